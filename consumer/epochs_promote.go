package consumer

import (
	"context"
	"fmt"
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
	i := slices.IndexFunc(x.model.Challengers(), func(c *learner.Challenger) bool { return c.Name == r.Challenger })
	if i < 0 {
		if x.refused != r.ID {
			x.refused = r.ID
			x.log.Warn("promotion request not recorded: the model has no such challenger",
				zap.String("challenger", r.Challenger), zap.String("request", r.ID))
		}
		return nil
	}
	if c := x.model.Challengers()[i].Model; r.Stale(x.model, x.cfg.Worker.Model, c) {
		if x.refused != r.ID {
			x.refused = r.ID
			x.log.Warn("promotion request not recorded: the challenger was started anew after the request; promote it again to make it the model",
				zap.String("challenger", r.Challenger), zap.String("request", r.ID),
				zap.Uint64("requested_at_examples", r.Examples), zap.Uint64("examples", c.Counts().Examples))
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

// announce publishes the event of the promotion made after the mix of
// the epoch before b, if one was, when r is b's announcing range: its
// first range in shard order that reads anything (docs/scale-out.md,
// section 3.11). It runs before the range is learned and returns once the
// event is durable, retrying while the output fails, so that the range's
// result, written after its outputs, proves the event published, and
// whoever learns the range again publishes it again, with the same id and
// bytes. m is the range's copy of W_{e-1}, the promoted model; the
// promotion is counted once a process.
func (x *Epochs) announce(ctx context.Context, b *epochlog.Boundary, r epochlog.Range, m *learner.Model) error {
	ps := m.Promotions()
	if len(ps) == 0 || ps[len(ps)-1].Epoch == 0 || ps[len(ps)-1].Epoch+1 != b.Epoch {
		return nil
	}
	if i := slices.IndexFunc(b.Shards, func(r epochlog.Range) bool { return !r.Empty() }); i < 0 || b.Shards[i].Shard != r.Shard {
		return nil
	}
	p := ps[len(ps)-1]
	if d := x.cfg.Worker.Promotions; d.enabled() {
		e := wire.Promotion{Position: wire.Position{Source: "epoch:" + x.cfg.Worker.Model, Offset: int64(p.Epoch)},
			Model: x.cfg.Worker.Model, Version: m.Version(), Promoted: p.Challenger, Replaced: p.Replaced,
			Auto: p.Auto, Request: p.Request, Examples: p.Examples, Promotions: uint64(len(ps))}
		// The comparison that decided it goes on turned around in W_{e-1},
		// which nothing has learned since: the old model's against the
		// promoted one, negated back (learner.Model.Promote).
		if i := slices.IndexFunc(m.Challengers(), func(c *learner.Challenger) bool { return c.Name == p.Replaced }); i >= 0 {
			if c, err := compare.Attach(m.Challengers()[i], x.alpha()); err == nil {
				res := c.Result()
				e.Compared, e.LogLossDiff, e.Low, e.High = uint64(res.Examples), -res.LogLossDiff, -res.LogLossHigh, -res.LogLossLow
			}
		}
		key := append(e.Position.AppendEventID(nil), "#promotion"...)
		out := Output{Topic: d.Topic, Key: key, Value: x.cfg.Worker.Encoding.AppendPromotion(nil, &e),
			Partition: d.Partition, HasPartition: d.HasPartition}
		err := x.retry(ctx, NotReadyOutputs, "publish the promotion event "+string(key), func(ctx context.Context) error {
			err := d.Sink.Publish(ctx, []Output{out})
			if err != nil {
				x.metrics.PublishErrors.Inc()
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("epoch %d, shard %s: the promotion event %s: %w", b.Epoch, r.Shard, key, err)
		}
	}
	x.mu.Lock()
	counted := x.announced >= p.Epoch
	x.announced = max(x.announced, p.Epoch)
	x.mu.Unlock()
	if !counted {
		x.metrics.Promotions.Inc()
	}
	return nil
}

// promotionRequester reads a model's promotion request (snapshot.Store).
type promotionRequester interface {
	PromotionRequest(ctx context.Context, model string) (*snapshot.PromotionRequest, error)
}

// storeRequests is EpochConfig.Requests reading model's request in s.
func storeRequests(s promotionRequester, model string) func(ctx context.Context) (*snapshot.PromotionRequest, error) {
	return func(ctx context.Context) (*snapshot.PromotionRequest, error) { return s.PromotionRequest(ctx, model) }
}
