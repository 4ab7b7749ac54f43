package consumer_test

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// BenchmarkWorkerRunChallengers is the whole worker (fetch, decode,
// learn, encode, publish to an in-memory sink, metrics per batch) over
// 100,000 generated examples of 20 features, with no challenger and with
// three of other algorithms that share the model's decoded example
// (perceptron, PA-I, AROW with r = 0.1). The model is the default (AROW,
// 2^18 weights). It reports msgs/s.
//
//	go test ./consumer -run XXX -bench BenchmarkWorkerRunChallengers -count 6
func BenchmarkWorkerRunChallengers(b *testing.B) {
	in := workerRunInput(workerRunN)
	base := workerRunConfig()
	with := func(f func(c *learner.Config)) learner.Config {
		c := base
		f(&c)
		return c
	}
	three := []learner.ChallengerConfig{
		{Name: "perceptron", Config: with(func(c *learner.Config) { c.Algorithm = learner.Perceptron })},
		{Name: "pa1", Config: with(func(c *learner.Config) { c.Algorithm = learner.PA1 })},
		{Name: "arow-r", Config: with(func(c *learner.Config) { c.AROWR = 0.1 })},
	}
	for _, c := range []struct {
		name        string
		challengers []learner.ChallengerConfig
	}{{"none", nil}, {"three", three}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				model, err := learner.New(base)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := model.SetChallengers(c.challengers); err != nil {
					b.Fatal(err)
				}
				runWorkerOnce(b, in, model, 0)
			}
			b.ReportMetric(float64(workerRunN)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
