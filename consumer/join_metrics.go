package consumer

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// JoinMetrics are the metrics of the join of labels that come later
// (docs/labels.md, section 7): zero without labels.
type JoinMetrics struct {
	Labels                *prometheus.CounterVec // by outcome: joined, late, unknown, duplicate
	Expired               prometheus.Counter
	Pending               prometheus.Gauge
	Held                  prometheus.Gauge
	Delay                 prometheus.Histogram
	Marks                 prometheus.Counter
	Future                *prometheus.CounterVec // by input: examples, labels
	Untimed               *prometheus.CounterVec // by input: examples, labels
	Reused                prometheus.Counter
	ServedAccuracy        prometheus.Gauge
	ServedLogLoss         prometheus.Gauge
	RollingServedAccuracy prometheus.Gauge
	RollingServedLogLoss  prometheus.Gauge

	outcomes [labelOutcomes]prometheus.Counter
	// futureExamples and futureLabels are Future's two series,
	// untimedExamples and untimedLabels Untimed's.
	futureExamples, futureLabels   prometheus.Counter
	untimedExamples, untimedLabels prometheus.Counter
	// totals is shared by the copies of the metrics that the joins of one
	// process use (one a partition in partition scope, one a head in
	// epochs).
	totals *joinTotals
}

// joinTotals is what the joins of a process have counted, by the shard of
// examples each joins, so that the counters and gauges are sums over
// shards: a join that starts again from a snapshot, here or after another
// worker, adds only what this process has not counted yet.
type joinTotals struct {
	mu     sync.Mutex
	shards map[string]*joinShard
	// The last rollingServed served scores of every join here.
	rolling     [rollingServed]struct{ correct, loss float64 }
	rollingNext int
	rollingN    int
	rollingSum  struct{ correct, loss float64 }
}

type joinShard struct {
	counted       JoinCounts // the most of each count the counters include
	pending, held int
}

func newJoinMetrics() JoinMetrics {
	m := JoinMetrics{
		Labels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_labels_total",
			Help: "Records of the labels' input (labels.*), by outcome: joined (the label of its example), late (after its example's window closed), unknown (for no example read within a window of it), duplicate (its example had joined an earlier label).",
		}, []string{"outcome"}),
		Expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_examples_expired_total",
			Help: "Examples whose window (labels.window) closed without a label: learned with labels.default, or not learned without one.",
		}),
		Pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_join_pending",
			Help: "Examples predicted and waiting for their labels, or for the examples before them, to be learned.",
		}),
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_join_held_labels",
			Help: "Labels read and held for examples not read yet: a label before its example, one for an id no example has, or one more than two windows after its example (which is forgotten by then), until the examples' watermark passes its time plus labels.window. labels.max_pending does not bound them while the labels' watermark is within a window of the examples'.",
		}),
		Delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hyperplane_label_delay_seconds",
			Help:    "Time from an example to its label, on the records' own times, of the labels that joined.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 24),
		}),
		Marks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_label_marks_written_total",
			Help: "Marks this worker appended to the labels' input to close the windows of a quiet one (docs/labels.md, section 5).",
		}),
		Future: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_join_future_records_total",
			Help: "Records of the join's inputs stamped more than labels.window ahead of this worker's clock, by input (examples, labels): each moves its input's watermark there, closing windows early (docs/labels.md, section 8).",
		}, []string{"input"}),
		Untimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_join_untimed_records_total",
			Help: "Records of the join's inputs without a time (a Kafka timestamp of -1 or 0), by input (examples, labels): the join takes each as stamped before every other record (docs/labels.md, section 8).",
		}, []string{"input"}),
		Reused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_join_reused_ids_total",
			Help: "Delayed examples this process read whose id an earlier example the join still held has (pending, or decided within two windows): labels join the earliest, so these are learned with labels.default or not at all (docs/labels.md, section 2).",
		}),
		ServedAccuracy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_accuracy",
			Help: "Accuracy of the predictions as they were published, scored when their labels joined: the accuracy users experienced (see hyperplane_rolling_accuracy for the prequential one).",
		}),
		ServedLogLoss: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_log_loss",
			Help: "Mean log-loss of the probabilities as they were published, scored when their labels joined; for a multiclass model a lower bound (a wrong prediction is scored by the mass its predicted class left to the others).",
		}),
		RollingServedAccuracy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_rolling_accuracy",
			Help: "hyperplane_served_accuracy over the last 1,000 labels that joined.",
		}),
		RollingServedLogLoss: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_rolling_log_loss",
			Help: "hyperplane_served_log_loss over the last 1,000 labels that joined.",
		}),
	}
	for o := range labelOutcomes {
		m.outcomes[o] = m.Labels.WithLabelValues(o.String())
	}
	m.futureExamples, m.futureLabels = m.Future.WithLabelValues("examples"), m.Future.WithLabelValues("labels")
	m.untimedExamples, m.untimedLabels = m.Untimed.WithLabelValues("examples"), m.Untimed.WithLabelValues("labels")
	m.totals = &joinTotals{shards: map[string]*joinShard{}}
	return m
}

func (m *JoinMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.Labels, m.Expired, m.Pending, m.Held, m.Delay, m.Marks, m.Future, m.Untimed, m.Reused,
		m.ServedAccuracy, m.ServedLogLoss, m.RollingServedAccuracy, m.RollingServedLogLoss}
}

// observe records the counts, the pending examples and the held labels
// of shard's join:
// each counter grows by what the join has counted beyond the most this
// process counted for shard, and the served accuracy and log-loss are
// over every shard's served predictions. A join resumed in this process
// from an older snapshot scores again predictions served before, maybe
// otherwise (a prediction is the model's of the moment it was served):
// its measures take the place of the run's before once it has scored as
// many.
func (m *JoinMetrics) observe(shard string, c JoinCounts, pending, held int) {
	t := m.totals
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.shards[shard]
	if s == nil {
		s = &joinShard{}
		t.shards[shard] = s
	}
	for o := range labelOutcomes {
		if n, was := c.Labels[o], s.counted.Labels[o]; n > was {
			m.outcomes[o].Add(float64(n - was))
			s.counted.Labels[o] = n
		}
	}
	if c.Expired > s.counted.Expired {
		m.Expired.Add(float64(c.Expired - s.counted.Expired))
		s.counted.Expired = c.Expired
	}
	if c.Served >= s.counted.Served {
		s.counted.Served, s.counted.ServedCorrect, s.counted.ServedLogLoss = c.Served, c.ServedCorrect, c.ServedLogLoss
	}
	s.pending, s.held = pending, held
	m.setSums()
}

// stopped records that shard's join no longer runs here: nothing of it
// is pending in this process. What its counters counted stays counted.
func (m *JoinMetrics) stopped(shard string) {
	t := m.totals
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.shards[shard]; s != nil {
		s.pending, s.held = 0, 0
		m.setSums()
	}
}

// setSums sets the gauges to the sums over shards; totals.mu is held.
func (m *JoinMetrics) setSums() {
	t := m.totals
	var served, correct uint64
	var loss float64
	n, held := 0, 0
	for _, s := range t.shards {
		served, correct, loss = served+s.counted.Served, correct+s.counted.ServedCorrect, loss+s.counted.ServedLogLoss
		n, held = n+s.pending, held+s.held
	}
	if served > 0 {
		m.ServedAccuracy.Set(float64(correct) / float64(served))
		m.ServedLogLoss.Set(loss / float64(served))
	}
	m.Pending.Set(float64(n))
	m.Held.Set(float64(held))
}

// scored adds a served prediction's score to the rolling gauges.
func (m *JoinMetrics) scored(correct bool, loss float64) {
	t := m.totals
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &t.rolling[t.rollingNext]
	t.rollingSum.correct -= r.correct
	t.rollingSum.loss -= r.loss
	r.correct, r.loss = 0, loss
	if correct {
		r.correct = 1
	}
	t.rollingSum.correct += r.correct
	t.rollingSum.loss += r.loss
	t.rollingNext = (t.rollingNext + 1) % rollingServed
	t.rollingN = min(t.rollingN+1, rollingServed)
	m.RollingServedAccuracy.Set(t.rollingSum.correct / float64(t.rollingN))
	m.RollingServedLogLoss.Set(t.rollingSum.loss / float64(t.rollingN))
}
