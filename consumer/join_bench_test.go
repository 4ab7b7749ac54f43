package consumer

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkJoinPending holds 10 million delayed examples, each with an id
// of 20 bytes of its own, waiting for their labels, and reports what the join keeps
// for each beyond its id's bytes (B/pending) and the time to take one in
// (ns/op is per example).
func BenchmarkJoinPending(b *testing.B) {
	const pending = 10_000_000
	ids := make([]string, pending)
	for i := range ids {
		ids[i] = "gen-3f2a9c1-" + strconv.FormatInt(int64(10_000_000+i), 10) // 20 bytes, distinct
	}
	idBytes := float64(len(ids[0]))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		j := NewJoin(JoinConfig{Window: time.Hour, MaxPending: pending})
		b.StartTimer()
		for i, id := range ids {
			j.Example(int64(i), int64(i), true, []byte(id), Served{Version: uint64(i)})
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if j.Pending() != pending {
			b.Fatalf("%d pending, want %d", j.Pending(), pending)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/pending, "B/pending")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/pending-idBytes, "B/pending-beyond-id")
		runtime.KeepAlive(j)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pending), "ns/example")
}

// BenchmarkJoinMatch joins 1,000,000 examples with their labels while
// 100,000 of either wait, and reports the time for an example and its
// label (ns/pair). labels=after: each label comes 100,000 examples after
// its example, which waits for it; labels=before: each label comes
// 100,000 examples before its example and is held. Every example before
// its label also looks among the held labels, and every label among the
// waiting examples, most often for an id that is not there.
func BenchmarkJoinMatch(b *testing.B) {
	const pairs, lag = 1_000_000, 100_000
	ids := make([][]byte, pairs)
	for i := range ids {
		ids[i] = []byte("gen-3f2a9c1b-" + strconv.FormatInt(int64(1_000_000+i), 10)) // 20 bytes, distinct
	}
	for _, order := range []string{"after", "before"} {
		b.Run("labels="+order, func(b *testing.B) {
			for b.Loop() {
				j := NewJoin(JoinConfig{Window: time.Hour})
				example := func(i int) {
					j.Example(int64(i), int64(i), true, ids[i], Served{})
					// The tail learns what is decided.
					for {
						if _, decided, ok := j.Next(); !ok || !decided {
							break
						}
						j.Learned()
					}
				}
				label := func(i int) { j.Label(int64(i), int64(i), false, ids[i], 1) }
				for i := range pairs + lag {
					if order == "after" {
						if i < pairs {
							example(i)
						}
						if i >= lag {
							label(i - lag)
						}
					} else {
						if i < pairs {
							label(i)
						}
						if i >= lag {
							example(i - lag)
						}
					}
				}
				if c := j.Counts(); c.Labels[LabelJoined] != pairs {
					b.Fatalf("%d labels joined, want %d (%+v)", c.Labels[LabelJoined], pairs, c)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pairs), "ns/pair")
		})
	}
}
