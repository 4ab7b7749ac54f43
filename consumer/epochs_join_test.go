package consumer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// rangeLogs are one shard's examples and labels: examples one every 10 ms
// of record time, most delayed (an id, no label), some carrying their
// label, some with no id, one that does not decode; labels in the order
// of their times, most within the window, some late, some twice, some for
// ids no example has, a mark and a record that is no label.
func rangeLogs(n int, seed uint64) (exs, lbs []Message) {
	rng := rand.New(rand.NewPCG(seed, 7))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := rangeWindow.Milliseconds()
	type rec struct {
		t    time.Time
		body []byte
	}
	var ls []rec
	for i := range n {
		t := base.Add(time.Duration(i) * 10 * time.Millisecond)
		id := fmt.Sprint("e", i)
		y := 2*rng.IntN(2) - 1
		feats := fmt.Sprintf(`{"a":%d,"b":%.3f}`, rng.IntN(5), rng.Float64())
		var body string
		switch r := rng.IntN(20); {
		case r < 2:
			body = fmt.Sprintf(`{"id":%q,"label":%d,"features":%s}`, id, y, feats)
		case r < 3:
			body = fmt.Sprintf(`{"features":%s}`, feats)
		case r < 4 && i%7 == 0:
			body = `{"label": "maybe"}`
		default:
			body = fmt.Sprintf(`{"id":%q,"features":%s}`, id, feats)
		}
		exs = append(exs, Message{Position: wire.Position{Source: "memory:ex/0", Offset: int64(i)}, Resume: int64(i + 1), Time: t, Value: []byte(body)})
		at := func(ms int64) time.Time { return t.Add(time.Duration(ms) * time.Millisecond) }
		label := func(id string, y int) []byte { return fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y) }
		switch r := rng.IntN(20); {
		case r < 13:
			ls = append(ls, rec{at(rng.Int64N(w)), label(id, y)})
		case r < 15:
			ls = append(ls, rec{at(w + 50 + rng.Int64N(w)), label(id, y)})
		case r < 16:
			ls = append(ls, rec{at(rng.Int64N(w)), label(id, y)}, rec{at(rng.Int64N(w)), label(id, -y)})
		case r < 17:
			ls = append(ls, rec{at(rng.Int64N(w)), label("x"+id, y)})
		case r < 18 && i%5 == 0:
			ls = append(ls, rec{at(rng.Int64N(w)), []byte(`{"mark":"w"}`)}, rec{at(rng.Int64N(w)), []byte(`{"id": 3}`)})
		}
	}
	slices.SortStableFunc(ls, func(a, b rec) int { return a.t.Compare(b.t) })
	for i, l := range ls {
		lbs = append(lbs, Message{Position: wire.Position{Source: "memory:lb/0", Offset: int64(i)}, Resume: int64(i + 1), Time: l.t, Value: l.body})
	}
	return exs, lbs
}

// delayedOf says of each example whether it is delayed, and its id.
func delayedOf(t *testing.T, cfg learner.Config, exs []Message) (delayed []bool, ids [][]byte) {
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
	var x learner.Example
	for i := range exs {
		meta, err := decodeExample(dec, wire.FormatJSON, exs[i].Value, &x)
		d := err == nil && meta.HasID && !x.Labeled
		delayed = append(delayed, d)
		ids = append(ids, bytes.Clone(meta.ID))
	}
	return delayed, ids
}

// TestRangeJoinIsTheRuleInAnyOrder checks the range of an epoch with
// labels (docs/labels.md, section 11.1) against the join read in other
// orders: the labels before the examples (what the range does), the
// examples before the labels, and both interleaved at random. Each
// reaches the same end, decides the same labels for the examples before
// it, learns the same model from them, and holds the same join there.
func TestRangeJoinIsTheRuleInAnyOrder(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	jcfg := JoinConfig{Window: rangeWindow, Default: -1, HasDefault: true}
	exs, lbs := rangeLogs(600, 3)
	delayed, ids := delayedOf(t, cfg, exs)
	type result struct {
		reached int64
		labels  []decidedLabel
		digest  [32]byte
		join    []byte
	}
	learn := func(reached int64, labels []decidedLabel) [32]byte {
		m, err := learner.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
		var x learner.Example
		k := 0
		for i := range exs {
			if exs[i].Resume > reached {
				break
			}
			if _, err := decodeExample(dec, wire.FormatJSON, exs[i].Value, &x); err != nil {
				continue
			}
			if delayed[i] {
				d := labels[k]
				k++
				x.Labeled, x.Label = d.labeled, d.label
			}
			m.Learn(&x)
		}
		return m.State().Digest()
	}
	for _, nl := range []int{0, len(lbs) / 3, 2 * len(lbs) / 3, len(lbs)} {
		for _, to := range []int{len(exs) / 2, len(exs)} {
			t.Run(fmt.Sprintf("labels %d, examples %d", nl, to), func(t *testing.T) {
				// The range: labels first, each example placed twice, as
				// the range's reader and the range place it.
				rj := newRangeJoin(NewJoin(jcfg), cfg, wire.DecoderOptions{}, wire.FormatJSON, 0, int64(to))
				dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
				var x learner.Example
				for i := range lbs[:nl] {
					joinLabel(rj.join, dec, wire.FormatJSON, &lbs[i], &x)
				}
				var want result
				for i := range exs {
					in, last := rj.end(&exs[i])
					if again, lastAgain := rj.end(&exs[i]); again != in || lastAgain != last {
						t.Fatalf("example %d placed (%v, %v), then (%v, %v)", i, in, last, again, lastAgain)
					}
					if in {
						want.reached = exs[i].Resume
						if delayed[i] {
							label, labeled := rj.take(&exs[i])
							want.labels = append(want.labels, decidedLabel{resume: exs[i].Resume, label: label, labeled: labeled})
						}
					}
					if last {
						if in != (i == to-1) {
							t.Fatalf("example %d ends the range placed in=%v, the range ends at %d", i, in, to)
						}
						break
					}
				}
				want.digest = learn(want.reached, want.labels)
				st := rj.state("memory:ex/0", "memory:lb/0", want.reached)
				b, err := st.encode()
				if err != nil {
					t.Fatal(err)
				}
				want.join = b
				// The mix takes the state of a range learned here as it is,
				// not decoded from its result: it must be what the result
				// decodes to.
				if dec, err := DecodeJoinState(b); err != nil || !reflect.DeepEqual(dec, st) {
					t.Fatalf("the range's join decodes to %+v (%v), the state kept is %+v", dec, err, st)
				}
				t.Logf("reached %d of %d, %d delayed examples learned", want.reached, to, len(want.labels))
				if nl == len(lbs) && want.reached < int64(to)/2 {
					t.Fatalf("with every label read the range reached only %d of %d", want.reached, to)
				}

				// The same logs in other orders: examples first, labels
				// first, and at random.
				orders := map[string]func(ne, nl int) []bool{
					"examples first": func(ne, nl int) []bool { return append(make([]bool, ne), trues(nl)...) },
					"labels first":   func(ne, nl int) []bool { return append(trues(nl), make([]bool, ne)...) },
				}
				for s := range 5 {
					orders[fmt.Sprint("random ", s)] = func(ne, nl int) []bool {
						o := append(make([]bool, ne), trues(nl)...)
						rand.New(rand.NewPCG(uint64(s), 9)).Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
						return o
					}
				}
				for name, order := range orders {
					// feed gives a join the first ne examples and the
					// labels in the order, and walks the tail: the end
					// it reaches and the labels it learns.
					feed := func(ne int) (*Join, result) {
						j := NewJoin(jcfg)
						ei, li := 0, 0
						for _, label := range order(ne, nl) {
							if label {
								joinLabel(j, dec, wire.FormatJSON, &lbs[li], &x)
								li++
								continue
							}
							m := &exs[ei]
							j.Example(m.Position.Offset, Millis(m.Time), delayed[ei], ids[ei], Served{})
							ei++
						}
						var got result
						for i := range exs[:ne] {
							if delayed[i] {
								off, decided, ok := j.Next()
								if !ok || off != exs[i].Position.Offset {
									t.Fatalf("%s: example %d is not the next to learn (%d, %v)", name, i, off, ok)
								}
								if !decided {
									break
								}
								label, labeled, _ := j.Learned()
								if !labeled {
									label = 0
								}
								got.labels = append(got.labels, decidedLabel{resume: exs[i].Resume, label: label, labeled: labeled})
							}
							got.reached = exs[i].Resume
						}
						return j, got
					}
					_, got := feed(to)
					if got.reached != want.reached || !slices.Equal(got.labels, want.labels) {
						t.Fatalf("%s: reached %d with %d labels, the range %d with %d", name, got.reached, len(got.labels), want.reached, len(want.labels))
					}
					if d := learn(got.reached, got.labels); d != want.digest {
						t.Fatalf("%s: learns state %x, the range %x", name, d, want.digest)
					}
					// The join at the reached end: the examples up to it
					// and the labels, in the same order.
					j, _ := feed(int(want.reached))
					st := j.State(want.reached)
					st.Source, st.LabelsSource = "memory:ex/0", "memory:lb/0"
					b, err := st.encode()
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(b, want.join) {
						t.Fatalf("%s: the join at %d differs from the range's", name, want.reached)
					}
				}
			})
		}
	}
}

const rangeWindow = 500 * time.Millisecond

func trues(n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = true
	}
	return b
}
