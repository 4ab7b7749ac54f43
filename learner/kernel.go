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

// canonical sorts x's features by index into k.cur, merging repeats and
// dropping zeros, so that dot products are merges of sorted lists.
func (k *kernelPerceptron) canonical(x *Example) {
	k.cur = k.cur[:0]
	for j, i := range x.Index {
		k.cur = append(k.cur, feature{i, x.Value[j]})
	}
	for i, v := range x.Dense {
		k.cur = append(k.cur, feature{uint32(i), v})
	}
	slices.SortStableFunc(k.cur, func(a, b feature) int { return cmp.Compare(a.index, b.index) })
	n := 0
	for _, f := range k.cur {
		if int(f.index) >= k.dim {
			panic(fmt.Sprintf("learner: feature index %d out of range [0, %d)", f.index, k.dim))
		}
		if n > 0 && k.cur[n-1].index == f.index {
			k.cur[n-1].value += f.value
			continue
		}
		k.cur[n] = f
		n++
	}
	out := k.cur[:0]
	var n2 float64
	for _, f := range k.cur[:n] {
		if f.value != 0 {
			out = append(out, f)
			n2 += float64(f.value * f.value)
		}
	}
	k.cur = out
	k.curNorm2 = n2
}

func (k *kernelPerceptron) dotSV(sv *SupportVector) float64 {
	var s float64
	a, b := 0, 0
	for a < len(sv.Index) && b < len(k.cur) {
		switch ia, ib := sv.Index[a], k.cur[b].index; {
		case ia < ib:
			a++
		case ia > ib:
			b++
		default:
			s += float64(sv.Value[a] * k.cur[b].value)
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
		return math.Exp(-k.cfg.Gamma * math.Max(0, n2a+n2b-2*d))
	}
	return d
}

func (k *kernelPerceptron) predict(x *Example, out []float64, _ uint64) {
	k.canonical(x)
	f := k.b
	for i := range k.sv {
		sv := &k.sv[i]
		f += float64(sv.Coef * k.kernel(k.dotSV(sv), sv.Norm2, k.curNorm2))
	}
	k.raw = f
	out[0] = f
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
