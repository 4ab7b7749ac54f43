package consumer

import "github.com/prometheus/client_golang/prometheus"

// JoinMetrics are the metrics of the join of labels that come later
// (docs/labels.md, section 7): zero without labels.
type JoinMetrics struct {
	Labels                *prometheus.CounterVec // by outcome: joined, late, unknown, duplicate
	Expired               prometheus.Counter
	Pending               prometheus.Gauge
	Delay                 prometheus.Histogram
	Marks                 prometheus.Counter
	ServedAccuracy        prometheus.Gauge
	ServedLogLoss         prometheus.Gauge
	RollingServedAccuracy prometheus.Gauge
	RollingServedLogLoss  prometheus.Gauge

	outcomes [labelOutcomes]prometheus.Counter
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
		Delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hyperplane_label_delay_seconds",
			Help:    "Time from an example to its label, on the records' own times, of the labels that joined.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 24),
		}),
		Marks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hyperplane_label_marks_written_total",
			Help: "Marks this worker appended to the labels' input to close the windows of a quiet one (docs/labels.md, section 5).",
		}),
		ServedAccuracy: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_accuracy",
			Help: "Accuracy of the predictions as they were published, scored when their labels joined: the accuracy users experienced (see hyperplane_rolling_accuracy for the prequential one).",
		}),
		ServedLogLoss: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hyperplane_served_log_loss",
			Help: "Mean log-loss of the probabilities as they were published, scored when their labels joined.",
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
	return m
}

func (m *JoinMetrics) all() []prometheus.Collector {
	return []prometheus.Collector{m.Labels, m.Expired, m.Pending, m.Delay, m.Marks,
		m.ServedAccuracy, m.ServedLogLoss, m.RollingServedAccuracy, m.RollingServedLogLoss}
}

// restored counts what a join restored from a snapshot had counted, so
// that the counters go on from there.
func (m *JoinMetrics) restored(c JoinCounts) {
	for o := range labelOutcomes {
		m.outcomes[o].Add(float64(c.Labels[o]))
	}
	m.Expired.Add(float64(c.Expired))
	m.served(c)
}

func (m *JoinMetrics) served(c JoinCounts) {
	if c.Served > 0 {
		m.ServedAccuracy.Set(float64(c.ServedCorrect) / float64(c.Served))
		m.ServedLogLoss.Set(c.ServedLogLoss / float64(c.Served))
	}
}
