package learner_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// Mixing rules measured against learner.Mix's weighted mean, on the epoch
// protocol of mixsim_test.go. Each rule is written here on the states'
// exported fields; learner.Mix gives the counters and the rolling window,
// and the rule replaces the parameters. A rule is judged by prequential
// accuracy, not by its bits.

// ruleMix is the mixFunc of rule for cfg's algorithm:
//   - mean: learner.Mix with weights examples (the default);
//   - mistakes: learner.Mix with weights mistakes;
//   - sum: W_e = W_{e-1} + Σ_s (W_{e,s} − W_{e-1}), each shard's learning
//     kept whole; pegasos sums its effective weights and projects the sum
//     onto its ball; arow sums the deltas of the weights and adds the
//     shards' precision gains, 1/σ = 1/σ_0 + Σ_s (1/σ_s − 1/σ_0); the
//     averaged perceptron sums its weights' deltas and counts every vector
//     held once, as learner.Mix does;
//   - damped: learner.MixWithRule with MixDamped and weights examples: the
//     sum's deltas scaled by 1/√k for k participants of equal weight;
//   - touched: learner.MixWithRule with MixTouched and weights examples:
//     each coordinate the mean over the shards that changed it;
//   - magnitude: each coordinate w_0 + q/m, with m = Σ μ_s·Δ_s and
//     q = Σ μ_s·Δ_s² (at most k·|m| for k participants), each shard's
//     delta weighted by its own size;
//   - precision (arow): the shards' evidence combined as independent
//     Gaussian estimates from the common prior W_{e-1}: the precision as in
//     sum, and the weight σ·(w_0/σ_0 + Σ_s (w_s/σ_s − w_0/σ_0));
//   - interleaved (averaged): the weights as in sum, and the sums as if the
//     shards' updates had been made one shard's after another's
//     interleaved over the epoch: an update at a shard's j-th of n_s
//     labeled examples counts as made at T_0 + j·N/n_s, N = Σ n_s.
func ruleMix(rule string) mixFunc {
	switch rule {
	case "mean":
		return func(base *learner.State, states []*learner.State) (*learner.State, error) {
			return learner.Mix(base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
		}
	case "mistakes":
		return func(base *learner.State, states []*learner.State) (*learner.State, error) {
			return learner.Mix(base, states, learner.MixWeightsOf(learner.MixMistakes, base, states))
		}
	case "damped", "touched":
		r := learner.MixRule(rule)
		return func(base *learner.State, states []*learner.State) (*learner.State, error) {
			return learner.MixWithRule(r, base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
		}
	}
	return func(base *learner.State, states []*learner.State) (*learner.State, error) {
		out, err := learner.Mix(base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
		if err != nil {
			return nil, err
		}
		var parts []*learner.State
		for _, st := range states {
			if st.Labeled > base.Labeled {
				parts = append(parts, st)
			}
		}
		if len(parts) < 2 {
			return out, nil
		}
		const c = 1.0
		if rule == "magnitude" {
			return magnitudeRule(base, out, parts)
		}
		deltaSum := func(w0 []float64, ws func(*learner.State) []float64) []float64 {
			w := make([]float64, len(w0))
			for i := range w {
				var d float64
				for _, st := range parts {
					d += ws(st)[i] - w0[i]
				}
				w[i] = w0[i] + c*d
			}
			return w
		}
		weights := func(st *learner.State) []float64 { return st.Weights }
		bias := func(st *learner.State) []float64 { return st.Bias }
		switch alg := base.Config.Algorithm; alg {
		case learner.Pegasos:
			eff := map[*learner.State][2][]float64{}
			for _, st := range append([]*learner.State{base}, parts...) {
				w, b := st.Effective()
				eff[st] = [2][]float64{w, b}
			}
			out.Weights = deltaSum(eff[base][0], func(st *learner.State) []float64 { return eff[st][0] })
			out.Bias = deltaSum(eff[base][1], func(st *learner.State) []float64 { return eff[st][1] })
			var n2 float64
			for _, v := range out.Weights {
				n2 += v * v
			}
			for _, v := range out.Bias {
				n2 += v * v
			}
			if r := 1 / base.Config.Lambda; n2 > r {
				f := math.Sqrt(r / n2)
				for i := range out.Weights {
					out.Weights[i] *= f
				}
				for i := range out.Bias {
					out.Bias[i] *= f
				}
				n2 *= f * f
			}
			out.Scale, out.VNorm2 = 1, n2
		case learner.AROW:
			w, v := arowRule(rule, c, base.Weights, base.Variance, parts, weights, func(st *learner.State) []float64 { return st.Variance })
			out.Weights, out.Variance = w, v
			b, vb := arowRule(rule, c, base.Bias, []float64{base.VarianceBias}, parts, bias, func(st *learner.State) []float64 { return []float64{st.VarianceBias} })
			out.Bias, out.VarianceBias = b, vb[0]
		case learner.Averaged:
			out.Weights = deltaSum(base.Weights, weights)
			out.Bias = deltaSum(base.Bias, bias)
			out.SumWeights = averagedRule(rule, base, parts, out.Weights, weights, func(st *learner.State) []float64 { return st.SumWeights })
			out.SumBias = averagedRule(rule, base, parts, out.Bias, bias, func(st *learner.State) []float64 { return st.SumBias })
		case learner.Perceptron, learner.Margin, learner.PA, learner.PA1, learner.PA2:
			out.Weights = deltaSum(base.Weights, weights)
			out.Bias = deltaSum(base.Bias, bias)
		default:
			return nil, fmt.Errorf("rule %s: algorithm %s", rule, alg)
		}
		return out, nil
	}
}

// magnitudeRule sets out's parameters, coordinate by coordinate, to w_0
// plus the shards' deltas each weighted by its own size: with μ_s the
// weights by examples, m = Σ μ_s·Δ_s and q = Σ μ_s·Δ_s², the delta is
// q/m, at most k·|m| for k participants in m's direction: the mean where
// the shards made the same change, a shard's own change where it alone
// made one, never beyond the largest change when they agree in sign.
// AROW's variances add the shards' precision gains.
func magnitudeRule(base, out *learner.State, parts []*learner.State) (*learner.State, error) {
	mu := make([]float64, len(parts))
	var tot float64
	for s, st := range parts {
		mu[s] = float64(st.Labeled - base.Labeled)
		tot += mu[s]
	}
	for s := range mu {
		mu[s] /= tot
	}
	k := float64(len(parts))
	mix := func(w0 []float64, ws func(*learner.State) []float64) []float64 {
		w := make([]float64, len(w0))
		for i := range w {
			var m, q float64
			for s, st := range parts {
				d := ws(st)[i] - w0[i]
				m += mu[s] * d
				q += mu[s] * d * d
			}
			w[i] = w0[i]
			if m != 0 {
				w[i] += math.Copysign(math.Min(q/math.Abs(m), k*math.Abs(m)), m)
			}
		}
		return w
	}
	weights := func(st *learner.State) []float64 { return st.Weights }
	bias := func(st *learner.State) []float64 { return st.Bias }
	out.Weights = mix(base.Weights, weights)
	out.Bias = mix(base.Bias, bias)
	switch alg := base.Config.Algorithm; alg {
	case learner.AROW:
		_, out.Variance = arowRule("sum", 1, base.Weights, base.Variance, parts, weights, func(st *learner.State) []float64 { return st.Variance })
		_, vb := arowRule("sum", 1, base.Bias, []float64{base.VarianceBias}, parts, bias, func(st *learner.State) []float64 { return []float64{st.VarianceBias} })
		out.VarianceBias = vb[0]
	case learner.Averaged:
		out.SumWeights = averagedRule("held", base, parts, out.Weights, weights, func(st *learner.State) []float64 { return st.SumWeights })
		out.SumBias = averagedRule("held", base, parts, out.Bias, bias, func(st *learner.State) []float64 { return st.SumBias })
	case learner.Perceptron, learner.Margin, learner.PA, learner.PA1, learner.PA2:
	default:
		return nil, fmt.Errorf("rule magnitude: algorithm %s", alg)
	}
	return out, nil
}

// arowRule mixes AROW's weights and variances by rule (see ruleMix), c
// scaling the weights' deltas. A coordinate no shard changed keeps its
// bits.
func arowRule(rule string, c float64, w0, v0 []float64, parts []*learner.State, ws, vs func(*learner.State) []float64) (w, v []float64) {
	w, v = make([]float64, len(w0)), make([]float64, len(v0))
	for i := range w {
		changed := false
		var p, dw, eta float64
		p = 1 / v0[i]
		for _, st := range parts {
			si, vi := ws(st)[i], vs(st)[i]
			if si != w0[i] || vi != v0[i] {
				changed = true
			}
			p += 1/vi - 1/v0[i]
			dw += si - w0[i]
			eta += si/vi - w0[i]/v0[i]
		}
		if !changed {
			w[i], v[i] = w0[i], v0[i]
			continue
		}
		v[i] = math.Min(1, 1/p)
		if rule == "precision" {
			w[i] = v[i] * (w0[i]/v0[i] + eta)
		} else {
			w[i] = w0[i] + c*dw
		}
	}
	return w, v
}

// averagedRule is the averaged perceptron's accumulator u = (T+1)·w − S
// for the mixed weights w (see ruleMix): S = S_0 + Σ_s (S_s − S_0), every
// vector held counted once, or, for interleaved, u = u_0 + Σ_s (T_0·Δw_s +
// (N/n_s)·(Δu_s − T_0·Δw_s)).
func averagedRule(rule string, base *learner.State, parts []*learner.State, w []float64, ws, us func(*learner.State) []float64) []float64 {
	w0, u0 := ws(base), us(base)
	t0 := float64(base.Labeled)
	var N float64
	for _, st := range parts {
		N += float64(st.Labeled - base.Labeled)
	}
	T := t0 + N
	out := make([]float64, len(w))
	for i := range out {
		switch rule {
		case "interleaved":
			u := u0[i]
			for _, st := range parts {
				n := float64(st.Labeled - base.Labeled)
				dw, du := ws(st)[i]-w0[i], us(st)[i]-u0[i]
				u += t0*dw + (N/n)*(du-t0*dw)
			}
			out[i] = u
		default:
			s0 := (t0+1)*w0[i] - u0[i]
			s := s0
			for _, st := range parts {
				ss := float64(st.Labeled+1)*ws(st)[i] - us(st)[i]
				s += ss - s0
			}
			out[i] = (T+1)*w[i] - s
		}
	}
	return out
}

// relabel gives xs the labels of a hidden hyperplane that moves: drift
// "rotate" turns it by a right angle over the stream, from h_A at the
// first example to h_B at the last (h = cos θ·h_A + sin θ·h_B, θ growing
// linearly), and "switch" is h_A for the first half and h_B for the second.
// h_A and h_B are independent normal weights on the hashed features, and
// noise is the probability that a label is flipped.
func relabel(xs []learner.Example, bits int, drift string, noise float64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ha, hb := make([]float64, 1<<bits), make([]float64, 1<<bits)
	for i := range ha {
		ha[i], hb[i] = r.NormFloat64(), r.NormFloat64()
	}
	n := len(xs)
	for t := range xs {
		x := &xs[t]
		var ca, cb float64
		switch drift {
		case "rotate":
			th := math.Pi / 2 * float64(t) / float64(n-1)
			ca, cb = math.Cos(th), math.Sin(th)
		case "switch":
			ca = 1
			if t >= n/2 {
				ca, cb = 0, 1
			}
		default:
			panic("relabel: unknown drift " + drift)
		}
		var score float64
		for k, i := range x.Index {
			score += x.Value[k] * (ca*ha[i] + cb*hb[i])
		}
		x.Label = 1
		if score < 0 {
			x.Label = -1
		}
		if r.Float64() < noise {
			x.Label = -x.Label
		}
	}
}

// epochSizes are the epoch schedules measured: a fixed size per shard;
// "1k..100k", 1,000 examples per shard in the first epoch, doubling at
// every epoch up to 100,000; or "growK", an epoch of 1/k of the examples
// each shard learned in the epochs before it, at least 1,000 and at most
// 100,000.
var epochSizes = map[string]func(e int) int{
	"1k":       func(int) int { return 1000 },
	"10k":      func(int) int { return 10000 },
	"100k":     func(int) int { return 100000 },
	"1k..100k": doublingEpochs(1000, 100000),
	"grow4":    growingEpochs(4, 1000, 100000),
	"grow8":    growingEpochs(8, 1000, 100000),
	"grow16":   growingEpochs(16, 1000, 100000),
}

// growingEpochs is an epoch schedule of 1/k of the examples per shard of
// the epochs before, at least from and at most to.
func growingEpochs(k, from, to int) func(e int) int {
	return func(e int) int {
		learned, n := 0, from
		for range e {
			n = min(max(learned/k, from), to)
			learned += n
		}
		return n
	}
}

// doublingEpochs is an epoch schedule of from examples per shard in the
// first epoch, doubling at every epoch up to to.
func doublingEpochs(from, to int) func(e int) int {
	return func(e int) int {
		n := from
		for k := 1; k < e && n < to; k++ {
			n *= 2
		}
		return min(n, to)
	}
}

// ruleGrid lists, per algorithm, the rules BenchmarkMixingRules measures.
var ruleGrid = map[learner.Algorithm][]string{
	learner.Perceptron: {"mean", "mistakes", "sum", "damped", "touched", "magnitude"},
	learner.Margin:     {"mean", "sum", "damped", "touched", "magnitude"},
	learner.PA:         {"mean", "sum", "damped", "touched", "magnitude"},
	learner.PA1:        {"mean", "mistakes", "sum", "damped", "touched", "magnitude"},
	learner.PA2:        {"mean", "sum", "damped", "touched", "magnitude"},
	learner.Pegasos:    {"mean", "sum", "damped", "touched"},
	learner.AROW:       {"mean", "mistakes", "sum", "precision", "damped", "touched", "magnitude"},
	learner.Averaged:   {"mean", "mistakes", "sum", "interleaved", "damped", "touched", "magnitude"},
}

// BenchmarkMixingRules measures the mixing rules of ruleMix and the epoch
// schedules of epochSizes, for every mixable linear algorithm, against
// sequential learning, on three 1M-example streams of 40 features from
// 100,000 names with 5% label noise: gen's stream (data=gen), and the same
// features labeled by a hyperplane that rotates by a right angle over the
// stream (data=rotate) or switches to another at 500k (data=switch). The
// stream is split as a Kafka topic of S partitions and cut as a backlog.
// One op is one simulation; the figures are deterministic, so run it with
// -benchtime 1x, and pick a part of the grid with -bench (the whole grid
// takes hours on 2 cores):
//
//	go test -run XXX -bench 'BenchmarkMixingRules/data=gen/S=4/E=100k/' -benchtime 1x -timeout 0 ./learner/
//
// Metrics as BenchmarkMixingAccuracy's: accuracy, seq-accuracy, cost-pp,
// tail-cost-pp, alone-accuracy and gain-pp (accuracy − alone-accuracy, in
// points), epochs.
func BenchmarkMixingRules(b *testing.B) {
	const n = 1_000_000
	opt := synth.DefaultOptions()
	opt.Vocab = 100_000
	cfg := perceptronConfig()
	algs := []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.PA, learner.PA1, learner.PA2, learner.Margin, learner.Pegasos, learner.AROW}
	schedules := []string{"1k", "10k", "100k", "1k..100k", "grow4", "grow8", "grow16"}
	for _, data := range []string{"gen", "rotate", "switch"} {
		b.Run("data="+data, func(b *testing.B) {
			s := genStream(opt, n, cfg)
			if data != "gen" {
				relabel(s.xs, cfg.HashBits, data, opt.Noise, 1)
			}
			seq := map[learner.Algorithm]prequential{}
			for _, shards := range []int{2, 4, 6} {
				split := s.kafkaShards(shards)
				alone := map[learner.Algorithm]prequential{}
				b.Run(fmt.Sprintf("S=%d", shards), func(b *testing.B) {
					for _, sched := range schedules {
						b.Run("E="+sched, func(b *testing.B) {
							for _, alg := range algs {
								for _, rule := range ruleGrid[alg] {
									b.Run(fmt.Sprintf("rule=%s/alg=%s", rule, alg), func(b *testing.B) {
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
											r = simulateEpochs(b, cfg, s.xs, split, epochSizes[sched], ruleMix(rule), cutBacklog)
										}
										b.ReportMetric(r.accuracy(), "accuracy")
										b.ReportMetric(seq[alg].accuracy(), "seq-accuracy")
										b.ReportMetric(100*(seq[alg].accuracy()-r.accuracy()), "cost-pp")
										b.ReportMetric(100*(seq[alg].tailAccuracy()-r.tailAccuracy()), "tail-cost-pp")
										b.ReportMetric(alone[alg].accuracy(), "alone-accuracy")
										b.ReportMetric(100*(r.accuracy()-alone[alg].accuracy()), "gain-pp")
										b.ReportMetric(float64(r.epochs), "epochs")
									})
								}
							}
						})
					}
				})
			}
		})
	}
}
