package learner

// LaterMetrics are a model's Metrics as of the moment Model.MetricsLater
// took them, but for the rolling AUC of a binary model, which sorts the
// window's probabilities and is computed only when Metrics is called: a
// worker records its challengers' measures after every batch and exports
// them far less often. The zero value holds the Metrics of a new model.
type LaterMetrics struct {
	m Metrics
	// pos and neg are the window's probabilities of positive and of
	// negative examples, unsorted while pending.
	pos, neg []float64
	pending  bool
}

// MetricsLater sets l to m's Metrics as of now, reusing l's space. Its
// Metrics are those Model.Metrics returns now, to the bit.
func (m *Model) MetricsLater(l *LaterMetrics) {
	p := &m.metrics
	q := &p.prob
	n := q.stream.Count()
	if n == 0 || q.aucPositive == nil || (q.cached && q.cachedAt == n) {
		l.m, l.pending = p.snapshot(), false
		return
	}
	r := q.gather(p.next)
	l.pos = append(l.pos[:0], q.pos...)
	l.neg = append(l.neg[:0], q.neg...)
	l.m = p.counted()
	q.set(&l.m, r)
	l.pending = true
}

// Metrics returns the measures l holds, computing the rolling AUC the
// first time it is asked for.
func (l *LaterMetrics) Metrics() Metrics {
	if l.pending {
		l.m.RollingAUC = windowAUC(l.pos, l.neg)
		l.pending = false
	}
	return l.m
}

// Known returns the measures l holds without computing a pending rolling
// AUC, which is then 0: pending says so, and Metrics computes it.
func (l *LaterMetrics) Known() (m Metrics, pending bool) {
	return l.m, l.pending
}

// Set makes l a copy of src, reusing l's space.
func (l *LaterMetrics) Set(src *LaterMetrics) {
	l.m, l.pending = src.m, src.pending
	if src.pending {
		l.pos = append(l.pos[:0], src.pos...)
		l.neg = append(l.neg[:0], src.neg...)
	}
}
