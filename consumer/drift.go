package consumer

import (
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// drifted reports the change of concept the model's detector found at
// the example of m, whose prediction event is ev: it counts it, logs it
// and adds a drift event for the drift destination, keyed like the
// example's other events. The model has already started its parameters
// afresh (learner.DriftConfig). Like every output, the event follows from
// the model and the message alone, so a replay of the same offsets
// publishes it again with the same id and content. An event over the
// destination's limit is dropped, and its error returned for the
// message's dead letter (see alsoOver).
func (w *Worker) drifted(m *Message, key []byte, ev *wire.Prediction, b *outBatch) (over error) {
	d := ev.Outcome.Drift
	mt := w.model.Counts()
	w.metrics.Drifts.Inc()
	w.log.Info("change of concept: the model starts afresh",
		zap.String("event_id", string(key)), zap.Uint64("drift", d.Count),
		zap.Float64("error_before", d.ErrorBefore), zap.Float64("error_after", d.ErrorAfter),
		zap.Uint64("labeled", mt.Labeled))
	if !w.cfg.Drift.enabled() {
		return
	}
	e := wire.Drift{
		Position: m.Position, Meta: ev.Meta, Model: w.cfg.Model, Version: ev.Version,
		Examples: mt.Examples, Labeled: mt.Labeled,
		ErrorBefore: d.ErrorBefore, ErrorAfter: d.ErrorAfter, Drifts: d.Count,
		Time: m.Time,
	}
	start := len(b.arena)
	b.arena = w.cfg.Encoding.AppendDrift(b.arena, &e)
	return b.addWithin(w.cfg.Drift, w.limits.drift, "drift", key, start)
}
