package learner_test

import (
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// TestImportanceGoesAtMostToTheMargin: the learners whose step goes to
// the margin (AROW, the default, binary and multiclass, and plain PA)
// take an example's importance as an aggressiveness, not as a factor of
// that step: every example at importance 100 leaves their prequential
// accuracy within 3 points of the same stream unweighted. (Scaled by it,
// AROW fell from 73% to 56% on the synthetic stream.) At importance 1
// nothing changes, to the bit.
func TestImportanceGoesAtMostToTheMargin(t *testing.T) {
	for _, c := range []struct {
		alg     learner.Algorithm
		classes int
	}{{learner.AROW, 0}, {learner.AROW, 4}, {learner.PA, 0}} {
		t.Run(fmt.Sprintf("%s/%d", c.alg, c.classes), func(t *testing.T) {
			t.Parallel()
			cfg := learner.DefaultConfig()
			cfg.Algorithm, cfg.HashBits = c.alg, 16
			o := synth.DefaultOptions()
			o.Seed, o.Vocab = 3, 10000
			if c.classes > 0 {
				o.Classes = c.classes
				cfg.Classes = []string{"a", "b", "c", "d"}
			}
			accuracy := func(weight float64) (float64, []float64) {
				xs := genStream(o, 30000, cfg).xs
				m := mustNew(t, cfg)
				var scores []float64
				for i := range xs {
					xs[i].Weight = weight
					out := m.Learn(&xs[i])
					if i%1000 == 0 {
						scores = append(scores, out.Score)
					}
				}
				return m.Metrics().Accuracy, scores
			}
			plain, plainScores := accuracy(0)
			one, oneScores := accuracy(1)
			heavy, _ := accuracy(100)
			t.Logf("accuracy %.4f unweighted, %.4f at importance 100", plain, heavy)
			if heavy < plain-0.03 {
				t.Errorf("at importance 100 the accuracy is %.4f, unweighted %.4f", heavy, plain)
			}
			if plain != one || fmt.Sprint(plainScores) != fmt.Sprint(oneScores) {
				t.Errorf("importance 1 learns otherwise than none: accuracy %v against %v", one, plain)
			}
		})
	}
}
