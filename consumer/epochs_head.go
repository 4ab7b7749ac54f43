package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// shardHead is the head of an owned shard of a model with labels
// (docs/labels.md, section 11.3): a Worker that reads the shard's
// examples ahead of the epochs, predicts each delayed one at once with
// the newest mixed model and publishes it, and reads the shard's labels
// to score the served predictions, publish misclassifications and late
// labels, and append marks when a window is due on a quiet labels'
// partition. It learns nothing: the epochs' ranges do.
type shardHead struct {
	w      *Worker
	lshard string
	cancel context.CancelFunc
	// stopped is closed once the head stopped, with err.
	stopped chan struct{}
	err     error
	closed  []Source
}

// heads reports whether the epochs run heads: with labels, and not when
// they follow a log (replay), which publishes and writes nothing.
func (x *Epochs) heads() bool { return x.cfg.Labels != nil && !x.cfg.Follow }

// ensureHead starts the head of r's shard unless one runs: from r's
// start, in the examples and the labels, with the shard's join as the
// mixed model holds it. While the broker fails to open them it retries,
// not ready for the source, until wctx is done; the head runs until
// Run's context is.
func (x *Epochs) ensureHead(wctx context.Context, r epochlog.Range) error {
	if !x.heads() || r.Labels == nil {
		return nil
	}
	x.mu.Lock()
	h := x.runningHeads[r.Shard]
	ctx := x.runCtx
	x.mu.Unlock()
	if h != nil {
		// A head that stopped of itself (its labels' stream recreated or
		// partitioned otherwise, a fetch that failed) reads nothing more:
		// its shard's examples would wait for labels for ever, the
		// worker ready. Its error stops the epochs.
		select {
		case <-h.stopped:
			if err := h.err; err != nil && ctx != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("the head of shard %s stopped: %w", r.Shard, err)
			}
		default:
		}
		return nil
	}
	if ctx == nil {
		return nil
	}
	l := x.cfg.Labels
	id := r.Shard
	lshard, err := l.CoShard(id)
	if err != nil {
		return err
	}
	m, err := learner.Restore(x.base.State())
	if err != nil {
		return err
	}
	// A source's lookups end with wctx; the source itself lives until
	// it is closed.
	wctx, cancel := context.WithCancel(wctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	var src, lsrc Source
	err = x.retry(wctx, NotReadySource, fmt.Sprintf("open the head of shard %s at %d", id, r.From), func(wctx context.Context) (err error) {
		src, err = x.cfg.Shards.Open(wctx, id, r.From)
		return err
	})
	if err != nil {
		return fmt.Errorf("the head of shard %s: %w", r.Shard, err)
	}
	err = x.retry(wctx, NotReadySource, fmt.Sprintf("open the head of shard %s: labels %s at %d", id, lshard, r.Labels.From), func(wctx context.Context) (err error) {
		lsrc, err = l.Shards.Open(wctx, lshard, r.Labels.From)
		return err
	})
	if err != nil {
		src.Close() //nolint:errcheck // it only read
		return fmt.Errorf("the head of shard %s: labels %s: %w", r.Shard, lshard, err)
	}
	x.mu.Lock()
	st := x.joins[id]
	x.mu.Unlock()
	lc := &LabelsConfig{
		Join:   l.Join,
		Shard:  id,
		Source: lsrc,
		OpenTail: func(context.Context, map[string]int64) (Source, error) {
			return nil, errors.New("the head of an epochs' shard reads no tail")
		},
		CacheBytes: 1,
		Format:     l.Format,
		Writer:     x.cfg.Writer,
		LateLabels: l.LateLabels,
		State:      st,
	}
	if l.Marks != nil {
		if lc.Marks, err = l.Marks(id); err != nil {
			src.Close()  //nolint:errcheck // it only read
			lsrc.Close() //nolint:errcheck // it only read
			return err
		}
	}
	wcfg := x.cfg.Worker
	// A range promotes nothing: promotions are made after the mix.
	wcfg.AutoPromote, wcfg.Replayed = false, nil
	wcfg.Snapshots, wcfg.Views, wcfg.Labels = nil, false, lc
	wcfg.head = x.View
	log := x.log.With(zap.Stringer("shard", id), zap.String("head", "labels"))
	metrics := x.headMetricsOf(id)
	w := NewWorker(wcfg, src, m, map[string]int64{id.String(): r.From, lshard.String(): r.Labels.From}, metrics, log)
	hctx, cancel := context.WithCancel(ctx)
	h = &shardHead{w: w, lshard: lshard.String(), cancel: cancel, stopped: make(chan struct{}), closed: []Source{src, lsrc}}
	go func() {
		err := w.Run(hctx)
		metrics.Join.stopped(id.String())
		for _, s := range h.closed {
			s.Close() //nolint:errcheck // it only read
		}
		h.err = err
		close(h.stopped)
	}()
	x.mu.Lock()
	if x.runningHeads == nil {
		x.runningHeads = map[shardid.ID]*shardHead{}
	}
	x.runningHeads[r.Shard] = h
	x.mu.Unlock()
	return nil
}

// idleHeads starts the head of every shard this worker owns that has
// none, at the model's reached end and where its labels' next range
// begins, while no epoch is due: a head starts with a range, and a
// worker that resumed from a generation of the newest epoch (or gained a
// shard) with every shard waiting for labels that never come cut no
// range, so no head wrote the marks that close those windows
// (docs/labels.md, sections 5 and 11.4), and nothing was learned again.
func (x *Epochs) idleHeads(ctx context.Context) error {
	if !x.heads() {
		return nil
	}
	for shard, from := range x.from {
		if !x.owns(shard) {
			continue
		}
		lfrom, err := x.labelsFrom(ctx, shard)
		if err != nil {
			return err
		}
		r := epochlog.Range{Shard: shard, From: from, To: from, Labels: &epochlog.LabelsRange{From: lfrom, To: lfrom}}
		if err := x.ensureHead(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// stopHeads stops the heads of the shards keep rejects (every head for
// nil), and waits for them.
func (x *Epochs) stopHeads(keep func(shard shardid.ID) bool) {
	x.mu.Lock()
	var stopped []*shardHead
	for s, h := range x.runningHeads {
		if keep == nil || !keep(s) {
			stopped = append(stopped, h)
			delete(x.runningHeads, s)
		}
	}
	x.mu.Unlock()
	for _, h := range stopped {
		h.cancel()
		<-h.stopped
		if err := h.err; err != nil && !errors.Is(err, context.Canceled) {
			x.log.Warn("the head of a shard stopped", zap.Error(err))
		}
	}
}

// headEvery is how often awaitHead looks at the head's progress.
const headEvery = 5 * time.Millisecond

// awaitHead waits until the head of r's shard has read the examples up
// to reached and the labels up to the range's end, with every output of
// what it read durable: step E3 with labels (docs/labels.md, section
// 11.3), before the range's result may be written. Without heads it
// returns at once.
func (x *Epochs) awaitHead(ctx context.Context, r epochlog.Range, reached int64) error {
	if !x.heads() || r.Labels == nil {
		return nil
	}
	if err := x.ensureHead(ctx, r); err != nil {
		return err
	}
	x.mu.Lock()
	h := x.runningHeads[r.Shard]
	x.mu.Unlock()
	if h == nil {
		return fmt.Errorf("shard %s has no head", r.Shard)
	}
	// The range read its labels to r.Labels.To: the head reads them too,
	// however far ahead of its examples they are.
	h.w.readLabelsTo(r.Labels.To)
	t := time.NewTicker(headEvery)
	defer t.Stop()
	published := func() bool {
		p := h.w.Published()
		return p[r.Shard.String()] >= reached && p[h.lshard] >= r.Labels.To
	}
	for {
		if published() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stopped:
			// A head that stops flushes its outputs first.
			if published() {
				return nil
			}
			return fmt.Errorf("the head of shard %s stopped: %v", r.Shard, h.err)
		case <-t.C:
		}
	}
}
