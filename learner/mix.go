package learner

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
)

// Mix is one step of iterative parameter mixing (McDonald, Hall & Mann
// 2010): W_e from W_{e-1} and the states W_{e,s} that the shards learned
// in epoch e, each from a copy of W_{e-1}. base is W_{e-1}, states are the
// W_{e,s} in shard order, and the model mixes with weights
// μ_s = weights[s]/Σ weights. It is pure and deterministic to the bit:
// every sum is taken in float64 in the order of states, with no fused
// multiply-add, and the inputs are not modified. It is not
// order-independent: the same states in another order may round
// differently, so callers must always pass them in the same order.
//
// base is required: for a new model's first epoch it is the new model's
// state, New(cfg).State(). A nil base is an error rather than a zero
// history, so that states learned from a trained model can never be mixed
// as if they were new and count that model's history once per shard.
//
// Every state must have been learned from a copy of base: base and every
// state pass Validate, every state has base's Config (the error names the
// state and the first field that differs), and no counter of a state is
// below base's (the error names the state and the counter). Mini-batch
// models (Config.Batch > 1) must be flushed: a state or base with a
// pending mini-batch is an error, and a shard ends its range with
// Model.Flush. A kernel model cannot be mixed with another: its support
// set is a list of examples, not a vector of parameters that can be
// averaged, so a kernel model learned from more than one shard needs
// `model.scope: partition`, one model per shard.
//
// The weights are finite and at least 0, one per state; MixWeightsOf
// computes them for the epoch protocol. A state of weight 0 adds to the
// counters but not to the parameters, except that the averaged
// perceptron's sums count the weight vectors it held (see below). The
// weights may all be 0 only when no state learned a labeled example
// beyond base: the parameters are then base's. A state of positive weight
// that learned nothing pulls the mix towards base.
//
// Counters: Examples, Labeled, Mistakes, Updates and the confusion counts
// are base's plus every state's delta, base + Σ_s (state_s − base), over
// all states whatever their weight (an error if one overflows); R2 is the
// largest of all. The rolling window is base's followed by each state's
// new outcomes in shard order (state s's last min(Window, Labeled_s −
// base.Labeled), oldest first), keeping the last Config.Window. The ring
// continues from base.WindowNext, laid out as one model learning those
// outcomes one after another from base would hold it, so Restore reports
// the rolling accuracy of exactly that sequence. With T the mixed Labeled,
// WindowNext is (base.WindowNext + T − base.Labeled) mod Window.
//
// No state gives a deep copy of base. One state of positive weight whose
// companions all have an empty delta (every counter equal to base's) gives
// a deep copy of that state, bit for bit, not μ·w with μ = 1; in
// particular a single state mixes into itself. Otherwise, with one
// participant (state of positive weight), the parameters are a copy of
// its own (for Averaged, all but the sums, which follow the rule below),
// and with none, base's. With several, a number on which every
// participant has the same bits keeps those bits, Averaged's sums aside,
// and every other one mixes as follows.
//
//   - perceptron, margin, pa, pa1, pa2 and multiclass models: every weight
//     and bias (per class) is the weighted mean Σ μ_s·w_s.
//   - averaged: Weights and Bias are weighted means as above. A model that
//     has learned T labeled examples has held T+1 weight vectors w_0, …,
//     w_T and predicts with their average a = S/(T+1), S = Σ_t w_t. Its
//     state keeps w = w_T in Weights and u = (T+1)·w − S in SumWeights (u
//     is Σ t·Δw_t over the updates Δw_t made at labeled example t). The
//     mix averages every weight vector that base or any state held,
//     exactly once. With base's T_0, w_0, u_0 and S_0 = (T_0+1)·w_0 − u_0,
//     state s, having learned n_s = T_s − T_0 labeled examples from base,
//     held S_s − S_0 = n_s·w_s + (T_0+1)·(w_s − w_0) − (u_s − u_0) beyond
//     base's vectors, and the mix has S = S_0 + Σ_s (S_s − S_0) over every
//     state that learned a labeled example (n_s > 0), whatever its weight:
//     a state of weight 0 adds nothing to the weights, but the vectors it
//     held were held, and count. A state that learned none adds no vector.
//     T, the mixed Labeled, is T_0 + Σ_s n_s, so S sums T+1 vectors and
//     the mix predicts with S/(T+1). SumWeights is u = (T+1)·w − S, with w
//     the mixed Weights, computed as u_0 + Σ_s (u_s − u_0) +
//     (Σ_s n_s·(w − w_s) + (T_0+1)·((w − w_0) − Σ_s (w_s − w_0))), with
//     each Σ over the states that learned, in shard order: the large
//     products (T+1)·w and (T_s+1)·w_s, which would round at their own
//     scale, are never formed, only differences of nearby numbers scaled.
//     A coordinate that no state changed (where the mixed w and every state
//     that learned have base's bits of w, and those states base's bits of
//     u) keeps base's bits. Likewise SumBias. When no state learned a
//     labeled example, S is S_0 and, the weights being base's, the sums are
//     base's. When one state did and it is the only participant, they are
//     its own, bit for bit: one shard learning while the others idle is
//     sequential learning. Learning on from the mix adds t·Δw at labeled
//     example t = T+1, T+2, …, so after T' examples the averaged model is
//     (S + w_{T+1} + … + w_{T'})/(T'+1): the running average goes on over
//     every vector held, each once, as sequential learning's does. T must
//     therefore be the mixed Labeled, which is why base's history counts
//     once and not once per shard. (The μ-weighted mean of the shards'
//     averaged models, which Mix took before, kept at each epoch a share
//     (T_0+1)/(T_0+n_s+1) of the average for the past instead of
//     (T_0+1)/(T+1), so that early epochs outweighed late ones; see
//     BENCHMARKS.md, "Weightings, by the mean at fixed epochs".)
//   - pegasos: the effective weights Scale·Weights and Scale·Bias are
//     mixed as weighted means into Weights and Bias, Scale is 1 and VNorm2
//     is recomputed as ‖Weights‖² + ‖Bias‖². The mean stays inside
//     Pegasos's ball, which is convex, and the next step is that of
//     labeled example T+1.
//   - arow: each coordinate (and each bias: a multiclass model has a
//     variance per weight and per class's bias) mixes by precision: with
//     p_s = μ_s/σ_s, the weight is Σ p_s·w_s / Σ p_s and the variance
//     1/Σ p_s, the weighted harmonic mean of the variances (at most 1, and
//     capped at 1 against rounding). To avoid overflow it is computed with
//     every p_s multiplied by the smallest variance m: p'_s = μ_s·(m/σ_s),
//     weight Σ p'_s·w_s / Σ p'_s, variance m/Σ p'_s. A variance of 0 is an
//     infinite precision: when some participants have one, the weight is
//     the μ-weighted mean over them alone and the variance stays 0.
//
// The change detector (State.Detector) mixes by the mean of the states'
// statistics weighted by the labeled examples each learned beyond base,
// whatever the mixing weights (base's when none learned), and its drift
// count is base's plus every state's new drifts (see mixDetector). A
// state of positive weight that found a drift restarts the model: the
// parameters and the detector mix, by the rules above, over the states
// that found one alone, from a new model's parameters in place of base's
// (see restart).
func Mix(base *State, states []*State, weights []float64) (*State, error) {
	return mix(MixMean, base, states, weights, -1)
}

// MixWithRule is Mix with the parameters of two or more participants
// combined by rule; MixMean is Mix. Everything else is as Mix documents:
// the checks, the counters and the window, a state of weight 0, one
// participant (whose parameters are copied: every rule gives W_{e-1} + Δ
// for one shard's delta Δ), the averaged perceptron's sums, which count
// every weight vector held once whatever the mixed weights, and the
// determinism to the bit, with every sum taken in the order of states.
//
// MixDamped keeps more of each epoch's learning than the mean, which
// shrinks it by the number of shards: with μ the normalised weights of
// the participants and ‖μ‖ = √(Σ μ_s²), a parameter is
//
//	w = w_0 + Σ_s (μ_s/‖μ‖)·(w_s − w_0)
//
// where w_0 is base's. With k participants of equal weight that is
// w_0 + Σ_s (w_s − w_0)/√k: between the mean (1/k) and the sum of the
// deltas (1), which overshoots when the shards correct the same
// mistakes. A coordinate on which every participant has base's bits keeps
// them. Per algorithm:
//   - perceptron, margin, pa, pa1, pa2, multiclass and averaged: every
//     weight and bias as above (the averaged perceptron's sums follow its
//     rule in Mix);
//   - pegasos: the effective weights Scale·Weights and Scale·Bias as
//     above, projected onto Pegasos's ball of radius 1/√λ when the sum
//     leaves it; Scale is 1 and VNorm2 is ‖Weights‖² + ‖Bias‖²;
//   - arow: the weights as above, and the shards' evidence added: the
//     precision is base's plus every participant's gain, 1/σ = 1/σ_0 +
//     Σ_s max(0, 1/σ_s − 1/σ_0), whatever the weights (capped at a
//     variance of 1; computed with every precision multiplied by the
//     smallest variance m, so that none overflows). A variance of 0 in
//     base or a participant stays 0.
//
// Measured (docs/scale-out.md, "Accuracy of mixing: measurements"), the
// damped rule suits AROW, whose precision gains shrink its next steps; for
// the other algorithms it diverges with six shards and small epochs.
//
// MixTouched takes, for each coordinate, the weighted mean over the
// participants that changed it, those whose bits differ from base's:
//
//	w = w_0 + Σ_{s changed} μ_s·(w_s − w_0) / Σ_{s changed} μ_s
//
// summed in shard order. A feature that one shard alone learned in the
// epoch keeps that shard's change whole, where the mean would divide it
// by the number of shards; a coordinate that every shard changed (the
// bias, frequent features) is their mean. Each coordinate stays between
// the shards' values, so that it cannot overshoot as a sum of deltas
// does. A coordinate no participant changed keeps base's bits. Per
// algorithm:
//   - perceptron, margin, pa, pa1, pa2, multiclass and averaged: every
//     weight and bias as above (the averaged perceptron's sums follow its
//     rule in Mix);
//   - pegasos: the effective weights as above; every step of Pegasos
//     shrinks them all, so that every participant changes every non-zero
//     coordinate and the rule is close to the mean; Scale is 1 and VNorm2
//     is ‖Weights‖² + ‖Bias‖²;
//   - arow: over the participants that changed the weight or the variance
//     of a coordinate, the weight is their precision-weighted mean, with
//     p_s = μ_s/σ_s, and the precision is base's plus their gains, as for
//     MixDamped.
//
// MixAROW mixes AROW models only (another algorithm is an error). The
// weights are MixDamped's, w_0 + Σ_s a_s·(w_s − w_0) with a_s = μ_s/‖μ‖,
// and the shards' evidence is damped alike rather than added: the
// precision is 1/σ = 1/σ_0 + Σ_s a_s·max(0, 1/σ_s − 1/σ_0) (capped at a
// variance of 1, computed as MixDamped's; a variance of 0 stays 0). With
// k shards of equal weight both the step and the precision gained are √k
// times the mean's, so that the mixed model is as confident as the step
// it took: under MixDamped the precision is that of every shard's
// evidence while the step is 1/√k of their sum, and a model that keeps
// moving (a concept that turns) falls behind. Measured
// (BenchmarkMixingDefaults*; BENCHMARKS.md, "AROW's rule"): on a concept
// that turns by a right angle over 400k examples it costs 0.51 and 0.66
// points at 4 and 6 partitions where MixDamped costs 1.14 and 1.36; 0.34
// and 0.47 on 1M examples of gen (0.44, 0.64).
//
// MixPegasos mixes Pegasos models only (another algorithm is an error).
// A Pegasos state holds its weights as Scale·v: every step shrinks all of
// them through Scale and adds the example to v, so a shard's effective
// weights are its shrunk past, Scale_s·v_0 with v_0 base's v, plus its new
// learning, Scale_s·(v_s − v_0), which is 0 where v_s has v_0's bits. Each
// coordinate (and bias) of the effective weights is
//
//	w = w_0 + g·((P + N) − w_0)
//
// with w_0 base's effective weight, P = Σ_s μ_s·Scale_s·v_0 the shards'
// past, shrunk as each shrank it, and N the weighted mean of the new
// learning over the shards whose v changed there (0 when none did), as
// MixTouched takes it: a feature one shard alone learned keeps that
// shard's learning whole. The step from base is then stretched by
// g = min(1/‖μ‖, 1.75), ‖μ‖ = √(Σ μ_s²) (√k for k shards of equal weight,
// as MixDamped), since a mean of the shards shrinks each epoch's learning
// against sequential learning's; the cap keeps it below 2, above which
// the shards' corrections of the same mistakes, stretched, overshoot and
// oscillate. The result is projected onto the ball of radius
// 1/√λ when it leaves it, Scale is 1 and VNorm2 ‖Weights‖² + ‖Bias‖². A
// shard that folded its scale into v within the epoch (when Scale falls
// below 1e-9) or restarted v, and so changed v wherever v_0 is not 0,
// counts by its effective weights in P and not in N. Measured
// (BenchmarkMixingDefaults; BENCHMARKS.md, "Pegasos's rule"), at the
// defaults it costs 0.17, 0.71 and 1.13 points at 2, 4 and 6 partitions,
// where the mean costs −0.16, 1.63 and 3.14.
//
// It returns an error for a rule that is not one of the MixRule
// constants.
func MixWithRule(rule MixRule, base *State, states []*State, weights []float64) (*State, error) {
	if !rule.known() {
		return nil, fmt.Errorf("mix: %w", unknownMixRule(rule))
	}
	if base != nil {
		rule = rule.For(base.Config.Algorithm)
	}
	return mix(rule, base, states, weights, -1)
}

// mix is MixWithRule of a known rule over states whose per-weight vectors
// hold n values, or the configuration's number when n < 0 (see
// MixChanged).
func mix(rule MixRule, base *State, states []*State, weights []float64, n int) (*State, error) {
	if base == nil {
		return nil, errors.New("mix: no base state: pass W_{e-1}, the model every state learned from (a new model's State for the first epoch)")
	}
	if err := base.validate(n); err != nil {
		return nil, fmt.Errorf("mix: base: %w", err)
	}
	if n, ok := pendingBatch(base); ok {
		return nil, fmt.Errorf("mix: the base has a pending mini-batch (%d weights): flush it with Model.Flush", n)
	}
	if len(weights) != len(states) {
		return nil, fmt.Errorf("mix: %d states but %d weights", len(states), len(weights))
	}
	cfg := base.Config
	learned := -1 // a state that learned a labeled example beyond base
	for i, st := range states {
		if st == nil {
			return nil, fmt.Errorf("mix: state %d is nil", i)
		}
		if err := st.validate(n); err != nil {
			return nil, fmt.Errorf("mix: state %d: %w", i, err)
		}
		if field := configDiff(cfg, st.Config); field != "" {
			return nil, fmt.Errorf("mix: state %d: config %s differs from the base's", i, field)
		}
		if err := checkAhead(base, st); err != nil {
			return nil, fmt.Errorf("mix: state %d: %w", i, err)
		}
		if n, ok := pendingBatch(st); ok {
			return nil, fmt.Errorf("mix: state %d has a pending mini-batch (%d weights): end its range with Model.Flush", i, n)
		}
		if learned < 0 && st.Labeled > base.Labeled {
			learned = i
		}
	}
	if rule == MixPegasos && cfg.Algorithm != Pegasos {
		return nil, errPegasosOnly(cfg.Algorithm)
	}
	if rule == MixAROW && cfg.Algorithm != AROW {
		return nil, errAROWOnly(cfg.Algorithm)
	}
	if cfg.Algorithm == Kernel && len(states) > 1 {
		return nil, fmt.Errorf("mix: a kernel model cannot be mixed with another (%d states): its support set is a list of examples, not a vector of parameters that can be averaged; learn one model per shard with model.scope: partition", len(states))
	}
	mu, err := normalize(weights, learned)
	if err != nil {
		return nil, err
	}
	// A change of concept found in this epoch restarts the model: the
	// parameters mix over the states that started afresh, from a new
	// model's (see restart).
	pbase, mu := restart(base, states, mu)

	var parts []*State
	var pmu []float64
	only := -1 // the participant, if there is exactly one
	for i, st := range states {
		if mu[i] > 0 {
			parts = append(parts, st)
			pmu = append(pmu, mu[i])
			only = i
		}
	}
	switch {
	case len(states) == 0:
		return base.clone(), nil
	case len(parts) == 1 && othersEmpty(base, states, only):
		return states[only].clone(), nil
	}

	out := &State{Config: cloneConfig(cfg)}
	if err := mixCounters(out, base, states); err != nil {
		return nil, err
	}
	switch len(parts) {
	case 0:
		out.copyParameters(pbase)
	case 1:
		out.copyParameters(parts[0])
	default:
		switch rule {
		case MixDamped:
			mixDamped(out, pbase, parts, pmu)
		case MixTouched:
			mixTouched(out, pbase, parts, pmu)
		case MixPegasos:
			mixPegasos(out, pbase, parts, pmu)
		case MixAROW:
			mixAROW(out, pbase, parts, pmu)
		default:
			mixParameters(out, parts, pmu)
		}
		if out.Config.Batch > 1 {
			out.PendingBias = make([]float64, out.Config.outputs())
		}
	}
	if cfg.Algorithm == Averaged && len(parts) > 0 {
		// The sums count every vector held, once (see Mix). With no
		// participant no state learned, and the parameters, sums
		// included, are base's. With one participant that is also the
		// only state that learned, the sums copied with its parameters
		// already count them all.
		var learners []*State
		soleIsOnly := false
		for i, st := range states {
			if st.Labeled > base.Labeled && (pbase == base || drifted(base, st)) {
				learners = append(learners, st)
				soleIsOnly = i == only
			}
		}
		if !(len(parts) == 1 && len(learners) == 1 && soleIsOnly) {
			out.SumWeights = averagedSums(pbase, learners, out.Weights, func(st *State) ([]float64, []float64) { return st.Weights, st.SumWeights })
			out.SumBias = averagedSums(pbase, learners, out.Bias, func(st *State) ([]float64, []float64) { return st.Bias, st.SumBias })
		}
	}
	mixDetector(out, base, states, pbase != base)
	mixCalibration(out, base, states, pbase != base)
	if err := out.validate(n); err != nil {
		// Not expected: the mix of valid states is valid.
		return nil, fmt.Errorf("mix: the mixed state: %w", err)
	}
	return out, nil
}

// normalize turns weights into μ_s = weights[s]/Σ weights, summed in
// order. All weights may be 0 only if no state learned a labeled example
// beyond the base (learned < 0); μ is then all 0.
func normalize(weights []float64, learned int) ([]float64, error) {
	var sum float64
	for i, w := range weights {
		if !(w >= 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("mix: weight %d must be a finite number >= 0, got %v", i, w)
		}
		sum += w
	}
	mu := make([]float64, len(weights))
	if sum == 0 && learned < 0 {
		return mu, nil
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return nil, fmt.Errorf("mix: the weights must have a positive, finite sum, got %v (state %d learned beyond the base)", sum, learned)
	}
	for i, w := range weights {
		mu[i] = w / sum
	}
	return mu, nil
}

// counter is one of a state's uint64 counters, by its snapshot name.
type counter struct {
	name  string
	value *uint64
}

// counters lists st's counters that Mix adds.
func (st *State) counters() [8]counter {
	return [8]counter{
		{"examples", &st.Examples}, {"labeled", &st.Labeled},
		{"mistakes", &st.Mistakes}, {"updates", &st.Updates},
		{"true_positives", &st.TruePositives}, {"false_positives", &st.FalsePositives},
		{"true_negatives", &st.TrueNegatives}, {"false_negatives", &st.FalseNegatives},
	}
}

// checkAhead reports a counter of st below base's: st was not learned
// from a copy of base.
func checkAhead(base, st *State) error {
	bc, sc := base.counters(), st.counters()
	for k, c := range sc {
		if *c.value < *bc[k].value {
			return fmt.Errorf("counter %s is %d, below the base's %d: a state must be learned from a copy of the base", c.name, *c.value, *bc[k].value)
		}
	}
	if st.R2 < base.R2 {
		return fmt.Errorf("r2 is %v, below the base's %v: a state must be learned from a copy of the base", st.R2, base.R2)
	}
	return nil
}

// emptyDelta reports whether st has every counter of base: it learned
// nothing, not even an unlabeled example.
func emptyDelta(base, st *State) bool {
	bc, sc := base.counters(), st.counters()
	for k, c := range sc {
		if *c.value != *bc[k].value {
			return false
		}
	}
	return math.Float64bits(st.R2) == math.Float64bits(base.R2)
}

// othersEmpty reports whether every state but states[p] has an empty
// delta.
func othersEmpty(base *State, states []*State, p int) bool {
	for i, st := range states {
		if i != p && !emptyDelta(base, st) {
			return false
		}
	}
	return true
}

// pendingBatch reports whether st holds a mini-batch not yet applied, and
// how many weights it touches.
func pendingBatch(st *State) (int, bool) {
	return len(st.PendingIndex), len(st.PendingIndex) > 0 || slices.ContainsFunc(st.PendingBias, func(v float64) bool { return v != 0 })
}

// mixCounters sets out's counters to base's plus every state's delta,
// R2 to the largest, and the rolling window (see Mix). The states are
// ahead of base (checkAhead).
func mixCounters(out, base *State, states []*State) error {
	oc, bc := out.counters(), base.counters()
	for k, c := range oc {
		*c.value = *bc[k].value
	}
	out.R2 = base.R2
	for _, st := range states {
		for k, c := range st.counters() {
			s, carry := bits.Add64(*oc[k].value, *c.value-*bc[k].value, 0)
			if carry != 0 {
				return fmt.Errorf("mix: the %s counter overflows", c.name)
			}
			*oc[k].value = s
		}
		out.R2 = max(out.R2, st.R2)
	}
	mixWindow(out, base, states)
	return nil
}

// mixWindow continues base's ring with each state's new outcomes in
// order. State st learned d = st.Labeled − base.Labeled outcomes from base,
// which its own ring holds, the last k = min(d, window) of them, in the k
// slots before its WindowNext. A model learning them after the ones
// before would put the j-th at slot (next + j) mod window, next being
// where the previous state's outcomes ended; outcomes that a later one
// overwrites are never copied.
func mixWindow(out, base *State, states []*State) {
	w := uint64(len(base.Window))
	out.Window = clone(base.Window)
	next := uint64(base.WindowNext)
	for _, st := range states {
		d := st.Labeled - base.Labeled
		k := min(d, w)
		to := (next + (d-k)%w) % w
		from := (uint64(st.WindowNext) + w - k) % w
		for i := range k {
			out.Window[(to+i)%w] = st.Window[(from+i)%w]
		}
		next = (next + d%w) % w
	}
	out.WindowNext = int(next)
}

// copyParameters sets out's parameters, everything but the configuration
// and the counters, to a deep copy of st's.
func (out *State) copyParameters(st *State) { out.takeParameters(st.clone()) }

// takeParameters is copyParameters of c itself rather than a copy: c
// must not be used afterwards.
func (out *State) takeParameters(c *State) {
	c.Config = out.Config
	c.Examples, c.Labeled, c.Mistakes, c.Updates, c.R2 = out.Examples, out.Labeled, out.Mistakes, out.Updates, out.R2
	c.TruePositives, c.FalsePositives = out.TruePositives, out.FalsePositives
	c.TrueNegatives, c.FalseNegatives = out.TrueNegatives, out.FalseNegatives
	c.Window, c.WindowNext = out.Window, out.WindowNext
	*out = *c
}

// configDiff is the configuration key of the first field in which a and
// b differ, or "". Settings the algorithm does not read do not count
// (Config.Canonical): a state learned when their default was another,
// by an earlier release, mixes with one learned after.
func configDiff(a, b Config) string {
	va, vb := reflect.ValueOf(a.Canonical()), reflect.ValueOf(b.Canonical())
	for i := range va.NumField() {
		fa, fb := va.Field(i), vb.Field(i)
		var equal bool
		if fa.Kind() == reflect.Slice {
			equal = fa.Len() == fb.Len()
			for j := 0; equal && j < fa.Len(); j++ {
				equal = fa.Index(j).Interface() == fb.Index(j).Interface()
			}
		} else {
			equal = fa.Interface() == fb.Interface()
		}
		if !equal {
			name, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

func cloneConfig(c Config) Config {
	c.Classes = clone(c.Classes)
	return c
}

// clone is a deep copy of st.
func (st *State) clone() *State {
	c := *st
	c.Config = cloneConfig(st.Config)
	c.Window = clone(st.Window)
	c.Weights = clone(st.Weights)
	c.Bias = clone(st.Bias)
	c.SumWeights = clone(st.SumWeights)
	c.SumBias = clone(st.SumBias)
	c.Variance = clone(st.Variance)
	c.VarianceBiases = clone(st.VarianceBiases)
	c.PendingIndex = clone(st.PendingIndex)
	c.PendingValue = clone(st.PendingValue)
	c.PendingBias = clone(st.PendingBias)
	c.Calibration = st.Calibration.clone()
	c.Support = nil
	for _, sv := range st.Support {
		c.Support = append(c.Support, SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2})
	}
	return &c
}

// Flush applies the pending mini-batch now, as the end of a batch does:
// the summed updates join the weights (and the averaged perceptron's sums,
// at the current labeled example). A mini-batch model (Config.Batch > 1)
// ends a shard's range of an epoch with Flush, since Mix does not mix a
// pending batch. The next batch then ends where it would have: at the next
// multiple of Batch labeled examples, so it is shorter.
//
// Updates does not change: in mini-batch mode it already counts each
// example as it joined the batch, as Learn does. Flush does nothing, and
// changes no bit, on a model with nothing pending, an on-line model or a
// kernel model.
//
// The model's challengers are flushed with it.
func (m *Model) Flush() {
	for _, c := range m.challengers {
		c.Model.Flush()
	}
	l, ok := m.eng.(*linear)
	if !ok || l.pw == nil {
		return
	}
	if len(l.touched) == 0 && !slices.ContainsFunc(l.pb, func(v float64) bool { return v != 0 }) {
		return
	}
	l.flush(m.metrics.Labeled)
}
