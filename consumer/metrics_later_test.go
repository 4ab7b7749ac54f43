package consumer

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// laterModel is a binary model that learned n synthetic examples, and
// its measures taken later (pending) and now.
func laterModel(t *testing.T, seed uint64, n int) (*learner.LaterMetrics, learner.Metrics) {
	t.Helper()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 12
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled, o.Vocab = seed, 0, 500
	s := synth.New(o)
	d := wire.NewDecoder(cfg, wire.DecoderOptions{})
	var x learner.Example
	for range n {
		if _, err := d.Decode(synth.AppendJSON(nil, s.Next()), &x); err != nil {
			t.Fatal(err)
		}
		m.Learn(&x)
	}
	var l learner.LaterMetrics
	m.MetricsLater(&l)
	if _, pending := l.Known(); !pending {
		t.Fatal("the rolling AUC is not pending")
	}
	return &l, m.Metrics()
}

// TestRollingAUCGauges: the rolling AUC that a worker records after a
// batch is computed when its gauge is collected, the model's own or a
// shard's, and reads the model's, to the bit; a value set at once (a
// restored model's) replaces one still pending; a dropped shard's series
// is gone.
func TestRollingAUCGauges(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	l, want := laterModel(t, 1, 3000)
	if want.RollingAUC <= 0.5 {
		t.Fatalf("the model's rolling AUC is %v", want.RollingAUC)
	}
	m.Probability.setLater(l)
	shard := m.forShard("kafka:clicks/0", true)
	sl, swant := laterModel(t, 2, 2000)
	shard.Probability.setLater(sl)
	// What the registry collects: the model's gauge, and the shards'
	// through their vector.
	if got := testutil.ToFloat64(m.Probability.RollingAUC); math.Float64bits(got) != math.Float64bits(want.RollingAUC) {
		t.Errorf("hyperplane_rolling_auc is %v, the model's is %v", got, want.RollingAUC)
	}
	if got := testutil.ToFloat64(m.ShardProbability.rollingAUC); math.Float64bits(got) != math.Float64bits(swant.RollingAUC) {
		t.Errorf("hyperplane_shard_rolling_auc is %v, the shard's model's is %v", got, swant.RollingAUC)
	}

	// Set at once over a pending value.
	l, _ = laterModel(t, 3, 1500)
	m.Probability.setLater(l)
	restored := learner.Metrics{RollingAUC: 0.625}
	m.Probability.set(&restored)
	if got := testutil.ToFloat64(m.Probability.RollingAUC); got != 0.625 {
		t.Errorf("hyperplane_rolling_auc is %v after a restored model's 0.625 replaced a pending value", got)
	}

	m.dropShard("kafka:clicks/0")
	if n := testutil.CollectAndCount(m.ShardProbability.rollingAUC); n != 0 {
		t.Errorf("%d hyperplane_shard_rolling_auc series after the only shard was dropped", n)
	}
	if n := len(m.ShardProbability.rollingAUC.shards); n != 0 {
		t.Errorf("%d shards' pending rolling AUCs kept after the shard was dropped", n)
	}
}
