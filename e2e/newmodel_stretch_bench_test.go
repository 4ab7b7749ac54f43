package e2e

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// stretch is how many examples BenchmarkNewModelStretches times at a
// time.
const stretch = 50_000

// BenchmarkNewModelStretches is BenchmarkNewModel over a long stream, as
// it goes: the real binary at the defaults learns a new model from 2,000,000
// examples on a topic of one partition, then the same examples spread
// round-robin over four, and the benchmark times every stretch of 50,000
// examples of each run from the worker's /metrics (the single worker's
// positions; in epochs the ranges' positions, hyperplane_shard_position,
// which is what has been learned, mixed or not). stream=drift changes the
// concept halfway (synth's DriftAt), after which epochs start smaller
// again. It reports the four partitions' rate over the whole stream
// against one partition's (ratio), and the lowest ratio of a stretch
// (min-stretch-ratio; with drift, of the stretches after the change),
// as the mean of each run's lowest. Over several runs (-benchtime 5x) it
// also reports the lowest ratio of a stretch's median times over the runs
// (min-median-stretch-ratio), which a pause of the machine in one run
// does not decide.
//
//	go test -run XXX -bench BenchmarkNewModelStretches -benchtime 1x -timeout 0 ./e2e/
func BenchmarkNewModelStretches(b *testing.B) {
	broker := buildBenchBroker(b)
	const n = 2_000_000
	for _, drift := range []bool{false, true} {
		name := "stream=stationary"
		if drift {
			name = "stream=drift"
		}
		b.Run(name, func(b *testing.B) {
			o := synth.DefaultOptions()
			o.Features, o.Seed = 40, 5
			if drift {
				o.DriftAt = n / 2
			}
			s := synth.New(o)
			msgs := make([][]byte, n)
			for i := range msgs {
				line := synth.AppendJSON(nil, s.Next())
				msgs[i] = line[:len(line)-1]
			}
			from := 0 // the first stretch the minimum counts
			if drift {
				from = n / 2 / stretch
			}
			var ratio, low float64
			// Each stretch's times over the runs, for the ratio of their
			// medians: a stretch lasts a tenth of a second, so one
			// run's may hold a pause of the machine's that the other
			// run's does not.
			ones, fours := make([][]float64, n/stretch+1), make([][]float64, n/stretch+1)
			for range b.N {
				one, _ := stretchTimes(b, broker, msgs, 1)
				four, epochs := stretchTimes(b, broker, msgs, 4)
				for k := 1; k < min(len(one), len(four), len(ones)); k++ {
					ones[k] = append(ones[k], (one[k] - one[k-1]).Seconds())
					fours[k] = append(fours[k], (four[k] - four[k-1]).Seconds())
				}
				ratio += one[len(one)-1].Seconds() / four[len(four)-1].Seconds()
				m := 0.0
				for k := 1; k < len(one); k++ {
					r := (one[k] - one[k-1]).Seconds() / (four[k] - four[k-1]).Seconds()
					b.Logf("stretch %d (examples %d to %d): one %v, four %v (%v epochs), ratio %.2f", k, (k-1)*stretch, k*stretch, one[k]-one[k-1], four[k]-four[k-1], epochs[k]-epochs[k-1], r)
					if k > from && (k == from+1 || r < m) {
						m = r
					}
				}
				low += m
			}
			b.ReportMetric(ratio/float64(b.N), "ratio")
			b.ReportMetric(low/float64(b.N), "min-stretch-ratio")
			lowMedian := math.Inf(1)
			for k := from + 1; k < len(ones); k++ {
				if len(ones[k]) > 0 {
					lowMedian = min(lowMedian, median(ones[k])/median(fours[k]))
				}
			}
			b.ReportMetric(lowMedian, "min-median-stretch-ratio")
		})
	}
}

// stretchTimes runs the worker over msgs on partitions partitions, with a
// broker and a store of its own, and returns, for every k, when (since
// the worker's start) it had learned k·stretch examples; the last is when
// its positions hold every example. Each time is interpolated between the
// polls of /metrics that straddle it. It also returns the newest mixed
// epoch (hyperplane_epoch) at the poll that passed each of those counts.
func stretchTimes(b *testing.B, brokerBin string, msgs [][]byte, partitions int) ([]time.Duration, []float64) {
	br, addrs := loadedBroker(b, brokerBin, msgs, partitions, roundRobin)
	defer br.stop(b)
	learned := "hyperplane_position{"
	if partitions > 1 {
		learned = "hyperplane_shard_position{"
	}
	start := time.Now()
	w := startDefaultWorker(b, addrs, "new")
	defer w.stop(b)
	times, epochs := []time.Duration{0}, []float64{0}
	prevT, prevN := time.Duration(0), 0.0
	waitBench(b, []*benchProc{w}, 30*time.Minute, "the positions at every example", func() bool {
		m, err := w.metrics()
		if err != nil {
			return false
		}
		now := time.Since(start)
		sum, mixed := sumOf(m, learned), sumOf(m, "hyperplane_position{")
		// A range's gauge may be gone between epochs: what is mixed, and
		// what was seen before, are learned too.
		sum = max(sum, mixed, prevN)
		for next := float64(len(times) * stretch); sum >= next && next < float64(len(msgs)); next = float64(len(times) * stretch) {
			frac := (next - prevN) / (sum - prevN)
			times = append(times, prevT+time.Duration(frac*float64(now-prevT)))
			epochs = append(epochs, m["hyperplane_epoch"])
		}
		prevT, prevN = now, sum
		if mixed == float64(len(msgs)) {
			times = append(times, now)
			epochs = append(epochs, m["hyperplane_epoch"])
			return true
		}
		return false
	})
	return times, epochs
}

// median is the median of v, which it sorts.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[n/2]
}
