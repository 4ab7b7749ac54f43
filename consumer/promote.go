package consumer

import (
	"context"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// promotion is a worker's side of promotions (docs/compare.md,
// "Promotion"): the request read from the store, and what the reading
// loop keeps of the promotions it made.
type promotion struct {
	// requests is true when the worker reads requests: its model has
	// challengers.
	requests bool
	// requested is the newest request read, stored by the snapshot loop
	// and taken by the reading loop.
	requested atomic.Pointer[snapshot.PromotionRequest]
	// seen is the id of the newest request read, which is logged once. It
	// belongs to whoever reads requests: the start, then the snapshot loop.
	seen string
	// The fields below belong to the reading loop. refused is the id of
	// the request last refused, so that it is refused once; replayed
	// counts the WorkerConfig.Replayed made; adjust is what the batch's
	// promotions changed in the model's counts (the new model's minus the
	// old's, wrapping), for the metrics' differences.
	refused  string
	replayed int
	adjust   learner.Counts
}

// promotionRequests is the snapshotter of a store that holds promotion
// requests (snapshot.Snapshotter).
type promotionRequests interface {
	PromotionRequest(ctx context.Context) (*snapshot.PromotionRequest, error)
}

// readRequest reads the model's promotion request, for the reading loop
// to apply after its next example. It runs when the worker starts, before
// the reading loop, and then in the snapshot loop after every generation,
// never in the reading loop. A request read for the first time is logged,
// unless the history of the model it starts with holds it (atStart: the
// reading loop has not begun, and the model is the start's to look at).
func (w *Worker) readRequest(ctx context.Context, atStart bool) {
	rs, ok := w.cfg.Snapshots.(promotionRequests)
	if !ok || !w.promotion.requests {
		return
	}
	r, err := rs.PromotionRequest(ctx)
	switch {
	case err != nil:
		w.log.Warn("promotion request not read; read again after the next snapshot", zap.Error(err))
	case r != nil:
		if r.ID != w.promotion.seen {
			w.promotion.seen = r.ID
			if !atStart || !r.Applied(w.model.Promotions()) {
				w.log.Info("promotion request read: it takes effect after the next example the model learns",
					zap.String("challenger", r.Challenger), zap.String("request", r.ID))
			}
		}
		w.promotion.requested.Store(r)
	}
}

// shift is start, the model's counts before a batch, as the model the
// batch ended with would have had them: the promotions in the batch
// replaced the model's counts by the promoted challenger's.
func (p *promotion) shift(start learner.Counts) learner.Counts {
	a := p.adjust
	p.adjust = learner.Counts{}
	return learner.Counts{Examples: start.Examples + a.Examples, Labeled: start.Labeled + a.Labeled,
		Mistakes: start.Mistakes + a.Mistakes, Updates: start.Updates + a.Updates}
}

// promoteAfter makes the promotion due after the example of m, which the
// model and its challengers have learned, if one is: the next of
// WorkerConfig.Replayed when the model's count has reached it, else an
// automatic one when the rule names a challenger, else the request read
// from the store unless the history holds it.
func (w *Worker) promoteAfter(m *Message, b *outBatch) {
	pr := &w.promotion
	var p learner.Promotion
	switch n := w.model.Counts().Examples; {
	case pr.replayed < len(w.cfg.Replayed):
		q := w.cfg.Replayed[pr.replayed]
		if q.Examples != n {
			break
		}
		pr.replayed++
		w.promote(learner.Promotion{Challenger: q.Challenger, Auto: q.Auto, Request: q.Request}, m, b)
		return
	case w.cfg.AutoPromote:
		if i := w.rivals.live.Better(); i >= 0 {
			w.promote(learner.Promotion{Challenger: w.rivals.live.Name(i), Auto: true}, m, b)
			return
		}
	}
	r := pr.requested.Load()
	if r == nil || r.ID == pr.refused {
		return
	}
	if r.Applied(w.model.Promotions()) {
		pr.requested.CompareAndSwap(r, nil)
		return
	}
	if i := slices.Index(w.rivals.names, "#"+r.Challenger); i >= 0 && r.Stale(w.model, w.cfg.Model, w.rivals.live.Model(i)) {
		pr.refused = r.ID
		w.log.Warn("promotion refused: the challenger was started anew after the request; promote it again to make it the model",
			zap.String("challenger", r.Challenger), zap.String("request", r.ID),
			zap.Uint64("requested_at_examples", r.Examples), zap.Uint64("examples", w.rivals.live.Model(i).Counts().Examples))
		return
	}
	p = learner.Promotion{Challenger: r.Challenger, Request: r.ID}
	if !w.promote(p, m, b) {
		pr.refused = r.ID
	}
}

// promote makes p's challenger the model after the example of m
// (learner.Model.Promote), and reports whether it did: the decoder and
// the challengers' side are made again for the new model, the promotion
// is counted, logged and published. A challenger the model does not
// have is refused with a warning.
func (w *Worker) promote(p learner.Promotion, m *Message, b *outBatch) bool {
	r := w.rivals
	i := slices.IndexFunc(r.names, func(n string) bool { return n == "#"+p.Challenger })
	if i < 0 {
		w.log.Warn("promotion refused: the model has no such challenger", zap.String("challenger", p.Challenger),
			zap.String("request", p.Request), zap.Strings("challengers", r.challengerNames()))
		return false
	}
	res := r.live.Results()[i]
	p.Replaced = w.model.Name(w.cfg.Model)
	p.Examples = w.model.Counts().Examples
	p.Source, p.Offset = m.Position.Source, m.Position.Offset
	from := w.model.Counts()
	if err := w.model.Promote(p); err != nil {
		w.log.Warn("promotion refused", zap.String("challenger", p.Challenger), zap.Error(err))
		return false
	}
	to := w.model.Counts()
	a := &w.promotion.adjust
	a.Examples += to.Examples - from.Examples
	a.Labeled += to.Labeled - from.Labeled
	a.Mistakes += to.Mistakes - from.Mistakes
	a.Updates += to.Updates - from.Updates
	w.dec = wire.NewDecoder(w.model.Config(), w.cfg.Decoder)
	w.rivals, w.rivalsErr = newRivals(w.model, w.cfg.CompareAlpha, w.cfg.Decoder, w.cfg.Labels != nil)
	if w.rivalsErr != nil {
		// The challengers of a model with labels hash as it does, the
		// promoted one included: this does not happen.
		w.log.Error("the challengers stop after a promotion", zap.Error(w.rivalsErr))
		w.rivals = nil
	}
	w.metrics.Promotions.Inc()
	w.metrics.Challengers.drop(w.metrics.shard)
	w.metrics.challengers(w.rivals)
	w.log.Info("a challenger becomes the model", zap.String("promoted", p.Challenger), zap.String("replaced", p.Replaced),
		zap.Bool("auto", p.Auto), zap.String("request", p.Request), zap.Uint64("examples", p.Examples),
		zap.String("source", p.Source), zap.Int64("offset", p.Offset),
		zap.Float64("log_loss_diff", res.LogLossDiff), zap.Float64("low", res.LogLossLow), zap.Float64("high", res.LogLossHigh))
	if !w.cfg.Promotions.enabled() {
		return true
	}
	e := wire.Promotion{Position: m.Position, Model: w.cfg.Model, Version: w.model.Version(),
		Promoted: p.Challenger, Replaced: p.Replaced, Auto: p.Auto, Request: p.Request,
		Examples: p.Examples, Compared: uint64(res.Examples), LogLossDiff: res.LogLossDiff, Low: res.LogLossLow, High: res.LogLossHigh,
		Promotions: uint64(len(w.model.Promotions()))}
	key := append(m.Position.AppendEventID(nil), "#promotion"...)
	start := len(b.arena)
	b.arena = w.cfg.Encoding.AppendPromotion(b.arena, &e)
	if err := b.addWithin(w.cfg.Promotions, w.limits.promotions, "promotion", key, start); err != nil {
		// The promotion stands, in the model and its history: only its
		// event is lost.
		w.log.Warn("promotion event dropped", zap.String("event_id", string(key)), zap.Error(err))
	}
	return true
}

// challengerNames are the challengers' names, in order.
func (r *rivals) challengerNames() []string {
	out := make([]string, r.live.Len())
	for i := range out {
		out[i] = r.live.Name(i)
	}
	return out
}
