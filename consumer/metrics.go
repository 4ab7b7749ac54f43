package consumer

import (
	"maps"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Metrics are a worker's Prometheus metrics. Register them on a registry
// of your own with NewMetrics.
type Metrics struct {
	Examples        *prometheus.CounterVec // by result: correct, mistake, unlabeled, invalid
	Updates         prometheus.Counter
	RollingAccuracy prometheus.Gauge
	DecodeErrors    prometheus.Counter
	DeadLetters     *prometheus.CounterVec // by reason (see deadReason)
	Drifts          prometheus.Counter     // changes of concept the model's detector found
	Promotions      prometheus.Counter     // challengers that became the model
	PublishErrors   prometheus.Counter
	Position        *prometheus.GaugeVec // by source: the model's position
	Lag             *prometheus.GaugeVec // by source: messages behind, as the broker tells it
	BatchLatency    prometheus.Histogram // from fetch to outputs durable
	ModelVersion    prometheus.Gauge
	Snapshots       prometheus.Counter
	SnapshotErrors  prometheus.Counter
	LastSnapshot    prometheus.Gauge
	ServedVersion   prometheus.Gauge // the version of the view requests are answered from
	// Probability is the prequential quality of the probabilities the
	// model that serves published.
	Probability ProbabilityGauges

	// The epochs of a model learned over several partitions.
	Epoch         prometheus.Gauge     // the newest epoch mixed
	ShardsOwned   prometheus.Gauge     // the partitions this worker learns
	MissingShards prometheus.Gauge     // the results the barrier still waits for
	Barrier       prometheus.Histogram // time from a worker's last range to every result
	Mixing        prometheus.Histogram // time to read the results and mix them

	// The shards' own models, by shard: a range's copy of the mixed model
	// in global scope, each shard's model in partition scope. The
	// unlabeled model gauges describe the model that serves.
	ShardRollingAccuracy *prometheus.GaugeVec
	ShardModelVersion    *prometheus.GaugeVec
	ShardServedVersion   *prometheus.GaugeVec
	ShardPosition        *prometheus.GaugeVec // global scope: how far a range has been learned
	ShardProbability     ShardProbabilityGauges

	// Join is the join of labels that come later.
	Join JoinMetrics
	// Challengers are the measures of the model's challengers, by model
	// (the challenger's name): the metrics above that describe the model,
	// under the same names, with a model label.
	Challengers *ChallengerMetrics
	// shard is the shard whose own model a forShard copy describes.
	shard string

	// deadLetters are DeadLetters' counters by reason, looked up once.
	deadLetters [numReasons]prometheus.Counter
}

// The help of the metrics that challengers share (ChallengerMetrics).
const (
	examplesHelp             = "Examples processed, by result: correct, mistake (a labeled example predicted wrong) or unlabeled; messages that are not examples count in hyperplane_decode_errors_total."
	rollingAccuracyHelp      = "Prequential accuracy over the last window of labeled examples, of the model that serves: with several partitions, the newest mixed model (0 in partition scope: see hyperplane_shard_rolling_accuracy)."
	shardRollingAccuracyHelp = "Prequential accuracy over the last window of labeled examples of each partition this worker learns: its own model in partition scope, its range's copy of the mixed model in global scope."
)

// NewMetrics creates the metrics and registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Examples: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_examples_total",
			Help: examplesHelp,
		}, []string{"result"}),
		Updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_updates_total",
			Help: "Updates applied to the model.",
		}),
		RollingAccuracy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_rolling_accuracy",
			Help: rollingAccuracyHelp,
		}),
		DecodeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_decode_errors_total",
			Help: "Messages that were not valid examples.",
		}),
		DeadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_dead_letters_total",
			Help: "Dead letters, by reason: malformed, wrong_format (JSON read as msgpack or the reverse: see source.format), type, out_of_range, too_many_features, unknown_class, too_large (the example is; see source.max_bytes), output_too_large (the example was learned, its event is over the output's limit). Counted whether or not a dead-letter destination is set.",
		}, []string{"reason"}),
		Drifts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_drifts_total",
			Help: "Changes of concept the model's detector found (model.drift): each started the model's parameters afresh and published a drift event to outputs.drift. A partition's range learned again, after a rebalance or a restart, counts its drifts again.",
		}),
		Promotions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_promotions_total",
			Help: "Challengers that became the model (hyperplane promote, or model.compare.promote auto), each published as a promotion event to outputs.promotions. In partition scope, each partition's model counts its own.",
		}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_publish_errors_total",
			Help: "Failed attempts to publish a batch of outputs (each is retried).",
		}),
		Position: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_position",
			Help: "The model's position in each source partition or stream: the next Kafka offset, or the last JetStream sequence. With several partitions in global scope, the newest mixed model's (see hyperplane_shard_position).",
		}, []string{"source"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_lag",
			Help: "Messages not yet read in each source partition or stream, as the broker reports it. With several partitions, each one this worker learns: its end less the position learned (for a partitioned JetStream stream, the sequences between divided by the partitions, an estimate).",
		}, []string{"source"}),
		BatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hyperplane_batch_latency_seconds",
			Help:    "Time from fetching a batch of messages to its outputs being durable.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		ModelVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_model_version",
			Help: "Updates applied to the model since it was created: with several partitions, to the newest mixed model (0 in partition scope: see hyperplane_shard_model_version).",
		}),
		Snapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_snapshots_total",
			Help: "Snapshots of the model written.",
		}),
		SnapshotErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_snapshot_errors_total",
			Help: "Failed attempts to write a snapshot (each is retried).",
		}),
		LastSnapshot: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_last_snapshot_timestamp_seconds",
			Help: "When the newest snapshot this worker wrote became durable, in Unix seconds; 0 before the first.",
		}),
		ServedVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_model_version",
			Help: "Version of the live model that prediction requests are answered from (it trails hyperplane_model_version by at most serve.refresh); 0 while serving is off, and in partition scope (see hyperplane_shard_served_model_version).",
		}),
		Epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_epoch",
			Help: "The newest epoch whose mixed model this worker holds (a source of several partitions; 0 otherwise).",
		}),
		ShardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_epoch_shards_owned",
			Help: "Partitions this worker learns in the current epoch, as the consumer group assigns them.",
		}),
		MissingShards: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_epoch_missing_shards",
			Help: "Partitions whose result for the current epoch the barrier still waits for: a slow or lost owner holds everyone.",
		}),
		Barrier: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hyperplane_epoch_barrier_seconds",
			Help:    "Time an epoch waited at the barrier: from this worker's last range done to every partition's result in the store.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		Mixing: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hyperplane_epoch_mix_seconds",
			Help:    "Time to read an epoch's results from the store and mix them.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}),
		ShardRollingAccuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_shard_rolling_accuracy",
			Help: shardRollingAccuracyHelp,
		}, []string{"shard"}),
		ShardModelVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_shard_model_version",
			Help: "Updates applied to the model of each partition this worker learns: its own model in partition scope, its range's copy of the mixed model in global scope.",
		}, []string{"shard"}),
		ShardServedVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_shard_served_model_version",
			Help: "In partition scope, the version of each partition's live model that prediction requests are answered from.",
		}, []string{"shard"}),
		ShardPosition: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_shard_position",
			Help: "With several partitions in global scope, how far this worker has learned each partition's range of the current epoch: the next Kafka offset, or the last JetStream sequence.",
		}, []string{"shard"}),
	}
	m.Probability, m.ShardProbability = newProbabilityGauges()
	m.Join = newJoinMetrics()
	m.Challengers = newChallengerMetrics()
	// Every reason is there from the start, at 0, so that a rate over it
	// is defined before the first dead letter.
	for r := range numReasons {
		m.deadLetters[r] = m.DeadLetters.WithLabelValues(r.String())
	}
	// So is every result of the examples: HyperplaneNotConsuming takes
	// rate() over them, which over no series is no alert.
	for _, r := range []string{"correct", "mistake", "unlabeled"} {
		m.Examples.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Examples, m.Updates, m.RollingAccuracy, m.DecodeErrors, m.DeadLetters, m.Drifts, m.Promotions, m.PublishErrors, m.Position, m.Lag, m.BatchLatency, m.ModelVersion, m.Snapshots, m.SnapshotErrors, m.LastSnapshot, m.ServedVersion,
			m.Epoch, m.ShardsOwned, m.MissingShards, m.Barrier, m.Mixing,
			m.ShardRollingAccuracy, m.ShardModelVersion, m.ShardServedVersion, m.ShardPosition)
		for _, g := range m.Probability.all() {
			reg.MustRegister(g)
		}
		reg.MustRegister(m.ShardProbability.collectors()...)
		reg.MustRegister(m.Join.all()...)
		reg.MustRegister(m.Challengers)
	}
	return m
}

// forShard is the metrics of a worker that learns shard's own model
// beside the model that serves: its counters are m's, its model gauges
// (rolling accuracy, versions) the shard's, resolved once. In global
// scope (ranges) its positions are the shard's too, since the mixed
// model's are m's; in partition scope the shard's model is the one whose
// positions m reports.
func (m *Metrics) forShard(shard string, ranges bool) *Metrics {
	v := *m
	v.shard = shard
	v.RollingAccuracy = m.ShardRollingAccuracy.WithLabelValues(shard)
	v.Probability = m.ShardProbability.of(shard)
	v.ModelVersion = m.ShardModelVersion.WithLabelValues(shard)
	if ranges {
		v.Position = m.ShardPosition
	} else {
		v.ServedVersion = m.ShardServedVersion.WithLabelValues(shard)
	}
	return &v
}

// dropShard removes shard's own gauges, once it is no longer learned
// here.
func (m *Metrics) dropShard(shard string) {
	m.ShardRollingAccuracy.DeleteLabelValues(shard)
	m.ShardModelVersion.DeleteLabelValues(shard)
	m.ShardServedVersion.DeleteLabelValues(shard)
	m.ShardPosition.DeleteLabelValues(shard)
	m.ShardProbability.drop(shard)
	m.Challengers.drop(shard)
}

// observe records a batch: the model's counts before and after it and
// the positions it reached.
func (m *Metrics) observe(before learner.Counts, later *learner.LaterMetrics, resume map[string]int64) {
	after, _ := later.Known()
	labeled := after.Labeled - before.Labeled
	mistakes := after.Mistakes - before.Mistakes
	m.Examples.WithLabelValues("correct").Add(float64(labeled - mistakes))
	m.Examples.WithLabelValues("mistake").Add(float64(mistakes))
	m.Examples.WithLabelValues("unlabeled").Add(float64(after.Examples - before.Examples - labeled))
	m.Updates.Add(float64(after.Updates - before.Updates))
	m.RollingAccuracy.Set(after.RollingAccuracy)
	m.Probability.setLater(later)
	m.ModelVersion.Set(float64(after.Updates))
	for src, pos := range resume {
		m.Position.WithLabelValues(src).Set(float64(pos))
	}
}

// SetLag records the broker's view of the lag.
func (m *Metrics) SetLag(lag map[string]int64) {
	for src, n := range lag {
		m.Lag.WithLabelValues(src).Set(float64(n))
	}
}

// restored sets the gauges from a model as it was restored (or created):
// its version, its rolling accuracy, the quality of its probabilities and
// its positions.
func (m *Metrics) restored(mt learner.Metrics, positions map[string]int64) {
	m.RollingAccuracy.Set(mt.RollingAccuracy)
	m.Probability.set(&mt)
	m.ModelVersion.Set(float64(mt.Updates))
	for src, pos := range positions {
		m.Position.WithLabelValues(src).Set(float64(pos))
	}
}

// ProbabilityGauges are the prequential measures of a model's calibrated
// probabilities (see learner.Metrics), over every labeled example and over
// the last window of them, as gauges named like the accuracy's:
// hyperplane_log_loss, hyperplane_rolling_log_loss, and so on for brier,
// calibration_error and auc.
type ProbabilityGauges struct {
	LogLoss, RollingLogLoss                   prometheus.Gauge
	Brier, RollingBrier                       prometheus.Gauge
	CalibrationError, RollingCalibrationError prometheus.Gauge
	AUC, RollingAUC                           prometheus.Gauge
}

// ShardProbabilityGauges are ProbabilityGauges by shard, named
// hyperplane_shard_log_loss and so on, as ShardRollingAccuracy is.
type ShardProbabilityGauges struct {
	LogLoss, RollingLogLoss                   *prometheus.GaugeVec
	Brier, RollingBrier                       *prometheus.GaugeVec
	CalibrationError, RollingCalibrationError *prometheus.GaugeVec
	AUC, RollingAUC                           *prometheus.GaugeVec
	// rollingAUC is RollingAUC with its shards' pending values, which it
	// computes when collected.
	rollingAUC *laterVec
}

// probabilityMeasures are the probability gauges' names (without the
// prefix) and the first part of their help, in the order of the gauges'
// fields.
func probabilityMeasures() [8]struct{ name, help string } {
	return [...]struct{ name, help string }{
		{"log_loss", "Prequential log-loss (natural logarithm) of the calibrated probabilities over every labeled example"},
		{"rolling_log_loss", "Prequential log-loss (natural logarithm) of the calibrated probabilities over the last window of labeled examples"},
		{"brier", "Prequential Brier score of the calibrated probabilities over every labeled example"},
		{"rolling_brier", "Prequential Brier score of the calibrated probabilities over the last window of labeled examples"},
		{"calibration_error", "Expected calibration error (10 equal-width bins; the predicted class's probability for a multiclass model) over every labeled example"},
		{"rolling_calibration_error", "Expected calibration error (10 equal-width bins; the predicted class's probability for a multiclass model) over the last window of labeled examples"},
		{"auc", "Prequential ROC AUC of a binary model's probabilities over every labeled example, in 1,024 bins of the probability (0 for a multiclass model)"},
		{"rolling_auc", "Prequential ROC AUC of a binary model's probabilities over the last window of labeled examples, exact (0 for a multiclass model)"},
	}
}

func newProbabilityGauges() (ProbabilityGauges, ShardProbabilityGauges) {
	measures := probabilityMeasures()
	var g ProbabilityGauges
	var s ShardProbabilityGauges
	gs, ss := g.fields(), s.fields()
	for i, d := range measures {
		*gs[i] = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_" + d.name,
			Help: d.help + ", of the model that serves: with several partitions, the newest mixed model (0 in partition scope: see hyperplane_shard_" + d.name + ").",
		})
		*ss[i] = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hyperplane_shard_" + d.name,
			Help: d.help + ", of each partition this worker learns: its own model in partition scope, its range's copy of the mixed model in global scope.",
		}, []string{"shard"})
	}
	g.RollingAUC = &laterGauge{Gauge: g.RollingAUC}
	s.rollingAUC = &laterVec{GaugeVec: s.RollingAUC}
	return g, s
}

func (g *ProbabilityGauges) fields() []*prometheus.Gauge {
	return []*prometheus.Gauge{&g.LogLoss, &g.RollingLogLoss, &g.Brier, &g.RollingBrier,
		&g.CalibrationError, &g.RollingCalibrationError, &g.AUC, &g.RollingAUC}
}

func (g *ProbabilityGauges) all() []prometheus.Gauge {
	return []prometheus.Gauge{g.LogLoss, g.RollingLogLoss, g.Brier, g.RollingBrier,
		g.CalibrationError, g.RollingCalibrationError, g.AUC, g.RollingAUC}
}

// setLater sets the gauges from the model's metrics as l holds them: a
// pending rolling AUC is computed when its gauge is collected.
func (g *ProbabilityGauges) setLater(l *learner.LaterMetrics) {
	mt, _ := l.Known()
	g.setButRollingAUC(&mt)
	g.RollingAUC.(*laterGauge).setLater(l)
}

// set sets the gauges from the model's metrics.
func (g *ProbabilityGauges) set(mt *learner.Metrics) {
	g.setButRollingAUC(mt)
	g.RollingAUC.Set(mt.RollingAUC)
}

// setButRollingAUC is set but for the rolling AUC.
func (g *ProbabilityGauges) setButRollingAUC(mt *learner.Metrics) {
	g.LogLoss.Set(mt.LogLoss)
	g.RollingLogLoss.Set(mt.RollingLogLoss)
	g.Brier.Set(mt.Brier)
	g.RollingBrier.Set(mt.RollingBrier)
	g.CalibrationError.Set(mt.CalibrationError)
	g.RollingCalibrationError.Set(mt.RollingCalibrationError)
	g.AUC.Set(mt.AUC)
}

func (s *ShardProbabilityGauges) fields() []**prometheus.GaugeVec {
	return []**prometheus.GaugeVec{&s.LogLoss, &s.RollingLogLoss, &s.Brier, &s.RollingBrier,
		&s.CalibrationError, &s.RollingCalibrationError, &s.AUC, &s.RollingAUC}
}

func (s *ShardProbabilityGauges) all() []*prometheus.GaugeVec {
	return []*prometheus.GaugeVec{s.LogLoss, s.RollingLogLoss, s.Brier, s.RollingBrier,
		s.CalibrationError, s.RollingCalibrationError, s.AUC, s.RollingAUC}
}

// of is the gauges of shard, resolved once.
func (s *ShardProbabilityGauges) of(shard string) ProbabilityGauges {
	var g ProbabilityGauges
	gs := g.fields()
	for i, v := range s.all() {
		*gs[i] = v.WithLabelValues(shard)
	}
	g.RollingAUC = s.rollingAUC.of(shard)
	return g
}

// collectors are what a registry collects of s: the vectors, RollingAUC
// through rollingAUC.
func (s *ShardProbabilityGauges) collectors() []prometheus.Collector {
	var cs []prometheus.Collector
	for _, v := range s.all() {
		if v == s.RollingAUC {
			cs = append(cs, s.rollingAUC)
			continue
		}
		cs = append(cs, v)
	}
	return cs
}

// drop removes shard's series.
func (s *ShardProbabilityGauges) drop(shard string) {
	s.rollingAUC.drop(shard)
	for _, v := range s.all() {
		v.DeleteLabelValues(shard)
	}
}

// laterGauge is a gauge whose value may wait until it is collected: the
// rolling AUC, which sorts the window's probabilities, is computed once a
// scrape rather than after every batch a worker learns.
type laterGauge struct {
	prometheus.Gauge

	mu      sync.Mutex
	later   learner.LaterMetrics
	pending bool
}

// Set sets the gauge to v, dropping a pending value.
func (g *laterGauge) Set(v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = false
	g.Gauge.Set(v)
}

// setLater makes l's rolling AUC the gauge's value, computed when the
// gauge is collected if l has not computed it.
func (g *laterGauge) setLater(l *learner.LaterMetrics) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if mt, pending := l.Known(); !pending {
		g.pending = false
		g.Gauge.Set(mt.RollingAUC)
		return
	}
	g.later.Set(l)
	g.pending = true
}

// resolve computes a pending value.
func (g *laterGauge) resolve() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending {
		g.Gauge.Set(g.later.Metrics().RollingAUC)
		g.pending = false
	}
}

// Collect collects the gauge, its pending value computed first.
func (g *laterGauge) Collect(ch chan<- prometheus.Metric) {
	g.resolve()
	g.Gauge.Collect(ch)
}

// Write writes the gauge, its pending value computed first.
func (g *laterGauge) Write(m *dto.Metric) error {
	g.resolve()
	return g.Gauge.Write(m)
}

// laterVec is a gauge vector by shard whose series are laterGauges.
type laterVec struct {
	*prometheus.GaugeVec

	mu     sync.Mutex
	shards map[string]*laterGauge
}

// of is shard's gauge, made once.
func (v *laterVec) of(shard string) *laterGauge {
	v.mu.Lock()
	defer v.mu.Unlock()
	g := v.shards[shard]
	if g == nil {
		if v.shards == nil {
			v.shards = map[string]*laterGauge{}
		}
		g = &laterGauge{Gauge: v.WithLabelValues(shard)}
		v.shards[shard] = g
	}
	return g
}

// drop forgets shard's gauge.
func (v *laterVec) drop(shard string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.shards, shard)
}

// Collect collects the vector, the pending values of its series computed
// first.
func (v *laterVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	gs := slices.Collect(maps.Values(v.shards))
	v.mu.Unlock()
	for _, g := range gs {
		g.resolve()
	}
	v.GaugeVec.Collect(ch)
}
