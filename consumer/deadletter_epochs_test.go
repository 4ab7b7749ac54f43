package consumer_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"
)

// TestEpochsWarnOncePerShard: learned in epochs, a shard is read by a new
// worker for every range; its run of dead letters goes on from one to the
// next, so that a wrong source.format is warned about once, not once per
// epoch.
func TestEpochsWarnOncePerShard(t *testing.T) {
	log := memory.NewLog("ex", 2)
	for p := range 2 {
		log.Append(p, examples(wire.FormatJSON, 600)...)
	}
	sink := memory.NewSink()
	cfg := consumer.EpochConfig{
		Worker: consumer.WorkerConfig{
			Model:      "mixed",
			DeadLetter: consumer.Destination{Sink: sink, Topic: "dead"},
			Format:     wire.FormatMsgpack,
			Batch:      64,
		},
		Shards:        log,
		Log:           epochlog.New(snapshot.NewStore(memblob.OpenBucket(nil), "")),
		Writer:        "one",
		ConfigDigest:  sha256.Sum256([]byte("history")),
		EpochExamples: 150,
		Interval:      20 * time.Millisecond,
		Weights:       learner.MixExamples,
		Start:         wire.Start{Kind: wire.StartEarliest},
	}
	lcfg := learner.DefaultConfig()
	lcfg.HashBits = 12
	m, e, prev, pos, err := consumer.Continue(nil, lcfg, cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	metrics := consumer.NewMetrics(prometheus.NewRegistry())
	x := consumer.NewEpochs(cfg, m, e, prev, pos, metrics, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	// Each range of 150 messages is read by a worker of its own; every
	// message is a dead letter, counted as it is read.
	wait.For(t, time.Minute, 5*time.Millisecond, "1200 wrong_format dead letters", func() bool {
		return testutil.ToFloat64(metrics.DeadLetters.WithLabelValues("wrong_format")) >= 1200
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := logs.FilterMessageSnippet("source.format").All()
	shards := map[any]int{}
	for _, w := range got {
		shards[w.ContextMap()["shard"]]++
	}
	if len(got) != 2 || shards[log.Key(0)] != 1 || shards[log.Key(1)] != 1 {
		t.Fatalf("warnings %v, want one for each shard", got)
	}
	if n := testutil.ToFloat64(metrics.DeadLetters.WithLabelValues("wrong_format")); n != 1200 {
		t.Fatalf("hyperplane_dead_letters_total{reason=wrong_format} = %v, want 1200", n)
	}
}
