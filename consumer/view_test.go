package consumer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap/zaptest"
)

// viewWorker is a worker over a one-partition memory log holding msgs.
func viewWorker(t *testing.T, cfg consumer.WorkerConfig, msgs [][]byte) (*consumer.Worker, *memory.Log) {
	t.Helper()
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 12
	model, err := learner.New(lcfg)
	if err != nil {
		t.Fatal(err)
	}
	log := memory.NewLog("views", 1)
	log.Append(0, msgs...)
	cfg.Model = "views"
	return consumer.NewWorker(cfg, memory.NewSource(log, nil), model, nil, nil, zaptest.NewLogger(t)), log
}

// TestWorkerPublishesViews: with views on and no interval, every batch
// publishes one; readers see versions that never go back, and the last
// view predicts as the final model does.
//
// The test hands the worker one batch at a time and waits until it has
// learned it: the view must then show the model as it is, whatever the
// machine's speed (watching a worker learn the whole stream at once could
// see only its first and last views).
func TestWorkerPublishesViews(t *testing.T) {
	const batch = 100
	msgs, _ := messages(3000)
	w, log := viewWorker(t, consumer.WorkerConfig{Views: true, Batch: batch}, nil)
	if w.View() == nil || w.View().Version() != 0 {
		t.Fatalf("before running: view %v, want one of the new model", w.View())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	seen := []uint64{0}
	for i := 0; i < len(msgs); i += batch {
		log.Append(0, msgs[i:i+batch]...)
		wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("the view of the batch ending at %d", i+batch), func() bool {
			return w.Positions()["memory:views/0"] == int64(i+batch) && w.View().Version() == w.Metrics().Updates
		})
		if v := w.View().Version(); v != seen[len(seen)-1] {
			seen = append(seen, v)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("view versions went back: %v", seen)
		}
	}
	// The perceptron makes mistakes in most batches of this stream, so
	// the views have many versions; a worker publishing none while it
	// learns would time out above.
	if len(seen) < 3 {
		t.Errorf("saw view versions %v: the views did not follow the batches", seen)
	}
	m := w.Model()
	v := w.View()
	if v.Version() != m.Version() {
		t.Fatalf("last view has version %d, the model %d", v.Version(), m.Version())
	}
	dec := wire.NewDecoder(m.Config(), wire.DecoderOptions{})
	var x learner.Example
	var s learner.Scratch
	for _, msg := range msgs[:200] {
		if _, err := dec.Decode(msg, &x); err != nil {
			continue
		}
		if got, want := v.Predict(&x, &s), m.Predict(&x); got.Label != want.Label || got.Score != want.Score {
			t.Fatalf("view predicts %+v, the model %+v", got, want)
		}
	}
}

// TestIdleStreamRefreshesTheView: when the stream stops, the view catches
// up with the model once the interval has passed, without a new batch.
func TestIdleStreamRefreshesTheView(t *testing.T) {
	msgs, _ := messages(500)
	w, log := viewWorker(t, consumer.WorkerConfig{Views: true, ViewInterval: time.Hour}, nil)
	// An hour would never pass: a worker with a short interval shows the
	// refresh, this one shows that nothing else refreshes the view.
	w2, log2 := viewWorker(t, consumer.WorkerConfig{Views: true, ViewInterval: 300 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- w.Run(ctx) }()
	go func() { done <- w2.Run(ctx) }()
	// Both get the same examples in one batch, well inside the interval.
	log.Append(0, msgs...)
	log2.Append(0, msgs...)
	wait.For(t, time.Minute, 5*time.Millisecond, "the short-interval view to catch up", func() bool {
		return w2.Metrics().Updates > 0 && w2.View().Version() == w2.Metrics().Updates
	})
	wait.For(t, time.Minute, 5*time.Millisecond, "the long-interval worker to learn", func() bool {
		return w.Positions()["memory:views/0"] == int64(len(msgs))
	})
	if w.Metrics().Updates == 0 || w.View().Version() != 0 {
		t.Fatalf("the model has %d updates, its view version %d: want a view still of the new model until the interval passes",
			w.Metrics().Updates, w.View().Version())
	}
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestViewsAreOffByDefault: a worker without Views publishes none and
// pays nothing for them.
func TestViewsAreOffByDefault(t *testing.T) {
	msgs, _ := messages(100)
	w, _ := viewWorker(t, consumer.WorkerConfig{}, msgs)
	if w.View() != nil {
		t.Fatal("a view without WorkerConfig.Views")
	}
}
