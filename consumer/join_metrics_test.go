package consumer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestJoinMetricsSumOverShards: the joins of two shards in one process
// report served accuracy and pending examples over both, and a shard's
// join that starts again from an older snapshot counts nothing twice.
func TestJoinMetricsSumOverShards(t *testing.T) {
	m := newJoinMetrics()
	a := JoinCounts{Served: 10, ServedCorrect: 9, ServedLogLoss: 1}
	a.Labels[LabelJoined] = 10
	b := JoinCounts{Served: 30, ServedCorrect: 15, ServedLogLoss: 6}
	b.Labels[LabelJoined] = 30
	m.observe("kafka:ex/0", a, 4, 100)
	m.observe("kafka:ex/1", b, 6, 20)
	if got := testutil.ToFloat64(m.ServedAccuracy); got != 24.0/40 {
		t.Errorf("served accuracy %v, want 24/40 over both shards", got)
	}
	if got := testutil.ToFloat64(m.ServedLogLoss); got != 7.0/40 {
		t.Errorf("served log-loss %v, want 7/40", got)
	}
	if got := testutil.ToFloat64(m.Pending); got != 10 {
		t.Errorf("pending %v, want 4 + 6", got)
	}
	if got := testutil.ToFloat64(m.Held); got != 120 {
		t.Errorf("held labels %v, want 100 + 20", got)
	}
	// Shard 0 comes back from a snapshot that counted 6 joins of the 10,
	// then joins 5 more: the log's count is 11.
	older := JoinCounts{Served: 6, ServedCorrect: 5, ServedLogLoss: 0.5}
	older.Labels[LabelJoined] = 6
	m.observe("kafka:ex/0", older, 0, 0)
	older.Labels[LabelJoined] += 5
	m.observe("kafka:ex/0", older, 0, 0)
	m.observe("kafka:ex/1", b, 6, 20)
	m.stopped("kafka:ex/1")
	if got := testutil.ToFloat64(m.Pending); got != 0 {
		t.Errorf("pending %v once shard 1 stopped here and shard 0 has none, want 0", got)
	}
	if got := testutil.ToFloat64(m.Held); got != 0 {
		t.Errorf("held labels %v once shard 1 stopped here and shard 0 holds none, want 0", got)
	}
	if got := testutil.ToFloat64(m.outcomes[LabelJoined]); got != 11+30 {
		t.Errorf("joined %v, want 41: shard 0's 11 and shard 1's 30", got)
	}
}
