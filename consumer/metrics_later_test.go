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
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	l, want := laterModel(t, 1, 3000)
	if want.RollingAUC <= 0.5 {
		t.Fatalf("the model's rolling AUC is %v", want.RollingAUC)
	}
	m.Probability.setLater(l)
	shard := m.forShard("kafka:clicks/0", true)
	sl, swant := laterModel(t, 2, 2000)
	shard.Probability.setLater(sl)
	if got, ok := gathered(t, reg, "hyperplane_rolling_auc", ""); !ok || math.Float64bits(got) != math.Float64bits(want.RollingAUC) {
		t.Errorf("hyperplane_rolling_auc is %v (%v), the model's is %v", got, ok, want.RollingAUC)
	}
	if got, ok := gathered(t, reg, "hyperplane_shard_rolling_auc", "kafka:clicks/0"); !ok || math.Float64bits(got) != math.Float64bits(swant.RollingAUC) {
		t.Errorf("hyperplane_shard_rolling_auc is %v (%v), the shard's model's is %v", got, ok, swant.RollingAUC)
	}
	if got := testutil.ToFloat64(m.Probability.RollingAUC); got != want.RollingAUC {
		t.Errorf("the gauge alone reads %v, the model's is %v", got, want.RollingAUC)
	}

	// Set at once over a pending value.
	l, _ = laterModel(t, 3, 1500)
	m.Probability.setLater(l)
	restored := learner.Metrics{RollingAUC: 0.625}
	m.Probability.set(&restored)
	if got, _ := gathered(t, reg, "hyperplane_rolling_auc", ""); got != 0.625 {
		t.Errorf("hyperplane_rolling_auc is %v after a restored model's 0.625 replaced a pending value", got)
	}

	m.dropShard("kafka:clicks/0")
	if v, ok := gathered(t, reg, "hyperplane_shard_rolling_auc", "kafka:clicks/0"); ok {
		t.Errorf("hyperplane_shard_rolling_auc of a dropped shard is still %v", v)
	}
	if n := len(m.ShardProbability.rollingAUC.shards); n != 0 {
		t.Errorf("%d shards' pending rolling AUCs kept after the shard was dropped", n)
	}
}

// gathered is the value of the series of name that reg gathers, of shard
// ("" for a series without labels).
func gathered(t *testing.T, reg prometheus.Gatherer, name, shard string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := m.GetLabel()
			if (shard == "" && len(labels) == 0) || (len(labels) == 1 && labels[0].GetValue() == shard) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}
