package consumer

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// servedRun is what a live worker at the defaults serves over a stream
// whose labels come later: the examples arrive at a steady rate, each
// label after a delay drawn from an exponential distribution, and the
// worker keeps up, so that every record is handled at its own time. The
// head predicts each example with the model of that moment, the join
// decides by the rule, the tail learns in the examples' order.
type servedRun struct {
	accuracy, logLoss float64 // of the served predictions, scored as their labels joined
	prequential       float64 // the tail's own accuracy, predict-then-learn
	lag               float64 // mean examples between the head and the tail at each prediction
}

func simulateServed(b *testing.B, n int, rate float64, delay, window time.Duration, driftAt uint64) servedRun {
	b.Helper()
	o := synth.DefaultOptions()
	o.DriftAt = driftAt
	s := synth.New(o)
	cfg := learner.DefaultConfig()
	model, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
	xs := make([]learner.Example, n)
	ys := make([]int, n)
	ids := make([]string, n)
	for i := range n {
		rec := s.Next()
		ys[i], ids[i] = rec.Label, strconv.FormatUint(rec.Seq, 10)
		rec.Labeled = false
		line := synth.AppendJSON(nil, rec)
		if _, err := dec.Decode(line[:len(line)-1], &xs[i]); err != nil {
			b.Fatal(err)
		}
		xs[i].Index = slices.Clone(xs[i].Index)
		xs[i].Value = slices.Clone(xs[i].Value)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	at := func(i int) int64 { return int64(float64(i) / rate * 1000) }
	type label struct {
		t int64
		i int
	}
	labels := make([]label, n)
	for i := range n {
		labels[i] = label{at(i) + int64(rng.ExpFloat64()*float64(delay.Milliseconds())), i}
	}
	slices.SortStableFunc(labels, func(a, b label) int { return int(a.t - b.t) })

	j := NewJoin(JoinConfig{Window: window})
	next, lagSum := 0, 0.0
	learn := func() {
		for {
			_, decided, ok := j.Next()
			if !ok || !decided {
				return
			}
			y, labeled, _ := j.Learned()
			x := xs[next]
			x.Labeled, x.Label = labeled, y
			model.Learn(&x)
			next++
		}
	}
	k := 0
	for i := range n {
		for k < n && labels[k].t <= at(i) {
			for _, d := range j.Label(int64(k), labels[k].t, false, []byte(ids[labels[k].i]), ys[labels[k].i]) {
				if d.Outcome == LabelJoined {
					j.Score(&d, true)
				}
			}
			k++
			learn()
		}
		p := model.Predict(&xs[i])
		lagSum += float64(i - next)
		for _, d := range j.Example(int64(i), at(i), true, []byte(ids[i]), Served{Probability: float32(p.Probability), Predicted: int32(p.Label)}) {
			if d.Outcome == LabelJoined {
				j.Score(&d, true)
			}
		}
		learn()
	}
	for ; k < n; k++ {
		for _, d := range j.Label(int64(k), labels[k].t, false, []byte(ids[labels[k].i]), ys[labels[k].i]) {
			if d.Outcome == LabelJoined {
				j.Score(&d, true)
			}
		}
		learn()
	}
	j.Label(int64(n), math.MaxInt64/2, true, nil, 0)
	learn()
	c := j.Counts()
	if c.Served != c.Labels[LabelJoined] || c.Served+c.Expired != uint64(n) || next != n {
		b.Fatalf("%d served predictions scored, %d expired, %d learned, of %d", c.Served, c.Expired, next, n)
	}
	mt := model.Metrics()
	return servedRun{
		accuracy:    float64(c.ServedCorrect) / float64(c.Served),
		logLoss:     c.ServedLogLoss / float64(c.Served),
		prequential: mt.Accuracy,
		lag:         lagSum / float64(n),
	}
}

// BenchmarkServedAccuracy measures what the delay of labels costs the
// predictions as they are served, at the defaults (the default learner,
// labels.window 10m, no labels.default): 2,000,000 examples of gen's stream (and
// 400,000, the stream e2e's BenchmarkServedDelay gives the real binary), 2,000 a
// second, every label after an exponentially distributed delay of mean 0
// (labeled at once: the anchor), 10 s and 60 s, stationary and with an
// abrupt change of concept halfway; and with windows of a few mean delays,
// the lever a user has. It reports the served accuracy and log-loss, the
// tail's own prequential accuracy, and how many examples the tail lags
// behind the head on average.
func BenchmarkServedAccuracy(b *testing.B) {
	for _, n := range []int{400_000, 2_000_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchServedAccuracy(b, n) })
	}
}

func benchServedAccuracy(b *testing.B, n int) {
	const rate = 2000
	for _, stream := range []struct {
		name    string
		driftAt uint64
	}{{"stationary", 0}, {"drift", uint64(n / 2)}} {
		for _, c := range []struct{ delay, window time.Duration }{
			{0, 10 * time.Minute}, {10 * time.Second, 10 * time.Minute}, {60 * time.Second, 10 * time.Minute},
			{10 * time.Second, 30 * time.Second}, {60 * time.Second, 3 * time.Minute},
		} {
			b.Run(fmt.Sprintf("%s/delay=%s/window=%s", stream.name, c.delay, c.window), func(b *testing.B) {
				var r servedRun
				for b.Loop() {
					r = simulateServed(b, n, rate, c.delay, c.window, stream.driftAt)
				}
				b.ReportMetric(r.accuracy, "served-accuracy")
				b.ReportMetric(r.logLoss, "served-logloss")
				b.ReportMetric(r.prequential, "prequential-accuracy")
				b.ReportMetric(r.lag, "lag-examples")
			})
		}
	}
}
