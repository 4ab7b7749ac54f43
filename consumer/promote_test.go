package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// promotedRun resumes the challenged model from store, its challengers
// as Resume says, and learns the log to its end; it returns the worker,
// stopped, and the promotions counted.
func promotedRun(t *testing.T, in *memory.Log, store *snapshot.Store, sink *memory.Sink, log *zap.Logger) (*consumer.Worker, float64) {
	t.Helper()
	ctx := context.Background()
	base, challengers := challengedConfig()
	res, err := snapshot.Resume(ctx, store, "m", base, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log, Challengers: challengers})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := res.Model.SetChallengers(res.Challengers); err != nil {
		t.Fatal(err)
	}
	cfg := consumer.WorkerConfig{
		Model:         "m",
		Predictions:   consumer.Destination{Sink: sink, Topic: "pred"},
		Promotions:    consumer.Destination{Sink: sink, Topic: "promotions"},
		Snapshots:     res.Snapshotter,
		SnapshotEvery: 300,
		Batch:         50,
	}
	metrics := consumer.NewMetrics(prometheus.NewRegistry())
	w := consumer.NewWorker(cfg, memory.NewSource(in, res.Positions), res.Model, res.Positions, metrics, log)
	learnLog(t, w, in)
	return w, testutil.ToFloat64(metrics.Promotions)
}

// learnLog runs w until it has published every message of in, then
// stops it.
func learnLog(t *testing.T, w *consumer.Worker, in *memory.Log) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait.For(t, time.Minute, 5*time.Millisecond, "the worker to learn the log", func() bool {
		return w.Published()[in.Key(0)] >= int64(in.Len(0))
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestWorkerPromotes: a request naming a challenger the model does not
// have is refused once, naming it; one naming a challenger of another
// hashing makes it the model after the first example the worker learns:
// its decoder follows, the old model is a challenger named m, the
// promotion is counted and published, and the resumed worker, the
// configuration unchanged, applies the request no second time.
func TestWorkerPromotes(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	in := challengedLog(1200)
	if err := store.RequestPromotion(ctx, "m", snapshot.NewPromotionRequest("gone", time.Now())); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	sink := memory.NewSink()
	w, n := promotedRun(t, in, store, sink, zap.New(core))
	refused := logs.FilterMessage("promotion refused: the model has no such challenger").All()
	if len(refused) != 1 || refused[0].ContextMap()["challenger"] != "gone" {
		t.Fatalf("refusals logged: %v", refused)
	}
	if n != 0 || len(w.Model().Promotions()) != 0 || len(sink.Outputs("promotions")) != 0 {
		t.Fatalf("a refused request promoted: %v counted, history %v", n, w.Model().Promotions())
	}

	r := snapshot.NewPromotionRequest("bits13", time.Now())
	if err := store.RequestPromotion(ctx, "m", r); err != nil {
		t.Fatal(err)
	}
	// The same log, 600 examples longer.
	at := in.Len(0)
	in = challengedLog(1800)
	core, logs = observer.New(zap.InfoLevel)
	w, n = promotedRun(t, in, store, sink, zap.New(core))
	if read := logs.FilterMessage("promotion request read: it takes effect after the next example the model learns").All(); len(read) != 1 || read[0].ContextMap()["request"] != r.ID {
		t.Fatalf("reading the request logged %v, want it once with its id", read)
	}
	ps := w.Model().Promotions()
	if n != 1 || len(ps) != 1 || ps[0].Challenger != "bits13" || ps[0].Replaced != "m" || ps[0].Request != r.ID || ps[0].Offset < int64(at) {
		t.Fatalf("counted %v, history %+v; want bits13 promoted after an offset from %d on", n, ps, at)
	}
	if got := w.Model().Config().HashBits; got != 13 {
		t.Fatalf("the model hashes into %d bits, want the promoted challenger's 13", got)
	}
	// Every example after the promotion's (every 97th message is not
	// one) is learned by the promoted model, decoded with its hashing.
	var after uint64
	for i := ps[0].Offset + 1; i < int64(in.Len(0)); i++ {
		if i%97 != 96 {
			after++
		}
	}
	if learned := w.Model().Counts().Examples - ps[0].Examples; learned != after {
		t.Fatalf("the promoted model learned %d examples after the promotion at %d, want %d", learned, ps[0].Offset, after)
	}
	var names []string
	for _, c := range w.Model().Challengers() {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "perceptron,m,seed7,bits13-pa1" {
		t.Fatalf("challengers after the promotion: %v", names)
	}
	events := sink.Outputs("promotions")
	if len(events) != 1 || !strings.Contains(string(events[0].Value), `"promoted":"bits13"`) || string(events[0].Key) != fmt.Sprintf("%s/%d#promotion", in.Key(0), ps[0].Offset) {
		t.Fatalf("promotion events %+v", events)
	}

	core, logs = observer.New(zap.InfoLevel)
	w, n = promotedRun(t, in, store, sink, zap.New(core))
	if read := logs.FilterMessage("promotion request read: it takes effect after the next example the model learns").All(); len(read) != 0 {
		t.Fatalf("a resumed worker logged the request its history holds as read: %v", read)
	}
	if n != 0 || len(w.Model().Promotions()) != 1 || w.Model().Config().HashBits != 13 {
		t.Fatalf("resumed: %v promotions counted, history %+v", n, w.Model().Promotions())
	}
	if w.Model().Config().Algorithm != learner.AROW {
		t.Fatal("the resumed model is not the promoted challenger's configuration")
	}
}

// TestWorkerPromotesANarrowerChallenger: a challenger of fewer hash_bits
// than the model refuses an example whose dense part is longer than its
// dimension, which the model learns. Learning fewer examples than the
// model since a request for it does not make it a challenger started
// anew: the request makes it the model.
func TestWorkerPromotesANarrowerChallenger(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	base := learner.DefaultConfig()
	base.HashBits = 12
	narrow := base
	narrow.HashBits = 11
	challengers := []learner.ChallengerConfig{{Name: "bits11", Config: narrow}}
	run := func(in *memory.Log) *consumer.Worker {
		t.Helper()
		res, err := snapshot.Resume(ctx, store, "m", base, snapshot.ResumeOptions{Writer: "w", Keep: 100, Challengers: challengers})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := res.Model.SetChallengers(res.Challengers); err != nil {
			t.Fatal(err)
		}
		cfg := consumer.WorkerConfig{Model: "m", Snapshots: res.Snapshotter, SnapshotEvery: 300, Batch: 50}
		w := consumer.NewWorker(cfg, memory.NewSource(in, res.Positions), res.Model, res.Positions, consumer.NewMetrics(prometheus.NewRegistry()), zap.NewNop())
		learnLog(t, w, in)
		return w
	}
	in := challengedLog(600)
	run(in)

	// The request, as hyperplane promote writes it.
	s, err := store.Latest(ctx, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := snapshot.NewPromotionRequest("bits11", time.Now())
	r.Counts = s.ExampleCounts("m")
	r.Examples = r.Counts["bits11"]
	if err := store.RequestPromotion(ctx, "m", r); err != nil {
		t.Fatal(err)
	}
	// The model's dimension is 4096, the challenger's 2048.
	dense := []byte(`{"label":1,"x":[` + strings.Repeat("0.01,", 2999) + `0.01]}`)
	in.Append(0, dense, dense)
	w := run(in)
	if ps := w.Model().Promotions(); len(ps) != 1 || ps[0].Challenger != "bits11" || ps[0].Request != r.ID {
		t.Fatalf("history %+v: the request for bits11 did not make it the model", ps)
	}
}
