package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap"
)

// Destination is where one kind of event goes: a sink and the topic or
// subject on it. The zero Destination publishes nothing.
type Destination struct {
	Sink  Sink
	Topic string
	// Partition, with HasPartition, is the Kafka partition of Topic every
	// output goes to (Output.Partition).
	Partition    int32
	HasPartition bool
}

func (d Destination) enabled() bool { return d.Sink != nil }

// WorkerConfig configures a Worker.
type WorkerConfig struct {
	// Model is the model's name, in every event.
	Model              string
	Predictions        Destination
	Misclassifications Destination
	DeadLetter         Destination
	// Drift receives an event for each change of concept the model's
	// detector finds (see Worker.drifted).
	Drift   Destination
	Publish wire.Publish
	// Encoding is how events are written: EncodingJSON or EncodingMsgpack.
	Encoding wire.Encoding
	// Batch is the most messages fetched and processed between two
	// publishes. 0 means DefaultBatch.
	Batch   int
	Decoder wire.DecoderOptions
	// Format is the encoding of the examples: FormatAuto detects it per
	// message.
	Format wire.Format

	// Snapshots, if set, makes the model durable: every SnapshotEvery
	// labeled examples, every SnapshotInterval, and at shutdown (either
	// may be 0 to disable it). A snapshot covers a batch boundary and is
	// written only once the outputs of every message it includes are
	// durable, and the source is committed only after the snapshot is.
	Snapshots        Snapshotter
	SnapshotEvery    int
	SnapshotInterval time.Duration

	// ShutdownTimeout bounds shutdown, from the moment ctx is done (or a
	// fatal error stops consuming) to Run's return: publishing what was
	// processed and writing the last snapshot must fit in it. What does
	// not is reported in Run's error and lost to nothing: its positions
	// were not committed, so the next start reads it again. 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// Views makes the worker publish a read-only copy of its model for
	// prediction requests (see Worker.View): when it starts, at the
	// first batch boundary ViewInterval or more after the last copy,
	// and, when the stream goes idle, ViewInterval after the last copy
	// if the model changed since. A ViewInterval of 0 means every batch.
	// Taking a copy costs about as much as copying the weights; the
	// interval bounds that cost on a fast stream.
	Views        bool
	ViewInterval time.Duration

	// Labels, if set, joins labels that come later to the examples, which
	// then come without them (docs/labels.md).
	Labels *LabelsConfig

	// learned, set by the epochs for a range, is called once the range is
	// complete and every message of it learned, before the worker waits
	// for the outputs still being published: the epochs mix the range's
	// state meanwhile. It runs on the worker's goroutine, which uses the
	// model no more.
	learned func()
	// rangeJoin, set by the epochs for a range of a model with labels,
	// gives each delayed example of the range the label its join decided.
	rangeJoin *rangeJoin
	// budget, set by the epochs for the ranges they learn at once, bounds
	// the batches queued or being published across those workers: each
	// holds a slot of it from its hand-over to the publisher until it is
	// published or given up. Without it a worker holds up to
	// queueBatches queued and a publish of up to maxPublish outputs.
	budget outputBudget
	// head, set by the epochs for the head of a shard of a model with
	// labels (docs/labels.md, section 11.3), makes a worker with Labels
	// predict the delayed examples with the newest mixed model it
	// returns, publish and score them, and learn nothing.
	head func() *learner.View
	// ChallengerPredictions receives the predictions of the model's
	// challengers (learner.Model.Challengers), each event named by its
	// challenger and keyed by the model's event id, '#' and its name.
	// Only the model's predictions go to Predictions.
	ChallengerPredictions Destination
	// CompareAlpha is the level of the challengers' comparisons with the
	// model (compare.Attach); 0 means DefaultCompareAlpha.
	CompareAlpha float64
	// AutoPromote promotes a challenger as soon as its comparison says
	// "challenger better" (compare.Live.Better), looked at after every
	// example (docs/compare.md, "Promotion").
	AutoPromote bool
	// Promotions receives an event for each promotion (wire.Promotion).
	Promotions Destination
	// Replayed are promotions to make again, in order, each after the
	// example that brings the model's count to its Examples: a replay's
	// of those the live model's history records. Automatic promotion
	// waits until they are all made.
	Replayed []learner.Promotion
}

// DefaultShutdownTimeout is WorkerConfig.ShutdownTimeout's default: well
// inside Kubernetes' default grace period of 30 seconds after SIGTERM,
// which is followed by SIGKILL.
const DefaultShutdownTimeout = 25 * time.Second

// DefaultBatch is WorkerConfig.Batch's default: enough messages per
// publish that a broker round trip is shared by many, few enough that a
// batch's outputs stay a small fraction of a broker's request limits.
const DefaultBatch = 1024

// queueBatches is how many processed batches may wait for their outputs
// to be published: how far learning runs ahead of durable outputs before
// back-pressure stops consumption.
const queueBatches = 8

// maxPublish bounds the outputs of one coalesced publish: batches that
// queued up while a publish was in flight go out together, up to this
// many outputs, so a slow broker makes publishes larger but not
// unbounded.
const maxPublish = 16384

// rangesBatches is the budget of batches the epochs' ranges hold queued
// or being published, together: four workers' queues. Up to four ranges
// learned at once (a topic of four partitions) each run as far ahead of
// their outputs as one partition's worker does, rather than waiting for
// a slot at every few batches; a worker learning more ranges at once
// holds no more than four workers would.
const rangesBatches = 4 * queueBatches

// outputBudget is a budget of processed batches, shared by workers: a
// slot per batch that waits for its outputs or is being published. The
// zero budget bounds nothing.
//
// The workers that share a budget also share its pool of batches: the
// epochs make a worker per range and epoch, and a pool of each worker's
// own would keep that worker's batches (their arenas of encoded outputs)
// until two collections after it stopped, as the runtime keeps every
// pool; shared, the batches of all the ranges at once are pooled, reused
// by the next epoch's workers.
type outputBudget struct {
	slots   chan struct{}
	batches *sync.Pool // of *outBatch
}

func newOutputBudget(batches int) outputBudget {
	return outputBudget{slots: make(chan struct{}, batches), batches: newBatchPool()}
}

// newBatchPool is a pool of *outBatch.
func newBatchPool() *sync.Pool { return &sync.Pool{New: func() any { return new(outBatch) }} }

// take gives b a slot unless it holds one, waiting until one is free;
// false means ctx ended first. Without a budget it returns true at once.
func (o outputBudget) take(ctx context.Context, b *outBatch) bool {
	if o.slots == nil || b.slot {
		return true
	}
	select {
	case o.slots <- struct{}{}:
		b.slot = true
		return true
	case <-ctx.Done():
		return false
	}
}

// give returns b's slot, if it holds one.
func (o outputBudget) give(b *outBatch) {
	if b.slot {
		b.slot = false
		<-o.slots
	}
}

// The delays between attempts of a failed publish or snapshot write:
// short at first, so a blip costs little, and during an outage an attempt
// at least every retryMaxDelay, so the worker is ready again soon after
// the broker or the store is back.
const (
	retryMinDelay = 50 * time.Millisecond
	retryMaxDelay = 5 * time.Second
)

// deadLogEvery is how often a dead letter that cannot be published (no
// destination, or one too small) is logged; the others in between are
// counted in the next line. Bad input can come at the stream's rate.
const deadLogEvery = time.Second

// Snapshotter makes a model's state durable with the positions it
// includes.
type Snapshotter interface {
	// Snapshot returns nil once st and positions are durable. An error
	// wrapping ErrFatal stops the worker; any other is retried.
	// join is the state of the join of labels that come later as a
	// msgpack value (JoinState), nil without one.
	Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error
}

// snapshotCopy is a copy of the model taken at a batch boundary.
type snapshotCopy struct {
	state     *learner.State
	positions map[string]int64
	join      *JoinState
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
	dec     *wire.Decoder
	labels  learner.Labels
	log     *zap.Logger
	metrics *Metrics

	mu sync.Mutex
	// positions is how far the model has got: the Resume of the last
	// message it includes, by source key.
	positions map[string]int64
	// published is how far the outputs are durable, by source key.
	published map[string]int64
	// stats are the model's metrics as of the last batch, the rolling
	// AUC computed when asked for.
	stats learner.LaterMetrics

	readiness readiness
	deadLogs  *retry.LogLimiter
	// streak follows the messages that fail to decode, to warn once
	// when they keep failing for the same reason. Only the reading loop
	// uses it; the epochs hand a shard's on from range to range.
	streak *deadStreak
	// limits are the outputs' size limits for the batch being processed;
	// only the reading loop uses them.
	limits outputLimits
	// batchPool is the budget's pool of batches, or the worker's own
	// without a budget.
	batchPool *sync.Pool

	// The snapshot hand-over: the newest snapshot whose outputs are
	// durable waits in pending; an older one not yet started is replaced.
	snapMu      sync.Mutex
	snapPending *snapshotCopy
	snapSignal  chan struct{}
	fatal       chan error

	// view is the newest read-only copy of the model (cfg.Views).
	view atomic.Pointer[learner.View]

	// joined is the join of labels that come later (cfg.Labels); err
	// is why it could not be restored, which Run returns.
	joined    *joined
	joinedErr error

	// rivals learn the model's challengers beside it; nil for none. err
	// is why they could not be set up, which Run returns.
	rivals    *rivals
	rivalsErr error
	// promotion is the state of promotions (promote.go).
	promotion promotion
}

// NewWorker returns a worker that learns into model from src. positions
// are the positions model already includes (as restored from a
// snapshot), nil for a new model. metrics may be nil.
func NewWorker(cfg WorkerConfig, src Source, model *learner.Model, positions map[string]int64, metrics *Metrics, log *zap.Logger) *Worker {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Publish == "" {
		cfg.Publish = wire.PublishAll
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	w := &Worker{
		cfg:       cfg,
		src:       src,
		model:     model,
		dec:       wire.NewDecoder(model.Config(), cfg.Decoder),
		labels:    model.Config().Labels(),
		log:       log,
		metrics:   metrics,
		positions: maps.Clone(positions),
		published: maps.Clone(positions),
		deadLogs:  retry.NewLogLimiter(log, deadLogEvery),
		streak:    new(deadStreak),
	}
	if w.positions == nil {
		w.positions = map[string]int64{}
		w.published = map[string]int64{}
	}
	// The gauges start from the restored model, not from zero: alerts
	// compare against them before the first new example arrives.
	metrics.restored(model.Metrics(), w.positions)
	w.readiness.fail(NotReadySource, "not consuming yet")
	if cfg.Labels != nil {
		w.joined, w.joinedErr = newJoined(*cfg.Labels, model, cfg.Decoder, w.positions)
		if w.joined != nil {
			metrics.Join.observe(cfg.Labels.Shard.String(), w.joined.join.Counts(), w.joined.join.Pending(), w.joined.join.Held())
		}
	}
	w.rivals, w.rivalsErr = newRivals(model, cfg.CompareAlpha, cfg.Decoder, cfg.Labels != nil || cfg.rangeJoin != nil)
	w.promotion.requests = w.rivals != nil
	metrics.challengers(w.rivals)
	if w.batchPool = cfg.budget.batches; w.batchPool == nil {
		w.batchPool = newBatchPool()
	}
	w.snapSignal = make(chan struct{}, 1)
	w.fatal = make(chan error, 1)
	if cfg.Views {
		w.publishView()
	}
	return w
}

// View is the newest read-only copy of the model the worker published for
// prediction requests, nil unless WorkerConfig.Views is set. It is safe
// to call at any time, from any goroutine, and never waits for learning;
// learning never waits for it either.
func (w *Worker) View() *learner.View { return w.view.Load() }

// publishView replaces the view with a copy of the model as it is now.
// Only the goroutine that learns calls it.
func (w *Worker) publishView() {
	v := w.model.View()
	w.view.Store(v)
	w.metrics.ServedVersion.Set(float64(v.Version()))
}

// Ready reports whether the worker is consuming, its outputs are being
// published and its snapshots written: false before Run starts, after it
// returns, and while either the outputs or the snapshot store fail.
func (w *Worker) Ready() bool { return w.readiness.ready() }

// NotReady lists why the worker is not ready, one "reason: why" per
// failing reason (NotReadySource, NotReadyOutputs, NotReadySnapshots),
// sorted; it is empty when the worker is ready.
func (w *Worker) NotReady() []string { return w.readiness.reasons() }

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

// readLabelsTo has a worker with labels read them at least to resume (a
// Resume value of its labels' source), however far ahead of its examples
// they are: an epochs' range read them so far, and waits for the head.
func (w *Worker) readLabelsTo(resume int64) {
	if w.joined != nil {
		w.joined.readLabelsTo(resume)
	}
}

// Metrics are the model's metrics as of the last batch processed. Unlike
// the model's own, they are safe to read while the worker runs.
func (w *Worker) Metrics() learner.Metrics {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats.Metrics()
}

// Model is the worker's model. It is only safe to use once Run returned.
func (w *Worker) Model() *learner.Model { return w.model }

// span is an output in the arena of its batch: its value is
// arena[start:end] and its key arena[end:key].
type span struct{ start, end, key int }

// outBatch is what one fetched batch produced.
type outBatch struct {
	outputs  [][]Output // per sink, in sinks order
	sinks    []Sink
	arena    []byte // the outputs' keys and values, end to end
	spans    [][]span
	resume   map[string]int64
	fetched  time.Time
	messages int
	snap     *snapshotCopy // taken after this batch, if any
	slot     bool          // holds a slot of the worker's budget
}

func (b *outBatch) reset() {
	for i := range b.outputs {
		b.outputs[i] = b.outputs[i][:0]
		b.spans[i] = b.spans[i][:0]
	}
	b.arena = b.arena[:0]
	clear(b.resume)
	b.snap = nil
}

// add appends an output whose value is arena[valueStart:] and whose key is
// key.
func (b *outBatch) add(d Destination, key []byte, valueStart int) {
	keyStart := len(b.arena)
	b.arena = append(b.arena, key...)
	b.addSpan(d, valueStart, keyStart)
}

// addSpan appends an output whose value is arena[valueStart:keyStart] and
// whose key is arena[keyStart:], for an event that appended its key to the
// arena itself.
func (b *outBatch) addSpan(d Destination, valueStart, keyStart int) {
	i := 0
	for i < len(b.sinks) && b.sinks[i] != d.Sink {
		i++
	}
	if i == len(b.sinks) {
		b.sinks = append(b.sinks, d.Sink)
		b.outputs = append(b.outputs, nil)
		b.spans = append(b.spans, nil)
	}
	// Keys and values are sliced out of the arena once it stops growing.
	b.spans[i] = append(b.spans[i], span{start: valueStart, end: keyStart, key: len(b.arena)})
	b.outputs[i] = append(b.outputs[i], Output{Topic: d.Topic, Partition: d.Partition, HasPartition: d.HasPartition})
}

// seal points the outputs' keys and values at their bytes in the finished
// arena, without copying them: they stay valid until the batch goes back
// to the pool, which the publisher does once every sink has published it.
func (b *outBatch) seal() {
	for i, spans := range b.spans {
		for j, s := range spans {
			o := &b.outputs[i][j]
			o.Value = b.arena[s.start:s.end:s.end]
			o.Key = b.arena[s.end:s.key:s.key]
		}
	}
}

// Run consumes until ctx is done or the source fails, then stops reading,
// publishes what it has processed, writes a last snapshot, and returns.
//
// Shutdown is bounded: from the moment consuming stops (ctx done, a
// failed source, a fatal snapshot error) Run returns within
// cfg.ShutdownTimeout, plus the time a sink or the store takes to notice
// a cancelled context. What it could not flush by then it names in a
// *ShutdownError. Nothing is lost that way: the positions of whatever was
// not flushed were never committed or snapshotted, so the next start
// reads those messages again.
//
// A clean shutdown returns nil. A fatal snapshot error (another worker
// writing the model) stops it with that error.
func (w *Worker) Run(ctx context.Context) error {
	if w.rivalsErr != nil {
		return w.rivalsErr
	}
	if w.joinedErr != nil {
		return w.joinedErr
	}
	queue := make(chan *outBatch, queueBatches)
	pubDone := make(chan []*outBatch, 1)
	snapDone := make(chan error, 1)
	snapStop := make(chan struct{})
	// The publisher and the snapshotter outlive ctx so that processed
	// messages are flushed on shutdown; flushCtx ends them when the
	// shutdown limit passes.
	flushCtx, cancelFlush := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelFlush()
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	// The limit runs from the moment consuming stops for a shutdown (ctx
	// done, a failed source, a fatal snapshot error), not from when the
	// reading loop has handed over its last batch: that hand-over itself
	// waits while the outputs fail. A range read to its end
	// (ErrRangeDone) is no shutdown: its outputs are retried until they
	// are durable or ctx ends, and the limit runs from then.
	limitCtx, startLimit := context.WithCancel(ctx)
	defer startLimit()
	stopLimit := context.AfterFunc(limitCtx, func() {
		t := time.AfterFunc(w.cfg.ShutdownTimeout, cancelFlush)
		context.AfterFunc(flushCtx, func() { t.Stop() })
	})
	defer stopLimit()
	// handCtx ends the hand-over of processed batches to the publisher:
	// at the shutdown limit, or once the publisher has stopped, when
	// nothing reads the queue any more.
	handCtx, stopHanding := context.WithCancel(flushCtx)
	defer stopHanding()
	// A request already in the store applies after the first example,
	// however quickly the reading loop gets ahead of the snapshots.
	w.readRequest(consumeCtx, true)
	var perr error
	go func() {
		left, err := w.publishLoop(flushCtx, queue)
		perr = err
		stopHanding()
		if errors.Is(err, ErrOutputTooLarge) {
			// Nothing more can be published: the worker stops.
			stopConsuming()
			startLimit()
		}
		pubDone <- left
	}()
	go func() {
		err := w.snapshotLoop(flushCtx, snapStop)
		if err != nil {
			stopConsuming()
			startLimit()
		}
		snapDone <- err
	}()

	w.readiness.ok(NotReadySource)
	unsent, err := w.consume(consumeCtx, handCtx, queue)
	if w.cfg.learned != nil && unsent == nil && errors.Is(err, ErrRangeDone) {
		w.cfg.learned()
	}
	w.readiness.fail(NotReadySource, "stopped consuming")
	stopConsuming()
	if !errors.Is(err, ErrRangeDone) {
		startLimit()
	}
	close(queue)
	left := <-pubDone
	// What the publisher did not get to is still queued.
	for b := range queue {
		left = append(left, b)
	}
	if unsent != nil {
		left = append(left, unsent)
	}
	for _, b := range left {
		w.cfg.budget.give(b)
	}
	close(snapStop)
	cerr := <-snapDone

	if errors.Is(cerr, ErrFatal) {
		return cerr
	}
	if errors.Is(perr, ErrOutputTooLarge) {
		return fmt.Errorf("outputs: %w; the worker stops, and at its next start reads again what it had not published, "+
			"making its outputs to the destination's limit now (those over it become dead letters)", perr)
	}
	var shut *ShutdownError
	if len(left) > 0 || cerr != nil {
		shut = &ShutdownError{Timeout: w.cfg.ShutdownTimeout, Snapshot: cerr != nil, Err: cmp.Or(perr, cerr)}
		for _, b := range left {
			shut.Messages += b.messages
			shut.Outputs += b.count()
			shut.Snapshot = shut.Snapshot || b.snap != nil
		}
	}
	switch {
	case err != nil && shut != nil:
		return errors.Join(err, shut)
	case err != nil:
		return err
	case shut != nil:
		return shut
	}
	return nil
}

// ShutdownError is what a shutdown that ran out of time could not flush.
// None of it is lost: its positions were not committed (and no snapshot
// includes them), so the next start reads those messages again and
// publishes their outputs then, with the same event ids.
type ShutdownError struct {
	Timeout time.Duration
	// Messages were processed but their outputs, Outputs in all, were not
	// all published.
	Messages, Outputs int
	// Snapshot is true when the last snapshot was not written.
	Snapshot bool
	// Err is the last publish or snapshot error.
	Err error
}

func (e *ShutdownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shutdown stopped after %s: ", e.Timeout)
	if e.Messages > 0 || e.Outputs > 0 {
		fmt.Fprintf(&b, "the outputs of %d processed messages (%d events) were not published", e.Messages, e.Outputs)
		if e.Snapshot {
			b.WriteString(" and ")
		}
	}
	if e.Snapshot {
		b.WriteString("the last snapshot was not written")
	}
	b.WriteString("; their positions were not committed, so the next start reads them again")
	if e.Err != nil {
		fmt.Fprintf(&b, " (last error: %v)", e.Err)
	}
	return b.String()
}

func (e *ShutdownError) Unwrap() error { return e.Err }

// ErrFatal marks a snapshot error that must stop the worker.
var ErrFatal = errors.New("fatal")

// snapshotLoop writes the snapshots handed over, newest first, each
// until it succeeds, and commits their positions to the source. When stop
// closes it writes what is pending and returns.
func (w *Worker) snapshotLoop(ctx context.Context, stop <-chan struct{}) error {
	if w.cfg.Snapshots == nil {
		<-stop
		return nil
	}
	bo := retry.Backoff{Min: retryMinDelay, Max: retryMaxDelay}
	for {
		stopping := false
		select {
		case <-w.snapSignal:
		case <-stop:
			stopping = true
		}
		w.snapMu.Lock()
		snap := w.snapPending
		w.snapPending = nil
		w.snapMu.Unlock()
		if snap != nil {
			join, err := snap.join.encode()
			if err != nil {
				return fmt.Errorf("%w: %w", ErrFatal, err)
			}
			// Every failure makes the worker not ready; one marked
			// ErrFatal is final and not counted as a snapshot error.
			err = retry.Do(ctx, &bo, func(ctx context.Context) error {
				err := w.cfg.Snapshots.Snapshot(ctx, snap.state, snap.positions, join)
				if err == nil {
					return nil
				}
				if errors.Is(err, ErrFatal) {
					w.readiness.fail(NotReadySnapshots, err.Error())
					return retry.Permanent(err)
				}
				w.metrics.SnapshotErrors.Inc()
				w.readiness.fail(NotReadySnapshots, err.Error())
				return err
			}, func(err error) {
				w.log.Warn("snapshot failed; retrying", zap.Error(err))
			})
			if errors.Is(err, ErrFatal) {
				return err
			}
			if err != nil {
				return fmt.Errorf("last snapshot not written: %w", err)
			}
			w.readiness.ok(NotReadySnapshots)
			w.metrics.Snapshots.Inc()
			w.metrics.LastSnapshot.SetToCurrentTime()
			w.readRequest(ctx, false)
			if err := w.commit(ctx, snap.positions); err != nil && !errors.Is(err, context.Canceled) {
				w.log.Warn("commit to the broker failed (lag monitoring only)", zap.Error(err))
			}
		}
		if stopping {
			return nil
		}
	}
}

// commitTimeout bounds a commit to the sources: it is for lag monitoring
// only, and a broker that takes it and never answers must not hold the
// snapshots (or, without them, the outputs) that wait behind it.
const commitTimeout = 10 * time.Second

// commit tells the sources how far the model has got, within
// commitTimeout.
func (w *Worker) commit(ctx context.Context, positions map[string]int64) error {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	if w.joined != nil {
		return w.joined.commit(ctx, w.src, positions)
	}
	return w.src.Commit(ctx, positions)
}

// handOver queues snap for writing, replacing an older one not yet begun.
func (w *Worker) handOver(snap *snapshotCopy) {
	w.snapMu.Lock()
	w.snapPending = snap
	w.snapMu.Unlock()
	select {
	case w.snapSignal <- struct{}{}:
	default:
	}
}

// consume reads, processes and queues batches until ctx is done or the
// source fails. A batch it has processed is in the model, so it is always
// queued, even after ctx is done: only flushCtx (the shutdown limit, or a
// publisher that stopped) stops that hand-over, and then consume returns
// the batch it could not queue.
func (w *Worker) consume(ctx, flushCtx context.Context, queue chan<- *outBatch) (unsent *outBatch, err error) {
	var x learner.Example
	var line []byte
	lastLabeled, lastTime, dirty := w.model.Counts().Labeled, time.Now(), false
	// takeSnapshot copies the model if one is due (or final) and anything
	// changed since the last.
	takeSnapshot := func(final bool) *snapshotCopy {
		if w.cfg.Snapshots == nil {
			return nil
		}
		labeled := w.model.Counts().Labeled
		due := final ||
			(w.cfg.SnapshotEvery > 0 && labeled-lastLabeled >= uint64(w.cfg.SnapshotEvery)) ||
			(w.cfg.SnapshotInterval > 0 && time.Since(lastTime) >= w.cfg.SnapshotInterval)
		if !due || !dirty {
			return nil
		}
		lastLabeled, lastTime, dirty = labeled, time.Now(), false
		snap := &snapshotCopy{state: w.model.State(), positions: maps.Clone(w.positions)}
		if w.joined != nil {
			snap.join = w.joined.state()
		}
		return snap
	}
	// send queues b; false means the shutdown limit passed first.
	send := func(b *outBatch) bool {
		if !w.cfg.budget.take(flushCtx, b) {
			unsent = b
			return false
		}
		select {
		case queue <- b:
			return true
		case <-flushCtx.Done():
			unsent = b
			return false
		}
	}
	// sendSnapshot queues a batch without messages that carries snap.
	sendSnapshot := func(snap *snapshotCopy) bool {
		b := w.batchPool.Get().(*outBatch)
		b.reset()
		b.messages = 0
		b.fetched, b.snap = time.Now(), snap
		return send(b)
	}
	// On an idle stream Fetch waits for ever; the alarm ends it when a
	// snapshot by interval falls due while the model holds examples that
	// no snapshot does.
	// The view follows the model at most every ViewInterval; viewStale
	// says the model changed since the last view.
	lastView, viewStale := time.Now(), false
	refreshView := func() {
		if !w.cfg.Views {
			return
		}
		if time.Since(lastView) < w.cfg.ViewInterval {
			viewStale = true
			return
		}
		w.publishView()
		lastView, viewStale = time.Now(), false
	}
	alarm := newAlarm(ctx)
	defer alarm.stop()
	// idle learns what the join has decided without a batch of input (a
	// restored join, a mark's window), writes a mark if one is due, and
	// queues what that produced; false means the shutdown limit passed.
	// learned records that the model includes b, a batch processed from
	// the counts start: its positions, its metrics, the view.
	learned := func(b *outBatch, start learner.Counts) {
		start = w.promotion.shift(start)
		w.mu.Lock()
		maps.Copy(w.positions, b.resume)
		w.model.MetricsLater(&w.stats)
		w.metrics.observe(start, &w.stats, b.resume)
		w.mu.Unlock()
		w.metrics.challengers(w.rivals)
		refreshView()
	}
	idle := func() (bool, error) {
		start := w.model.Counts()
		b, err := w.joinedIdle(ctx, &x)
		if err != nil || b == nil {
			return true, err
		}
		dirty = true
		learned(b, start)
		return send(b), nil
	}
	if w.joined != nil {
		rctx, stopReaders := context.WithCancel(ctx)
		w.joined.start(rctx, w.src, w.cfg.Batch)
		defer func() {
			stopReaders()
			w.joined.stop()
		}()
		if ok, err := idle(); err != nil || !ok {
			return unsent, err
		}
	}
	for {
		var due time.Time
		if dirty && w.cfg.Snapshots != nil && w.cfg.SnapshotInterval > 0 {
			due = lastTime.Add(w.cfg.SnapshotInterval)
		}
		if viewStale {
			if d := lastView.Add(w.cfg.ViewInterval); due.IsZero() || d.Before(due) {
				due = d
			}
		}
		if w.joined != nil {
			if d := w.joined.markDue(); !d.IsZero() && (due.IsZero() || d.Before(due)) {
				due = d
			}
		}
		if due.IsZero() {
			alarm.clear()
		} else {
			alarm.set(time.Until(due))
		}
		fetchCtx := alarm.context()
		var msgs []Message
		var labels bool
		var err error
		if w.joined != nil {
			var f fetched
			f, err = w.fetchJoined(fetchCtx)
			msgs, labels = f.msgs, f.label
		} else {
			msgs, err = w.src.Fetch(fetchCtx, w.cfg.Batch)
		}
		if err != nil {
			if ctx.Err() != nil {
				if snap := takeSnapshot(true); snap != nil {
					sendSnapshot(snap)
				}
				return unsent, nil
			}
			if fetchCtx.Err() != nil && errors.Is(err, context.Canceled) {
				// The alarm (or a spurious wake-up: then nothing is due).
				if viewStale {
					refreshView()
				}
				if w.joined != nil {
					if ok, err := idle(); err != nil || !ok {
						return unsent, err
					}
				}
				if snap := takeSnapshot(false); snap != nil && !sendSnapshot(snap) {
					return unsent, nil
				}
				continue
			}
			if !errors.Is(err, ErrRangeDone) {
				// The source failed: what the model learned is written
				// once its outputs are, so that a restart goes on from
				// there rather than from the last snapshot due.
				if snap := takeSnapshot(true); snap != nil && !sendSnapshot(snap) {
					return unsent, fmt.Errorf("fetch: %w", err)
				}
			}
			return nil, fmt.Errorf("fetch: %w", err)
		}
		dirty = true
		b := w.batchPool.Get().(*outBatch)
		b.reset()
		if b.resume == nil {
			b.resume = map[string]int64{}
		}
		b.fetched = time.Now()
		b.messages = len(msgs)
		start := w.model.Counts()
		w.refreshLimits()
		switch {
		case w.joined == nil:
			for i := range msgs {
				line = w.process(&msgs[i], &x, b, line)
			}
		case labels:
			for i := range msgs {
				line = w.processLabel(&msgs[i], &x, b, line)
			}
		default:
			for i := range msgs {
				line = w.processHead(&msgs[i], &x, b, line)
			}
		}
		if w.joined != nil {
			if err := w.afterJoined(ctx, &x, b); err != nil {
				return nil, err
			}
		}
		b.seal()
		learned(b, start)
		final := ctx.Err() != nil
		b.snap = takeSnapshot(final)
		// The budget is taken like the queue: a batch that waits for
		// either once ctx is done is still sent, until the shutdown limit.
		queued := false
		if w.cfg.budget.take(ctx, b) {
			select {
			case queue <- b:
				queued = true
			case <-ctx.Done():
			}
		}
		if !queued {
			// Processed: it is in the model, so it must still be published.
			if b.snap == nil {
				b.snap = takeSnapshot(true)
			}
			send(b)
			return unsent, nil
		}
		if final {
			return nil, nil
		}
	}
}

// alarm is a context that a timer cancels, renewed once it has gone off.
// Setting and clearing it do not allocate; only a renewal does.
type alarm struct {
	parent context.Context
	timer  *time.Timer

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
}

func newAlarm(parent context.Context) *alarm {
	a := &alarm{parent: parent}
	a.ctx, a.cancel = context.WithCancel(parent)
	a.timer = time.AfterFunc(time.Hour, a.fire) // any delay: stopped here, armed by set
	a.timer.Stop()
	return a
}

func (a *alarm) fire() {
	a.mu.Lock()
	a.cancel()
	a.mu.Unlock()
}

// set makes the alarm go off after d (at once if d <= 0): the context
// that context returns from now on ends then, even when d has passed
// already.
func (a *alarm) set(d time.Duration) {
	a.timer.Stop()
	a.renew()
	a.timer.Reset(d)
}

// clear stops the alarm. One that was going off as it was cleared may
// still end the current context: callers treat a wake-up as a hint.
func (a *alarm) clear() {
	a.timer.Stop()
	a.renew()
}

// renew replaces a context the alarm ended, before it is armed again: a
// renewal when the context is asked for would lose an alarm that went off
// at once.
func (a *alarm) renew() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil && a.parent.Err() == nil {
		a.ctx, a.cancel = context.WithCancel(a.parent)
	}
}

// context is done when the parent is, or once the alarm went off after
// the last set or clear.
func (a *alarm) context() context.Context {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ctx
}

func (a *alarm) stop() {
	a.timer.Stop()
	a.mu.Lock()
	a.cancel()
	a.mu.Unlock()
}

// process handles one message: the heart of the worker.
//
// Every output it adds fits its destination's limit (see limitedSink):
// one that did not would be refused on every attempt and stall the stream.
// An event over the limit is replaced by a dead letter that says so; the
// model has learned from the example all the same, so its state never
// depends on the outputs' limits. A message gets at most one dead letter.
func (w *Worker) process(m *Message, x *learner.Example, b *outBatch, scratch []byte) []byte {
	b.resume[m.Position.Source] = m.Resume
	var (
		meta wire.Meta
		err  error
	)
	if w.rivals != nil {
		meta, err = w.rivals.decode(w, m.Value, x)
	} else {
		meta, err = w.decode(m.Value, x)
	}
	key := m.Position.AppendEventID(scratch[:0])
	if err != nil {
		w.refuse(m, key, err, b)
		return key
	}
	if s := w.streak; s.failed != 0 || !s.decoded {
		w.decodedAgain(m)
	}
	if rj := w.cfg.rangeJoin; rj != nil && meta.HasID && !x.Labeled {
		// A delayed example in an epoch's range: its prediction was the
		// head's, and its label is the one its join decided.
		x.Label, x.Labeled = rj.take(m)
		w.learnAt(m, x, meta, b)
		return key
	}
	version := w.model.Version()
	o := w.model.Learn(x)
	ev := wire.Prediction{Position: m.Position, Meta: meta, Outcome: o, Label: x.Label, Model: w.cfg.Model, Version: version}
	if w.rivals != nil {
		w.rivals.learn(w, m.Value, x, &o)
		if w.cfg.ChallengerPredictions.enabled() {
			w.challengerPredictions(m, key, &ev, b)
		}
	}
	over := w.publishOutcome(key, &ev, b)
	if o.Drift != nil {
		over = alsoOver(over, w.drifted(m, key, &ev, b))
	}
	if over != nil {
		w.deadLetter(m, key, over, reasonOutputTooLarge, b)
	}
	if w.rivals != nil {
		w.promoteAfter(m, b)
	}
	return key
}

// publishOutcome adds the prediction event ev, keyed by key, and, when
// its label shows it wrong, its misclassification. It returns the error
// of each event that is over its output's limit (see alsoOver), for the
// caller to make one dead letter naming every event the message lost;
// nil when every event fits.
func (w *Worker) publishOutcome(key []byte, ev *wire.Prediction, b *outBatch) (over error) {
	o := &ev.Outcome
	if w.cfg.Predictions.enabled() && (w.cfg.Publish == wire.PublishAll || (w.cfg.Publish == wire.PublishUnlabeled && !o.Labeled)) {
		start := len(b.arena)
		b.arena = w.cfg.Encoding.AppendPrediction(b.arena, ev, w.labels)
		over = b.addWithin(w.cfg.Predictions, w.limits.predictions, "prediction", key, start)
	}
	if o.Labeled && !o.Correct && w.cfg.Misclassifications.enabled() {
		mt := w.model.Counts()
		mc := wire.Misclassification{Prediction: *ev, Mistakes: mt.Mistakes, Examples: mt.Examples}
		start := len(b.arena)
		b.arena = w.cfg.Encoding.AppendMisclassification(b.arena, &mc, w.labels)
		over = alsoOver(over, b.addWithin(w.cfg.Misclassifications, w.limits.misclassifications, "misclassification", key, start))
	}
	return over
}

// alsoOver joins the errors of a message's events over their outputs'
// limits on one line: the message gets one dead letter (its events share
// its id, which a dead-letter stream would take for a repeat), and its
// error names every event dropped.
func alsoOver(over, err error) error {
	switch {
	case err == nil:
		return over
	case over == nil:
		return err
	}
	return fmt.Errorf("%w; %w", over, err)
}

// refuse makes m, which failed to decode with err, a dead letter, and
// warns once when the messages keep failing for the same reason (see
// deadStreak): a dead letter alone is counted, not logged, as bad input
// can come at the stream's rate, but a stream of nothing else is most
// likely a setting, and the worker is otherwise ready and silent.
func (w *Worker) refuse(m *Message, key []byte, err error, b *outBatch) {
	w.metrics.DecodeErrors.Inc()
	r := reasonOf(w.cfg.Format, m.Value, err)
	w.deadLetter(m, key, err, r, b)
	if !w.streak.fail(r) {
		return
	}
	fields := []zap.Field{zap.String("reason", r.String()), zap.Int("messages", w.streak.run),
		zap.String("source", m.Position.Source), zap.String("event_id", string(key)), zap.Error(err)}
	switch {
	case r == reasonWrongFormat && w.cfg.Format == wire.FormatMsgpack:
		w.log.Warn("messages look like JSON but source.format is msgpack; they all go to the dead letters", fields...)
	case r == reasonWrongFormat:
		w.log.Warn("messages look like msgpack but source.format is jsonl; they all go to the dead letters", fields...)
	default:
		if h := r.hint(); h != "" {
			fields = append(fields, zap.String("hint", h))
		}
		w.log.Warn("every one of the last messages failed to decode for the same reason; they all went to the dead letters", fields...)
	}
}

// decodedAgain records that m decoded, which ends a run of failures, and
// says so if the run was warned about.
func (w *Worker) decodedAgain(m *Message) {
	if warned, failed := w.streak.ok(); warned {
		w.log.Info("messages decode again", zap.Int("dead_letters", failed), zap.String("source", m.Position.Source))
	}
}

// limitedSink is a Sink that knows how large an output the broker takes.
// The broker adapters implement it; a Sink that does not is taken to have
// no limit.
type limitedSink interface {
	// MaxOutputBytes is the size of the largest output, counted as
	// len(Key)+len(Value), that Publish can deliver to topic: the
	// broker's real limit for it, less what the sink adds to each
	// message. An output over it would be refused on every attempt. The
	// limit is looked up once per topic, in bounded time; while that
	// fails, the sink returns a documented fallback and asks again now
	// and then. It is safe to call concurrently with Publish.
	MaxOutputBytes(topic string) int
}

// ErrOutputTooLarge marks a sink's error for an output larger than its
// destination takes now, though it fitted when the output was made: the
// broker's limit was lowered since (a NATS server restarted with a smaller
// max_payload). Publishing it again fails the same way, so the worker
// stops rather than retry for ever: what it had not published is read
// again at its next start, where the outputs are made to the new limit
// and those over it become dead letters.
var ErrOutputTooLarge = errors.New("an output is larger than its destination takes now")

// maxOutputBytes is the largest output d takes (see limitedSink).
func (d Destination) maxOutputBytes() int {
	if s, ok := d.Sink.(limitedSink); ok {
		return s.MaxOutputBytes(d.Topic)
	}
	return math.MaxInt
}

// outputLimits are the destinations' limits (see limitedSink), read once
// per batch rather than for every event: a sink's lookup takes a lock,
// and its first one asks the broker.
type outputLimits struct {
	predictions, misclassifications, deadLetter, drift int
	challengerPredictions, promotions                  int
	// lateLabels is outputs.late_labels' limit, with labels that come
	// later.
	lateLabels int
}

// refreshLimits reads the destinations' limits for the next batch.
func (w *Worker) refreshLimits() {
	w.limits = outputLimits{
		predictions:        w.cfg.Predictions.maxOutputBytes(),
		misclassifications: w.cfg.Misclassifications.maxOutputBytes(),
		deadLetter:         w.cfg.DeadLetter.maxOutputBytes(),
		drift:              w.cfg.Drift.maxOutputBytes(),

		challengerPredictions: w.cfg.ChallengerPredictions.maxOutputBytes(),
		promotions:            w.cfg.Promotions.maxOutputBytes(),
	}
	if w.cfg.Labels != nil {
		w.limits.lateLabels = w.cfg.Labels.LateLabels.maxOutputBytes()
	}
}

// addWithin adds the event of the given kind encoded at arena[start:] for
// d, keyed by key, if it fits limit, d's limit. If not, it drops the event
// and returns an error naming its kind, its size and the limit.
func (b *outBatch) addWithin(d Destination, limit int, kind string, key []byte, start int) error {
	size := len(key) + len(b.arena) - start
	if size > limit {
		b.arena = b.arena[:start]
		return fmt.Errorf("%s event: %d bytes exceed the limit of %d of output %s", kind, size, limit, d.Topic)
	}
	b.add(d, key, start)
	return nil
}

// deadLetter adds the dead letter of m, refused with cause, keyed by key,
// and counts it under reason: with as much of m's bytes as the dead-letter
// output takes (see wire.Encoding.AppendDeadLetter). With no dead-letter
// destination, or one too small for even an empty payload, it logs the
// event id and cause instead, at most once every deadLogEvery.
func (w *Worker) deadLetter(m *Message, key []byte, cause error, reason deadReason, b *outBatch) {
	w.metrics.deadLetters[reason].Inc()
	d := w.cfg.DeadLetter
	why := "no dead-letter destination"
	if d.enabled() {
		start := len(b.arena)
		var ok bool
		b.arena, ok = w.cfg.Encoding.AppendDeadLetter(b.arena, m.Position, cause, m.Value, w.limits.deadLetter-len(key))
		if ok {
			b.add(d, key, start)
			return
		}
		why = "dead-letter output limit too small"
	}
	// Allow before the fields: a flood of bad input costs no allocation.
	if n, ok := w.deadLogs.Allow(); ok {
		w.log.Warn("dead letter dropped", zap.String("reason", why),
			zap.String("event_id", string(key)), zap.Error(cause), retry.Suppressed(n))
	}
}

func (w *Worker) decode(value []byte, x *learner.Example) (wire.Meta, error) {
	return decodeExample(w.dec, w.cfg.Format, value, x)
}

// decodeExample decodes the example value as format says with dec.
func decodeExample(dec *wire.Decoder, format wire.Format, value []byte, x *learner.Example) (wire.Meta, error) {
	return dec.DecodeMessage(value, format, x)
}

// publishLoop publishes the batches in order, each until it succeeds, and
// then commits the positions they cover to the source. Batches that queue
// up while a publish is in flight go out together in the next one, so a
// slow broker round trip makes publishes larger rather than the worker
// slower. To a SendSink the next group is sent while the broker stores
// the one before it: at most two groups are in flight, and a group's
// positions are taken only once it and every group before it are held.
// It returns when queue is closed and empty, or when ctx ends with the
// batches it was publishing then, and the last publish error.
func (w *Worker) publishLoop(ctx context.Context, queue <-chan *outBatch) ([]*outBatch, error) {
	bo := retry.Backoff{Min: retryMinDelay, Max: retryMaxDelay}
	// Two groups take turns: one in flight, one being sent.
	var groups [2]inFlight
	var prev *inFlight
	turn := 0
	for {
		var b *outBatch
		ok := true
		select {
		case b, ok = <-queue:
		default:
			// Nothing to send beside the group in flight: it is waited
			// for now, so that an idle worker's positions are taken.
			if prev != nil {
				if err := w.complete(ctx, &bo, prev); err != nil {
					return prev.group, err
				}
				prev = nil
			}
			b, ok = <-queue
		}
		if !ok {
			break
		}
		cur := &groups[turn]
		turn = 1 - turn
		cur.reset(b)
		outputs := b.count()
	more:
		for outputs < maxPublish {
			select {
			case next, ok := <-queue:
				if !ok {
					break more
				}
				cur.group = append(cur.group, next)
				outputs += next.count()
			default:
				break more
			}
		}
		for _, sink := range sinksOf(cur.group) {
			out := cur.outputs(sink)
			if len(out) == 0 {
				continue
			}
			if ss, ok := sink.(SendSink); ok {
				cur.sent = append(cur.sent, sent{sink: sink, outputs: out, wait: ss.Send(ctx, out)})
				continue
			}
			if err := w.publish(ctx, &bo, sink, out); err != nil {
				return prev.append(cur.group), err
			}
		}
		if prev != nil {
			if err := w.complete(ctx, &bo, prev); err != nil {
				return prev.append(cur.group), err
			}
			prev = nil
		}
		if len(cur.sent) > 0 {
			prev = cur
			continue
		}
		if err := w.complete(ctx, &bo, cur); err != nil {
			return cur.group, err
		}
	}
	if prev != nil {
		if err := w.complete(ctx, &bo, prev); err != nil {
			return prev.group, err
		}
	}
	return nil, nil
}

// inFlight is a group of batches being published: its outputs by sink,
// and those sent to a SendSink, whose wait is outstanding.
type inFlight struct {
	group  []*outBatch
	merged map[Sink][]Output
	sent   []sent
}

// sent is the outputs of a group sent to a SendSink.
type sent struct {
	sink    Sink
	outputs []Output
	wait    func(context.Context) error
}

// reset makes f the group of b alone, keeping its slices.
func (f *inFlight) reset(b *outBatch) {
	f.group = append(f.group[:0], b)
	for sink, out := range f.merged {
		f.merged[sink] = out[:0]
	}
	clear(f.sent)
	f.sent = f.sent[:0]
}

// outputs gathers the outputs of f's group for sink, in batch order.
func (f *inFlight) outputs(sink Sink) []Output {
	if f.merged == nil {
		f.merged = map[Sink][]Output{}
	}
	out := f.merged[sink][:0]
	for _, g := range f.group {
		out = append(out, g.outputsFor(sink)...)
	}
	f.merged[sink] = out
	return out
}

// append is f's group followed by group; group alone when f is nil.
func (f *inFlight) append(group []*outBatch) []*outBatch {
	if f == nil {
		return group
	}
	return append(slices.Clone(f.group), group...)
}

// publish publishes outputs to sink until it succeeds or ctx ends.
func (w *Worker) publish(ctx context.Context, bo *retry.Backoff, sink Sink, outputs []Output) error {
	// Every failure is counted and makes the worker not ready, the last
	// one too (ctx ended); none is final.
	return retry.Do(ctx, bo, func(ctx context.Context) error {
		err := sink.Publish(ctx, outputs)
		if err != nil {
			w.publishFailed(err)
		}
		if errors.Is(err, ErrOutputTooLarge) {
			return retry.Permanent(err)
		}
		return err
	}, func(err error) { w.publishRetrying(err, len(outputs)) })
}

// publishFailed counts a failed publish and makes the worker not ready.
func (w *Worker) publishFailed(err error) {
	w.metrics.PublishErrors.Inc()
	w.readiness.fail(NotReadyOutputs, err.Error())
}

// publishRetrying logs that a publish of n outputs failed and is tried
// again.
func (w *Worker) publishRetrying(err error, n int) {
	w.log.Warn("publishing outputs failed; consumption paused, retrying", zap.Error(err), zap.Int("outputs", n))
}

// complete waits until the broker holds every output f sent, publishing
// again those whose wait failed, and then takes the positions of f's
// group: they are published.
func (w *Worker) complete(ctx context.Context, bo *retry.Backoff, f *inFlight) error {
	for i := range f.sent {
		s := &f.sent[i]
		if err := s.wait(ctx); err != nil {
			w.publishFailed(err)
			w.publishRetrying(err, len(s.outputs))
			if err := w.publish(ctx, bo, s.sink, s.outputs); err != nil {
				return err
			}
		}
	}
	if w.readiness.ok(NotReadyOutputs) {
		w.log.Info("outputs are published again; consumption resumed")
	}
	w.mu.Lock()
	for _, g := range f.group {
		maps.Copy(w.published, g.resume)
	}
	done := maps.Clone(w.published)
	w.mu.Unlock()
	if w.cfg.Snapshots == nil {
		if err := w.commit(ctx, done); err != nil && !errors.Is(err, context.Canceled) {
			w.log.Warn("commit to the broker failed (lag monitoring only)", zap.Error(err))
		}
	}
	// The outputs of every message a snapshot includes are durable
	// now: it may be written.
	for i := len(f.group) - 1; i >= 0; i-- {
		if snap := f.group[i].snap; snap != nil {
			w.handOver(snap)
			break
		}
	}
	for _, g := range f.group {
		if g.messages > 0 {
			w.metrics.BatchLatency.Observe(time.Since(g.fetched).Seconds())
		}
		w.cfg.budget.give(g)
		w.batchPool.Put(g)
	}
	return nil
}

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
