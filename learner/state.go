package learner

import (
	"fmt"
	"math"
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

	// Variance and VarianceBias are AROW's per-weight confidences.
	Variance     []float64
	VarianceBias float64

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
}

// State returns a deep copy of m's state.
func (m *Model) State() *State {
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
	}
	m.eng.export(st)
	return st
}

// Restore builds the model that st describes. It checks that every part of
// st fits its configuration and names the field that does not.
func Restore(st *State) (*Model, error) {
	m, err := New(st.Config)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	p := &m.metrics
	if len(st.Window) != st.Config.Window {
		return nil, stateErr("window", "has %d slots, config window is %d", len(st.Window), st.Config.Window)
	}
	if st.WindowNext < 0 || st.WindowNext >= len(st.Window) {
		return nil, stateErr("window_next", "%d is outside the window of %d", st.WindowNext, len(st.Window))
	}
	if st.Mistakes > st.Labeled || st.Labeled > st.Examples {
		return nil, stateErr("counters", "need mistakes <= labeled <= examples, got %d, %d, %d", st.Mistakes, st.Labeled, st.Examples)
	}
	if !(st.R2 >= 0) || math.IsInf(st.R2, 0) {
		return nil, stateErr("r2", "must be a finite number >= 0, got %v", st.R2)
	}
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
	if err := m.eng.restore(st); err != nil {
		return nil, err
	}
	return m, nil
}

// StateError names the part of a State that does not fit its
// configuration.
type StateError struct {
	Field   string
	Problem string
}

func (e *StateError) Error() string { return "state " + e.Field + ": " + e.Problem }

func stateErr(field, format string, args ...any) error {
	return &StateError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// clone copies s; an empty s gives nil, so that states compare equal
// whatever capacity their empty parts had.
func clone[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

func restoreSlice[T any](dst []T, src []T, field string) error {
	if len(src) != len(dst) {
		return stateErr(field, "has %d values, the configuration needs %d", len(src), len(dst))
	}
	copy(dst, src)
	return nil
}

func (l *linear) export(st *State) {
	st.Weights = clone(l.w)
	st.Bias = clone(l.b)
	st.SumWeights = clone(l.u)
	st.SumBias = clone(l.ub)
	if l.cfg.Algorithm == Pegasos {
		st.Scale = l.scale
		st.VNorm2 = l.vnorm2
	}
	if l.sigma != nil {
		st.Variance = clone(l.sigma)
		st.VarianceBias = l.sigmaB[0]
	}
	if l.pw != nil {
		st.PendingIndex = clone(l.touched)
		for _, j := range l.touched {
			st.PendingValue = append(st.PendingValue, l.pw[j])
		}
		st.PendingBias = clone(l.pb)
	}
}

func (l *linear) restore(st *State) error {
	if err := restoreSlice(l.w, st.Weights, "weights"); err != nil {
		return err
	}
	if err := restoreSlice(l.b, st.Bias, "bias"); err != nil {
		return err
	}
	if l.u != nil {
		if err := restoreSlice(l.u, st.SumWeights, "sum_weights"); err != nil {
			return err
		}
		if err := restoreSlice(l.ub, st.SumBias, "sum_bias"); err != nil {
			return err
		}
	}
	if l.cfg.Algorithm == Pegasos {
		if !(st.Scale > 0) || math.IsInf(st.Scale, 0) {
			return stateErr("scale", "must be a positive number, got %v", st.Scale)
		}
		l.scale, l.vnorm2 = st.Scale, st.VNorm2
	}
	if l.sigma != nil {
		if err := restoreSlice(l.sigma, st.Variance, "variance"); err != nil {
			return err
		}
		l.sigmaB[0] = st.VarianceBias
	}
	if l.pw != nil {
		if len(st.PendingValue) != len(st.PendingIndex) {
			return stateErr("pending", "%d indices but %d values", len(st.PendingIndex), len(st.PendingValue))
		}
		for n, j := range st.PendingIndex {
			if int(j) >= len(l.pw) {
				return stateErr("pending", "index %d is outside the %d weights", j, len(l.pw))
			}
			l.pw[j] = st.PendingValue[n]
		}
		l.touched = clone(st.PendingIndex)
		if err := restoreSlice(l.pb, st.PendingBias, "pending_bias"); err != nil {
			return err
		}
	}
	return nil
}

func (k *kernelPerceptron) export(st *State) {
	st.Bias = []float64{k.b}
	for _, sv := range k.sv {
		st.Support = append(st.Support, SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2})
	}
	st.SupportNext = k.next
	st.KernelR2 = k.r2
}

func (k *kernelPerceptron) restore(st *State) error {
	if len(st.Bias) != 1 {
		return stateErr("bias", "a kernel model has 1 bias, got %d", len(st.Bias))
	}
	if len(st.Support) > k.cfg.Budget {
		return stateErr("support", "%d support vectors exceed the budget of %d", len(st.Support), k.cfg.Budget)
	}
	if st.SupportNext < 0 || (st.SupportNext > 0 && st.SupportNext >= len(st.Support)) {
		return stateErr("support_next", "slot %d is outside the %d support vectors", st.SupportNext, len(st.Support))
	}
	k.b = st.Bias[0]
	k.sv = make([]SupportVector, len(st.Support))
	for i, sv := range st.Support {
		if len(sv.Index) != len(sv.Value) {
			return stateErr("support", "vector %d has %d indices but %d values", i, len(sv.Index), len(sv.Value))
		}
		for n, j := range sv.Index {
			if int(j) >= k.dim || (n > 0 && j <= sv.Index[n-1]) {
				return stateErr("support", "vector %d: indices must be increasing and below %d", i, k.dim)
			}
		}
		k.sv[i] = SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2}
	}
	k.next = st.SupportNext
	k.r2 = st.KernelR2
	return nil
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
