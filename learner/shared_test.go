package learner_test

import (
	"reflect"
	"testing"
)

// Shared is State with the model's own per-weight vectors: the same
// values, no copy of the weights.
func TestSharedIsStateWithoutCopies(t *testing.T) {
	for _, cfg := range configs() {
		t.Run(string(cfg.Algorithm), func(t *testing.T) {
			m := mustRestore(t, fresh(t, cfg))
			xs := streamFor(cfg, 7, 50)
			for i := range xs {
				m.Learn(&xs[i])
			}
			want, got := m.State(), m.Shared()
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Shared differs from State")
			}
			if len(got.Weights) == 0 {
				return
			}
			if again := m.Shared(); &again.Weights[0] != &got.Weights[0] {
				t.Errorf("two Shared states hold different weights: a copy")
			}
			if &want.Weights[0] == &got.Weights[0] {
				t.Errorf("State holds the model's weights")
			}
		})
	}
}
