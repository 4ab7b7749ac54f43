package compare_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// BenchmarkAATest is TestAATestStaysWithinAlpha at a larger scale: 1000
// A/A streams of 20,000 examples, the bands looked at after every
// example. It reports the share of streams whose log-loss band, and
// whose accuracy band, ever excluded zero (alpha is 0.05).
//
//	go test ./learner/compare -run '^$' -bench AATest -benchtime 1x
func BenchmarkAATest(b *testing.B) {
	const streams, length, alpha = 1000, 20000, 0.05
	for range b.N {
		var ll, acc int
		for s := range uint64(streams) {
			l, a, _ := aaRun(b, 10000+s, length, alpha)
			if l {
				ll++
			}
			if a {
				acc++
			}
		}
		b.ReportMetric(float64(ll)/streams, "log-loss-rate")
		b.ReportMetric(float64(acc)/streams, "accuracy-rate")
	}
}

// BenchmarkVerdictOnePoint measures how many examples the verdict takes
// when the challenger truly is better: the default learner with 2^18
// weights against the model, the same with 2^17, on the default
// synthetic stream (10,000 names, 40 features an example, 5% noise),
// where the challenger's accuracy is 1.0 point higher over a million
// examples. It reports the medians, over streams of other seeds, of the
// examples after which the log-loss band and the accuracy band first
// excluded zero in the challenger's favour (the stream's length, 10^6,
// when one never did), and the worst of them.
//
//	go test ./learner/compare -run '^$' -bench VerdictOnePoint -benchtime 1x
func BenchmarkVerdictOnePoint(b *testing.B) {
	const streams, length = 9, 1000000
	for range b.N {
		var ll, acc []float64
		var gap float64
		for s := range uint64(streams) {
			model := learner.DefaultConfig()
			model.HashBits = 17
			better := learner.DefaultConfig()
			c, err := compare.NewContest(compare.Entrant{Name: "model", Config: model}, []compare.Entrant{{Name: "better", Config: better}}, 0.05)
			if err != nil {
				b.Fatal(err)
			}
			o := synth.DefaultOptions()
			o.Seed = 100 + s
			h := newHashedStream(o, c.Hashings())
			llAt, accAt := length, length
			for i := 1; i <= length; i++ {
				c.Learn(h.next())
				if i%100 != 0 || (llAt < length && accAt < length) {
					continue
				}
				r := c.Result(1)
				if r.LogLossLow > 0 && llAt == length {
					llAt = i
				}
				if r.AccuracyLow > 0 && accAt == length {
					accAt = i
				}
			}
			ll, acc = append(ll, float64(llAt)), append(acc, float64(accAt))
			gap += c.Result(1).AccuracyDiff / streams
		}
		slices.Sort(ll)
		slices.Sort(acc)
		b.ReportMetric(ll[streams/2], "log-loss-examples")
		b.ReportMetric(ll[streams-1], "log-loss-worst")
		b.ReportMetric(acc[streams/2], "accuracy-examples")
		b.ReportMetric(acc[streams-1], "accuracy-worst")
		b.ReportMetric(gap, "accuracy-gap")
	}
}

// BenchmarkSequenceOnePoint is the accuracy band alone on paired
// outcomes drawn to order: the challenger right 1 point more often, the
// two disagreeing on a share of the examples (the 0/1 losses' variance,
// which sets how fast the band narrows). It reports the median examples
// to the verdict over 101 streams for each share.
//
//	go test ./learner/compare -run '^$' -bench SequenceOnePoint -benchtime 1x
func BenchmarkSequenceOnePoint(b *testing.B) {
	for _, disagree := range []float64{0.05, 0.1, 0.2} {
		b.Run(fmt.Sprintf("disagree=%g%%", 100*disagree), func(b *testing.B) {
			r := rand.New(rand.NewPCG(7, 8))
			for range b.N {
				var at []float64
				for range 101 {
					s, _ := compare.NewSequence(0.05, 1)
					n := 0
					for lo := -1.0; lo <= 0 && n < 10000000; n++ {
						s.Add(pairedErrors(r, disagree/2+0.005, disagree/2-0.005))
						if n%100 == 0 {
							lo, _ = s.Bounds()
						}
					}
					at = append(at, float64(n))
				}
				slices.Sort(at)
				b.ReportMetric(at[50], "examples")
			}
		})
	}
}

// BenchmarkContestLearn is the learning of backtest's "seed" contest
// (the default model, the perceptron, pa1 and the model under another
// hash seed) over 20,000 decoded examples of the default synthetic
// stream, per example: "example" one example at a time (Learn, on one
// goroutine), "chunk" 2,000 at a time (LearnChunk, the entrants on up
// to GOMAXPROCS goroutines).
//
//	go test ./learner/compare -run '^$' -bench ContestLearn
func BenchmarkContestLearn(b *testing.B) {
	model := learner.DefaultConfig()
	perceptron, pa1, seed := model, model, model
	perceptron.Algorithm = learner.Perceptron
	pa1.Algorithm = learner.PA1
	seed.HashSeed = 7
	challengers := []compare.Entrant{{Name: "perceptron", Config: perceptron}, {Name: "pa1", Config: pa1}, {Name: "seed", Config: seed}}
	const n, chunk = 20000, 2000
	for _, name := range []string{"example", "chunk"} {
		b.Run(name, func(b *testing.B) {
			c, err := compare.NewContest(compare.Entrant{Name: "model", Config: model}, challengers, 0.05)
			if err != nil {
				b.Fatal(err)
			}
			xs := examples(synth.DefaultOptions(), c.Hashings(), n)
			b.ResetTimer()
			for range b.N {
				for j := 0; j < n; j += chunk {
					if name == "chunk" {
						c.LearnChunk(xs[j : j+chunk])
						continue
					}
					for _, x := range xs[j : j+chunk] {
						c.Learn(x)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/example")
		})
	}
}
