package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// sendSink is a SendSink that records, in order, what the publish loop
// asks of it: "send g", "wait g", "publish g" for the group whose first
// output's key is g. A wait reports failWait's error for group failWait,
// once. Each wait and each Publish also records the positions the worker
// had taken when it was called.
type sendSink struct {
	mu       sync.Mutex
	events   []string
	taken    map[string]map[string]int64 // by event
	w        *Worker
	failWait string
	failed   bool
}

func (s *sendSink) record(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
	if s.taken == nil {
		s.taken = map[string]map[string]int64{}
	}
	s.taken[event] = s.w.Published()
}

func (s *sendSink) Send(_ context.Context, batch []Output) func(context.Context) error {
	g := string(batch[0].Key)
	s.record("send " + g)
	return func(context.Context) error {
		s.record("wait " + g)
		s.mu.Lock()
		defer s.mu.Unlock()
		if g == s.failWait && !s.failed {
			s.failed = true
			return errors.New("an acknowledgement failed")
		}
		return nil
	}
}

func (s *sendSink) Publish(_ context.Context, batch []Output) error {
	s.record("publish " + string(batch[0].Key))
	return nil
}

func (s *sendSink) Close() error { return nil }

// committed is a Source whose Commit reports each commit's positions.
type committed struct{ commits chan map[string]int64 }

func (c committed) Fetch(ctx context.Context, _ int) ([]Message, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (c committed) Commit(_ context.Context, resume map[string]int64) error {
	c.commits <- maps.Clone(resume)
	return nil
}

func (committed) Close() error { return nil }

// sendTest is a worker publishing to a sendSink, and a batch maker: a
// batch of n outputs keyed g (its group's name), covering position pos.
func sendTest(t *testing.T) (*Worker, *sendSink, committed, func(g string, n int, pos int64) *outBatch) {
	t.Helper()
	model, err := learner.New(learner.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	sink := &sendSink{}
	src := committed{commits: make(chan map[string]int64, 16)}
	w := NewWorker(WorkerConfig{Predictions: Destination{Sink: sink, Topic: "p"}}, src, model, nil, nil, zap.NewNop())
	sink.w = w
	batch := func(g string, n int, pos int64) *outBatch {
		out := make([]Output, n)
		for i := range out {
			out[i] = Output{Topic: "p", Key: []byte(g), Value: []byte(fmt.Sprint(i))}
		}
		return &outBatch{outputs: [][]Output{out}, sinks: []Sink{sink}, resume: map[string]int64{"s": pos}, messages: n}
	}
	return w, sink, src, batch
}

// publishTwoGroups runs w's publish loop over two groups: a, which fills a
// publish, and b, so that b is a group of its own; a covers position 1,
// b position 2.
func publishTwoGroups(t *testing.T, w *Worker, batch func(g string, n int, pos int64) *outBatch) {
	t.Helper()
	queue := make(chan *outBatch, 2)
	queue <- batch("a", maxPublish, 1)
	queue <- batch("b", 1, 2)
	close(queue)
	left, err := w.publishLoop(t.Context(), queue)
	if err != nil || len(left) > 0 {
		t.Fatalf("publishLoop: %d batches left, %v", len(left), err)
	}
}

// TestPublishLoopSendsWhileTheGroupBeforeIsStored: to a SendSink the
// next group is sent before the one before it is waited for, and each
// group's positions are taken only once it is held, in order.
func TestPublishLoopSendsWhileTheGroupBeforeIsStored(t *testing.T) {
	w, sink, _, batch := sendTest(t)
	publishTwoGroups(t, w, batch)
	if want := []string{"send a", "send b", "wait a", "wait b"}; !slices.Equal(sink.events, want) {
		t.Fatalf("events %q, want %q", sink.events, want)
	}
	if got := sink.taken["wait a"]["s"]; got != 0 {
		t.Fatalf("position %d taken before the first group was held", got)
	}
	if got := sink.taken["wait b"]["s"]; got != 1 {
		t.Fatalf("position %d taken when the second group is waited for, want the first group's, 1", got)
	}
	if got := w.Published()["s"]; got != 2 {
		t.Fatalf("position %d published at the end, want 2", got)
	}
}

// TestPublishLoopPublishesAgainWhatAWaitFailed: a group whose wait fails
// is published again, whole, before its positions are taken, though the
// group after it was sent already.
func TestPublishLoopPublishesAgainWhatAWaitFailed(t *testing.T) {
	w, sink, _, batch := sendTest(t)
	sink.failWait = "a"
	publishTwoGroups(t, w, batch)
	if want := []string{"send a", "send b", "wait a", "publish a", "wait b"}; !slices.Equal(sink.events, want) {
		t.Fatalf("events %q, want %q", sink.events, want)
	}
	if got := sink.taken["publish a"]["s"]; got != 0 {
		t.Fatalf("position %d taken before the failed group was published again", got)
	}
	if got := w.Published()["s"]; got != 2 {
		t.Fatalf("position %d published at the end, want 2", got)
	}
	if got := testutil.ToFloat64(w.metrics.PublishErrors); got != 1 {
		t.Fatalf("%v publish errors counted, want 1", got)
	}
}

// TestPublishLoopIdleTakesThePositions: a group in flight with nothing
// queued behind it is waited for at once, so that an idle worker's
// positions are taken (and committed) without a next batch.
func TestPublishLoopIdleTakesThePositions(t *testing.T) {
	w, sink, src, batch := sendTest(t)
	queue := make(chan *outBatch)
	done := make(chan error, 1)
	go func() {
		_, err := w.publishLoop(t.Context(), queue)
		done <- err
	}()
	queue <- batch("a", 1, 1)
	if got := <-src.commits; got["s"] != 1 {
		t.Fatalf("committed %v, want s at 1", got)
	}
	close(queue)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"send a", "wait a"}; !slices.Equal(sink.events, want) {
		t.Fatalf("events %q, want %q", sink.events, want)
	}
}
