package learner_test

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// unlabeled is a copy of xs with every label removed.
func unlabeled(xs []learner.Example) []learner.Example {
	out := make([]learner.Example, len(xs))
	for i, x := range xs {
		x.Labeled, x.Label = false, 0
		out[i] = x
	}
	return out
}

// lastOutcomes is the rolling window of st in order, oldest first: the
// min(Labeled, Window) slots before WindowNext, as Restore reads them.
func lastOutcomes(st *learner.State) []bool {
	w := len(st.Window)
	filled := int(min(st.Labeled, uint64(w)))
	out := make([]bool, filled)
	for j := range out {
		out[j] = st.Window[(st.WindowNext-filled+j+2*w)%w]
	}
	return out
}

// rolling is the rolling accuracy Metrics reports for outcomes.
func rolling(outcomes []bool) float64 {
	var correct int
	for _, ok := range outcomes {
		if ok {
			correct++
		}
	}
	return float64(correct) / float64(len(outcomes))
}

// TestMixOneShardIsSequential: with one shard, every epoch's mix is the
// shard's state, so the epochs give, bit for bit, the model that learns
// the stream sequentially (flushing a mini-batch where each range ends),
// whatever the cuts and the weighting. Ranges include an empty one and
// one of unlabeled examples only.
func TestMixOneShardIsSequential(t *testing.T) {
	kinds := []learner.MixWeights{learner.MixUniform, learner.MixExamples, learner.MixMistakes}
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 21, 800)
			copy(xs[500:560], unlabeled(xs[500:560]))
			cuts := []int{0, 1, 38, 38, 200, 500, 560, 561, 800}
			seq := mustNew(t, cfg)
			w := seq.State()
			for e := 1; e < len(cuts); e++ {
				from, to := cuts[e-1], cuts[e]
				shard, _ := learnRange(t, w, xs[from:to])
				weights := learner.MixWeightsOf(kinds[e%len(kinds)], w, []*learner.State{shard})
				if e == 5 {
					weights = []float64{0.3}
				}
				w = mustMix(t, w, []*learner.State{shard}, weights)
				for i := from; i < to; i++ {
					seq.Learn(&xs[i])
				}
				seq.Flush()
				if w.Digest() != seq.State().Digest() {
					t.Fatalf("epoch %d [%d, %d) with weights %v: the mix differs from sequential learning", e, from, to, weights)
				}
			}
			if cfg.Batch == 1 {
				// Without mini-batches, Flush is nothing: the epochs are
				// the sequential model without any cut.
				whole := mustNew(t, cfg)
				for i := range xs {
					whole.Learn(&xs[i])
				}
				if w.Digest() != whole.State().Digest() {
					t.Fatal("the epochs differ from learning the whole stream at once")
				}
			}
		})
	}
}

// TestMixCountersAddDeltas: a 3-shard mix counts the base's history once,
// plus what each shard added to it, whatever the shard's weight; R2 is
// the largest.
func TestMixCountersAddDeltas(t *testing.T) {
	for name, cfg := range configs() {
		if cfg.Algorithm == learner.Kernel {
			continue
		}
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 200)
			a, _ := learnRange(t, base, streamFor(cfg, 2, 50))
			b, _ := learnRange(t, base, unlabeled(streamFor(cfg, 3, 20)))
			c, _ := learnRange(t, base, streamFor(cfg, 4, 130))
			states := []*learner.State{a, b, c}
			out := mustMix(t, base, states, []float64{0, 1, 2})
			get := func(st *learner.State) []uint64 {
				return []uint64{st.Examples, st.Labeled, st.Mistakes, st.Updates, st.TruePositives, st.FalsePositives, st.TrueNegatives, st.FalseNegatives}
			}
			want := get(base)
			for _, st := range states {
				for k, v := range get(st) {
					want[k] += v - get(base)[k]
				}
			}
			if got := get(out); !reflect.DeepEqual(got, want) {
				t.Fatalf("counters (examples, labeled, mistakes, updates, tp, fp, tn, fn) = %v, want %v", got, want)
			}
			if b.Examples == base.Examples || b.Labeled != base.Labeled {
				t.Fatal("shard b should count unlabeled examples only")
			}
			if r2 := math.Max(base.R2, math.Max(a.R2, math.Max(b.R2, c.R2))); out.R2 != r2 {
				t.Fatalf("r2 %v, want %v", out.R2, r2)
			}
		})
	}
}

// window builds the ring of a state with Window = len(slots).
func window(slots string, next int) ([]bool, int) {
	w := make([]bool, len(slots))
	for i, c := range slots {
		w[i] = c == 'T'
	}
	return w, next
}

func outcomes(s string) []bool {
	w, _ := window(s, 0)
	return w
}

// TestMixWindow: the mixed rolling window is the base's followed by the
// shards' new outcomes in shard order, the last Window of them, laid out
// so that Restore reports their rolling accuracy. The rings are written
// out by hand: T is a correct prediction, F a mistake.
func TestMixWindow(t *testing.T) {
	cfg := perceptronConfig()
	cfg.Window = 5
	state := func(labeled uint64, slots string, next int) *learner.State {
		st := tiny(t, cfg)
		st.Examples, st.Labeled = labeled, labeled
		st.Window, st.WindowNext = window(slots, next)
		for _, ok := range lastOutcomes(st) {
			if !ok {
				st.Mistakes++
			}
		}
		return st
	}
	// The base learned T F T; its ring continues at slot 3.
	base := state(3, "TFTFF", 3)
	a := state(7, "TFTFF", 2)  // + F F T F, in slots 3 4 0 1
	b := state(5, "TFTTT", 0)  // + T T, in slots 3 4
	c := state(10, "FTTFT", 0) // + F T F T T F T: the last five fill the ring
	shards := map[string]*learner.State{"a": a, "b": b, "c": c}
	for _, tc := range []struct {
		order string
		want  string // the last five outcomes, oldest first
		next  int
	}{
		{"a", "TFFTF", 2},
		{"ab", "FTFTT", 4}, // T F T | F F T F | T T
		{"ba", "TFFTF", 4}, // T F T | T T | F F T F: shard order matters
		{"ac", "FTTFT", 4}, // c's last five
		{"cb", "TFTTT", 2}, // c's last three, then b's two
		{"bab", "FTFTT", 1},
	} {
		t.Run(tc.order, func(t *testing.T) {
			var states []*learner.State
			var weights []float64
			for _, s := range tc.order {
				states = append(states, shards[string(s)])
				weights = append(weights, 1)
			}
			out := mustMix(t, base, states, weights)
			if got := lastOutcomes(out); !reflect.DeepEqual(got, outcomes(tc.want)) || out.WindowNext != tc.next {
				t.Fatalf("window %v next %d, want %v next %d", got, out.WindowNext, outcomes(tc.want), tc.next)
			}
			m, err := learner.Restore(out)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := m.Metrics().RollingAccuracy, rolling(outcomes(tc.want)); got != want {
				t.Fatalf("restored rolling accuracy %v, want %v", got, want)
			}
		})
	}
	// A window that is not full yet: T F, then F T T and F.
	cfg.Window = 8
	base = state(2, "TFFFFFFF", 2)
	a = state(5, "TFFTTFFF", 5)
	b = state(3, "TFFFFFFF", 3)
	out := mustMix(t, base, []*learner.State{a, b}, []float64{1, 1})
	if got := lastOutcomes(out); !reflect.DeepEqual(got, outcomes("TFFTTF")) || out.WindowNext != 6 {
		t.Fatalf("window %v next %d, want TFFTTF next 6", got, out.WindowNext)
	}
	if m, err := learner.Restore(out); err != nil || m.Metrics().RollingAccuracy != 0.5 {
		t.Fatalf("restored: %v, %+v, want a rolling accuracy of 0.5", err, m.Metrics())
	}
}

// TestMixWindowLearned: shards learned from a base, with the outcomes
// that Learn reported: the mix's window is the base's followed by them,
// for a window the base has wrapped around and one it has not filled.
func TestMixWindowLearned(t *testing.T) {
	for _, name := range []string{"perceptron/named-classes/window=17", "perceptron", "pa1", "multiclass/averaged"} {
		t.Run(name, func(t *testing.T) {
			cfg := configs()[name]
			base := trained(t, cfg, 1, 300)
			seq := lastOutcomes(base)
			var states []*learner.State
			for s, n := range []int{5, 40, 0, 9} {
				st, got := learnRange(t, base, streamFor(cfg, uint64(s+2), n))
				states = append(states, st)
				seq = append(seq, got...)
			}
			want := seq[max(0, len(seq)-cfg.Window):]
			out := mustMix(t, base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
			if got := lastOutcomes(out); !reflect.DeepEqual(got, want) {
				t.Fatalf("window %v, want %v", got, want)
			}
			m, err := learner.Restore(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Metrics().RollingAccuracy; got != rolling(want) {
				t.Fatalf("restored rolling accuracy %v, want %v", got, rolling(want))
			}
		})
	}
}

// TestMixOneParticipant: one shard of positive weight among shards that
// learned nothing gives that shard's state, bit for bit; among shards
// whose counters must add (unlabeled examples, or labeled ones at weight
// 0), it gives the shard's parameters with the counters added, except
// that the averaged perceptron's sums also count the vectors that a
// shard of weight 0 held.
func TestMixOneParticipant(t *testing.T) {
	for name, cfg := range configs() {
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 200)
			p, _ := learnRange(t, base, streamFor(cfg, 2, 60))
			if cfg.Algorithm == learner.Kernel {
				// A kernel model mixes only with itself.
				if out := mustMix(t, base, []*learner.State{p}, []float64{2}); out.Digest() != p.Digest() {
					t.Fatal("one kernel shard: the mix is not its state")
				}
				return
			}
			idle, _ := learnRange(t, base, nil)
			out := mustMix(t, base, []*learner.State{idle, p, idle}, []float64{0, 2, 0})
			if out.Digest() != p.Digest() {
				t.Fatal("one participant among empty shards: the mix is not its state")
			}
			// Another shard that learned unlabeled examples only: the
			// participant's model, every bit, with the examples added.
			quiet, _ := learnRange(t, base, unlabeled(streamFor(cfg, 3, 25)))
			out = mustMix(t, base, []*learner.State{p, quiet}, learner.MixWeightsOf(learner.MixUniform, base, []*learner.State{p, quiet}))
			want := *p
			want.Examples += quiet.Examples - base.Examples
			if out.Digest() != want.Digest() {
				t.Fatal("one participant and an unlabeled shard: not the participant's state with the examples added")
			}
			// A shard of weight 0 that learned labeled examples: the
			// participant's parameters; for Averaged, the sums count the
			// vectors both shards held.
			other, _ := learnRange(t, base, streamFor(cfg, 4, 30))
			out = mustMix(t, base, []*learner.State{other, p}, []float64{0, 1})
			if out.Labeled != p.Labeled+other.Labeled-base.Labeled {
				t.Fatalf("labeled %d, want %d", out.Labeled, p.Labeled+other.Labeled-base.Labeled)
			}
			if !sameBits(out.Weights, p.Weights) || !sameBits(out.Bias, p.Bias) || !sameBits(out.Variance, p.Variance) || out.Scale != p.Scale {
				t.Fatal("the parameters are not the participant's")
			}
			if cfg.Algorithm == learner.Averaged {
				checkHeldOnce(t, base, []*learner.State{other, p}, out)
				return
			}
			w, b := out.Effective()
			pw, pb := p.Effective()
			checkNear(t, "effective weights", w, pw)
			checkNear(t, "effective bias", b, pb)
		})
	}
}

// TestMixNoParticipant: when no shard learned a labeled example, the
// weights are all 0, and the mix is the base with the examples counted.
func TestMixNoParticipant(t *testing.T) {
	for name, cfg := range configs() {
		if cfg.Algorithm == learner.Kernel {
			continue
		}
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 200)
			a, _ := learnRange(t, base, unlabeled(streamFor(cfg, 2, 10)))
			b, _ := learnRange(t, base, unlabeled(streamFor(cfg, 3, 7)))
			weights := learner.MixWeightsOf(learner.MixExamples, base, []*learner.State{a, b})
			if !reflect.DeepEqual(weights, []float64{0, 0}) {
				t.Fatalf("weights %v, want [0 0]", weights)
			}
			out := mustMix(t, base, []*learner.State{a, b}, weights)
			want := *base
			want.Examples += 17
			if out.Digest() != want.Digest() {
				t.Fatal("the mix is not the base with 17 more examples")
			}
		})
	}
	// No state at all: a copy of the base.
	base := trained(t, configs()["arow"], 1, 50)
	out := mustMix(t, base, nil, nil)
	if out.Digest() != base.Digest() {
		t.Fatal("no state: the mix is not the base")
	}
	out.Weights[0]++
	if out.Digest() == base.Digest() {
		t.Fatal("no state: the mix shares memory with the base")
	}
}

// TestMixWeightsOf: c_s is 1, the labeled examples or the mistakes since
// the base, 0 for a shard that learned no labeled example, and uniform
// when no participant made a mistake.
func TestMixWeightsOf(t *testing.T) {
	cfg := perceptronConfig()
	state := func(examples, labeled, mistakes uint64) *learner.State {
		st := tiny(t, cfg)
		st.Examples, st.Labeled, st.Mistakes = examples, labeled, mistakes
		return st
	}
	base := state(12, 10, 3)
	s0 := state(18, 15, 5)   // 5 labeled, 2 mistakes
	s1 := state(16, 10, 3)   // unlabeled examples only
	s2 := state(20, 17, 3)   // 7 labeled, no mistake
	s3 := state(21, 11, 3)   // 1 labeled, no mistake
	behind := state(9, 9, 3) // refused by Mix; weighs 0 here
	states := []*learner.State{s0, s1, s2, nil, behind}
	for _, tc := range []struct {
		kind   learner.MixWeights
		states []*learner.State
		want   []float64
	}{
		{learner.MixUniform, states, []float64{1, 0, 1, 0, 0}},
		{learner.MixExamples, states, []float64{5, 0, 7, 0, 0}},
		{learner.MixMistakes, states, []float64{2, 0, 0, 0, 0}},
		{learner.MixMistakes, []*learner.State{s2, s1, s3}, []float64{1, 0, 1}},
		{learner.MixExamples, []*learner.State{s1}, []float64{0}},
		{learner.MixUniform, nil, []float64{}},
	} {
		t.Run(fmt.Sprint(tc.kind, len(tc.states)), func(t *testing.T) {
			if got := learner.MixWeightsOf(tc.kind, base, tc.states); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// Mix divides them by their sum: μ = 5/12 and 7/12, rounded once.
	s0.Weights, s2.Weights = []float64{1, 3, 0, 0}, []float64{2, 1, 0, 0}
	out := mustMix(t, base, []*learner.State{s0, s1, s2}, learner.MixWeightsOf(learner.MixExamples, base, []*learner.State{s0, s1, s2}))
	mu0, mu2 := 5.0/12, 7.0/12
	if want := []float64{float64(mu0*1) + float64(mu2*2), float64(mu0*3) + float64(mu2*1), 0, 0}; !sameBits(out.Weights, want) {
		t.Fatalf("weights %v, want %v", out.Weights, want)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `unknown mixing weights "sum"`) {
			t.Fatalf("an unknown kind: got %v, want a panic naming it", r)
		}
	}()
	learner.MixWeightsOf("sum", base, states)
}

// TestMixWeightsText: the weightings read and write their names, and an
// unknown name is an error that lists the known ones.
func TestMixWeightsText(t *testing.T) {
	for _, kind := range []learner.MixWeights{learner.MixUniform, learner.MixExamples, learner.MixMistakes} {
		text, err := kind.MarshalText()
		if err != nil || string(text) != kind.String() {
			t.Fatalf("%s: MarshalText = %q, %v", kind, text, err)
		}
		var back learner.MixWeights
		if err := back.UnmarshalText(text); err != nil || back != kind {
			t.Fatalf("%s: UnmarshalText = %q, %v", kind, back, err)
		}
	}
	if got := []string{learner.MixUniform.String(), learner.MixExamples.String(), learner.MixMistakes.String()}; !reflect.DeepEqual(got, []string{"uniform", "examples", "mistakes"}) {
		t.Fatalf("names %v", got)
	}
	w := learner.MixExamples
	err := w.UnmarshalText([]byte("weighted"))
	if err == nil || err.Error() != `unknown mixing weights "weighted" (want one of uniform, examples, mistakes)` || w != learner.MixExamples {
		t.Fatalf("got %v and %q, want an error and examples unchanged", err, w)
	}
}

// TestMixIsDeterministic: the same base, states and weights give the same
// bits, and leave their inputs as they were. Another order need not
// (float64 sums are not associative), which is why Mix sums in shard
// order.
func TestMixIsDeterministic(t *testing.T) {
	for name, cfg := range configs() {
		if cfg.Algorithm == learner.Kernel {
			continue
		}
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 200)
			states := shardsOf(t, base, []uint64{2, 3, 4}, []int{100, 60, 150})
			before := []([32]byte){base.Digest(), states[0].Digest(), states[1].Digest(), states[2].Digest()}
			weights := []float64{0.1, 0.7, 0.2}
			first := mustMix(t, base, states, weights).Digest()
			for range 3 {
				if mustMix(t, base, states, weights).Digest() != first {
					t.Fatal("the same mix gave other bits")
				}
			}
			if after := []([32]byte){base.Digest(), states[0].Digest(), states[1].Digest(), states[2].Digest()}; !reflect.DeepEqual(after, before) {
				t.Fatal("Mix changed its inputs")
			}
			reversed := mustMix(t, base, []*learner.State{states[2], states[1], states[0]}, []float64{0.2, 0.7, 0.1})
			if reversed.Labeled != mustMix(t, base, states, weights).Labeled {
				t.Fatal("the counters depend on the order")
			}
			// Learning on from a mix works.
			next, _ := learnRange(t, mustMix(t, base, states, weights), streamFor(cfg, 9, 50))
			if err := next.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// batchConfigs are the mini-batch configurations of configs.
func batchConfigs() map[string]learner.Config {
	out := map[string]learner.Config{}
	for name, cfg := range configs() {
		if cfg.Batch > 1 {
			out[name] = cfg
		}
	}
	return out
}

// midBatch learns xs with a model of cfg until a batch is pending, and
// returns the model and how many outcomes reported an update.
func midBatch(t *testing.T, cfg learner.Config, xs []learner.Example) (*learner.Model, int) {
	t.Helper()
	m := mustNew(t, cfg)
	var updated int
	for i := range xs {
		if m.Learn(&xs[i]).Updated {
			updated++
		}
		if st := m.State(); i > 100 && len(st.PendingIndex) > 0 && st.Labeled%uint64(cfg.Batch) != 0 {
			return m, updated
		}
	}
	t.Fatal("no pending batch")
	return nil, 0
}

// TestFlush: Flush applies the pending mini-batch as the end of a batch
// does, at the current labeled example, leaves Updates alone (Learn
// counted each example as it joined the batch), and changes nothing when
// nothing is pending.
func TestFlush(t *testing.T) {
	if len(batchConfigs()) == 0 {
		t.Fatal("configs has no mini-batch configuration")
	}
	for name, cfg := range batchConfigs() {
		t.Run(name, func(t *testing.T) {
			m, updated := midBatch(t, cfg, streamFor(cfg, 5, 400))
			before := m.State()
			m.Flush()
			after := m.State()
			if len(after.PendingIndex) != 0 || !sameBits(after.PendingBias, make([]float64, len(after.PendingBias))) {
				t.Fatal("a batch is still pending after Flush")
			}
			if after.Updates != before.Updates || after.Updates != uint64(updated) {
				t.Fatalf("updates %d, want %d (before) and %d (outcomes that updated)", after.Updates, before.Updates, updated)
			}
			// The batch adds Δ to the weights and t·Δ to the averaged
			// sums, t the labeled examples so far; an index pending twice
			// adds its sum once.
			ct := float64(before.Labeled)
			want, wantSum := copyOf(before.Weights), copyOf(before.SumWeights)
			left := map[uint32]float64{}
			for n, j := range before.PendingIndex {
				left[j] = before.PendingValue[n]
			}
			for _, j := range before.PendingIndex {
				d := left[j]
				left[j] = 0
				want[j] += d
				if wantSum != nil {
					wantSum[j] += float64(ct * d)
				}
			}
			wantBias, wantSumBias := copyOf(before.Bias), copyOf(before.SumBias)
			for c, d := range before.PendingBias {
				wantBias[c] += d
				if wantSumBias != nil {
					wantSumBias[c] += float64(ct * d)
				}
			}
			if !sameBits(after.Weights, want) || !sameBits(after.Bias, wantBias) || !sameBits(after.SumWeights, wantSum) || !sameBits(after.SumBias, wantSumBias) {
				t.Fatal("Flush did not add the pending batch as the end of a batch does")
			}
			if after.Examples != before.Examples || after.Labeled != before.Labeled || after.Mistakes != before.Mistakes {
				t.Fatal("Flush changed the counters")
			}
			m.Flush()
			if m.State().Digest() != after.Digest() {
				t.Fatal("a second Flush changed the model")
			}
		})
	}
	for name, cfg := range configs() {
		if cfg.Batch > 1 {
			continue
		}
		t.Run("nothing pending/"+name, func(t *testing.T) {
			m, err := learner.Restore(trained(t, cfg, 3, 200))
			if err != nil {
				t.Fatal(err)
			}
			want := m.State().Digest()
			m.Flush()
			if m.State().Digest() != want {
				t.Fatal("Flush changed a model with nothing pending")
			}
		})
	}
}

// TestFlushThenLearn: a model flushed mid-batch learns on
// deterministically: two models, and the restored state of one, give the
// same outcomes and bits, and the next batch ends at the next multiple of
// Batch.
func TestFlushThenLearn(t *testing.T) {
	for name, cfg := range batchConfigs() {
		t.Run(name, func(t *testing.T) {
			xs := streamFor(cfg, 5, 400)
			a, _ := midBatch(t, cfg, xs)
			b, _ := midBatch(t, cfg, xs)
			unflushed, _ := midBatch(t, cfg, xs)
			a.Flush()
			b.Flush()
			if a.State().Digest() == unflushed.State().Digest() {
				t.Fatal("Flush changed nothing")
			}
			c, err := learner.Restore(a.State())
			if err != nil {
				t.Fatal(err)
			}
			cut := int(a.Metrics().Examples)
			for i := cut; i < len(xs); i++ {
				oa, ob, oc := strip(a.Learn(&xs[i])), strip(b.Learn(&xs[i])), strip(c.Learn(&xs[i]))
				unflushed.Learn(&xs[i])
				if !reflect.DeepEqual(oa, ob) || !reflect.DeepEqual(oa, oc) {
					t.Fatalf("example %d: outcomes %+v, %+v and %+v", i, oa, ob, oc)
				}
				if st := a.State(); st.Labeled%uint64(cfg.Batch) == 0 && len(st.PendingIndex) > 0 {
					t.Fatalf("example %d: a batch is pending at labeled %d, a multiple of the batch", i, st.Labeled)
				}
			}
			if a.State().Digest() != b.State().Digest() || a.State().Digest() != c.State().Digest() {
				t.Fatal("flushed models learned on into other bits")
			}
		})
	}
}

// TestMixFlushedBatch: mini-batch shards mix once flushed, into the
// weighted mean of their models (for Averaged, of their weights, with
// every vector held counted once); unflushed, they are refused.
func TestMixFlushedBatch(t *testing.T) {
	for name, cfg := range batchConfigs() {
		t.Run(name, func(t *testing.T) {
			base := trained(t, cfg, 1, 300)
			var flushed, pending []*learner.State
			for s, n := range []int{41, 97} {
				m, err := learner.Restore(base)
				if err != nil {
					t.Fatal(err)
				}
				xs := streamFor(cfg, uint64(s+2), n)
				for i := range xs {
					m.Learn(&xs[i])
				}
				pending = append(pending, m.State())
				m.Flush()
				flushed = append(flushed, m.State())
			}
			if _, err := learner.Mix(base, pending, []float64{1, 1}); err == nil || !strings.Contains(err.Error(), "pending mini-batch") {
				t.Fatalf("unflushed shards: got %v, want a pending mini-batch error", err)
			}
			out := mustMix(t, base, flushed, []float64{1, 1})
			if cfg.Algorithm == learner.Averaged {
				want, wantBias := meanWeights(flushed, []float64{0.5, 0.5})
				checkNear(t, "weights", out.Weights, want)
				checkNear(t, "bias", out.Bias, wantBias)
				checkHeldOnce(t, base, flushed, out)
			} else {
				want, wantBias := meanEffective(flushed, []float64{0.5, 0.5})
				w, b := out.Effective()
				checkNear(t, "effective weights", w, want)
				checkNear(t, "effective bias", b, wantBias)
			}
			if len(out.PendingIndex) != 0 {
				t.Fatal("the mix has a pending batch")
			}
		})
	}
}
