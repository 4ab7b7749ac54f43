package consumer

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Promotion in epochs (docs/scale-out.md, section 3.11): a challenger
// becomes the model between two epochs, on the mixed model, decided from
// W_e and B_e alone, so that every worker and replay make the same one.

// requestToRecord is the promotion request the boundary of the next epoch
// records, nil if none: the request in the store, unless the model's
// history holds it or the model has no such challenger. It runs in the
// worker that cuts the boundary; an error reading the request is logged,
// and the boundary records none (the next cut reads it again).
func (x *Epochs) requestToRecord(ctx context.Context) *epochlog.Promote {
	if x.cfg.Requests == nil || len(x.model.Challengers()) == 0 {
		return nil
	}
	r, err := x.cfg.Requests(ctx)
	if err != nil {
		x.log.Warn("promotion request not read; read again at the next cut", zap.Error(err))
		return nil
	}
	if r == nil || r.Applied(x.model.Promotions()) {
		return nil
	}
	if !slices.ContainsFunc(x.model.Challengers(), func(c *learner.Challenger) bool { return c.Name == r.Challenger }) {
		if x.refused != r.ID {
			x.refused = r.ID
			x.log.Warn("promotion request not recorded: the model has no such challenger",
				zap.String("challenger", r.Challenger), zap.String("request", r.ID))
		}
		return nil
	}
	return &epochlog.Promote{Challenger: r.Challenger, Request: r.ID}
}

// promoteMixed makes the promotion due after the mix of b's epoch on m,
// W_e, if one is: with AutoPromote the first challenger whose mixed
// log-loss band lies above zero, else the request b records. It reports
// whether m was promoted. Every worker decides alike: the decision reads
// m, b and the configuration only.
func (x *Epochs) promoteMixed(b *epochlog.Boundary, m *learner.Model) bool {
	if len(m.Challengers()) == 0 {
		return false
	}
	live, err := compare.NewLive(m, x.alpha())
	if err != nil || live == nil {
		return false
	}
	p := learner.Promotion{Examples: m.Counts().Examples, Epoch: b.Epoch}
	i := -1
	if x.cfg.Worker.AutoPromote {
		i = live.Better()
	}
	switch {
	case i >= 0:
		p.Challenger, p.Auto = live.Name(i), true
	case b.Promote != nil:
		p.Challenger, p.Request = b.Promote.Challenger, b.Promote.Request
		if i = slices.IndexFunc(m.Challengers(), func(c *learner.Challenger) bool { return c.Name == p.Challenger }); i < 0 {
			x.log.Warn("promotion refused: the model has no such challenger", zap.Uint64("epoch", b.Epoch),
				zap.String("challenger", p.Challenger), zap.String("request", p.Request))
			return false
		}
	default:
		return false
	}
	res := live.Results()[i]
	p.Replaced = m.Name(x.cfg.Worker.Model)
	if err := m.Promote(p); err != nil {
		x.log.Warn("promotion refused", zap.Uint64("epoch", b.Epoch), zap.String("challenger", p.Challenger), zap.Error(err))
		return false
	}
	x.log.Info("a challenger becomes the model", zap.Uint64("epoch", b.Epoch), zap.String("promoted", p.Challenger),
		zap.String("replaced", p.Replaced), zap.Bool("auto", p.Auto), zap.String("request", p.Request),
		zap.Uint64("examples", p.Examples), zap.Float64("log_loss_diff", res.LogLossDiff),
		zap.Float64("low", res.LogLossLow), zap.Float64("high", res.LogLossHigh))
	return true
}

func (x *Epochs) alpha() float64 {
	if a := x.cfg.Worker.CompareAlpha; a > 0 {
		return a
	}
	return DefaultCompareAlpha
}

// announce publishes the event of the promotion of W_{e-1}, and counts
// it, when cut, the boundary of epoch e this worker cut, is the one
// stored: the worker whose create-if-absent created B_e announces the
// promotion made after epoch e-1, once. A failed publish is logged: the
// promotion stands in the model's history.
func (x *Epochs) announce(ctx context.Context, cut, stored *epochlog.Boundary) {
	ps := x.model.Promotions()
	if len(ps) == 0 || ps[len(ps)-1].Epoch != cut.Epoch-1 {
		return
	}
	if stored.Cut.Writer != cut.Cut.Writer || !stored.Cut.Created.Equal(cut.Cut.Created) {
		return
	}
	p := ps[len(ps)-1]
	x.metrics.Promotions.Inc()
	d := x.cfg.Worker.Promotions
	if !d.enabled() {
		return
	}
	e := wire.Promotion{Position: wire.Position{Source: "epoch:" + x.cfg.Worker.Model, Offset: int64(p.Epoch)},
		Model: x.cfg.Worker.Model, Version: x.model.Version(), Promoted: p.Challenger, Replaced: p.Replaced,
		Auto: p.Auto, Request: p.Request, Examples: p.Examples, Promotions: uint64(len(ps))}
	// The comparison that decided it goes on turned around in W_{e-1},
	// which nothing has learned since: the old model's against the
	// promoted one, negated back (learner.Model.Promote).
	if i := slices.IndexFunc(x.model.Challengers(), func(c *learner.Challenger) bool { return c.Name == p.Replaced }); i >= 0 {
		if c, err := compare.Attach(x.model.Challengers()[i], x.alpha()); err == nil {
			r := c.Result()
			e.Compared, e.LogLossDiff, e.Low, e.High = uint64(r.Examples), -r.LogLossDiff, -r.LogLossHigh, -r.LogLossLow
		}
	}
	key := append(e.Position.AppendEventID(nil), "#promotion"...)
	out := Output{Topic: d.Topic, Key: key, Value: x.cfg.Worker.Encoding.AppendPromotion(nil, &e),
		Partition: d.Partition, HasPartition: d.HasPartition}
	if err := d.Sink.Publish(ctx, []Output{out}); err != nil {
		x.log.Warn("promotion event dropped", zap.String("event_id", string(key)), zap.Error(err))
	}
}

// promotionRequester reads a model's promotion request (snapshot.Store).
type promotionRequester interface {
	PromotionRequest(ctx context.Context, model string) (*snapshot.PromotionRequest, error)
}

// storeRequests is EpochConfig.Requests reading model's request in s.
func storeRequests(s promotionRequester, model string) func(ctx context.Context) (*snapshot.PromotionRequest, error) {
	return func(ctx context.Context) (*snapshot.PromotionRequest, error) { return s.PromotionRequest(ctx, model) }
}
