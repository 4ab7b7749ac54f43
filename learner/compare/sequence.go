// Package compare says whether one configuration of a model predicts
// better than another on the same stream: the running mean of their
// paired differences, per example, with a confidence sequence around it.
//
// A confidence sequence is a band around the mean that holds at every
// example at once, with probability at least 1−alpha: one may look at it
// after every example and stop at the first look where it excludes zero,
// and the chance that it ever excluded a true mean is still at most alpha.
// A fixed-sample confidence interval looked at as often would exclude a
// true zero almost surely in the end.
//
// The package is pure and deterministic, like learner: O(1) memory and a
// few floating-point operations per example.
package compare

import (
	"fmt"
	"math"
)

// Sequence is the predictable-plug-in empirical-Bernstein confidence
// sequence (PrPl-EB) of Waudby-Smith and Ramdas, "Estimating means of
// bounded random variables by betting", J. R. Stat. Soc. B 86(1), 2024
// (arXiv:2010.09686), Theorem 2; the empirical-Bernstein family of Howard,
// Ramdas, McAuliffe and Sekhon, "Time-uniform, nonparametric,
// nonasymptotic confidence sequences", Ann. Statist. 49(2), 2021.
//
// Each observation d_t is in [−Bound, Bound] and is rescaled to
// x_t = (d_t + Bound)/(2·Bound) in [0, 1]. With
//
//	μ̂_t  = (1/2 + Σ_{i≤t} x_i) / (t+1)
//	σ̂²_t = (1/4 + Σ_{i≤t} (x_i − μ̂_i)²) / (t+1)
//	λ_t  = min( sqrt( 2·log(2/α) / (σ̂²_{t−1} · t · log(1+t)) ), 1/2 )
//	v_t  = 4·(x_t − μ̂_{t−1})²
//	ψ(λ) = (−log(1−λ) − λ) / 4
//
// the band after t observations is
//
//	Σ λ_i x_i / Σ λ_i  ±  (log(2/α) + Σ v_i ψ(λ_i)) / Σ λ_i
//
// intersected with [0, 1], and mapped back to the scale of d. Each λ_t
// is chosen from the observations before t alone (it is predictable),
// which is what makes the band valid at every t at once: it is built from
// two nonnegative supermartingales, and Ville's inequality bounds the
// chance that either ever passes 2/α.
//
// When the observations' conditional means μ_t = E[d_t | the past] vary,
// as the paired losses of two models that learn do, the band covers
// Σ λ_i μ_i / Σ λ_i, a weighted mean of them (Waudby-Smith and Ramdas,
// Section 3.5): how much better one model was, on the example about to
// come, at each moment of the stream.
//
// The zero value is not usable: build one with NewSequence.
type Sequence struct {
	bound   float64 // d is in [−bound, bound]
	logTerm float64 // log(2/α)

	n     int     // observations so far
	sumD  float64 // Σ d_i, for the plain mean
	sumX  float64 // Σ x_i
	sumSq float64 // Σ (x_i − μ̂_i)²
	sumL  float64 // Σ λ_i
	sumLX float64 // Σ λ_i x_i
	sumVP float64 // Σ v_i ψ(λ_i)
}

// maxLambda is the truncation c of λ_t: Waudby-Smith and Ramdas suggest
// 1/2 or 3/4; the smaller one loses little early and nothing late.
const maxLambda = 0.5

// NewSequence returns an empty sequence at level alpha, in (0, 1), for
// observations in [−bound, bound], bound > 0.
func NewSequence(alpha, bound float64) (*Sequence, error) {
	if !(alpha > 0 && alpha < 1) {
		return nil, fmt.Errorf("compare: alpha must be in (0, 1), got %v", alpha)
	}
	if !(bound > 0) || math.IsInf(bound, 0) {
		return nil, fmt.Errorf("compare: bound must be positive and finite, got %v", bound)
	}
	return &Sequence{bound: bound, logTerm: math.Log(2 / alpha)}, nil
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
	x := (d + s.bound) / (2 * s.bound)
	t := float64(s.n + 1)
	// μ̂_{t−1} and σ̂²_{t−1}, from the observations before this one.
	mean := (0.5 + s.sumX) / t
	variance := (0.25 + s.sumSq) / t
	lambda := min(math.Sqrt(2*s.logTerm/(variance*t*math.Log1p(t))), maxLambda)
	v := 4 * (x - mean) * (x - mean)
	s.sumL += lambda
	s.sumLX += lambda * x
	s.sumVP += v * (-math.Log1p(-lambda) - lambda) / 4

	s.n++
	s.sumD += d
	s.sumX += x
	now := (0.5 + s.sumX) / (t + 1) // μ̂_t, with this observation
	s.sumSq += (x - now) * (x - now)
}

// Count is the number of observations added.
func (s *Sequence) Count() int { return s.n }

// Mean is the plain mean of the observations (after clipping), 0 before
// the first.
func (s *Sequence) Mean() float64 {
	if s.n == 0 {
		return 0
	}
	return s.sumD / float64(s.n)
}

// Bounds are the band after the observations so far, on the scale of the
// observations: [−Bound, Bound] before the first. The band's centre is a
// weighted mean of the observations, not Mean, which may fall outside it
// when the band is narrow and the observations drift.
func (s *Sequence) Bounds() (low, high float64) {
	if s.n == 0 {
		return -s.bound, s.bound
	}
	centre := s.sumLX / s.sumL
	margin := (s.logTerm + s.sumVP) / s.sumL
	lo, hi := max(centre-margin, 0), min(centre+margin, 1)
	return 2*s.bound*lo - s.bound, 2*s.bound*hi - s.bound
}

// Bound is the largest |d| the sequence takes.
func (s *Sequence) Bound() float64 { return s.bound }
