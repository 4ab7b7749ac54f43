package learner

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestRecoverStartsAfreshInPlace: after a drift a linear model holds a
// new model's parameters, as newLinear makes them, for every algorithm,
// binary and multiclass, with and without mini-batches, and holds them in
// the vectors it learned in rather than in new memory.
func TestRecoverStartsAfreshInPlace(t *testing.T) {
	for _, alg := range algorithms {
		if alg == Kernel {
			continue
		}
		for _, classes := range [][]string{nil, {"a", "b", "c"}} {
			for _, batch := range []int{1, 8} {
				cfg := DefaultConfig()
				cfg.Algorithm, cfg.HashBits, cfg.Batch = alg, 6, batch
				if classes != nil {
					cfg.Classes = classes
				}
				if cfg.Validate() != nil {
					continue
				}
				t.Run(fmt.Sprintf("%s/classes=%d/batch=%d", alg, len(classes), batch), func(t *testing.T) {
					m, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					rng := rand.New(rand.NewPCG(3, uint64(len(classes)+batch)))
					for range 300 {
						var x Example
						for range 1 + rng.IntN(8) {
							x.Add(uint32(rng.IntN(cfg.Dimension())), rng.NormFloat64())
						}
						x.Labeled, x.Label = true, rng.IntN(max(len(classes), 2))
						if classes == nil {
							x.Label = 2*x.Label - 1
						}
						m.Learn(&x)
					}
					l := m.eng.(*linear)
					w := &l.w[0]
					m.recover()
					got := m.eng.(*linear)
					if &got.w[0] != w {
						t.Error("the weights start afresh in new memory")
					}
					want := newLinear(cfg)
					for name, v := range map[string][2]any{
						"w": {got.w, want.w}, "b": {got.b, want.b}, "raw": {got.raw, want.raw},
						"u": {got.u, want.u}, "ub": {got.ub, want.ub},
						"scale": {got.scale, want.scale}, "vnorm2": {got.vnorm2, want.vnorm2},
						"sigma": {got.sigma, want.sigma}, "sigmaB": {got.sigmaB, want.sigmaB},
						"pw": {got.pw, want.pw}, "pb": {got.pb, want.pb}, "k": {got.k, want.k},
					} {
						if !reflect.DeepEqual(v[0], v[1]) {
							t.Errorf("%s after the restart: %v, a new model's %v", name, v[0], v[1])
						}
					}
					if len(got.touched) != 0 {
						t.Errorf("%d pending updates after the restart", len(got.touched))
					}
				})
			}
		}
	}
}

// BenchmarkRecover is what a drift's restart costs the default model
// (AROW, 2^18 weights): its parameters started afresh, and the learning
// of the examples after it.
//
//	go test -run '^$' -bench BenchmarkRecover -benchmem -count 10 ./learner/
func BenchmarkRecover(b *testing.B) {
	m, err := New(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	xs := make([]Example, 1000)
	for i := range xs {
		for range 20 {
			xs[i].Add(uint32(rng.IntN(m.cfg.Dimension())), 1)
		}
		xs[i].Labeled, xs[i].Label = true, 2*rng.IntN(2)-1
	}
	for b.Loop() {
		m.recover()
		for i := range xs {
			m.Learn(&xs[i])
		}
	}
}
