package learner

import (
	"fmt"
	"math"
	"slices"
)

// State is the complete state of a model: restoring it gives a model that
// continues bit-identically to the one it was taken from. It holds no
// references into the model.
//
// The snapshot package gives it a wire format; the fields that an
// algorithm does not use are empty.
type State struct {
	Config Config

	// Counters. R2 is the running maximum of ‖x‖² over labeled examples.
	Examples, Labeled, Mistakes, Updates uint64
	R2                                   float64
	TruePositives, FalsePositives        uint64
	TrueNegatives, FalseNegatives        uint64
	// Window holds the outcomes (true = correct) of the last labeled
	// examples in a ring of Config.Window slots; WindowNext is the slot of
	// the next outcome.
	Window     []bool
	WindowNext int

	// Weights holds 2^HashBits weights per output, feature-major: the
	// weight of feature i for class c is Weights[i*outputs+c], outputs
	// being 1 for a binary model. Bias holds one bias per output. For
	// Pegasos the model's weights are Scale·Weights and Scale·Bias.
	Weights []float64
	Bias    []float64
	Scale   float64
	// VNorm2 is Pegasos's ‖Weights‖² + ‖Bias‖², kept incrementally.
	VNorm2 float64

	// SumWeights and SumBias are the averaged perceptron's accumulators:
	// the averaged weights after T labeled examples are
	// Weights - SumWeights/(T+1), likewise for the bias.
	SumWeights []float64
	SumBias    []float64

	// Variance and VarianceBias are AROW's per-weight confidences:
	// Variance in the layout of Weights, VarianceBias the bias's of a
	// binary model. VarianceBiases holds a multiclass model's bias
	// variances, one per class (its VarianceBias is 0 and unused).
	Variance       []float64
	VarianceBias   float64
	VarianceBiases []float64

	// Pending is the mini-batch update not yet applied: PendingIndex are
	// flat weight indices (as in Weights), PendingValue their pending sums.
	PendingIndex []uint32
	PendingValue []float64
	PendingBias  []float64

	// Support is the kernel model's support set in slot order, SupportNext
	// the slot the next support vector overwrites once the set is full,
	// KernelR2 the running maximum of K(x,x).
	Support     []SupportVector
	SupportNext int
	KernelR2    float64

	// Detector is the change detector's state; zero for a fresh one.
	Detector Detector

	// Calibration is the probabilities' calibrator and measures; empty
	// for a model that has published no probability of a labeled example.
	Calibration Calibration

	// Challengers are the model's challengers (see Model.Challengers),
	// nil for none; a challenger's own State has none.
	Challengers []ChallengerState

	// Promotions are the model's history of promotions (see
	// Model.Promote), oldest first; nil for a model never promoted.
	Promotions []Promotion
}

// State returns a deep copy of m's state.
func (m *Model) State() *State { return m.state(false) }

// Shared returns m's state as State does, but with the model's own
// per-weight vectors (weights, sums, variances) rather than copies: the
// caller must not change them, and the state holds m's values only until
// m learns or a mix writes into those vectors. It is for reading the
// model whole at once, as encoding a snapshot of it does.
func (m *Model) Shared() *State { return m.state(true) }

// Release returns m's state as State does, but hands over the model's
// per-weight vectors (weights, sums, variances) rather than copying them:
// m must not be used afterwards. It is for a model that ends where its
// state begins, such as a range's, whose state is written once and
// mixed.
func (m *Model) Release() *State {
	st := m.state(true)
	m.eng = nil
	return st
}

// state is m's state, with its per-weight vectors copied or, with
// release, handed over.
func (m *Model) state(release bool) *State {
	p := &m.metrics
	st := &State{
		Config:         m.Config(),
		Examples:       p.Examples,
		Labeled:        p.Labeled,
		Mistakes:       p.Mistakes,
		Updates:        p.Updates,
		R2:             p.r2,
		TruePositives:  p.TruePositives,
		FalsePositives: p.FalsePositives,
		TrueNegatives:  p.TrueNegatives,
		FalseNegatives: p.FalseNegatives,
		Window:         clone(p.window),
		WindowNext:     p.next,
		Detector:       m.detector.export(),
		Calibration:    m.exportCalibration(),
		Challengers:    m.exportChallengers(release),
		Promotions:     slices.Clone(m.promotions),
	}
	m.eng.export(st, release)
	return st
}

// Restore builds the model that st describes, after checking it with
// Validate.
func Restore(st *State) (*Model, error) {
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return restore(st, func(cfg Config) engine {
		if cfg.Algorithm == Kernel {
			k := newKernelPerceptron(cfg)
			k.restore(st)
			return k
		}
		return restoredLinear(cfg, st)
	}, nil)
}

// restore is the model of st, which Validate has checked, with the
// engine that engine makes of st's configuration, and its challengers
// built by challengers (Restore when nil).
func restore(st *State, engine func(Config) engine, challengers func(i int, st *State) (*Model, error)) (*Model, error) {
	m, err := newModel(st.Config, engine)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p := &m.metrics
	p.Examples, p.Labeled, p.Mistakes, p.Updates = st.Examples, st.Labeled, st.Mistakes, st.Updates
	p.r2 = st.R2
	p.TruePositives, p.FalsePositives = st.TruePositives, st.FalsePositives
	p.TrueNegatives, p.FalseNegatives = st.TrueNegatives, st.FalseNegatives
	copy(p.window, st.Window)
	p.next = st.WindowNext
	filled := min(p.Labeled, uint64(len(p.window)))
	for i := range filled {
		// The filled slots are the last `filled` before next, circularly.
		slot := (uint64(p.next) + uint64(len(p.window)) - 1 - i) % uint64(len(p.window))
		if p.window[slot] {
			p.correct++
		}
	}
	m.detector.restore(st.Detector)
	m.restoreCalibration(&st.Calibration)
	if err := m.restoreChallengers(st, challengers); err != nil {
		return nil, err
	}
	m.promotions = slices.Clone(st.Promotions)
	return m, nil
}

// Validate reports whether a model can continue from st: its
// configuration is valid, every part has the length and range the
// configuration gives it, and every number is finite. The error is a
// *StateError naming the field, or wraps the configuration's *FieldError.
//
// Restore runs it, and so does the snapshot writer: a state that would not
// load is never written. It reads the state once and builds nothing.
func (st *State) Validate() error { return st.validate(-1) }

// ValidateLean is Validate for a state whose per-weight vectors
// (Weights, SumWeights, Variance), and its challengers', are left out:
// the lean form the epoch log writes beside the coordinates a range
// changed (snapshot.EncodeStateLean). Its cost does not grow with the
// model. Those vectors are checked where they are put back, when the
// reader checks the whole state.
func (st *State) ValidateLean() error {
	if len(st.Weights) > 0 || len(st.SumWeights) > 0 || len(st.Variance) > 0 {
		return stateErr("weights", "a lean state leaves its per-weight vectors out, got %d weights", len(st.Weights))
	}
	return st.validateAs(0, true)
}

// VectorValueOK reports whether v may be a value of the per-weight
// vector field ("weights", "sum_weights" or "variance") of a state, as
// Validate requires: finite, and a variance within [0, 1]. A writer of
// some of a vector's values (the epoch log's changes) checks them so.
func VectorValueOK(field string, v float64) bool {
	if field == "variance" {
		return varianceOK(v)
	}
	return finite(v)
}

// varianceOK reports whether v may be an AROW variance: they start at 1
// and only shrink, never below 0.
func varianceOK(v float64) bool { return v >= 0 && v <= 1 }

// validate is Validate with per-weight vectors (weights, sums,
// variances) of n values, or of the configuration's length when n < 0:
// a mix over some coordinates alone checks them alone (MixChanged).
func (st *State) validate(n int) error { return st.validateAs(n, false) }

// validateAs is validate, of a lean state (ValidateLean) when lean is
// set: its challengers' vectors are left out too.
func (st *State) validateAs(n int, lean bool) error {
	cfg := st.Config
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if len(st.Window) != cfg.Window {
		return stateErr("window", "has %d slots, config window is %d", len(st.Window), cfg.Window)
	}
	if st.WindowNext < 0 || st.WindowNext >= len(st.Window) {
		return stateErr("window_next", "%d is outside the window of %d", st.WindowNext, len(st.Window))
	}
	if st.Mistakes > st.Labeled || st.Labeled > st.Examples {
		return stateErr("counters", "need mistakes <= labeled <= examples, got %d, %d, %d", st.Mistakes, st.Labeled, st.Examples)
	}
	// R2 is the largest ‖x‖² learned from, and the learner learns from no
	// example over MaxNorm2: a larger one breaks the bounds of MaxValue.
	if !(st.R2 >= 0 && st.R2 <= MaxNorm2) {
		return stateErr("r2", "must be a number in [0, %g], got %v", MaxNorm2, st.R2)
	}
	if err := st.validateDetector(); err != nil {
		return err
	}
	if err := st.Calibration.validate(st); err != nil {
		return err
	}
	if err := st.validateChallengers(lean); err != nil {
		return err
	}
	if err := st.validatePromotions(); err != nil {
		return err
	}
	if cfg.Algorithm == Kernel {
		return st.validateKernel()
	}
	return st.validateLinear(n)
}

// validateLinear checks the parts of a primal model's state. The parts an
// algorithm does not use are not read on restore, but must be finite too.
func (st *State) validateLinear(n int) error {
	cfg := st.Config
	k, d := cfg.outputs(), cfg.Dimension()
	if n < 0 {
		n = d * k
	}
	if err := checkLength("weights", st.Weights, n); err != nil {
		return err
	}
	if err := checkLength("bias", st.Bias, k); err != nil {
		return err
	}
	if cfg.Algorithm == Averaged {
		if err := checkLength("sum_weights", st.SumWeights, n); err != nil {
			return err
		}
		if err := checkLength("sum_bias", st.SumBias, k); err != nil {
			return err
		}
	}
	if cfg.Algorithm == Pegasos && (!(st.Scale > 0) || math.IsInf(st.Scale, 0)) {
		return stateErr("scale", "must be a positive number, got %v", st.Scale)
	}
	if cfg.Algorithm == AROW {
		if err := checkLength("variance", st.Variance, n); err != nil {
			return err
		}
		// The variances start at 1 and only shrink, never below 0: the
		// bound on AROW's steps rests on it.
		for i, v := range st.Variance {
			if !varianceOK(v) {
				return stateErr("variance", "[%d] must be in [0, 1], got %v", i, v)
			}
		}
		if !(st.VarianceBias >= 0 && st.VarianceBias <= 1) {
			return stateErr("variance_bias", "must be in [0, 1], got %v", st.VarianceBias)
		}
		if cfg.Multiclass() {
			if err := checkLength("variance_biases", st.VarianceBiases, k); err != nil {
				return err
			}
			for c, v := range st.VarianceBiases {
				if !varianceOK(v) {
					return stateErr("variance_biases", "[%d] must be in [0, 1], got %v", c, v)
				}
			}
		}
	}
	if cfg.Batch > 1 {
		if len(st.PendingValue) != len(st.PendingIndex) {
			return stateErr("pending", "%d indices but %d values", len(st.PendingIndex), len(st.PendingValue))
		}
		for _, j := range st.PendingIndex {
			if int(j) >= d*k {
				return stateErr("pending", "index %d is outside the %d weights", j, d*k)
			}
		}
		if err := checkLength("pending_bias", st.PendingBias, k); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		field string
		value float64
	}{{"scale", st.Scale}, {"vnorm2", st.VNorm2}, {"variance_bias", st.VarianceBias}, {"kernel_r2", st.KernelR2}} {
		if !finite(v.value) {
			return stateErr(v.field, "must be a finite number, got %v", v.value)
		}
	}
	for _, v := range []struct {
		field  string
		values []float64
	}{
		{"weights", st.Weights}, {"bias", st.Bias}, {"sum_weights", st.SumWeights}, {"sum_bias", st.SumBias},
		{"variance", st.Variance}, {"variance_biases", st.VarianceBiases}, {"pending_value", st.PendingValue}, {"pending_bias", st.PendingBias},
	} {
		if err := checkFinite(v.field, v.values); err != nil {
			return err
		}
	}
	return nil
}

// validateKernel checks the parts of a kernel model's state.
func (st *State) validateKernel() error {
	cfg := st.Config
	if len(st.Bias) != 1 {
		return stateErr("bias", "a kernel model has 1 bias, got %d", len(st.Bias))
	}
	if err := checkFinite("bias", st.Bias); err != nil {
		return err
	}
	if !(st.KernelR2 >= 0 && st.KernelR2 <= maxKernel) {
		return stateErr("kernel_r2", "must be a number in [0, %g], got %v", maxKernel, st.KernelR2)
	}
	if len(st.Support) > cfg.Budget {
		return stateErr("support", "%d support vectors exceed the budget of %d", len(st.Support), cfg.Budget)
	}
	if st.SupportNext < 0 || (st.SupportNext > 0 && st.SupportNext >= len(st.Support)) {
		return stateErr("support_next", "slot %d is outside the %d support vectors", st.SupportNext, len(st.Support))
	}
	dim := cfg.Dimension()
	for i, sv := range st.Support {
		if len(sv.Index) != len(sv.Value) {
			return stateErr("support", "vector %d has %d indices but %d values", i, len(sv.Index), len(sv.Value))
		}
		for n, j := range sv.Index {
			if int(j) >= dim || (n > 0 && j <= sv.Index[n-1]) {
				return stateErr("support", "vector %d: indices must be increasing and below %d", i, dim)
			}
		}
		if !finite(sv.Coef) || !finite(sv.Norm2) {
			return stateErr("support", "vector %d: coef %v and norm2 %v must be finite numbers", i, sv.Coef, sv.Norm2)
		}
		for n, v := range sv.Value {
			if !finite(v) {
				return stateErr("support", "vector %d: value %d is %v: every number of a state must be finite", i, n, v)
			}
		}
	}
	return nil
}

// StateError names the part of a State that does not fit its
// configuration or is not a finite number.
type StateError struct {
	Field   string
	Problem string
}

func (e *StateError) Error() string { return "state " + e.Field + ": " + e.Problem }

func stateErr(field, format string, args ...any) error {
	return &StateError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

func checkLength(field string, values []float64, want int) error {
	if len(values) != want {
		return stateErr(field, "has %d values, the configuration needs %d", len(values), want)
	}
	return nil
}

func checkFinite(field string, values []float64) error {
	for i, v := range values {
		if !finite(v) {
			return stateErr(field, "value %d is %v: every number of a state must be finite", i, v)
		}
	}
	return nil
}

// clone copies s; an empty s gives nil, so that states compare equal
// whatever capacity their empty parts had.
func clone[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func (l *linear) export(st *State, release bool) {
	vector := clone[float64]
	if release {
		vector = func(v []float64) []float64 { return v }
	}
	st.Weights = vector(l.w)
	st.Bias = clone(l.b)
	st.SumWeights = vector(l.u)
	st.SumBias = clone(l.ub)
	if l.cfg.Algorithm == Pegasos {
		st.Scale = l.scale
		st.VNorm2 = l.vnorm2
	}
	if l.sigma != nil {
		st.Variance = vector(l.sigma)
		if l.k == 1 {
			st.VarianceBias = l.sigmaB[0]
		} else {
			st.VarianceBiases = clone(l.sigmaB)
		}
	}
	if l.pw != nil {
		st.PendingIndex = clone(l.touched)
		for _, j := range l.touched {
			st.PendingValue = append(st.PendingValue, l.pw[j])
		}
		st.PendingBias = clone(l.pb)
	}
}

// restoredLinear is the rule of cfg with st's state, which Validate has
// checked. Its per-weight vectors are copies of st's, made without first
// allocating a new model's.
func restoredLinear(cfg Config, st *State) *linear {
	return restoredLinearOnto(cfg, st, &State{}, AllCoords)
}

func (k *kernelPerceptron) export(st *State, _ bool) {
	st.Bias = []float64{k.b}
	for _, sv := range k.sv {
		st.Support = append(st.Support, SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2})
	}
	st.SupportNext = k.next
	st.KernelR2 = k.r2
}

// restore copies st, which Validate has checked, into k.
func (k *kernelPerceptron) restore(st *State) {
	k.b = st.Bias[0]
	k.sv = make([]SupportVector, len(st.Support))
	for i, sv := range st.Support {
		k.sv[i] = SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2}
	}
	k.next = st.SupportNext
	k.r2 = st.KernelR2
}

// Effective returns the weights and biases the model predicts with, in the
// layout of Weights: the averaged ones for Averaged, the scaled ones for
// Pegasos, Weights and Bias otherwise. A kernel model has no primal
// weights: Effective returns nil weights and its bias.
func (st *State) Effective() (weights, bias []float64) {
	switch {
	case st.Config.Algorithm == Kernel:
		return nil, clone(st.Bias)
	case st.Config.Algorithm == Averaged:
		n := float64(st.Labeled + 1)
		weights = make([]float64, len(st.Weights))
		for i, w := range st.Weights {
			weights[i] = w - st.SumWeights[i]/n
		}
		bias = make([]float64, len(st.Bias))
		for c, b := range st.Bias {
			bias[c] = b - st.SumBias[c]/n
		}
		return weights, bias
	case st.Config.Algorithm == Pegasos:
		weights = make([]float64, len(st.Weights))
		for i, w := range st.Weights {
			weights[i] = st.Scale * w
		}
		bias = make([]float64, len(st.Bias))
		for c, b := range st.Bias {
			bias[c] = st.Scale * b
		}
		return weights, bias
	}
	return clone(st.Weights), clone(st.Bias)
}
