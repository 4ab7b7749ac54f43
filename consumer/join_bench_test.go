package consumer

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkJoinPending holds 10 million delayed examples, each with an id
// of 20 bytes, waiting for their labels, and reports what the join keeps
// for each beyond its id's bytes (B/pending) and the time to take one in
// (ns/op is per example).
func BenchmarkJoinPending(b *testing.B) {
	const pending = 10_000_000
	ids := make([]string, pending)
	for i := range ids {
		ids[i] = "gen-3f2a9c1b-" + strconv.FormatInt(int64(10_000_000+i), 10)[:7]
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
