package learner

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAROWOnePass: binary AROW, which reads each variance beside its
// weight when predicting and moves weights and variances in one pass,
// leaves the weights, variances and biases bit for bit as the rule
// written as separate passes does (arowPasses), on examples whose sparse
// indices repeat and overlap their dense part.
func TestAROWOnePass(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Algorithm, cfg.HashBits = AROW, 4
	for _, r := range []float64{0.1, 10} {
		for _, bias := range []BiasRule{BiasStandard, BiasNone} {
			cfg.AROWR, cfg.Bias = r, bias
			got, want := newLinear(cfg), newLinear(cfg)
			rng := rand.New(rand.NewPCG(7, uint64(r*10)))
			out := make([]float64, 1)
			for n := range 2000 {
				var x Example
				for range rng.IntN(12) {
					x.Add(uint32(rng.IntN(cfg.Dimension())), rng.NormFloat64())
				}
				for range rng.IntN(4) {
					x.Dense = append(x.Dense, rng.Float64())
				}
				y := 2*rng.IntN(2) - 1
				s := step{t: uint64(n + 1), importance: 1 + rng.Float64()}
				got.predict(&x, out, 0)
				got.update(&x, y, s)
				arowPasses(want, &x, y, s)
				for _, v := range [][2][]float64{{got.w, want.w}, {got.sigma, want.sigma}, {got.b, want.b}, {got.sigmaB, want.sigmaB}} {
					for i := range v[0] {
						if math.Float64bits(v[0][i]) != math.Float64bits(v[1][i]) {
							t.Fatalf("r %v, bias %v, example %d: element %d is %v, the passes give %v", r, bias, n, i, v[0][i], v[1][i])
						}
					}
				}
			}
		}
	}
}

// arowPasses is binary AROW's prediction and update of x as separate
// passes: the margin, the confidence, the weights, the variances.
func arowPasses(l *linear, x *Example, y int, s step) {
	m := dot(l.w, x) + l.b[0]
	fy := float64(y)
	if fy*m >= 1 {
		return
	}
	var conf float64
	for j, i := range x.Index {
		v := x.Value[j]
		conf += float64(float64(v*v) * l.sigma[i])
	}
	for i, v := range x.Dense {
		conf += float64(float64(v*v) * l.sigma[i])
	}
	bias := l.cfg.Bias != BiasNone
	if bias {
		conf += l.sigmaB[0]
	}
	beta := 1 / (conf + l.cfg.AROWR/s.importance)
	alpha := (1 - fy*m) * beta
	if !(conf >= 0) || !(alpha*conf*alpha <= maxStep2) {
		return
	}
	ay := alpha * fy
	for j, i := range x.Index {
		l.w[i] += float64(float64(ay*l.sigma[i]) * x.Value[j])
	}
	for i, v := range x.Dense {
		l.w[i] += float64(float64(ay*l.sigma[i]) * v)
	}
	for j, i := range x.Index {
		v, sg := x.Value[j], l.sigma[i]
		l.sigma[i] = shrink(sg, float64(beta*float64(sg*sg)*float64(v*v)))
	}
	for i, v := range x.Dense {
		sg := l.sigma[i]
		l.sigma[i] = shrink(sg, float64(beta*float64(sg*sg)*float64(v*v)))
	}
	if bias {
		sg := l.sigmaB[0]
		l.b[0] += float64(ay * sg)
		l.sigmaB[0] = shrink(sg, float64(beta*float64(sg*sg)))
	}
}
