package consumer_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// gauge is the value of the gauge name with the labels (name, value
// pairs) in reg, and whether it is there.
func gauge(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	m := findMetric(t, reg, name, labels...)
	return m.GetGauge().GetValue(), m != nil
}

// counter is the value of the counter name with the labels (name, value
// pairs) in reg, and whether it is there.
func counter(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	m := findMetric(t, reg, name, labels...)
	return m.GetCounter().GetValue(), m != nil
}

// findMetric is the series of name with exactly the labels (name, value
// pairs) in reg; nil if there is none.
func findMetric(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels)/2 {
				continue
			}
			for _, l := range m.GetLabel() {
				found := false
				for i := 0; i+1 < len(labels); i += 2 {
					found = found || (labels[i] == l.GetName() && labels[i+1] == l.GetValue())
				}
				if !found {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// TestEpochsGaugesAfterAMix: after every epoch is mixed, the model gauges
// are the mixed model's (its version, rolling accuracy, probability
// measures and positions),
// not those of the last range learned, and each shard's range has its
// own gauges, labeled with the shard.
func TestEpochsGaugesAfterAMix(t *testing.T) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	reg := prometheus.NewRegistry()
	metrics := consumer.NewMetrics(reg)
	var x *consumer.Epochs
	mixed := 0
	cfg.Verify = func(ctx context.Context, e uint64, digest [32]byte) error {
		mixed++
		m := x.Model()
		check := func(name string, want float64) {
			if got, ok := gauge(t, reg, name); !ok || got != want {
				t.Errorf("after epoch %d is mixed, %s is %v (%v), the mixed model's is %v", e, name, got, ok, want)
			}
		}
		check("hyperplane_model_version", float64(m.Version()))
		check("hyperplane_served_model_version", float64(m.Version()))
		check("hyperplane_rolling_accuracy", m.Metrics().RollingAccuracy)
		check("hyperplane_epoch", float64(e))
		for name, want := range probabilityGauges(m.Metrics()) {
			check("hyperplane_"+name, want)
		}
		for shard, pos := range x.Positions() {
			if got, ok := gauge(t, reg, "hyperplane_position", "source", shard); !ok || got != float64(pos) {
				t.Errorf("after epoch %d is mixed, hyperplane_position{source=%q} is %v (%v), the mixed model's is %d", e, shard, got, ok, pos)
			}
		}
		return nil
	}
	m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
	if err != nil {
		t.Fatal(err)
	}
	x = consumer.NewEpochs(cfg, m, e, prev, pos, metrics, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	finalDigest(t, x, done, cancel, waitComplete(t, store, data))
	if mixed < 2 {
		t.Fatalf("%d epochs mixed, want several", mixed)
	}
	for p := range 6 {
		shard := data.Key(p)
		if v, ok := gauge(t, reg, "hyperplane_shard_model_version", "shard", shard); !ok || v == 0 {
			t.Errorf("hyperplane_shard_model_version{shard=%q} is %v (%v), want the version its last range reached", shard, v, ok)
		}
		if v, ok := gauge(t, reg, "hyperplane_shard_position", "shard", shard); !ok || v != float64(data.Len(p)) {
			t.Errorf("hyperplane_shard_position{shard=%q} is %v (%v), want the partition's end %d", shard, v, ok, data.Len(p))
		}
		if _, ok := gauge(t, reg, "hyperplane_shard_rolling_accuracy", "shard", shard); !ok {
			t.Errorf("no hyperplane_shard_rolling_accuracy{shard=%q}", shard)
		}
		for name := range probabilityGauges(learner.Metrics{}) {
			if _, ok := gauge(t, reg, "hyperplane_shard_"+name, "shard", shard); !ok {
				t.Errorf("no hyperplane_shard_%s{shard=%q}", name, shard)
			}
		}
	}
	if v, _ := gauge(t, reg, "hyperplane_log_loss"); !(v > 0) || math.IsInf(v, 0) {
		t.Errorf("hyperplane_log_loss %v after the last mix", v)
	}
}

// TestEpochsGaugesWhenIdleAfterARestart: a worker restarted over an
// idle log shows the epoch it holds and the shards it owns before any
// new data comes, not zeros.
func TestEpochsGaugesWhenIdleAfterARestart(t *testing.T) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	runEpochs(t, data, cfg, store)
	snap, err := store.Latest(context.Background(), "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	x := continueEpochs(t, snap, cfg, consumer.NewMetrics(reg), zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	}()
	wait.For(t, time.Minute, 5*time.Millisecond, "the shards owned while idle", func() bool {
		v, ok := gauge(t, reg, "hyperplane_epoch_shards_owned")
		return ok && v == 6
	})
	if v, ok := gauge(t, reg, "hyperplane_epoch"); !ok || v != float64(snap.Epoch) {
		t.Errorf("hyperplane_epoch is %v (%v) while idle, want %d, the epoch of the generation continued", v, ok, snap.Epoch)
	}
}

// TestPartitionsGaugesByShard: in partition scope each shard's model
// gauges (its probability gauges too) carry its label and describe its
// model; the unlabeled ones,
// which would describe one model, do not follow the shards; and a shard
// that is lost takes its gauges with it.
func TestPartitionsGaugesByShard(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	cfg := r.config(t, "a")
	own := newOwnership()
	all := map[string]string{}
	for p := range partitionShards {
		all[r.log.Key(p)] = "a"
	}
	own.set(all)
	cfg.Owned, cfg.Changed = own.owned("a"), own.changes
	reg := prometheus.NewRegistry()
	p := consumer.NewPartitions(cfg, consumer.NewMetrics(reg), zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, p)
	r.waitChains(t, map[string]<-chan error{"a": done})

	lost := r.log.Key(partitionShards - 1)
	kept := map[string]string{}
	for shard := range all {
		if shard != lost {
			kept[shard] = "a"
		}
	}
	own.set(kept)
	waitRunning(t, "the lost shard let go", map[string]<-chan error{"a": done}, func() bool { return p.View(shardOf(t, lost)) == nil })
	stopPartitions(t, "a", cancel, done)

	for _, name := range []string{"hyperplane_shard_model_version", "hyperplane_shard_rolling_accuracy", "hyperplane_shard_served_model_version"} {
		if v, ok := gauge(t, reg, name, "shard", lost); ok {
			t.Errorf("%s{shard=%q} is still %v after the shard was lost", name, lost, v)
		}
	}
	if v, ok := gauge(t, reg, "hyperplane_position", "source", lost); ok {
		t.Errorf("hyperplane_position{source=%q} is still %v after the shard was lost", lost, v)
	}
	for shard := range kept {
		m := p.Model(shardOf(t, shard))
		want := map[string]float64{
			"hyperplane_shard_model_version":        float64(m.Version()),
			"hyperplane_shard_rolling_accuracy":     m.Metrics().RollingAccuracy,
			"hyperplane_shard_served_model_version": float64(p.View(shardOf(t, shard)).Version()),
		}
		for name, w := range want {
			if got, ok := gauge(t, reg, name, "shard", shard); !ok || got != w {
				t.Errorf("%s{shard=%q} is %v (%v), its model's is %v", name, shard, got, ok, w)
			}
		}
		if got, ok := gauge(t, reg, "hyperplane_position", "source", shard); !ok || got != float64(p.Positions()[shard]) {
			t.Errorf("hyperplane_position{source=%q} is %v (%v), its model's is %d", shard, got, ok, p.Positions()[shard])
		}
	}
	for _, name := range []string{"hyperplane_model_version", "hyperplane_rolling_accuracy", "hyperplane_served_model_version"} {
		if got, _ := gauge(t, reg, name); got != 0 {
			t.Errorf("%s is %v in partition scope, where no one model serves", name, got)
		}
	}
	// The probability gauges follow the shards alike.
	for name := range probabilityGauges(learner.Metrics{}) {
		if v, ok := gauge(t, reg, "hyperplane_shard_"+name, "shard", lost); ok {
			t.Errorf("hyperplane_shard_%s{shard=%q} is still %v after the shard was lost", name, lost, v)
		}
		if v, _ := gauge(t, reg, "hyperplane_"+name); v != 0 {
			t.Errorf("hyperplane_%s is %v in partition scope, where no one model serves", name, v)
		}
	}
	for shard := range kept {
		mt := p.Model(shardOf(t, shard)).Metrics()
		if mt.LogLoss == 0 {
			t.Fatalf("shard %s measured no log-loss: %+v", shard, mt)
		}
		for name, want := range probabilityGauges(mt) {
			if got, ok := gauge(t, reg, "hyperplane_shard_"+name, "shard", shard); !ok || got != want {
				t.Errorf("hyperplane_shard_%s{shard=%q} is %v (%v), its model's is %v", name, shard, got, ok, want)
			}
		}
	}
}

// TestEpochsLogTheirMixes: the epochs log what they mix, summed over the
// epochs mixed within a few seconds (here, in a bubble where learning
// takes no time, the first epoch alone and then the rest at shutdown), and
// every generation they write.
func TestEpochsLogTheirMixes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		data := epochLog(600)
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		cfg := epochConfig(data, store, memory.NewSink(), "w")
		cfg.EpochExamples = 50
		core, logs := observer.New(zapcore.InfoLevel)
		m, e, prev, pos, err := consumer.Continue(nil, epochLearner(), cfg.ConfigDigest)
		if err != nil {
			t.Fatal(err)
		}
		x := consumer.NewEpochs(cfg, m, e, prev, pos, nil, zap.New(core))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.Run(ctx) }()
		finalDigest(t, x, done, cancel, waitComplete(t, store, data))

		lines := logs.FilterMessage("epochs mixed").All()
		var epochs, examples int64
		for i, l := range lines {
			f := l.ContextMap()
			for _, k := range []string{"epoch", "epochs", "examples", "shards", "barrier_wait", "mix_time", "rolling_accuracy"} {
				if _, ok := f[k]; !ok {
					t.Errorf("line %d %v has no %s", i, f, k)
				}
			}
			epochs += f["epochs"].(int64)
			examples += int64(f["examples"].(uint64))
		}
		if epochs != int64(x.Mixed()) || x.Mixed() < 10 {
			t.Errorf("the lines count %d epochs mixed, the worker mixed %d (want at least 10)", epochs, x.Mixed())
		}
		if want := x.Model().Metrics().Examples; examples != int64(want) {
			t.Errorf("the lines count %d examples, the model learned %d", examples, want)
		}
		if len(lines) != 2 || lines[0].ContextMap()["epoch"] != uint64(1) {
			t.Errorf("%d lines for %d epochs mixed at once, want the first epoch's, then the rest's at shutdown", len(lines), x.Mixed())
		}

		gens, err := store.Generations(context.Background(), "mixed")
		if err != nil {
			t.Fatal(err)
		}
		written := map[uint64]bool{}
		for _, l := range logs.FilterMessage("snapshot written").All() {
			written[l.ContextMap()["generation"].(uint64)] = true
		}
		for _, g := range gens {
			if !written[g] {
				t.Errorf("generation %d was written without a line (%v)", g, written)
			}
		}
		if len(written) != len(gens) {
			t.Errorf("%d generations logged, %d written", len(written), len(gens))
		}
	})
}
