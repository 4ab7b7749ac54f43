package compare_test

import (
	"math"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// hashedStream turns a synthetic stream's records into examples for each
// of a contest's hashings, as a decoder of each would: feature "f<n>"
// hashed with the hashing's seed and bits.
type hashedStream struct {
	s       *synth.Stream
	indices [][]uint32 // per hashing, per vocabulary name
	xs      []learner.Example
	ptrs    []*learner.Example
}

func newHashedStream(o synth.Options, hashings []learner.Config) *hashedStream {
	h := &hashedStream{s: synth.New(o), xs: make([]learner.Example, len(hashings))}
	for _, cfg := range hashings {
		hasher := learner.NewHasher(cfg.HashBits, cfg.HashSeed)
		idx := make([]uint32, o.Vocab)
		for n := range idx {
			idx[n] = learner.Index(hasher, "f"+strconv.Itoa(n))
		}
		h.indices = append(h.indices, idx)
	}
	for k := range h.xs {
		h.ptrs = append(h.ptrs, &h.xs[k])
	}
	return h
}

// next is the next record, once per hashing.
func (h *hashedStream) next() []*learner.Example {
	rec := h.s.Next()
	for k := range h.xs {
		x := &h.xs[k]
		x.Reset()
		for i, n := range rec.Names {
			x.Index = append(x.Index, h.indices[k][n])
			x.Value = append(x.Value, rec.Values[i])
		}
		x.Labeled, x.Label = rec.Labeled, rec.Label
	}
	return h.ptrs
}

// aaConfig is the learner of the A/A streams: the default but for fewer
// weights, which makes collisions, so that the hash seed matters.
func aaConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	return cfg
}

// aaRun runs one A/A stream of the given length and reports whether the
// log-loss band and the accuracy band ever excluded zero.
func aaRun(t testing.TB, stream uint64, length int, alpha float64) (logLoss, accuracy bool, last compare.Result) {
	model := compare.Entrant{Name: "model", Config: aaConfig()}
	other := model.Config
	other.HashSeed = 1 + stream
	c, err := compare.NewContest(model, []compare.Entrant{{Name: "seed", Config: other}}, alpha)
	if err != nil {
		t.Fatal(err)
	}
	o := synth.Options{Features: 20, Vocab: 2000, Noise: 0.1, Seed: 1000 + stream}
	h := newHashedStream(o, c.Hashings())
	for range length {
		c.Learn(h.next())
		r := c.Result(1)
		if r.LogLossLow > 0 || r.LogLossHigh < 0 {
			logLoss = true
		}
		if r.AccuracyLow > 0 || r.AccuracyHigh < 0 {
			accuracy = true
		}
		last = r
	}
	return logLoss, accuracy, last
}

// TestAATestStaysWithinAlpha: a challenger that is the model but for its
// hash seed is declared different, at any of the looks after every
// example, in at most alpha of the streams (within a binomial margin).
func TestAATestStaysWithinAlpha(t *testing.T) {
	const streams, length, alpha = 200, 3000, 0.05
	var ll, acc int
	var discordant float64
	for s := range uint64(streams) {
		l, a, r := aaRun(t, s, length, alpha)
		if l {
			ll++
		}
		if a {
			acc++
		}
		discordant += math.Abs(r.AccuracyDiff)
	}
	limit := binomialLimit(streams, alpha)
	t.Logf("A/A: log-loss band excluded zero in %d of %d streams, accuracy band in %d (limit %d)", ll, streams, acc, limit)
	if ll > limit || acc > limit {
		t.Errorf("A/A: the log-loss band excluded zero in %d, the accuracy band in %d of %d streams; want at most %d each", ll, acc, streams, limit)
	}
	if discordant == 0 {
		t.Error("A/A: the two seeds gave the same accuracy on every stream: the hash seed did not reach the challenger")
	}
}

// TestContestFindsTheBetterLearner: AROW against the perceptron, which
// is worse on this stream, is found better on the log-loss, and the
// reverse is found worse; the standings' measures are each entrant's.
func TestContestFindsTheBetterLearner(t *testing.T) {
	arow := learner.DefaultConfig()
	perceptron := arow
	perceptron.Algorithm = learner.Perceptron
	c, err := compare.NewContest(compare.Entrant{Name: "perceptron", Config: perceptron},
		[]compare.Entrant{{Name: "arow", Config: arow}, {Name: "same", Config: perceptron}}, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Hashings()); n != 1 {
		t.Fatalf("%d hashings for three entrants of one hashing", n)
	}
	o := synth.DefaultOptions()
	o.Seed = 7
	h := newHashedStream(o, c.Hashings())
	for range 20000 {
		c.Learn(h.next())
	}
	st := c.Standings()
	if st[1].Result.Verdict() != compare.ChallengerBetter {
		t.Errorf("arow against the perceptron: %v; want challenger better", st[1].Result)
	}
	if st[2].Result.Verdict() != compare.Undecided || st[2].Result.LogLossDiff != 0 {
		t.Errorf("the perceptron against itself: %v; want a difference of 0, undecided", st[2].Result)
	}
	if m := c.Model(0).Metrics(); math.Abs(m.Accuracy-st[0].Accuracy) > 1e-12 || st[0].Examples != int(m.Labeled) {
		t.Errorf("the model's standing %+v disagrees with its metrics (accuracy %v, %d labeled)", st[0], m.Accuracy, m.Labeled)
	}
	r := st[1].Result
	if math.Abs(r.LogLossDiff-(st[0].LogLoss-st[1].LogLoss)) > 1e-9 || math.Abs(r.AccuracyDiff-(st[1].Accuracy-st[0].Accuracy)) > 1e-9 {
		t.Errorf("differences %v disagree with the standings %+v and %+v", r, st[0], st[1])
	}
	pts := c.Traces()[0].Points()
	if len(pts) == 0 || len(pts) > 513 || pts[len(pts)-1].Examples != r.Examples {
		t.Errorf("trace of %d points ending at %v; want at most 513 ending at %d examples", len(pts), pts[len(pts)-1], r.Examples)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].Examples <= pts[i-1].Examples {
			t.Fatalf("trace points out of order at %d: %v then %v", i, pts[i-1], pts[i])
		}
	}
}

func TestContestRefusesAmbiguousEntrants(t *testing.T) {
	cfg := learner.DefaultConfig()
	classes := cfg
	classes.Classes = []string{"no", "yes"}
	bad := cfg
	bad.HashBits = 99
	for name, challengers := range map[string][]compare.Entrant{
		"no name":       {{Name: "", Config: cfg}},
		"repeated name": {{Name: "a", Config: cfg}, {Name: "a", Config: cfg}},
		"model's name":  {{Name: "model", Config: cfg}},
		"other classes": {{Name: "c", Config: classes}},
		"invalid":       {{Name: "bits", Config: bad}},
	} {
		if _, err := compare.NewContest(compare.Entrant{Name: "model", Config: cfg}, challengers, 0.05); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestContestLearnDoesNotAllocate(t *testing.T) {
	cfg := learner.DefaultConfig()
	seed := cfg
	seed.HashSeed = 9
	c, err := compare.NewContest(compare.Entrant{Name: "model", Config: cfg}, []compare.Entrant{{Name: "seed", Config: seed}}, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	h := newHashedStream(synth.DefaultOptions(), c.Hashings())
	for range 2000 { // past the trace's first points
		c.Learn(h.next())
	}
	xs := h.next()
	if n := testing.AllocsPerRun(1000, func() { c.Learn(xs) }); n != 0 {
		t.Errorf("Learn allocates %v times per example", n)
	}
}

// examples are n records of a synthetic stream, each once per hashing
// (as Contest.Learn takes it), kept apart so that they can be learned a
// chunk at a time.
func examples(o synth.Options, hashings []learner.Config, n int) [][]*learner.Example {
	h := newHashedStream(o, hashings)
	xs := make([][]*learner.Example, n)
	for j := range xs {
		for _, x := range h.next() {
			c := *x
			c.Index, c.Value = slices.Clone(x.Index), slices.Clone(x.Value)
			xs[j] = append(xs[j], &c)
		}
	}
	return xs
}

// TestLearnChunkIsLearnInOrder: a contest learned a chunk at a time, on
// several goroutines, ends with the standings, results and traces of one
// learned an example at a time, to the bit, whatever the chunks' sizes,
// on a stream with unlabeled examples and entrants of three hashings.
func TestLearnChunkIsLearnInOrder(t *testing.T) {
	// Goroutines enough for every entrant, whatever the machine's cores.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	arow := learner.DefaultConfig()
	arow.HashBits = 12
	perceptron := arow
	perceptron.Algorithm = learner.Perceptron
	seed := arow
	seed.HashSeed = 5
	bits := arow
	bits.HashBits = 10
	model := compare.Entrant{Name: "arow", Config: arow}
	challengers := []compare.Entrant{{Name: "perceptron", Config: perceptron}, {Name: "seed", Config: seed}, {Name: "bits", Config: bits}}
	newContest := func(challengers []compare.Entrant) *compare.Contest {
		c, err := compare.NewContest(model, challengers, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	o := synth.Options{Features: 20, Vocab: 3000, Noise: 0.1, Unlabeled: 0.3, Seed: 3}
	const n = 3000 // past the traces' first thinning
	for _, tc := range []struct {
		name        string
		challengers []compare.Entrant
	}{{"four entrants", challengers}, {"the model alone", nil}} {
		want := newContest(tc.challengers)
		xs := examples(o, want.Hashings(), n)
		for _, x := range xs {
			want.Learn(x)
		}
		if len(tc.challengers) > 0 && want.Result(2).LogLossDiff == 0 {
			t.Fatal("the seed challenger learned as the model did: the hashings did not reach the entrants")
		}
		for _, size := range []int{1, 7, 64, 500, n} {
			t.Run(tc.name+"/chunks of "+strconv.Itoa(size), func(t *testing.T) {
				got := newContest(tc.challengers)
				for j := 0; j < n; j += size {
					got.LearnChunk(xs[j:min(j+size, n)])
				}
				if g, w := got.Standings(), want.Standings(); !reflect.DeepEqual(g, w) {
					t.Errorf("standings\n%+v\nwant\n%+v", g, w)
				}
				for i := range tc.challengers {
					g, w := got.Traces()[i].Points(), want.Traces()[i].Points()
					if !reflect.DeepEqual(g, w) {
						t.Errorf("%s's trace of %d points differs from the one of %d learned in order", tc.challengers[i].Name, len(g), len(w))
					}
				}
				for i := range len(tc.challengers) + 1 {
					if g, w := got.Model(i).Metrics(), want.Model(i).Metrics(); !reflect.DeepEqual(g, w) {
						t.Errorf("entrant %d's metrics %+v; want %+v", i, g, w)
					}
				}
			})
		}
	}
}

func TestLearnChunkAllocatesOnlyForItsGoroutines(t *testing.T) {
	cfg := learner.DefaultConfig()
	seed := cfg
	seed.HashSeed = 9
	c, err := compare.NewContest(compare.Entrant{Name: "model", Config: cfg}, []compare.Entrant{{Name: "seed", Config: seed}, {Name: "pa1", Config: cfg}}, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	xs := examples(synth.DefaultOptions(), c.Hashings(), 3000)
	c.LearnChunk(xs[:2000]) // past the trace's first points and the largest chunk
	// Per chunk of 1000 examples: at most the goroutines' few allocations
	// and the sorting of the entrants, none per example.
	if n := testing.AllocsPerRun(20, func() { c.LearnChunk(xs[2000:]) }); n > 10 {
		t.Errorf("LearnChunk of 1000 examples allocates %v times", n)
	}
}
