package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"go.uber.org/zap"
)

// Publish says which predictions a worker publishes.
type Publish string

// The publish modes. Misclassifications are published whenever they have
// a destination, whatever the mode.
const (
	PublishAll       Publish = "all"
	PublishUnlabeled Publish = "unlabeled"
	PublishNone      Publish = "none"
)

// Destination is where one kind of event goes: a sink and the topic or
// subject on it. The zero Destination publishes nothing.
type Destination struct {
	Sink  Sink
	Topic string
}

func (d Destination) enabled() bool { return d.Sink != nil }

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Model is the model's name, in every event.
	Model              string
	Predictions        Destination
	Misclassifications Destination
	DeadLetter         Destination
	Publish            Publish
	// Encoding is how events are written: EncodingJSON or EncodingMsgpack.
	Encoding Encoding
	// Batch is the most messages fetched and processed between two
	// publishes.
	Batch   int
	Decoder DecoderOptions
	// Format is the encoding of the examples: FormatAuto detects it per
	// message.
	Format Format

	// Checkpoints, if set, makes the model durable: every CheckpointEvery
	// labeled examples, every CheckpointInterval, and at shutdown (either
	// may be 0 to disable it). A checkpoint covers a batch boundary and is
	// written only once the outputs of every message it includes are
	// durable, and the source is committed only after the checkpoint is.
	Checkpoints        Checkpointer
	CheckpointEvery    int
	CheckpointInterval time.Duration
}

// Checkpointer makes a model's state durable with the positions it
// includes.
type Checkpointer interface {
	// Checkpoint returns nil once st and positions are durable. An error
	// wrapping ErrFatal stops the worker; any other is retried.
	Checkpoint(ctx context.Context, st *learner.State, positions map[string]int64) error
}

// checkpoint is a copy of the model taken at a batch boundary.
type checkpoint struct {
	state     *learner.State
	positions map[string]int64
}

// Worker runs one model over one source: for each message, in order, it
// decodes the example, predicts, publishes the prediction (and a
// misclassification if the labeled example was predicted wrong), learns,
// and advances the model's position. Bad input becomes a dead-letter
// event; the model never sees it and the position advances past it.
//
// Outputs are published in batches by a second goroutine, in order, each
// batch retried with backoff until the broker takes all of it: while
// outputs cannot be published the worker stops consuming (back-pressure)
// and reports not ready; it never drops an event. Learning itself never
// waits on the broker except through that bounded queue.
type Worker struct {
	cfg     WorkerConfig
	src     Source
	model   *learner.Model
	dec     *Decoder
	labels  Labels
	log     *zap.Logger
	metrics *Metrics

	mu sync.Mutex
	// positions is how far the model has got: the Resume of the last
	// message it includes, by source key.
	positions map[string]int64
	// published is how far the outputs are durable, by source key.
	published map[string]int64
	// stats are the model's metrics as of the last batch.
	stats learner.Metrics

	ready     atomic.Bool
	deadLogs  rateLimiter
	batchPool sync.Pool

	// The checkpoint hand-over: the newest checkpoint whose outputs are
	// durable waits in pending; an older one not yet started is replaced.
	ckMu      sync.Mutex
	ckPending *checkpoint
	ckSignal  chan struct{}
	fatal     chan error
}

// NewWorker returns a worker that learns into model from src. positions
// are the positions model already includes (as restored from a
// snapshot), nil for a new model. metrics may be nil.
func NewWorker(cfg WorkerConfig, src Source, model *learner.Model, positions map[string]int64, metrics *Metrics, log *zap.Logger) *Worker {
	if cfg.Batch <= 0 {
		cfg.Batch = 1024
	}
	if cfg.Publish == "" {
		cfg.Publish = PublishAll
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	w := &Worker{
		cfg:       cfg,
		src:       src,
		model:     model,
		dec:       NewDecoder(model.Config(), cfg.Decoder),
		labels:    NewLabels(model.Config()),
		log:       log,
		metrics:   metrics,
		positions: maps.Clone(positions),
		published: maps.Clone(positions),
		deadLogs:  rateLimiter{every: time.Second},
	}
	if w.positions == nil {
		w.positions = map[string]int64{}
		w.published = map[string]int64{}
	}
	for src, pos := range w.positions {
		metrics.Position.WithLabelValues(src).Set(float64(pos))
	}
	w.batchPool.New = func() any { return new(outBatch) }
	w.ckSignal = make(chan struct{}, 1)
	w.fatal = make(chan error, 1)
	return w
}

// Ready reports whether the worker is consuming and its outputs are being
// published: false before Run starts and while the outputs fail.
func (w *Worker) Ready() bool { return w.ready.Load() }

// Positions returns the model's positions: for each source key, the
// Resume value of the last message the model includes.
func (w *Worker) Positions() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.positions)
}

// Published returns the positions up to which every output is durable.
func (w *Worker) Published() map[string]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.published)
}

// Metrics are the model's metrics as of the last batch processed. Unlike
// the model's own, they are safe to read while the worker runs.
func (w *Worker) Metrics() learner.Metrics {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Model is the worker's model. It is only safe to use once Run returned.
func (w *Worker) Model() *learner.Model { return w.model }

// outBatch is what one fetched batch produced.
type outBatch struct {
	outputs  [][]Output // per sink, in sinks order
	sinks    []Sink
	arena    []byte // the outputs' keys and values, end to end
	spans    [][]span
	resume   map[string]int64
	fetched  time.Time
	messages int
	check    *checkpoint // taken after this batch, if any
}

func (b *outBatch) reset() {
	for i := range b.outputs {
		b.outputs[i] = b.outputs[i][:0]
		b.spans[i] = b.spans[i][:0]
	}
	b.arena = b.arena[:0]
	clear(b.resume)
	b.check = nil
}

// add appends an output whose value is arena[valueStart:] and whose key is
// key.
func (b *outBatch) add(d Destination, key []byte, valueStart int) {
	i := 0
	for i < len(b.sinks) && b.sinks[i] != d.Sink {
		i++
	}
	if i == len(b.sinks) {
		b.sinks = append(b.sinks, d.Sink)
		b.outputs = append(b.outputs, nil)
		b.spans = append(b.spans, nil)
	}
	keyStart := len(b.arena)
	b.arena = append(b.arena, key...)
	// Keys and values are sliced out of the arena once it stops growing.
	b.spans[i] = append(b.spans[i], span{start: valueStart, end: keyStart, n: len(key)})
	b.outputs[i] = append(b.outputs[i], Output{Topic: d.Topic})
}

// seal points the outputs at their bytes in the finished arena.
func (b *outBatch) seal() {
	for i, spans := range b.spans {
		for j, s := range spans {
			b.outputs[i][j].Value = b.arena[s.start:s.end:s.end]
			b.outputs[i][j].Key = string(b.arena[s.end : s.end+s.n])
		}
	}
}

// Run consumes until ctx is done or the source fails, then stops reading,
// publishes what it has processed, writes a last checkpoint, and returns.
// A clean shutdown returns nil. A fatal checkpoint error (another worker
// writing the model) stops it with that error.
func (w *Worker) Run(ctx context.Context) error {
	// The queue bounds how far learning runs ahead of durable outputs.
	queue := make(chan *outBatch, 8)
	pubDone := make(chan error, 1)
	ckDone := make(chan error, 1)
	ckStop := make(chan struct{})
	// The publisher and the checkpointer outlive ctx so that processed
	// messages are flushed on shutdown; they stop early only if that takes
	// too long.
	flushCtx, cancelFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFlush()
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	go func() { pubDone <- w.publishLoop(flushCtx, queue) }()
	go func() {
		err := w.checkpointLoop(flushCtx, ckStop)
		if err != nil {
			stopConsuming()
		}
		ckDone <- err
	}()

	w.ready.Store(true)
	err := w.consume(consumeCtx, queue)
	close(queue)
	if err != nil {
		cancelFlush()
	} else {
		timer := time.AfterFunc(30*time.Second, cancelFlush)
		defer timer.Stop()
	}
	perr := <-pubDone
	close(ckStop)
	cerr := <-ckDone
	w.ready.Store(false)
	switch {
	case cerr != nil:
		return cerr
	case err != nil:
		return err
	case perr != nil:
		return fmt.Errorf("flush outputs: %w", perr)
	}
	return nil
}

// ErrFatal marks a checkpoint error that must stop the worker.
var ErrFatal = errors.New("fatal")

// checkpointLoop writes the checkpoints handed over, newest first, each
// until it succeeds, and commits their positions to the source. When stop
// closes it writes what is pending and returns.
func (w *Worker) checkpointLoop(ctx context.Context, stop <-chan struct{}) error {
	if w.cfg.Checkpoints == nil {
		<-stop
		return nil
	}
	var bo backoff
	for {
		stopping := false
		select {
		case <-w.ckSignal:
		case <-stop:
			stopping = true
		}
		w.ckMu.Lock()
		ck := w.ckPending
		w.ckPending = nil
		w.ckMu.Unlock()
		if ck != nil {
			for {
				err := w.cfg.Checkpoints.Checkpoint(ctx, ck.state, ck.positions)
				if err == nil {
					break
				}
				if errors.Is(err, ErrFatal) {
					return err
				}
				w.metrics.CheckpointErrors.Inc()
				w.ready.Store(false)
				if ctx.Err() != nil {
					return fmt.Errorf("last checkpoint not written: %w", err)
				}
				w.log.Warn("checkpoint failed; retrying", zap.Error(err))
				if bo.wait(ctx) != nil {
					return fmt.Errorf("last checkpoint not written: %w", err)
				}
			}
			bo.reset()
			w.ready.Store(true)
			w.metrics.Checkpoints.Inc()
			w.metrics.LastCheckpoint.SetToCurrentTime()
			if err := w.src.Commit(ctx, ck.positions); err != nil && !errors.Is(err, context.Canceled) {
				w.log.Warn("commit to the broker failed (lag monitoring only)", zap.Error(err))
			}
		}
		if stopping {
			return nil
		}
	}
}

// handOver queues ck for writing, replacing an older one not yet begun.
func (w *Worker) handOver(ck *checkpoint) {
	w.ckMu.Lock()
	w.ckPending = ck
	w.ckMu.Unlock()
	select {
	case w.ckSignal <- struct{}{}:
	default:
	}
}

func (w *Worker) consume(ctx context.Context, queue chan<- *outBatch) error {
	var x learner.Example
	var line []byte
	lastLabeled, lastTime, dirty := w.model.Metrics().Labeled, time.Now(), false
	// checkpoint copies the model if one is due (or final) and anything
	// changed since the last.
	checkpoint := func(final bool) *checkpoint {
		if w.cfg.Checkpoints == nil {
			return nil
		}
		labeled := w.model.Metrics().Labeled
		due := final ||
			(w.cfg.CheckpointEvery > 0 && labeled-lastLabeled >= uint64(w.cfg.CheckpointEvery)) ||
			(w.cfg.CheckpointInterval > 0 && time.Since(lastTime) >= w.cfg.CheckpointInterval)
		if !due || !dirty {
			return nil
		}
		lastLabeled, lastTime, dirty = labeled, time.Now(), false
		return &checkpoint{state: w.model.State(), positions: maps.Clone(w.positions)}
	}
	for {
		msgs, err := w.src.Fetch(ctx, w.cfg.Batch)
		if err != nil {
			if ctx.Err() != nil {
				if ck := checkpoint(true); ck != nil {
					b := w.batchPool.Get().(*outBatch)
					b.reset()
					b.fetched, b.check = time.Now(), ck
					queue <- b
				}
				return nil
			}
			return fmt.Errorf("fetch: %w", err)
		}
		dirty = true
		b := w.batchPool.Get().(*outBatch)
		b.reset()
		if b.resume == nil {
			b.resume = map[string]int64{}
		}
		b.fetched = time.Now()
		b.messages = len(msgs)
		start := w.model.Metrics()
		for i := range msgs {
			line = w.process(&msgs[i], &x, b, line)
		}
		b.seal()
		end := w.model.Metrics()
		w.mu.Lock()
		maps.Copy(w.positions, b.resume)
		w.stats = end
		w.mu.Unlock()
		w.metrics.observe(start, end, b.resume)
		final := ctx.Err() != nil
		b.check = checkpoint(final)
		select {
		case queue <- b:
		case <-ctx.Done():
			// Processed: it is in the model, so it must still be published.
			if b.check == nil {
				b.check = checkpoint(true)
			}
			queue <- b
			return nil
		}
		if final {
			return nil
		}
	}
}

// process handles one message: the heart of the worker.
func (w *Worker) process(m *Message, x *learner.Example, b *outBatch, scratch []byte) []byte {
	b.resume[m.Position.Source] = m.Resume
	meta, err := w.decode(m.Value, x)
	key := m.Position.AppendEventID(scratch[:0])
	if err != nil {
		w.metrics.DecodeErrors.Inc()
		if w.cfg.DeadLetter.enabled() {
			start := len(b.arena)
			b.arena = w.cfg.Encoding.appendDeadLetter(b.arena, m.Position, err, m.Value)
			b.add(w.cfg.DeadLetter, key, start)
		} else if n := w.deadLogs.allow(); n >= 0 {
			w.log.Warn("invalid example dropped (no dead-letter destination)",
				zap.String("event_id", string(key)), zap.Error(err), zap.Int("suppressed", n))
		}
		return key
	}
	version := w.model.Version()
	o := w.model.Learn(x)
	ev := Prediction{Position: m.Position, Meta: meta, Outcome: o, Label: x.Label, Model: w.cfg.Model, Version: version}
	if w.cfg.Predictions.enabled() && (w.cfg.Publish == PublishAll || (w.cfg.Publish == PublishUnlabeled && !o.Labeled)) {
		start := len(b.arena)
		b.arena = w.cfg.Encoding.appendPrediction(b.arena, &ev, w.labels)
		b.add(w.cfg.Predictions, key, start)
	}
	if o.Labeled && !o.Correct && w.cfg.Misclassifications.enabled() {
		mt := w.model.Metrics()
		mc := Misclassification{Prediction: ev, Mistakes: mt.Mistakes, Examples: mt.Examples}
		start := len(b.arena)
		b.arena = w.cfg.Encoding.appendMisclassification(b.arena, &mc, w.labels)
		b.add(w.cfg.Misclassifications, key, start)
	}
	return key
}

func (w *Worker) decode(value []byte, x *learner.Example) (Meta, error) {
	switch w.cfg.Format {
	case FormatJSON:
		return w.dec.DecodeJSON(value, x)
	case FormatMsgpack:
		n, meta, err := w.dec.DecodeMsgpack(value, x)
		if err == nil && n != len(value) {
			err = &DecodeError{Field: "example", Problem: fmt.Sprintf("%d bytes after the msgpack map", len(value)-n)}
		}
		return meta, err
	}
	return w.dec.Decode(value, x)
}

// publishLoop publishes the batches in order, each until it succeeds, and
// then commits the positions they cover to the source. Batches that queue
// up while a publish is in flight go out together in the next one, so a
// slow broker round trip makes publishes larger rather than the worker
// slower.
func (w *Worker) publishLoop(ctx context.Context, queue <-chan *outBatch) error {
	var bo backoff
	var group []*outBatch
	var merged []Output
	for b := range queue {
		group = append(group[:0], b)
		outputs := b.count()
	more:
		for outputs < maxPublish {
			select {
			case next, ok := <-queue:
				if !ok {
					break more
				}
				group = append(group, next)
				outputs += next.count()
			default:
				break more
			}
		}
		for _, sink := range sinksOf(group) {
			merged = merged[:0]
			for _, g := range group {
				merged = append(merged, g.outputsFor(sink)...)
			}
			if len(merged) == 0 {
				continue
			}
			for {
				err := sink.Publish(ctx, merged)
				if err == nil {
					break
				}
				w.metrics.PublishErrors.Inc()
				w.ready.Store(false)
				if ctx.Err() != nil {
					return fmt.Errorf("%d outputs not published: %w", len(merged), err)
				}
				w.log.Warn("publishing outputs failed; consumption paused, retrying", zap.Error(err), zap.Int("outputs", len(merged)))
				if werr := bo.wait(ctx); werr != nil {
					return fmt.Errorf("%d outputs not published: %w", len(merged), err)
				}
			}
			bo.reset()
		}
		w.ready.Store(true)
		w.mu.Lock()
		for _, g := range group {
			maps.Copy(w.published, g.resume)
		}
		done := maps.Clone(w.published)
		w.mu.Unlock()
		if w.cfg.Checkpoints == nil {
			if err := w.src.Commit(ctx, done); err != nil && !errors.Is(err, context.Canceled) {
				w.log.Warn("commit to the broker failed (lag monitoring only)", zap.Error(err))
			}
		}
		// The outputs of every message a checkpoint includes are durable
		// now: it may be written.
		for i := len(group) - 1; i >= 0; i-- {
			if ck := group[i].check; ck != nil {
				w.handOver(ck)
				break
			}
		}
		for _, g := range group {
			w.metrics.BatchLatency.Observe(time.Since(g.fetched).Seconds())
			w.batchPool.Put(g)
		}
	}
	return nil
}

// maxPublish bounds the outputs of one coalesced publish.
const maxPublish = 16384

func (b *outBatch) count() int {
	n := 0
	for _, o := range b.outputs {
		n += len(o)
	}
	return n
}

func (b *outBatch) outputsFor(s Sink) []Output {
	for i, sink := range b.sinks {
		if sink == s {
			return b.outputs[i]
		}
	}
	return nil
}

// sinksOf lists the sinks of a group of batches, in first-use order.
func sinksOf(group []*outBatch) []Sink {
	var sinks []Sink
	for _, g := range group {
		for _, s := range g.sinks {
			if !slices.Contains(sinks, s) {
				sinks = append(sinks, s)
			}
		}
	}
	return sinks
}

// rateLimiter lets one event through per period and counts the rest.
type rateLimiter struct {
	every      time.Duration
	last       time.Time
	suppressed int
}

// allow returns the number suppressed since the last allowed event, or -1
// if this one is suppressed.
func (r *rateLimiter) allow() int {
	now := time.Now()
	if now.Sub(r.last) < r.every {
		r.suppressed++
		return -1
	}
	r.last = now
	n := r.suppressed
	r.suppressed = 0
	return n
}
