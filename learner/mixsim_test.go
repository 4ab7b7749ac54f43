package learner_test

import (
	"fmt"
	"hash/fnv"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// The epoch protocol of DESIGN.md section 9, simulated with the learner
// alone: no broker, no store, no barrier. A `hyperplane gen` stream is
// split into S shards as a Kafka topic of S partitions would hold it, and
// learned in epochs of at most E examples per shard, mixed with
// learner.Mix (docs/scale-out.md 3.2, E2 and E6). Everything is
// deterministic, so one run of the benchmark gives the figures.

// simStream is a generated stream, hashed as the worker's decoders hash
// it: feature "f<n>" at learner.Index of its name, with the model's hash
// bits and seed.
type simStream struct {
	opt synth.Options
	xs  []learner.Example
}

// genStream is the first n examples that `hyperplane gen` writes with the
// options o, as the worker decodes them for cfg's hashing.
func genStream(o synth.Options, n int, cfg learner.Config) *simStream {
	if err := o.Validate(); err != nil {
		panic(err)
	}
	h := learner.NewHasher(cfg.HashBits, cfg.HashSeed)
	names := make([]uint32, o.Vocab)
	for i := range names {
		names[i] = learner.Index(h, "f"+strconv.Itoa(i))
	}
	src := synth.New(o)
	xs := make([]learner.Example, n)
	// One backing array for every example's features.
	index := make([]uint32, 0, n*o.Features)
	value := make([]float64, 0, n*o.Features)
	for i := range xs {
		r := src.Next()
		from := len(index)
		for k, name := range r.Names {
			index = append(index, names[name])
			value = append(value, r.Values[k])
		}
		xs[i] = learner.Example{
			Index:   index[from:len(index):len(index)],
			Value:   value[from:len(value):len(value)],
			Labeled: r.Labeled,
			Label:   r.Label,
		}
	}
	return &simStream{opt: o, xs: xs}
}

// kafkaShards splits the stream into the S partitions of a Kafka topic
// that `hyperplane gen -to kafka:<topic>` fills: example i is keyed
// gen-<stream>-<i>, and the worker's sink (kafka-go's Hash balancer, as
// Sarama's) sends it to partition |int32(FNV-1a-32(key))| mod S. Each
// shard keeps the stream's order. It returns, per shard, the indices of
// its examples in s.xs.
func (s *simStream) kafkaShards(shards int) [][]int32 {
	id := s.opt.StreamID("jsonl")
	out := make([][]int32, shards)
	h := fnv.New32a()
	var key []byte
	for i := range s.xs {
		key = append(key[:0], "gen-"...)
		key = append(key, id...)
		key = append(key, '-')
		key = strconv.AppendInt(key, int64(i), 10)
		h.Reset()
		h.Write(key)
		p := int32(h.Sum32()) % int32(shards)
		if p < 0 {
			p = -p
		}
		out[p] = append(out[p], int32(i))
	}
	return out
}

// prequential counts the predictions made before learning each labeled
// example: over the whole stream, and over its tail, the last fifth of
// the stream's positions (tailFrom), where the start-up is long past.
type prequential struct{ labeled, correct, tailLabeled, tailCorrect uint64 }

// tailFrom is the first position of the tail of a stream of n examples.
func tailFrom(n int) int { return n - n/5 }

// add counts o, the outcome of the example at position i of a stream of
// n.
func (p *prequential) add(o learner.Outcome, i int32, n int) {
	if !o.Labeled {
		return
	}
	tail := int(i) >= tailFrom(n)
	p.labeled++
	if tail {
		p.tailLabeled++
	}
	if o.Correct {
		p.correct++
		if tail {
			p.tailCorrect++
		}
	}
}

func (p *prequential) merge(q prequential) {
	p.labeled += q.labeled
	p.correct += q.correct
	p.tailLabeled += q.tailLabeled
	p.tailCorrect += q.tailCorrect
}

func (p prequential) accuracy() float64 { return float64(p.correct) / float64(p.labeled) }

func (p prequential) tailAccuracy() float64 {
	return float64(p.tailCorrect) / float64(p.tailLabeled)
}

// skewedShards splits the stream into S partitions of unequal rates, as a
// keyed topic with hot keys holds it: partition p receives a share
// proportional to 2^-p (S=4: 8/15, 4/15, 2/15, 1/15; S=8: the last has
// 1/255), chosen by the same key hash as kafkaShards. Each shard keeps the
// stream's order.
func (s *simStream) skewedShards(shards int) [][]int32 {
	id := s.opt.StreamID("jsonl")
	out := make([][]int32, shards)
	h := fnv.New32a()
	var key []byte
	total := uint64(1)<<shards - 1
	for i := range s.xs {
		key = append(key[:0], "gen-"...)
		key = append(key, id...)
		key = append(key, '-')
		key = strconv.AppendInt(key, int64(i), 10)
		h.Reset()
		h.Write(key)
		// u in [0, 2^S-1): partition p takes 2^(S-1-p) of the values.
		u := uint64(h.Sum32()) * total >> 32
		p, top := 0, uint64(1)<<(shards-1)
		for u >= top {
			p++
			top += uint64(1) << (shards - 1 - p)
		}
		out[p] = append(out[p], int32(i))
	}
	return out
}

// How a simulation cuts its epochs' boundaries (docs/scale-out.md 3.4).
const (
	// cutBacklog: the broker already holds the whole stream, so every
	// boundary is cut at E: each shard's range is its next min(E,
	// remaining) examples.
	cutBacklog = iota
	// cutLive: the examples arrive in the stream's order and a boundary
	// is cut as soon as some shard holds E new examples (rule (a) of 3.4,
	// with no time bound): each shard's range is what arrived for it until
	// then, in proportion to its rate.
	cutLive
)

// mixResult is one simulation of the epoch protocol.
type mixResult struct {
	prequential
	epochs   int
	restarts int            // mixes where a shard's drift started the model afresh
	final    *learner.State // W after the last epoch
}

// simulateMixing runs the epoch protocol over shards (indices into xs, in
// shard order; every index once) with at most epoch examples per shard
// and epoch, boundaries cut as cut says, and mixes with learner.Mix and
// MixWeightsOf(weights, ...): simulateEpochs with a fixed epoch size.
func simulateMixing(tb testing.TB, cfg learner.Config, xs []learner.Example, shards [][]int32, epoch int, weights learner.MixWeights, cut int) mixResult {
	tb.Helper()
	mix := func(base *learner.State, states []*learner.State) (*learner.State, error) {
		return learner.Mix(base, states, learner.MixWeightsOf(weights, base, states))
	}
	return simulateEpochs(tb, cfg, xs, shards, func(int) int { return epoch }, mix, cut)
}

// mixFunc mixes the states that shards learned from base in one epoch,
// given in shard order, into the next base.
type mixFunc func(base *learner.State, states []*learner.State) (*learner.State, error)

// simulateEpochs runs the epoch protocol over shards (indices into xs, in
// shard order; every index once) with at most size(e) examples per shard
// in epoch e = 1, 2, ...: simulateSchedule with a schedule of the epoch's
// number alone.
func simulateEpochs(tb testing.TB, cfg learner.Config, xs []learner.Example, shards [][]int32, size func(e int) int, mix mixFunc, cut int) mixResult {
	tb.Helper()
	return simulateSchedule(tb, cfg, xs, shards, func(e int, _ *learner.State, _ []int) int { return size(e) }, mix, cut)
}

// epochSchedule is the most examples of a shard in epoch e, given W_{e-1},
// the mixed model the epoch learns from, and left, the examples of each
// shard not learned yet (cutBacklog: those the broker holds for it beyond
// the model's position), as consumer/epochs.go epochLimit computes it from
// the model and the shards' spans.
type epochSchedule func(e int, w *learner.State, left []int) int

// simulateSchedule runs the epoch protocol over shards (indices into xs,
// in shard order; every index once) with at most sched(e, W_{e-1}, left)
// examples per shard in epoch e = 1, 2, ..., boundaries cut as cut says.
// In each epoch every shard with a non-empty range learns it
// predict-then-learn from a copy of W_{e-1} (learner.Restore) and flushes,
// and W_e = mix(W_{e-1}, those shards' states in shard order). The
// prequential counts are the shards' predictions before learning each
// example. Shards learn concurrently, each on its own model: the result
// does not depend on scheduling.
func simulateSchedule(tb testing.TB, cfg learner.Config, xs []learner.Example, shards [][]int32, sched epochSchedule, mix mixFunc, cut int) mixResult {
	tb.Helper()
	m0, err := learner.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	w := m0.State()
	var shardOf []uint8 // cutLive: the shard of each example
	if cut == cutLive {
		shardOf = make([]uint8, len(xs))
		for s, idx := range shards {
			for _, i := range idx {
				shardOf[i] = uint8(s)
			}
		}
	}
	next := 0 // cutLive: the next example of the stream to arrive
	pos := make([]int, len(shards))
	ends := make([]int, len(shards))
	left := make([]int, len(shards))
	counts := make([]prequential, len(shards))
	var res mixResult
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for {
		// Cut the boundary B_e: ends[s] is the end of shard s's range.
		for s := range shards {
			left[s] = len(shards[s]) - pos[s]
		}
		epoch := sched(res.epochs+1, w, left)
		switch cut {
		case cutBacklog:
			for s := range shards {
				ends[s] = min(pos[s]+epoch, len(shards[s]))
			}
		case cutLive:
			copy(ends, pos)
			for next < len(xs) {
				s := shardOf[next]
				next++
				ends[s]++
				if ends[s]-pos[s] == epoch {
					break
				}
			}
		}
		var part []int // shards with a non-empty range, in shard order
		for s := range shards {
			if ends[s] > pos[s] {
				part = append(part, s)
			}
		}
		if len(part) == 0 {
			break
		}
		res.epochs++
		states := make([]*learner.State, len(part))
		errs := make([]error, len(part))
		var wg sync.WaitGroup
		for k, s := range part {
			rng := shards[s][pos[s]:ends[s]]
			pos[s] = ends[s]
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				m, err := learner.Restore(w)
				if err != nil {
					errs[k] = err
					return
				}
				for _, i := range rng {
					counts[s].add(m.Learn(&xs[i]), i, len(xs))
				}
				m.Flush()
				states[k] = m.State()
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				tb.Fatalf("epoch %d: Restore: %v", res.epochs, err)
			}
		}
		before := w.Detector.Drifts
		if w, err = mix(w, states); err != nil {
			tb.Fatalf("epoch %d: Mix: %v", res.epochs, err)
		}
		if w.Detector.Drifts > before {
			res.restarts++
		}
	}
	for _, c := range counts {
		res.merge(c)
	}
	res.final = w
	return res
}

// learnSequentially learns the examples idx of xs in order with one new
// model of cfg.
func learnSequentially(tb testing.TB, cfg learner.Config, xs []learner.Example, idx []int32) (prequential, *learner.State) {
	tb.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	var p prequential
	for _, i := range idx {
		p.add(m.Learn(&xs[i]), i, len(xs))
	}
	return p, m.State()
}

// learnAlone is the reference of `model.scope: partition`: each shard
// learned sequentially by its own model, the counts summed.
func learnAlone(tb testing.TB, cfg learner.Config, xs []learner.Example, shards [][]int32) prequential {
	tb.Helper()
	var sum prequential
	for _, idx := range shards {
		p, _ := learnSequentially(tb, cfg, xs, idx)
		sum.merge(p)
	}
	return sum
}

// inOrder is 0, 1, ..., n-1: the whole stream in its order.
func inOrder(n int) []int32 {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	return idx
}

// mixAlgorithms are the algorithms the benchmark mixes: the perceptron
// (learner.DefaultConfig's), the averaged perceptron, PA-I and AROW.
var mixAlgorithms = []learner.Algorithm{learner.Averaged, learner.Perceptron, learner.PA1, learner.AROW}

// mixSimData is one stream of the benchmark with the grid run on it.
type mixSimData struct {
	name    string
	opt     synth.Options // the flags of `hyperplane gen`
	n       int           // examples
	skewed  bool          // skewedShards and cutLive, else kafkaShards and cutBacklog
	epochs  []int         // E
	weights []learner.MixWeights
}

// mixSimGrid is BenchmarkMixingAccuracy's grid. The full grid (every E,
// weighting and algorithm, S = 4 and 8) runs on gen's defaults and with
// 20% label noise, E = 100 with weights=examples only: it is no candidate
// for a default (a shard learns 100 examples in well under a millisecond,
// and every epoch pays a barrier of milliseconds to hundreds of them) and
// it is the slowest. The other streams run weights=examples: other seeds,
// no noise, a longer stream (1M examples, of which the default stream is
// the first 200k), and skewed shards cut live, where the weightings
// differ most (on the balanced split the shards' ranges are nearly equal
// and so are uniform and examples).
func mixSimGrid() []mixSimData {
	all := []learner.MixWeights{learner.MixUniform, learner.MixExamples, learner.MixMistakes}
	ex := []learner.MixWeights{learner.MixExamples}
	with := func(f func(*synth.Options)) synth.Options {
		o := synth.DefaultOptions()
		f(&o)
		return o
	}
	return []mixSimData{
		{name: "gen", opt: synth.DefaultOptions(), n: 200_000, epochs: []int{100, 1000, 10000, 100000}, weights: all},
		{name: "gen-noise=0.2", opt: with(func(o *synth.Options) { o.Noise = 0.2 }), n: 200_000, epochs: []int{100, 1000, 10000, 100000}, weights: all},
		{name: "gen-noise=0", opt: with(func(o *synth.Options) { o.Noise = 0 }), n: 200_000, epochs: []int{1000, 10000, 100000}, weights: ex},
		{name: "gen-seed=1", opt: with(func(o *synth.Options) { o.Seed = 1 }), n: 200_000, epochs: []int{1000, 10000, 100000}, weights: ex},
		{name: "gen-seed=2", opt: with(func(o *synth.Options) { o.Seed = 2 }), n: 200_000, epochs: []int{1000, 10000, 100000}, weights: ex},
		{name: "gen-1M", opt: synth.DefaultOptions(), n: 1_000_000, epochs: []int{1000, 10000, 100000, 1000000}, weights: ex},
		{name: "gen-skewed", opt: synth.DefaultOptions(), n: 200_000, skewed: true, epochs: []int{1000, 10000, 100000}, weights: all},
	}
}

// BenchmarkMixingAccuracy is the cost of mixing: the prequential accuracy
// of the epoch protocol (simulateMixing) against one model learning the
// same stream sequentially, for S shards, epochs of at most E examples
// per shard, each weighting and algorithm (the rest of
// learner.DefaultConfig: 2^18 weights, η = 1, standard bias). One op is
// one whole simulation; the figures are deterministic, so one run
// (-benchtime 1x) gives them, in about 4 minutes on 2 cores (with the
// default -benchtime, each simulation repeats for a second and the set
// overruns go test's 10-minute timeout). Metrics: accuracy (mixed, prequential over
// the whole stream), seq-accuracy (one model, the stream in its order),
// cost-pp (seq-accuracy − accuracy, percentage points), alone-accuracy
// (each shard learned by its own model, model.scope: partition), epochs,
// and tail-cost-pp: the cost over the last fifth of the stream, where the
// start-up is past.
func BenchmarkMixingAccuracy(b *testing.B) {
	for _, d := range mixSimGrid() {
		b.Run("data="+d.name, func(b *testing.B) {
			cfg := perceptronConfig()
			s := genStream(d.opt, d.n, cfg)
			seq := map[learner.Algorithm]prequential{}
			for _, shards := range []int{4, 8} {
				split, cut := s.kafkaShards(shards), cutBacklog
				if d.skewed {
					split, cut = s.skewedShards(shards), cutLive
				}
				alone := map[learner.Algorithm]prequential{}
				for _, e := range d.epochs {
					for _, kind := range d.weights {
						if e < 1000 && kind != learner.MixExamples {
							continue
						}
						for _, alg := range mixAlgorithms {
							name := fmt.Sprintf("S=%d/E=%d/weights=%s/alg=%s", shards, e, kind, alg)
							b.Run(name, func(b *testing.B) {
								cfg := cfg
								cfg.Algorithm = alg
								if _, ok := seq[alg]; !ok {
									seq[alg], _ = learnSequentially(b, cfg, s.xs, inOrder(len(s.xs)))
								}
								if _, ok := alone[alg]; !ok {
									alone[alg] = learnAlone(b, cfg, s.xs, split)
								}
								var r mixResult
								for b.Loop() {
									r = simulateMixing(b, cfg, s.xs, split, e, kind, cut)
								}
								b.ReportMetric(r.accuracy(), "accuracy")
								b.ReportMetric(seq[alg].accuracy(), "seq-accuracy")
								b.ReportMetric(100*(seq[alg].accuracy()-r.accuracy()), "cost-pp")
								b.ReportMetric(alone[alg].accuracy(), "alone-accuracy")
								b.ReportMetric(100*(seq[alg].tailAccuracy()-r.tailAccuracy()), "tail-cost-pp")
								b.ReportMetric(float64(r.epochs), "epochs")
							})
						}
					}
				}
			}
		})
	}
}

// TestMixingApproachesSequential runs the epoch protocol on `hyperplane
// gen` streams (the defaults: 40 features of 10,000, 5% label noise) with
// the learner alone, as BenchmarkMixingAccuracy does, and checks what the
// benchmark relies on:
//   - with one shard, mixing is sequential learning, bit for bit, for every
//     epoch size, algorithm and weighting;
//   - every example is counted once: the mixed model's counters are the
//     shards' prequential counts;
//   - with 4 shards and E = 1000, the cost against sequential learning stays
//     within a tolerance, and mixing beats learning each shard alone;
//   - on the averaged perceptron, smaller epochs are better than much larger
//     ones.
func TestMixingApproachesSequential(t *testing.T) {
	t.Run("one shard", func(t *testing.T) {
		cfg := perceptronConfig()
		cfg.HashBits = 12 // small states: many epochs of few examples
		s := genStream(synth.DefaultOptions(), 2000, cfg)
		one := [][]int32{inOrder(len(s.xs))}
		for _, alg := range mixAlgorithms {
			cfg.Algorithm = alg
			seq, want := learnSequentially(t, cfg, s.xs, one[0])
			for k, e := range []int{1, 7, 500, 2000, 1 << 20} {
				kind := []learner.MixWeights{learner.MixUniform, learner.MixExamples, learner.MixMistakes}[k%3]
				r := simulateMixing(t, cfg, s.xs, one, e, kind, cutBacklog)
				if r.prequential != seq {
					t.Errorf("%s, E=%d, weights=%s: %d of %d correct, sequential learning %d of %d", alg, e, kind, r.correct, r.labeled, seq.correct, seq.labeled)
				}
				if r.final.Digest() != want.Digest() {
					t.Errorf("%s, E=%d, weights=%s: the mixed model differs from the sequential one", alg, e, kind)
				}
			}
		}
	})

	// The tolerances on the cost (sequential accuracy minus mixed, in
	// percentage points) for S=4, E=1000, weights=examples on the first
	// 50,000 examples of seed 0, from measurement: over seeds 0 to 5 the
	// cost was averaged 1.0–1.8, perceptron 3.0–3.6, pa1 2.0–2.6, arow
	// 1.5–2.1 (the spread over seeds is about ±0.5). Each tolerance is the
	// largest measured plus 1.5 points, three times that spread: a change
	// in Mix or in the learners that costs accuracy shows, another seed
	// would not. (Averaged cost 3.1–4.1, with a tolerance of 5.5, while Mix
	// took the weighted mean of the shards' averaged models; its tolerance
	// now catches a return to that rule.) Each shard learning alone cost
	// 7.7–9.1; mixing gained at least 4.2 points over it in every run, and
	// must gain 2.5. One seed keeps the test short under the race detector
	// (about 20 s); the benchmark runs others.
	tolerance := map[learner.Algorithm]float64{
		learner.Averaged:   3.3,
		learner.Perceptron: 5.0,
		learner.PA1:        4.0,
		learner.AROW:       3.5,
	}
	const n, shards, gain = 50_000, 4, 2.5
	t.Run(fmt.Sprintf("S=%d", shards), func(t *testing.T) {
		cfg := perceptronConfig()
		s := genStream(synth.DefaultOptions(), n, cfg)
		split := s.kafkaShards(shards)
		for _, alg := range mixAlgorithms {
			cfg.Algorithm = alg
			seq, _ := learnSequentially(t, cfg, s.xs, inOrder(n))
			alone := learnAlone(t, cfg, s.xs, split)
			r := simulateMixing(t, cfg, s.xs, split, 1000, learner.MixExamples, cutBacklog)
			if r.labeled != n || r.final.Labeled != r.labeled || r.final.Mistakes != r.labeled-r.correct {
				t.Errorf("%s: %d labeled, %d correct; the mixed model counts %d labeled, %d mistakes", alg, r.labeled, r.correct, r.final.Labeled, r.final.Mistakes)
			}
			cost := 100 * (seq.accuracy() - r.accuracy())
			t.Logf("%s: sequential %.4f, mixed %.4f (cost %.2f points, %d epochs), each shard alone %.4f", alg, seq.accuracy(), r.accuracy(), cost, r.epochs, alone.accuracy())
			if cost > tolerance[alg] {
				t.Errorf("%s: mixing costs %.2f points of accuracy against sequential learning, more than %.1f", alg, cost, tolerance[alg])
			}
			if d := 100 * (r.accuracy() - alone.accuracy()); d < gain {
				t.Errorf("%s: mixing gains %.2f points over each shard alone, less than %.1f", alg, d, gain)
			}
			if alg != learner.Averaged {
				continue
			}
			// Measured over seeds 0 to 5: E=1000 was 5.3–5.7 points
			// better than E=10000 (3.2–3.4 with Mix's former rule for the
			// averaged sums), which was 1.5–1.9 better than one epoch for
			// the whole stream (E of 12,500 or more: each shard learns
			// alone from the new model, so its accuracy is alone's).
			// E=10000 is two epochs here, and the shards learn from one
			// mix only, of shards learned from the new model, where the
			// two rules nearly agree.
			large := simulateMixing(t, cfg, s.xs, split, 10000, learner.MixExamples, cutBacklog)
			if d := 100 * (r.accuracy() - large.accuracy()); d < 4 {
				t.Errorf("averaged: E=1000 is %.2f points better than E=10000, less than 4", d)
			}
			if d := 100 * (large.accuracy() - alone.accuracy()); d < 0.5 {
				t.Errorf("averaged: E=10000 is %.2f points better than one epoch, less than 0.5", d)
			}
		}
	})
}
