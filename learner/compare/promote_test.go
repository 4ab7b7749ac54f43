package compare_test

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// autoRun learns a stream of length examples into a model of cfg with
// challengers cs, as a worker does with model.compare.promote auto: the
// challengers learn each example after the model, and the first one
// Live.Better names is promoted right after that example. It returns
// the model and the examples after which each promotion took effect.
func autoRun(t testing.TB, cfg learner.Config, cs []learner.ChallengerConfig, o synth.Options, length int, alpha float64) (*learner.Model, []int) {
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers(cs); err != nil {
		t.Fatal(err)
	}
	hashings := []learner.Config{cfg}
	for _, c := range cs {
		hashings = append(hashings, c.Config)
	}
	// The stream decodes an example once per configuration, whichever
	// is the model: hashing k is configuration k's.
	h := newHashedStream(o, hashings)
	names := []string{"model"}
	for _, c := range cs {
		names = append(names, c.Name)
	}
	live, err := compare.NewLive(m, alpha)
	if err != nil {
		t.Fatal(err)
	}
	var at []int
	in := make([]*learner.Example, len(cs))
	for i := 1; i <= length; i++ {
		xs := h.next()
		model := m.Name("model")
		mx := xs[indexOf(names, model)]
		o := m.Learn(mx)
		for j, c := range m.Challengers() {
			in[j] = xs[indexOf(names, c.Name)]
		}
		live.Learn(&o, mx.Label, in)
		if j := live.Better(); j >= 0 {
			p := learner.Promotion{Challenger: live.Name(j), Replaced: model, Auto: true, Examples: m.Counts().Examples, Source: "synth", Offset: int64(i)}
			if err := m.Promote(p); err != nil {
				t.Fatal(err)
			}
			if live, err = compare.NewLive(m, alpha); err != nil {
				t.Fatal(err)
			}
			at = append(at, i)
		}
	}
	return m, at
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	panic("no configuration " + name)
}

// TestAutoPromotesTheBetterLearner: a perceptron model whose AROW
// challenger is better on the stream is replaced by it once the
// log-loss band lies above zero; the old model stays a challenger under
// its configuration's name with the comparison turned around (so it is
// not promoted back), the other challenger's comparison starts afresh,
// and the history records the promotion. The run is deterministic, and
// the state restores to the same digest.
func TestAutoPromotesTheBetterLearner(t *testing.T) {
	perceptron := learner.DefaultConfig()
	perceptron.Algorithm = learner.Perceptron
	arow := learner.DefaultConfig()
	seed := perceptron
	seed.HashSeed = 7
	cs := []learner.ChallengerConfig{{Name: "seed", Config: seed}, {Name: "arow", Config: arow}}
	o := synth.DefaultOptions()
	o.Seed = 3
	m, at := autoRun(t, perceptron, cs, o, 30000, 0.05)
	if len(at) != 1 {
		t.Fatalf("promotions after examples %v, want one", at)
	}
	if m.Config().Algorithm != learner.AROW || m.Name("model") != "arow" {
		t.Fatalf("the model is %s named %s, want AROW named arow", m.Config().Algorithm, m.Name("model"))
	}
	ps := m.Promotions()
	if len(ps) != 1 || ps[0].Challenger != "arow" || ps[0].Replaced != "model" || !ps[0].Auto || ps[0].Offset != int64(at[0]) {
		t.Fatalf("history %+v", ps)
	}
	st := m.State()
	if len(st.Challengers) != 2 || st.Challengers[0].Name != "seed" || st.Challengers[1].Name != "model" ||
		st.Challengers[1].State.Config.Algorithm != learner.Perceptron {
		t.Fatalf("challengers after the promotion: %+v", st.Challengers)
	}
	old, err := compare.ResultOf(&st.Challengers[1], 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if old.Examples < at[0] || old.LogLossHigh >= 0 {
		t.Fatalf("the old model's comparison went on over %d examples with band [%v, %v]; want over all %d and below zero", old.Examples, old.LogLossLow, old.LogLossHigh, at[0])
	}
	reset, err := compare.ResultOf(&st.Challengers[0], 0.05)
	if err != nil {
		t.Fatal(err)
	}
	if reset.Examples != 30000-at[0] {
		t.Fatalf("the other challenger's comparison holds %d examples, want the %d since the promotion", reset.Examples, 30000-at[0])
	}
	again, at2 := autoRun(t, perceptron, cs, o, 30000, 0.05)
	if at2[0] != at[0] || again.State().Digest() != st.Digest() {
		t.Fatal("the same stream promoted elsewhere or to another state")
	}
	r, err := learner.Restore(st)
	if err != nil || r.State().Digest() != st.Digest() {
		t.Fatalf("restored: %v", err)
	}
	s, err := compare.Standings("model", st, 0.05)
	if err != nil || s[0].Name != "arow" {
		t.Fatalf("standings %+v, %v: want the model's row named arow", s, err)
	}
}

// TestPromoteRefusesUnknownChallenger: a name that is not a challenger's
// is refused, the error naming it, and the model is unchanged.
func TestPromoteRefusesUnknownChallenger(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg
	p.Algorithm = learner.Perceptron
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "p", Config: p}}); err != nil {
		t.Fatal(err)
	}
	before := m.State().Digest()
	err = m.Promote(learner.Promotion{Challenger: "nope", Replaced: "model"})
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "p]") {
		t.Fatalf("err %v, want one naming nope and the challengers", err)
	}
	if err := m.Promote(learner.Promotion{Challenger: "p", Replaced: "p"}); err == nil {
		t.Fatal("the old model took the promoted challenger's name")
	}
	if err := m.Promote(learner.Promotion{Challenger: "p", Replaced: "model"}); err != nil {
		t.Fatal(err)
	}
	if m.State().Digest() == before || m.Config().Algorithm != learner.Perceptron {
		t.Fatal("the promotion changed nothing")
	}
}

// aaPromotes runs one A/A stream under automatic promotion (the model
// and, as its challenger, the same but for its hash seed) and reports
// whether the challenger was promoted.
func aaPromotes(t testing.TB, stream uint64, length int, alpha float64) bool {
	other := aaConfig()
	other.HashSeed = 1 + stream
	o := synth.Options{Features: 20, Vocab: 2000, Noise: 0.1, Seed: 1000 + stream}
	_, at := autoRun(t, aaConfig(), []learner.ChallengerConfig{{Name: "seed", Config: other}}, o, length, alpha)
	return len(at) > 0
}

// TestAAPromotionStaysWithinAlpha: automatic promotion, its rule looked
// at after every example, promotes a challenger that is the model but
// for its hash seed in at most alpha of the streams (within a binomial
// margin).
func TestAAPromotionStaysWithinAlpha(t *testing.T) {
	const streams, length, alpha = 100, 3000, 0.05
	var promoted int
	for s := range uint64(streams) {
		if aaPromotes(t, s, length, alpha) {
			promoted++
		}
	}
	if limit := binomialLimit(streams, alpha); promoted > limit {
		t.Errorf("A/A: auto promoted in %d of %d streams; want at most %d", promoted, streams, limit)
	}
}

// BenchmarkAAPromotion is TestAAPromotionStaysWithinAlpha at the scale of
// BenchmarkAATest: 1000 A/A streams of 20,000 examples under automatic
// promotion. It reports the share of streams in which the challenger was
// promoted (alpha is 0.05).
//
//	go test ./learner/compare -run '^$' -bench AAPromotion -benchtime 1x
func BenchmarkAAPromotion(b *testing.B) {
	const streams, length, alpha = 1000, 20000, 0.05
	for range b.N {
		var promoted int
		for s := range uint64(streams) {
			if aaPromotes(b, 10000+s, length, alpha) {
				promoted++
			}
		}
		b.ReportMetric(float64(promoted)/streams, "promote-rate")
	}
}
