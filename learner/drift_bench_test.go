package learner_test

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// BenchmarkLearnDrift is BenchmarkLearn with the change detector on (the
// default) and off: its cost on the hot path, where it allocates nothing.
func BenchmarkLearnDrift(b *testing.B) {
	for _, alg := range []learner.Algorithm{learner.AROW, learner.Perceptron} {
		for _, on := range []bool{true, false} {
			name := string(alg) + "/drift=off"
			if on {
				name = string(alg) + "/drift=on"
			}
			b.Run(name, func(b *testing.B) {
				cfg := learner.DefaultConfig()
				cfg.Algorithm = alg
				cfg.Drift.Enabled = on
				benchmarkLearn(b, cfg, 0)
			})
		}
	}
}
