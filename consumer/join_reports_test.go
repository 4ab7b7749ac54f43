package consumer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestJoinedWorkerReportsRecordsFromTheFuture: a record of either input
// stamped more than a window ahead of the worker's clock (a producer's
// clock far ahead, a time in microseconds) moves its input's watermark
// there, as the rule says. The worker counts each such record, by input,
// in hyperplane_join_future_records_total and warns of it, naming where
// it is; records stamped now are not counted.
func TestJoinedWorkerReportsRecordsFromTheFuture(t *testing.T) {
	ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	now := time.Now()
	far := time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 20 {
		ex.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","features":{"a":%d}}`, i, i%3))
		labels.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","label":1}`, i))
	}
	labels.AppendAt(0, far, []byte(`not a label`))
	labels.AppendAt(0, now.Add(joinWindow/2), []byte(`{"id":"e0","label":1}`))
	ex.AppendAt(0, far.Add(time.Hour), []byte(`{"id":"late","features":{"a":1}}`))

	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	future := func(input string) float64 { return testutil.ToFloat64(metrics.Join.Future.WithLabelValues(input)) }
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	w := runJoinedLogged(t, ex, labels, store, nil, false, zap.New(core), metrics, func(w *consumer.Worker) bool {
		head, _, _, _ := w.JoinProgress()
		return head == int64(ex.Len(0)) && future("labels") == 1 && future("examples") == 1
	})
	if c := w.JoinCounts(); c.Labels[consumer.LabelJoined] != 20 {
		t.Errorf("%d labels joined, want the 20 stamped now (the record from the future came after them)", c.Labels[consumer.LabelJoined])
	}
	warned := logs.FilterMessageSnippet("ahead of this worker's clock").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a record from the future, want 1 (at most one a minute): %v", len(warned), logs.All())
	}
	// The two inputs are read side by side: the warning names whichever
	// record came first.
	fields := warned[0].ContextMap()
	if named := fmt.Sprint(fields["input"], " ", fields["source"], " ", fields["offset"]); named != "labels "+labels.Key(0)+" 20" && named != "examples "+ex.Key(0)+" 20" {
		t.Errorf("the warning names %q, want offset 20 of %s or of %s", named, labels.Key(0), ex.Key(0))
	}
}

// TestJoinedWorkerReportsUntimedRecords: a record of either input
// without a time (a Kafka timestamp of -1 or 0, which the client gives as
// the zero time) is taken as stamped before every other record, so an
// example's window has closed when its label comes. The worker counts
// each such record, by input, in hyperplane_join_untimed_records_total
// and warns of it, naming where it is; records stamped now are not
// counted.
func TestJoinedWorkerReportsUntimedRecords(t *testing.T) {
	ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	now := time.Now()
	for i := range 20 {
		ex.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","features":{"a":%d}}`, i, i%3))
		labels.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","label":1}`, i))
	}
	ex.AppendAt(0, time.Time{}, []byte(`{"id":"u1","features":{"a":1}}`))
	ex.AppendAt(0, time.Time{}, []byte(`{"id":"u2","features":{"a":2}}`))
	ex.AppendAt(0, now, []byte(`{"id":"e20","features":{"a":1}}`))
	labels.AppendAt(0, now, []byte(`{"id":"u1","label":1}`))
	labels.AppendAt(0, time.Time{}, []byte(`{"id":"e20","label":1}`))

	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	untimed := func(input string) float64 { return testutil.ToFloat64(metrics.Join.Untimed.WithLabelValues(input)) }
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	w := runJoinedLogged(t, ex, labels, store, nil, false, zap.New(core), metrics, func(w *consumer.Worker) bool {
		head, _, _, _ := w.JoinProgress()
		// u1 and u2 expire: their windows closed before any label came.
		return head == int64(ex.Len(0)) && untimed("labels") == 1 && untimed("examples") == 2 && w.JoinCounts().Expired == 2
	})
	if c := w.JoinCounts(); c.Labels[consumer.LabelJoined] < 20 {
		t.Errorf("%d labels joined, want the 20 stamped now", c.Labels[consumer.LabelJoined])
	}
	if got := testutil.ToFloat64(metrics.Join.Future.WithLabelValues("examples")) + testutil.ToFloat64(metrics.Join.Future.WithLabelValues("labels")); got != 0 {
		t.Errorf("%v records counted as stamped ahead, want none", got)
	}
	warned := logs.FilterMessageSnippet("has no time").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a record without a time, want 1 (at most one a minute): %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if named := fmt.Sprint(fields["input"], " ", fields["source"]); named != "labels "+labels.Key(0) && named != "examples "+ex.Key(0) {
		t.Errorf("the warning names %q, want %s or %s", named, labels.Key(0), ex.Key(0))
	}
}

// TestJoinedWorkerReportsReusedIDs: an example whose id an earlier example
// the join still holds has is joined by none of the labels after it (each
// is decided against the earlier one, docs/labels.md, section 2). The
// worker counts each such example in hyperplane_join_reused_ids_total and
// warns of it, naming where it is; examples with ids of their own are not
// counted.
func TestJoinedWorkerReportsReusedIDs(t *testing.T) {
	ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	now := time.Now()
	for i := range 10 {
		ex.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","features":{"a":%d}}`, i, i%3))
		labels.AppendAt(0, now, fmt.Appendf(nil, `{"id":"e%d","label":1}`, i))
	}
	ex.AppendAt(0, now, []byte(`{"id":"session-7","features":{"a":1}}`))
	ex.AppendAt(0, now, []byte(`{"id":"session-7","features":{"a":2}}`))
	labels.AppendAt(0, now, []byte(`{"id":"session-7","label":1}`))
	labels.AppendAt(0, now, []byte(`{"id":"session-7","label":-1}`))

	core, logs := observer.New(zapcore.WarnLevel)
	metrics := consumer.NewMetrics(nil)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	decided := func(outcome string) float64 { return testutil.ToFloat64(metrics.Join.Labels.WithLabelValues(outcome)) }
	w := runJoinedLogged(t, ex, labels, store, nil, false, zap.New(core), metrics, func(*consumer.Worker) bool {
		return decided("joined")+decided("duplicate") == 12
	})
	if n := testutil.ToFloat64(metrics.Join.Reused); n != 1 {
		t.Errorf("hyperplane_join_reused_ids_total is %v, want 1: the second example with id session-7", n)
	}
	if c := w.JoinCounts(); c.Labels[consumer.LabelJoined] != 11 || c.Labels[consumer.LabelDuplicate] != 1 {
		t.Errorf("%d labels joined and %d duplicate, want 11 and 1: both labels of session-7 are decided against its first example",
			c.Labels[consumer.LabelJoined], c.Labels[consumer.LabelDuplicate])
	}
	warned := logs.FilterMessageSnippet("the id of an earlier example").All()
	if len(warned) != 1 {
		t.Fatalf("%d warnings of a reused id, want 1: %v", len(warned), logs.All())
	}
	fields := warned[0].ContextMap()
	if named := fmt.Sprint(fields["id"], " ", fields["source"], " ", fields["offset"]); named != "session-7 "+ex.Key(0)+" 11" {
		t.Errorf("the warning names %q, want session-7 at offset 11 of %s", named, ex.Key(0))
	}
}
