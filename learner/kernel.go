package learner

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// kernelPerceptron is the dual perceptron: f(x) = Σ_i a_i·y_i·K(x_i, x) + b
// over a support set of at most Budget examples. Each mistake adds the
// example with coefficient η_t·y·importance; when the set is full the
// oldest support vector is overwritten.
type kernelPerceptron struct {
	cfg  Config
	dim  int
	sv   []SupportVector
	next int // the slot the next support vector takes once the set is full
	b    float64
	r2   float64 // running maximum of K(x,x) over labeled examples

	cur      []feature // the current example, sorted by index, merged
	curNorm2 float64
	raw      float64
}

// SupportVector is one example of a kernel model's support set, its
// features sorted by index with no repeats.
type SupportVector struct {
	Index []uint32
	Value []float64
	// Coef is a_i·y_i: the signed weight of the example in f.
	Coef float64
	// Norm2 is ‖x_i‖², kept for the RBF kernel.
	Norm2 float64
}

type feature struct {
	index uint32
	value float64
}

func newKernelPerceptron(cfg Config) *kernelPerceptron {
	return &kernelPerceptron{cfg: cfg, dim: cfg.Dimension()}
}

// canonical sorts x's features by index into dst, merging repeats and
// dropping zeros, so that dot products are merges of sorted lists; it
// returns them with their squared norm.
func canonical(dst []feature, x *Example, dim int) ([]feature, float64) {
	dst = dst[:0]
	for j, i := range x.Index {
		dst = append(dst, feature{i, x.Value[j]})
	}
	for i, v := range x.Dense {
		dst = append(dst, feature{uint32(i), v})
	}
	slices.SortStableFunc(dst, func(a, b feature) int { return cmp.Compare(a.index, b.index) })
	n := 0
	for _, f := range dst {
		if int(f.index) >= dim {
			panic(fmt.Sprintf("learner: feature index %d out of range [0, %d)", f.index, dim))
		}
		if n > 0 && dst[n-1].index == f.index {
			dst[n-1].value += f.value
			continue
		}
		dst[n] = f
		n++
	}
	out := dst[:0]
	var n2 float64
	for _, f := range dst[:n] {
		if f.value != 0 {
			out = append(out, f)
			n2 += float64(f.value * f.value)
		}
	}
	return out, n2
}

// dotSV is sv·x for x in canonical form.
func dotSV(sv *SupportVector, x []feature) float64 {
	var s float64
	a, b := 0, 0
	for a < len(sv.Index) && b < len(x) {
		switch ia, ib := sv.Index[a], x[b].index; {
		case ia < ib:
			a++
		case ia > ib:
			b++
		default:
			s += float64(sv.Value[a] * x[b].value)
			a++
			b++
		}
	}
	return s
}

// kernel is K(x_i, x) from their dot product and squared norms.
func (k *kernelPerceptron) kernel(d, n2a, n2b float64) float64 {
	switch k.cfg.Kernel {
	case PolynomialKernel:
		base := k.cfg.Gamma*d + k.cfg.Coef0
		p := 1.0
		for range k.cfg.Degree {
			p *= base
		}
		return p
	case RBFKernel:
		return math.Exp(-k.cfg.Gamma * max(0, n2a+n2b-2*d))
	}
	return d
}

func (k *kernelPerceptron) predict(x *Example, out []float64, _ uint64) {
	k.cur, k.curNorm2 = canonical(k.cur, x, k.dim)
	k.raw = k.score(k.cur, k.curNorm2)
	out[0] = k.raw
}

// score is f(x) for x in canonical form with squared norm n2. It reads k's
// support set and bias and nothing else, so a copy of them scores
// concurrently (see View). Each kernel value is clamped to ±maxKernel:
// for an example the model may learn (K(x,x) <= maxKernel) that changes
// nothing (Cauchy–Schwarz), and an example beyond the bound, whose poly
// kernel overflows, still scores a finite number rather than ±Inf, or
// NaN where infinities of both signs meet (see MaxValue).
func (k *kernelPerceptron) score(x []feature, n2 float64) float64 {
	f := k.b
	for i := range k.sv {
		sv := &k.sv[i]
		kv := min(max(k.kernel(dotSV(sv, x), sv.Norm2, n2), -maxKernel), maxKernel)
		f += float64(sv.Coef * kv)
	}
	return f
}

func (k *kernelPerceptron) update(_ *Example, y int, s step) bool {
	kk := k.kernel(k.curNorm2, k.curNorm2, k.curNorm2)
	if !(kk <= maxKernel) {
		// Beyond the bound every score's finiteness rests on (see
		// MaxValue): not learned.
		return false
	}
	if kk > k.r2 {
		k.r2 = kk
	}
	fy := float64(y)
	if fy*k.raw > 0 {
		return false
	}
	coef := fy * s.eta
	switch k.cfg.Bias {
	case BiasStandard:
		k.b += coef
	case BiasR2:
		k.b += float64(coef * k.r2)
	}
	var sv *SupportVector
	if len(k.sv) < k.cfg.Budget {
		k.sv = append(k.sv, SupportVector{})
		sv = &k.sv[len(k.sv)-1]
	} else {
		sv = &k.sv[k.next]
		k.next = (k.next + 1) % k.cfg.Budget
	}
	sv.Index, sv.Value = sv.Index[:0], sv.Value[:0]
	for _, f := range k.cur {
		sv.Index = append(sv.Index, f.index)
		sv.Value = append(sv.Value, f.value)
	}
	sv.Coef = coef
	sv.Norm2 = k.curNorm2
	return true
}
