// Package compare says whether one configuration of a model predicts
// better than another on the same stream: the running mean of their
// paired differences, per example, with a confidence sequence around it.
//
// A confidence sequence is a band around the mean that holds at every
// example at once, with probability at least 1−alpha: one may look at it
// after every example and stop at the first look where it excludes zero,
// and the chance that it ever excluded the true difference is still at
// most alpha. A fixed-sample confidence interval looked at as often
// would exclude a true zero almost surely in the end.
//
// The package is pure and deterministic, like learner: O(1) memory and a
// few floating-point operations per example.
package compare

import (
	"fmt"
	"math"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Sequence is the empirical-Bernstein confidence sequence of Howard,
// Ramdas, McAuliffe and Sekhon, "Time-uniform, nonparametric,
// nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021
// (arXiv:1810.08240): Theorem 4 with the polynomial stitching boundary of
// their Theorem 1, for the mean of bounded observations.
//
// Each observation d_t is in [−Bound, Bound] and is rescaled to
// x_t = (d_t + Bound)/(2·Bound) in [0, 1]. With the predictable estimate
// x̂_{t−1} = (1/2 + Σ_{i<t} x_i)/t and the intrinsic time
// V_t = Σ_{i≤t} (x_i − x̂_{i−1})², S_t = Σ_{i≤t} (x_i − μ_i) is
// sub-exponential with variance process V_t and scale c = 1, so that, for
// each side at level α/2,
//
//	P( ∃t: S_t ≥ u(V_t) ) ≤ α/2,  u(v) = sqrt(k1²·w·ℓ(w) + k2²·ℓ(w)²) + k2·ℓ(w),  w = max(v, m)
//	ℓ(w) = s·log log(η·w/m) + log( ζ(s) / ((α/2)·log^s η) )
//	k1 = (η^{1/4} + η^{−1/4})/√2,  k2 = (√η + 1)/2
//
// with η = 2, s = 1.4 and m = 1. The band after t observations is
//
//	x̄_t ± u(V_t)/t
//
// intersected with [0, 1] and mapped back to the scale of d. It is
// centred on the plain mean, and covers the mean of the observations'
// conditional means, (1/t)·Σ_{i≤t} E[d_i | the past]: when those vary, as
// the paired losses of two models that learn do, the band is about the
// average advantage over the stream so far, each example counted once.
// A look at the band after every observation, or at any stopping time,
// keeps its level: that is what "time-uniform" means, by Ville's
// inequality applied to the supermartingales behind u.
//
// The zero value is not usable: build one with NewSequence.
type Sequence struct {
	bound float64 // d is in [−bound, bound]
	alpha float64
	logA  float64 // log(ζ(s) / ((α/2)·log^s η))

	// st holds the observations' sums: its Count, Sum (Σ d_i, for the
	// mean on d's scale), SumScaled (Σ x_i) and V (V_t). It is the
	// sequence's own, or a model's challenger's (Attach).
	st *learner.SequenceState
}

// The stitching's parameters, Howard et al.'s defaults: η the geometric
// spacing of the epochs, s the exponent of the epochs' share of α, m the
// intrinsic time where the boundary begins to be tight (below it, the
// boundary is u(m)).
const (
	eta     = 2.0
	stitchS = 1.4
	zetaS   = 3.10554727797758 // ζ(1.4)
	minTime = 1.0
)

var (
	k1 = (math.Pow(eta, 0.25) + math.Pow(eta, -0.25)) / math.Sqrt2
	k2 = (math.Sqrt(eta) + 1) / 2
)

// NewSequence returns an empty sequence at level alpha, in (0, 1), for
// observations in [−bound, bound], bound > 0.
func NewSequence(alpha, bound float64) (*Sequence, error) {
	return sequenceOf(alpha, bound, new(learner.SequenceState))
}

// sequenceOf is the sequence at level alpha, for observations in
// [−bound, bound], whose sums st holds and Add updates.
func sequenceOf(alpha, bound float64, st *learner.SequenceState) (*Sequence, error) {
	if !(alpha > 0 && alpha < 1) {
		return nil, fmt.Errorf("compare: alpha must be in (0, 1), got %v", alpha)
	}
	if !(bound > 0) || math.IsInf(bound, 0) {
		return nil, fmt.Errorf("compare: bound must be positive and finite, got %v", bound)
	}
	return &Sequence{
		bound: bound,
		alpha: alpha,
		logA:  math.Log(zetaS / (alpha / 2 * math.Pow(math.Log(eta), stitchS))),
		st:    st,
	}, nil
}

// Add adds one observation d. A d outside [−Bound, Bound] is clipped to
// it; a NaN counts as 0. Add does not allocate.
func (s *Sequence) Add(d float64) {
	switch {
	case d > s.bound:
		d = s.bound
	case d < -s.bound:
		d = -s.bound
	case d != d:
		d = 0
	}
	st := s.st
	x := (d + s.bound) / (2 * s.bound)
	predicted := (0.5 + st.SumScaled) / float64(st.Count+1) // x̂_{t−1}, from the past alone
	st.V += (x - predicted) * (x - predicted)
	st.Count++
	st.Sum += d
	st.SumScaled += x
}

// Count is the number of observations added.
func (s *Sequence) Count() int { return int(s.st.Count) }

// Mean is the mean of the observations (after clipping), 0 before the
// first: the band's centre.
func (s *Sequence) Mean() float64 {
	if s.st.Count == 0 {
		return 0
	}
	return s.st.Sum / float64(s.st.Count)
}

// Bounds are the band after the observations so far, on the scale of the
// observations: [−Bound, Bound] before the first.
func (s *Sequence) Bounds() (low, high float64) {
	if s.st.Count == 0 {
		return -s.bound, s.bound
	}
	t := float64(s.st.Count)
	margin := boundary(s.st.V, s.logA) / t
	mean := s.st.SumScaled / t
	lo, hi := max(mean-margin, 0), min(mean+margin, 1)
	return 2*s.bound*lo - s.bound, 2*s.bound*hi - s.bound
}

// boundary is the polynomial stitching boundary u(v) of one side, logA
// holding that side's share of α.
func boundary(v, logA float64) float64 {
	w := max(v, minTime)
	l := stitchS*math.Log(math.Log(eta*w/minTime)) + logA
	return math.Sqrt(k1*k1*w*l+k2*k2*l*l) + k2*l
}

// Alpha is the sequence's level.
func (s *Sequence) Alpha() float64 { return s.alpha }

// Bound is the largest |d| the sequence takes.
func (s *Sequence) Bound() float64 { return s.bound }
