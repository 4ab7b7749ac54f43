package consumer

import (
	"slices"
	"sync"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/prometheus/client_golang/prometheus"
)

// ChallengerMetrics are the measures of the model's challengers
// (learner.Model.Challengers) as the series of the model's own metrics,
// under the same names, with a model label naming the challenger:
// hyperplane_examples_total{model,result}, hyperplane_rolling_accuracy
// and the probability gauges (hyperplane_log_loss, ...,
// hyperplane_rolling_calibration_error) with {model}, and in partition
// scope hyperplane_shard_rolling_accuracy and the shard probability
// gauges with {shard,model}. The model's own series keep their names and
// labels. A challenger's counts are its model's since it started, which a
// restart restores.
//
// It is a prometheus.Collector that describes nothing (its series share
// their names with the model's), so register it on the registry of the
// model's metrics only.
type ChallengerMetrics struct {
	mu sync.Mutex
	// models are the challengers' measures as of their last batch, by
	// shard ("" for a model of one source) and then name, in order.
	models map[string][]challengerMeasures
	// mixed are the measures of the challengers of the newest mixed
	// model, by name, in order, once there is one (epochs, global
	// scope): then they are the unlabeled series and the counts, and
	// models' shards give only their shard series, since each range's
	// copy of a challenger starts from the mixed one's counts.
	mixed    []challengerMeasures
	hasMixed bool

	examples     *prometheus.Desc
	accuracy     *prometheus.Desc
	shardAcc     *prometheus.Desc
	probability  [8]*prometheus.Desc
	shardProb    [8]*prometheus.Desc
	probabilityF [8]func(*learner.Metrics) float64
}

type challengerMeasures struct {
	name    string
	metrics learner.Metrics
	// later holds the measures taken from the model (observeModel) while
	// pending: metrics is set from it when they are collected.
	later   learner.LaterMetrics
	pending bool
}

func newChallengerMetrics() *ChallengerMetrics {
	c := &ChallengerMetrics{
		models:   map[string][]challengerMeasures{},
		examples: prometheus.NewDesc("hyperplane_examples_total", examplesHelp, []string{"model", "result"}, nil),
		accuracy: prometheus.NewDesc("hyperplane_rolling_accuracy", rollingAccuracyHelp, []string{"model"}, nil),
		shardAcc: prometheus.NewDesc("hyperplane_shard_rolling_accuracy", shardRollingAccuracyHelp, []string{"shard", "model"}, nil),
		probabilityF: [8]func(*learner.Metrics) float64{
			func(m *learner.Metrics) float64 { return m.LogLoss },
			func(m *learner.Metrics) float64 { return m.RollingLogLoss },
			func(m *learner.Metrics) float64 { return m.Brier },
			func(m *learner.Metrics) float64 { return m.RollingBrier },
			func(m *learner.Metrics) float64 { return m.CalibrationError },
			func(m *learner.Metrics) float64 { return m.RollingCalibrationError },
			func(m *learner.Metrics) float64 { return m.AUC },
			func(m *learner.Metrics) float64 { return m.RollingAUC },
		},
	}
	// The same names and help as the model's gauges (newProbabilityGauges):
	// a family's series must agree on them.
	for i, d := range probabilityMeasures() {
		c.probability[i] = prometheus.NewDesc("hyperplane_"+d.name,
			d.help+", of the model that serves: with several partitions, the newest mixed model (0 in partition scope: see hyperplane_shard_"+d.name+").",
			[]string{"model"}, nil)
		c.shardProb[i] = prometheus.NewDesc("hyperplane_shard_"+d.name,
			d.help+", of each partition this worker learns: its own model in partition scope, its range's copy of the mixed model in global scope.",
			[]string{"shard", "model"}, nil)
	}
	return c
}

// Describe describes nothing: the series share their families with the
// model's metrics, which describe them (an unchecked collector).
func (c *ChallengerMetrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends every challenger's series.
func (c *ChallengerMetrics) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Counts of a challenger learned on several shards add up, as the
	// model's counters do.
	var counts []challengerMeasures
	if c.hasMixed {
		for i := range c.mixed {
			m := &c.mixed[i]
			c.collectModel(ch, m.name, &m.metrics)
			counts = append(counts, *m)
		}
	}
	for shard, ms := range c.models {
		for i := range ms {
			m := &ms[i]
			if m.pending {
				m.metrics, m.pending = m.later.Metrics(), false
			}
			mt := &m.metrics
			if shard == "" {
				c.collectModel(ch, m.name, mt)
			} else {
				ch <- prometheus.MustNewConstMetric(c.shardAcc, prometheus.GaugeValue, mt.RollingAccuracy, shard, m.name)
				for k, d := range c.shardProb {
					ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, c.probabilityF[k](mt), shard, m.name)
				}
			}
			if c.hasMixed {
				continue
			}
			j := slices.IndexFunc(counts, func(o challengerMeasures) bool { return o.name == m.name })
			if j < 0 {
				counts = append(counts, challengerMeasures{name: m.name})
				j = len(counts) - 1
			}
			t := &counts[j].metrics
			t.Examples += mt.Examples
			t.Labeled += mt.Labeled
			t.Mistakes += mt.Mistakes
		}
	}
	for _, m := range counts {
		mt := &m.metrics
		ch <- prometheus.MustNewConstMetric(c.examples, prometheus.CounterValue, float64(mt.Labeled-mt.Mistakes), m.name, "correct")
		ch <- prometheus.MustNewConstMetric(c.examples, prometheus.CounterValue, float64(mt.Mistakes), m.name, "mistake")
		ch <- prometheus.MustNewConstMetric(c.examples, prometheus.CounterValue, float64(mt.Examples-mt.Labeled), m.name, "unlabeled")
	}
}

// collectModel sends the unlabeled series of challenger name: its
// rolling accuracy and probability gauges.
func (c *ChallengerMetrics) collectModel(ch chan<- prometheus.Metric, name string, mt *learner.Metrics) {
	ch <- prometheus.MustNewConstMetric(c.accuracy, prometheus.GaugeValue, mt.RollingAccuracy, name)
	for k, d := range c.probability {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, c.probabilityF[k](mt), name)
	}
}

// observeMixed records the measures of the challengers of m, the newest
// mixed model, in place of those it recorded before.
func (c *ChallengerMetrics) observeMixed(m *learner.Model) {
	cs := m.Challengers()
	mixed := make([]challengerMeasures, len(cs))
	for i, ch := range cs {
		mixed[i] = challengerMeasures{name: ch.Name, metrics: ch.Model.Metrics()}
	}
	c.mu.Lock()
	c.mixed, c.hasMixed = mixed, true
	c.mu.Unlock()
}

// Observe records the measures mt of challenger model, learned on shard
// ("" for a model of one source), as of its last batch.
func (c *ChallengerMetrics) Observe(shard, model string, mt learner.Metrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := c.models[shard]
	if i := slices.IndexFunc(ms, func(m challengerMeasures) bool { return m.name == model }); i >= 0 {
		ms[i].metrics, ms[i].pending = mt, false
		return
	}
	c.models[shard] = append(ms, challengerMeasures{name: model, metrics: mt})
}

// observeModel is Observe of m's measures as of now, whose rolling AUC,
// the one that sorts the window, is computed only when they are
// collected: m is the challenger's model, which the caller owns.
func (c *ChallengerMetrics) observeModel(shard, name string, m *learner.Model) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := c.models[shard]
	i := slices.IndexFunc(ms, func(m challengerMeasures) bool { return m.name == name })
	if i < 0 {
		ms = append(ms, challengerMeasures{name: name})
		c.models[shard] = ms
		i = len(ms) - 1
	}
	m.MetricsLater(&ms[i].later)
	ms[i].pending = true
}

// drop removes shard's challengers, once it is no longer learned here.
func (c *ChallengerMetrics) drop(shard string) {
	c.mu.Lock()
	delete(c.models, shard)
	c.mu.Unlock()
}

// challengers records the measures of r's challengers (none if r is
// nil) after a batch, or as restored, and drops those of the shard's
// challengers r no longer has: a promotion mixed into the model that a
// range learns from (epochs) made one of them the model.
func (m *Metrics) challengers(r *rivals) {
	if r == nil {
		return
	}
	names := make([]string, r.live.Len())
	for i := range r.live.Len() {
		names[i] = r.live.Name(i)
		m.Challengers.observeModel(m.shard, names[i], r.live.Model(i))
	}
	m.Challengers.keep(m.shard, names)
}

// keep drops shard's challengers whose names are not among names.
func (c *ChallengerMetrics) keep(shard string, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ms, ok := c.models[shard]; ok {
		c.models[shard] = slices.DeleteFunc(ms, func(m challengerMeasures) bool { return !slices.Contains(names, m.name) })
	}
}
