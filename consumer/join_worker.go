package consumer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// LabelsConfig makes a Worker join labels that come later, on an input of
// their own, to the examples it predicts (docs/labels.md). The worker's
// source is then the head: it predicts every example as it comes, and
// learns each one from the tail once its join is decided.
type LabelsConfig struct {
	Join JoinConfig
	// Shard is the examples' shard this join is of, where a process joins
	// several (partition scope, epochs): its metrics sum over shards. The
	// zero ID for the join of a source of one shard.
	Shard shardid.ID
	// Source reads the labels from the position the model's snapshot
	// recorded for them (the labels' earliest record without one).
	Source Source
	// OpenTail opens the examples again after resume (a Resume value of
	// the examples' source key), to learn those whose join is decided
	// once the head's recent examples (CacheBytes) no longer hold them.
	// The worker closes what it opens.
	OpenTail func(ctx context.Context, resume map[string]int64) (Source, error)
	// CacheBytes bounds the examples the head keeps, as read, for the
	// tail: while the tail is that close behind, it reads no log again.
	// 0 means DefaultJoinCache.
	CacheBytes int
	// Format is the labels' encoding.
	Format wire.Format
	// Marks is the labels' topic or subject, where the worker appends a
	// mark when a window must close on a quiet input; Writer names the
	// worker in it.
	Marks  Destination
	Writer string
	// LateLabels receives the labels that joined no example.
	LateLabels Destination
	// State is the join the model's snapshot recorded; nil for none.
	State *JoinState
}

// DefaultJoinCache is LabelsConfig.CacheBytes' default: about 100,000
// examples of 600 bytes, a minute at the rate of most streams.
const DefaultJoinCache = 64 << 20

// markEvery is the least time between two marks, and how long after a
// window closed by the worker's clock its mark is written
// (docs/labels.md, section 5).
const markEvery = time.Second

// rollingServed is how many joined labels the rolling served measures
// cover.
const rollingServed = 1000

// joined is a worker's side of the join: the two inputs read ahead by
// goroutines of their own, the tail, and the join itself.
type joined struct {
	cfg  LabelsConfig
	join *Join
	dec  *wire.Decoder

	// head is the Resume of the last example read at the head; tail that
	// of the last one learned.
	head, tail int64
	// exSource is the examples' source key; initial the model's
	// positions when the worker started.
	exSource string
	initial  map[string]int64
	// lbSource is the labels' source key.
	lbSource string

	examples, labels *reader
	last             *fetched

	// lbRead is the Resume of the last label read. readTo is where an
	// epochs' range of this head's shard read the labels to, and waits for
	// the head to have published what they decide (Epochs.awaitHead): the
	// labels' reader does not stop for labels ahead (Join.LabelsAhead)
	// below it, as the range would wait for ever. wake tells fetch that
	// readTo moved.
	lbRead int64
	readTo atomic.Int64
	wake   chan struct{}

	// tailSrc reads the examples again from the tail (nil until needed);
	// tailBuf[tailNext:] is what it fetched and the tail has not taken
	// yet.
	tailSrc  Source
	tailBuf  []Message
	tailNext int

	// cache holds the head's examples with Resume beyond cacheFrom, in
	// order, every one of them, as decoded: the tail takes them from
	// there while it can (cacheFrom ≤ tail).
	cache      []cachedExample
	cacheFirst int
	cacheBytes int
	cacheFrom  int64
	// dropped counts the examples dropped from the cache: the one at
	// cacheFirst is the cache's example dropped (in the order kept).
	dropped int64
	slab    featureSlab

	// progress is head, tail and pending as of the last batch, for
	// JoinProgress.
	progress struct {
		sync.Mutex
		head, tail int64
		pending    int
	}

	lastMark time.Time
	// futureWarned is when the last warning of a record stamped ahead
	// of this worker's clock was logged (checkFuture).
	futureWarned time.Time
	// untimedWarned is when the last warning of a record without a time
	// was logged (checkFuture).
	untimedWarned time.Time
	// reusedWarned is when the last warning of an example whose id an
	// earlier held example has was logged (checkReused).
	reusedWarned time.Time
	// scratch is the head's, predicting with a view (WorkerConfig.head).
	scratch learner.Scratch

	mu sync.Mutex
	// labelKeys are the source keys the labels' messages carried, to
	// split a commit between the two inputs.
	labelKeys map[string]bool
}

// reader fetches batches from one source ahead of the worker, one at a
// time: it fetches the next once the worker is done with the last.
type reader struct {
	src  Source
	ch   chan fetched
	ack  chan struct{}
	done chan struct{}
}

type fetched struct {
	msgs  []Message
	err   error
	from  *reader
	label bool
}

func newJoined(cfg LabelsConfig, model *learner.Model, opts wire.DecoderOptions, positions map[string]int64) (*joined, error) {
	if cfg.Source == nil || cfg.OpenTail == nil {
		return nil, errors.New("labels: no labels' source, or no way to read the examples again")
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultJoinCache
	}
	j := &joined{cfg: cfg, dec: wire.NewDecoder(model.Config(), opts), labelKeys: map[string]bool{}, initial: maps.Clone(positions), wake: make(chan struct{}, 1)}
	if cfg.State != nil {
		var err error
		if j.join, err = RestoreJoin(cfg.Join, cfg.State, model.Config()); err != nil {
			return nil, err
		}
		j.head, j.exSource, j.lbSource = cfg.State.Head, cfg.State.Source, cfg.State.LabelsSource
		j.tail = positions[j.exSource]
		j.lbRead = positions[j.lbSource]
		if j.lbSource != "" {
			j.labelKeys[j.lbSource] = true
		}
	} else {
		j.join = NewJoin(cfg.Join)
	}
	j.cacheFrom = j.head
	j.progress.head, j.progress.tail, j.progress.pending = j.head, j.tail, j.join.Pending()
	return j, nil
}

// start runs the readers of the two inputs until ctx is done; stop waits
// for them.
func (j *joined) start(ctx context.Context, src Source, batch int) {
	j.examples = startReader(ctx, src, batch)
	j.labels = startReader(ctx, j.cfg.Source, batch)
}

func (j *joined) stop() {
	<-j.examples.done
	<-j.labels.done
	if j.tailSrc != nil {
		j.tailSrc.Close() //nolint:errcheck // it only read
		j.tailSrc = nil
	}
}

// cachedExample is an example the head read, kept for the tail: its
// message without its bytes, and the example as decoded (ok), its label
// and weight as it came, with its id (for a drift event at it).
type cachedExample struct {
	m     Message
	x     learner.Example
	id    []byte
	hasID bool
	ok    bool
}

// featureSlab copies the features of cached examples into slabs shared
// by many, rather than two allocations an example. The cache keeps and
// drops its examples in order, so a slab is free once the last example cut
// from it is dropped, and the next slab is taken from those.
type featureSlab struct {
	index slabs[uint32]
	value slabs[float64]
	id    slabs[byte]
}

const slabLen = 1 << 15

// indices and values copy v for the cache's example seq (kept in order).
func (s *featureSlab) indices(v []uint32, seq int64) []uint32  { return s.index.cut(v, seq) }
func (s *featureSlab) values(v []float64, seq int64) []float64 { return s.value.cut(v, seq) }

// release frees the slabs of examples up to seq, which are dropped.
func (s *featureSlab) release(seq int64) {
	s.index.release(seq)
	s.value.release(seq)
	s.id.release(seq)
}

// slabs are the slabs of one element type: cur is cut from, full holds
// those cut from before it, oldest first, each with the last example cut
// from it, and free those whose examples are all dropped.
type slabs[T any] struct {
	cur     []T
	curLast int64
	full    []usedSlab[T]
	free    [][]T
}

type usedSlab[T any] struct {
	s    []T
	last int64
}

// slabsFree is how many free slabs of a type are kept for reuse.
const slabsFree = 2

// cut copies v into the current slab, taking another when it has no room
// left, and returns the copy.
func (s *slabs[T]) cut(v []T, seq int64) []T {
	if len(v) == 0 {
		return nil
	}
	if cap(s.cur)-len(s.cur) < len(v) {
		if s.cur != nil {
			s.full = append(s.full, usedSlab[T]{s: s.cur, last: s.curLast})
		}
		s.cur = nil
		if n := len(s.free); n > 0 && cap(s.free[n-1]) >= len(v) {
			s.cur, s.free = s.free[n-1][:0], s.free[:n-1]
		} else {
			s.cur = make([]T, 0, max(slabLen, len(v)))
		}
	}
	s.curLast = seq
	n := len(s.cur)
	s.cur = append(s.cur, v...)
	return s.cur[n:len(s.cur):len(s.cur)]
}

// release frees the full slabs whose examples, up to seq, are dropped.
func (s *slabs[T]) release(seq int64) {
	n := 0
	for n < len(s.full) && s.full[n].last <= seq {
		if len(s.free) < slabsFree {
			s.free = append(s.free, s.full[n].s)
		}
		n++
	}
	if n > 0 {
		clear(s.full[:n])
		s.full = s.full[n:]
	}
}

// size is about what c holds in memory.
func (c *cachedExample) size() int {
	return 160 + 4*len(c.x.Index) + 8*len(c.x.Value) + 8*len(c.x.Dense) + len(c.id)
}

// keep adds the head's example m, as decoded into x with meta if ok, to
// the cache, dropping the oldest when it is over its bound: the tail reads
// those from the log again.
func (j *joined) keep(m *Message, x *learner.Example, meta wire.Meta, ok bool) {
	c := cachedExample{m: *m, ok: ok}
	c.m.Value = nil
	if ok {
		seq := j.dropped + int64(len(j.cache)-j.cacheFirst)
		c.x = learner.Example{Index: j.slab.indices(x.Index, seq), Value: j.slab.values(x.Value, seq), Dense: j.slab.values(x.Dense, seq),
			Labeled: x.Labeled, Label: x.Label, Weight: x.Weight}
		c.id, c.hasID = j.slab.id.cut(meta.ID, seq), meta.HasID
	}
	j.cache = append(j.cache, c)
	j.cacheBytes += c.size()
	for j.cacheBytes > j.cfg.CacheBytes && j.cacheFirst < len(j.cache) {
		if old := &j.cache[j.cacheFirst]; old.m.Resume > j.tail {
			j.cacheFrom = old.m.Resume
		}
		j.dropCached()
	}
}

// dropCached drops the oldest cached example.
func (j *joined) dropCached() {
	old := &j.cache[j.cacheFirst]
	j.cacheBytes -= old.size()
	*old = cachedExample{}
	j.slab.release(j.dropped)
	j.dropped++
	j.cacheFirst++
	if j.cacheFirst >= 1024 && 2*j.cacheFirst >= len(j.cache) {
		n := copy(j.cache, j.cache[j.cacheFirst:])
		clear(j.cache[n:])
		j.cache, j.cacheFirst = j.cache[:n], 0
	}
}

// tailExample is the next example after the tail: its message, and, when
// it comes from the cache, the example as the head decoded it.
type tailExample struct {
	m      *Message
	cached *cachedExample
}

// nextTail is the next example after the tail, if the head has read it:
// from the cache while it holds every one from the tail on, else from the
// log, read again. It waits for the broker only for examples the head has
// read, which the broker holds.
func (j *joined) nextTail(ctx context.Context, batch int) (tailExample, error) {
	if j.tail >= j.head {
		return tailExample{}, nil
	}
	for j.cacheFirst < len(j.cache) && j.cache[j.cacheFirst].m.Resume <= j.tail {
		j.dropCached()
	}
	if j.tail >= j.cacheFrom && j.cacheFirst < len(j.cache) {
		c := &j.cache[j.cacheFirst]
		return tailExample{m: &c.m, cached: c}, nil
	}
	for j.tailNext < len(j.tailBuf) && j.tailBuf[j.tailNext].Resume <= j.tail {
		j.tailNext++
	}
	if j.tailNext >= len(j.tailBuf) {
		if j.tailSrc == nil {
			src, err := j.cfg.OpenTail(ctx, map[string]int64{j.exSource: j.tail})
			if err != nil {
				return tailExample{}, err
			}
			j.tailSrc = src
		}
		msgs, err := j.tailSrc.Fetch(ctx, batch)
		if err != nil {
			return tailExample{}, err
		}
		j.tailBuf, j.tailNext = msgs, 0
		if len(msgs) == 0 {
			return tailExample{}, fmt.Errorf("the examples read again after position %d: the source returned none", j.tail)
		}
		if msgs[0].Resume <= j.tail {
			return tailExample{}, fmt.Errorf("the examples read again after position %d: the first returned resumes at %d, not after it", j.tail, msgs[0].Resume)
		}
	}
	return tailExample{m: &j.tailBuf[j.tailNext]}, nil
}

// tookTail records that the tail took m, from the cache or from the log.
// The log's reader goes on only while it gave what the tail took: one the
// cache served instead is closed, to be opened again where the tail is
// when it is needed.
func (j *joined) tookTail(e tailExample) {
	j.tail = e.m.Resume
	if e.cached == nil {
		j.tailNext++
		return
	}
	if j.tailSrc != nil {
		// Closing may wait for a fetch in flight: not on the learning
		// goroutine.
		go j.tailSrc.Close() //nolint:errcheck // it only read
		j.tailSrc, j.tailBuf, j.tailNext = nil, nil, 0
	}
}

func startReader(ctx context.Context, src Source, batch int) *reader {
	r := &reader{src: src, ch: make(chan fetched), ack: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			msgs, err := src.Fetch(ctx, batch)
			if err != nil && ctx.Err() != nil {
				return
			}
			select {
			case r.ch <- fetched{msgs: msgs, err: err, from: r}:
			case <-ctx.Done():
				return
			}
			select {
			case <-r.ack:
			case <-ctx.Done():
				return
			}
		}
	}()
	return r
}

// fetch returns the next batch of either input: of the examples unless the
// join is full, of the labels unless they are more than a window ahead
// (docs/labels.md, section 3) and read to readTo. The batch before it is
// released.
func (j *joined) fetch(ctx context.Context) (fetched, error) {
	if j.last != nil {
		j.last.from.ack <- struct{}{}
		j.last = nil
	}
	var f fetched
	for got := false; !got; {
		exCh, lbCh := j.examples.ch, j.labels.ch
		if j.join.Full() {
			exCh = nil
		}
		if j.join.LabelsAhead() && j.lbRead >= j.readTo.Load() {
			lbCh = nil
		}
		select {
		case f = <-exCh:
			got = true
		case f = <-lbCh:
			f.label, got = true, true
		case <-j.wake:
		case <-ctx.Done():
			return fetched{}, ctx.Err()
		}
	}
	j.last = &f
	if f.label {
		j.mu.Lock()
		last := ""
		for i := range f.msgs {
			if k := f.msgs[i].Position.Source; k != last {
				j.labelKeys[k], last = true, k
			}
		}
		j.mu.Unlock()
	}
	return f, f.err
}

// readLabelsTo has the labels read at least to resume (a Resume value),
// however far ahead of the examples they are.
func (j *joined) readLabelsTo(resume int64) {
	for {
		old := j.readTo.Load()
		if resume <= old || j.readTo.CompareAndSwap(old, resume) {
			break
		}
	}
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// commit splits a commit between the two inputs.
func (j *joined) commit(ctx context.Context, head Source, resume map[string]int64) error {
	ex, lb := map[string]int64{}, map[string]int64{}
	j.mu.Lock()
	for k, v := range resume {
		if j.labelKeys[k] {
			lb[k] = v
		} else {
			ex[k] = v
		}
	}
	j.mu.Unlock()
	return errors.Join(head.Commit(ctx, ex), j.cfg.Source.Commit(ctx, lb))
}

// state is the join as a snapshot records it.
func (j *joined) state() *JoinState {
	st := j.join.State(j.head)
	st.Source, st.LabelsSource = j.exSource, j.lbSource
	return st
}

// markDue is when the worker should write a mark, by its clock; zero when
// no window waits on one.
func (j *joined) markDue() time.Time {
	due, ok := j.join.Due()
	if !ok || !j.cfg.Marks.enabled() {
		return time.Time{}
	}
	at := time.UnixMilli(due).Add(markEvery)
	if next := j.lastMark.Add(markEvery); next.After(at) {
		at = next
	}
	return at
}

// processHead predicts the example of m, publishes its prediction, and
// hands it to the join: the head's part of docs/labels.md section 4.
func (w *Worker) processHead(m *Message, x *learner.Example, b *outBatch, scratch []byte) []byte {
	j := w.joined
	if j.exSource == "" {
		// A model without a join before: the tail is where the model is,
		// or, for a model with no position here yet, just before this
		// first example (a Resume value less one is the position before
		// it, for a Kafka offset and a JetStream sequence alike), which
		// every snapshot from now on records.
		j.exSource = m.Position.Source
		tail, ok := j.initial[j.exSource]
		if !ok {
			tail = m.Resume - 1
		}
		j.tail, j.cacheFrom = tail, tail
		b.resume[j.exSource] = tail
	}
	j.head = m.Resume
	head := w.cfg.head
	if head != nil {
		// The head of an epochs' shard: how far it has read is what
		// its outputs are durable up to.
		b.resume[m.Position.Source] = m.Resume
	}
	t := Millis(m.Time)
	w.checkFuture(m, t, false, b.fetched)
	meta, err := w.decode(m.Value, x)
	j.keep(m, x, meta, err == nil)
	key := m.Position.AppendEventID(scratch[:0])
	if err != nil {
		if head == nil {
			w.refuse(m, key, err, b)
		}
		w.joinOutcomes(j.join.Example(m.Position.Offset, t, false, nil, Served{}), b)
		return key
	}
	if s := w.streak; s.failed != 0 || !s.decoded {
		w.decodedAgain(m)
	}
	delayed := meta.HasID && !x.Labeled
	if head != nil && !delayed {
		// The epoch's range publishes what it learns as it comes.
		w.joinOutcomes(j.join.Example(m.Position.Offset, t, false, nil, Served{}), b)
		return key
	}
	var o learner.Outcome
	version := w.model.Version()
	if head != nil {
		v := head()
		version, o.Prediction = v.Version(), v.Predict(x, &j.scratch)
	} else {
		o.Prediction = w.model.Predict(x)
	}
	if x.Labeled {
		o.Labeled = true
		o.Correct = o.Label == x.Label
		o.Margin = margin(&o.Prediction, x.Label, w.labels.Multiclass())
	}
	ev := wire.Prediction{Position: m.Position, Meta: meta, Outcome: o, Label: x.Label, Model: w.cfg.Model, Version: version}
	if over := w.publishOutcome(key, &ev, b); over != nil {
		w.deadLetter(m, key, over, reasonOutputTooLarge, b)
	}
	served := Served{Version: version, Probability: float32(o.Probability), Predicted: int32(o.Label)}
	reused := j.join.Reused()
	w.joinOutcomes(j.join.Example(m.Position.Offset, t, delayed, meta.ID, served), b)
	if j.join.Reused() != reused {
		w.reusedID(m, meta.ID, b.fetched)
	}
	return key
}

// reusedID counts a delayed example whose id an earlier example the join
// still holds has, and warns of it at most once a minute: the labels
// after it are decided against the earlier one, so it is learned with
// labels.default or not at all. Ids that name one example each are what
// the join needs (docs/labels.md, section 2).
func (w *Worker) reusedID(m *Message, id []byte, now time.Time) {
	j := w.joined
	w.metrics.Join.Reused.Inc()
	if now.Sub(j.reusedWarned) < time.Minute {
		return
	}
	j.reusedWarned = now
	w.log.Warn("an example's id is the id of an earlier example the join still holds: labels join the earliest, so this one is learned with labels.default or not at all (give each example an id of its own: docs/labels.md, section 2)",
		zap.ByteString("id", id), zap.String("source", m.Position.Source), zap.Int64("offset", m.Position.Offset))
}

// checkFuture counts a record of the join's inputs (of the labels' if
// label) stamped more than a window ahead of this worker's clock, now
// (when its batch was fetched: the clock is read once a batch), and
// warns of it at most once a minute. The join follows the records' own
// times whatever the clock says, so that every replay decides as the live
// worker did: such a record moves its input's watermark to its time, and
// until the clock gets there windows close as soon as they open (a label)
// or no label is related to a later example (an example). A producer's
// clock far ahead, or a time in micro- rather than milliseconds, is the
// usual cause; docs/labels.md, section 8, says how to keep it out.
//
// A record without a time (a Kafka timestamp of -1 or 0, which the client
// gives as the zero time) is counted and warned of apart: the join takes
// it as stamped before every other record, so an example's window has
// closed before its label comes.
func (w *Worker) checkFuture(m *Message, t int64, label bool, now time.Time) {
	j := w.joined
	if t <= 0 {
		w.untimed(m, label, now)
		return
	}
	if t <= now.UnixMilli()+j.join.window {
		return
	}
	input, warn := countRecord(label, w.metrics.Join.futureExamples, w.metrics.Join.futureLabels, &j.futureWarned, now)
	if !warn {
		return
	}
	w.log.Warn("a record of the join's input is stamped more than labels.window ahead of this worker's clock: the join follows record times, so its windows follow this one (fix the producer's clock, or have the broker stamp records: docs/labels.md, section 8)",
		zap.String("input", input), zap.String("source", m.Position.Source), zap.Int64("offset", m.Position.Offset),
		zap.Time("stamped", time.UnixMilli(t)), zap.Duration("ahead", time.UnixMilli(t).Sub(now).Round(time.Second)))
}

// untimed counts a record of the join's inputs (of the labels' if label)
// without a time, and warns of it at most once a minute.
func (w *Worker) untimed(m *Message, label bool, now time.Time) {
	input, warn := countRecord(label, w.metrics.Join.untimedExamples, w.metrics.Join.untimedLabels, &w.joined.untimedWarned, now)
	if !warn {
		return
	}
	w.log.Warn("a record of the join's input has no time (a Kafka timestamp of -1 or 0): the join follows record times and takes it as stamped before every other record, so an example's window has closed before its label comes (have the producer stamp records, or the broker: docs/labels.md, section 8)",
		zap.String("input", input), zap.String("source", m.Position.Source), zap.Int64("offset", m.Position.Offset))
}

// countRecord counts a record of the join's inputs in examples, or in
// labels if label, and returns its input's name and whether to warn of
// it: at most once a minute, last being when it was warned of last.
func countRecord(label bool, examples, labels prometheus.Counter, last *time.Time, now time.Time) (input string, warn bool) {
	input, c := "examples", examples
	if label {
		input, c = "labels", labels
	}
	c.Inc()
	if now.Sub(*last) < time.Minute {
		return input, false
	}
	*last = now
	return input, true
}

// margin is y·f(x) of a binary prediction, the label's score minus the
// best other of a multiclass one.
func margin(p *learner.Prediction, y int, multiclass bool) float64 {
	if !multiclass {
		return float64(y) * p.Score
	}
	best := math.Inf(-1)
	for c, s := range p.Scores {
		if c != y && s > best {
			best = s
		}
	}
	return p.Scores[y] - best
}

// processLabel hands the label record of m to the join and publishes what
// it decided.
func (w *Worker) processLabel(m *Message, x *learner.Example, b *outBatch, scratch []byte) []byte {
	j := w.joined
	b.resume[m.Position.Source] = m.Resume
	j.lbSource = m.Position.Source
	j.lbRead = m.Resume
	t := Millis(m.Time)
	w.checkFuture(m, t, true, b.fetched)
	rec, err := j.dec.DecodeLabel(m.Value, j.cfg.Format, x)
	if err != nil {
		key := m.Position.AppendEventID(scratch[:0])
		w.metrics.DecodeErrors.Inc()
		derr := fmt.Errorf("label record: %w", err)
		if de := (*wire.DecodeError)(nil); errors.As(err, &de) && de.Field == wire.LabelRecordField {
			derr = err
		}
		w.deadLetter(m, key, derr, reasonOf(j.cfg.Format, m.Value, err), b)
		// A record of the labels' log all the same: its time counts.
		w.joinOutcomes(j.join.Skip(t), b)
		return key
	}
	w.joinOutcomes(j.join.Label(m.Position.Offset, t, rec.Mark, rec.ID, rec.Label), b)
	return scratch
}

// joinOutcomes counts and publishes what the join decided: a joined
// label scores its served prediction (and publishes its misclassification
// if it was wrong), a late or unknown one goes to outputs.late_labels.
func (w *Worker) joinOutcomes(ds []Decided, b *outBatch) {
	j := w.joined
	for i := range ds {
		d := &ds[i]
		switch d.Outcome {
		case LabelJoined:
			w.scoreServed(d, b)
		case LabelLate, LabelUnknown:
			if !j.cfg.LateLabels.enabled() {
				continue
			}
			ll := wire.LateLabel{
				Position: wire.Position{Source: j.lbSource, Offset: d.LabelOffset},
				ID:       string(d.ID), Label: d.Label, Reason: d.Outcome.String(),
			}
			if d.Outcome == LabelLate {
				ll.Example = &wire.Position{Source: j.exSource, Offset: d.ExampleOffset}
			}
			start := len(b.arena)
			b.arena = w.cfg.Encoding.AppendLateLabel(b.arena, &ll, w.labels)
			var kb [128]byte
			key := ll.Position.AppendEventID(kb[:0])
			if err := b.addWithin(j.cfg.LateLabels, w.limits.lateLabels, "late label", key, start); err != nil {
				w.joinEventDropped(key, err)
			}
		}
	}
}

// joinEventDropped logs a late label or a joined label's misclassification
// over its output's limit (its id alone can be nearly as large as a
// message of the labels' input), at most once every deadLogEvery: the
// output would refuse it, and the worker would retry it for ever, reading
// nothing more. There is no dead letter: the record it is about, a label
// held or an example read long before, is not at hand.
func (w *Worker) joinEventDropped(key []byte, err error) {
	if n, ok := w.deadLogs.Allow(); ok {
		w.log.Warn("event of the join dropped", zap.String("event_id", string(key)), zap.Error(err), retry.Suppressed(n))
	}
}

// scoreServed scores the prediction that was served for the example a
// label joined.
func (w *Worker) scoreServed(d *Decided, b *outBatch) {
	j := w.joined
	jm := &w.metrics.Join
	correct, loss := j.join.Score(d, !w.labels.Multiclass())
	delay := d.LabelTime - d.ExampleTime
	jm.Delay.Observe(float64(delay) / 1000)
	jm.scored(correct, loss)
	if correct || !w.cfg.Misclassifications.enabled() {
		return
	}
	pos := wire.Position{Source: j.exSource, Offset: d.ExampleOffset}
	o := learner.Outcome{Labeled: true}
	o.Label, o.Probability = int(d.Served.Predicted), float64(d.Served.Probability)
	mt := w.model.Counts()
	mc := wire.Misclassification{
		Prediction: wire.Prediction{Position: pos, Meta: wire.Meta{ID: d.ID, HasID: true}, Outcome: o,
			Label: d.Label, Model: w.cfg.Model, Version: d.Served.Version},
		Mistakes: mt.Mistakes, Examples: mt.Examples, Joined: true, LabelDelay: delay,
	}
	start := len(b.arena)
	b.arena = w.cfg.Encoding.AppendMisclassification(b.arena, &mc, w.labels)
	var kb [128]byte
	key := pos.AppendEventID(kb[:0])
	if err := b.addWithin(w.cfg.Misclassifications, w.limits.misclassifications, "misclassification", key, start); err != nil {
		w.joinEventDropped(key, err)
	}
}

// learnTail learns the examples from the tail on whose joins are decided,
// no further than the head has read: the tail's part of docs/labels.md
// section 4. It fetches from the tail only what the head has read, which
// the broker holds, so it does not wait for new messages.
func (w *Worker) learnTail(ctx context.Context, x *learner.Example, b *outBatch) error {
	j := w.joined
	for {
		e, err := j.nextTail(ctx, w.cfg.Batch)
		if err != nil {
			return fmt.Errorf("read the examples again (the join's tail): %w", err)
		}
		m := e.m
		if m == nil || m.Resume > j.head {
			return nil
		}
		// The example as the head decoded it, or decoded again.
		ex, meta, ok := x, wire.Meta{}, true
		decode := func() error {
			if e.cached != nil {
				ex, ok = &e.cached.x, e.cached.ok
				meta = wire.Meta{ID: e.cached.id, HasID: e.cached.hasID}
				return nil
			}
			var err error
			meta, err = w.decode(m.Value, x)
			ok = err == nil
			return err
		}
		off, decided, pending := j.join.Next()
		switch {
		case pending && off == m.Position.Offset:
			if !decided {
				return nil
			}
			if err := decode(); err != nil || !ok {
				return fmt.Errorf("the join's tail: example %s decoded at the head and not again: %v", m.Position.EventID(), err)
			}
			label, labeled, _ := j.join.Learned()
			ex.Labeled, ex.Label = labeled, label
			w.learnAt(m, ex, meta, b)
		case pending && off < m.Position.Offset:
			return fmt.Errorf("the join's tail: example at offset %d waits for its label, and the examples' log went on from offset %d", off, m.Position.Offset)
		default:
			decode() //nolint:errcheck // a dead letter at the head: the model never sees it
			if ok {
				if e.cached == nil && meta.HasID && !ex.Labeled {
					return fmt.Errorf("the join's tail: example %s waits for a label the join does not know of", m.Position.EventID())
				}
				w.learnAt(m, ex, meta, b)
			}
		}
		b.resume[m.Position.Source] = m.Resume
		j.tookTail(e)
	}
}

// learnAt learns x, the example of m re-read at the tail, whose id meta
// holds.
func (w *Worker) learnAt(m *Message, x *learner.Example, meta wire.Meta, b *outBatch) {
	version := w.model.Version()
	o := w.model.Learn(x)
	if w.rivals != nil {
		// The challengers learn the example where the model does; their
		// predictions at the head were not learned from, so none is
		// published here.
		w.rivals.learn(w, m.Value, x, &o)
	}
	if o.Drift != nil {
		key := m.Position.AppendEventID(nil)
		ev := wire.Prediction{Position: m.Position, Meta: meta, Outcome: o, Label: x.Label, Model: w.cfg.Model, Version: version}
		if over := w.drifted(m, key, &ev, b); over != nil {
			w.deadLetter(m, key, over, reasonOutputTooLarge, b)
		}
	}
	if w.rivals != nil {
		w.promoteAfter(m, b)
	}
}

// writeMark appends a mark to the labels' input if a window waits on one
// (docs/labels.md, section 5).
func (w *Worker) writeMark(b *outBatch) bool {
	j := w.joined
	due := j.markDue()
	if due.IsZero() || time.Now().Before(due) || !j.cfg.Marks.enabled() {
		return false
	}
	j.lastMark = time.Now()
	start := len(b.arena)
	b.arena = wire.AppendMark(b.arena, j.cfg.Format, j.cfg.Writer)
	keyStart := len(b.arena)
	// A key of its own, mark/<writer>/<ns>: a JetStream stream takes the
	// key for the message's id and drops a second message with the same
	// id within its duplicate window, which would drop every mark after
	// the first for minutes (and the marks of the other partitions).
	b.arena = append(append(b.arena, "mark/"...), j.cfg.Writer...)
	b.arena = strconv.AppendInt(append(b.arena, '/'), j.lastMark.UnixNano(), 10)
	b.addSpan(j.cfg.Marks, start, keyStart)
	w.metrics.Join.Marks.Inc()
	w.log.Debug("mark written to the labels' input", zap.Time("window_closed", time.UnixMilli(due.Add(-markEvery).UnixMilli())))
	return true
}

// afterJoined is the join's work after a batch, or without one: the tail
// learns what is decided, a mark is written if one is due, and the join's
// progress is recorded. A tail stopped by ctx is no error: what it
// learned is in b.
func (w *Worker) afterJoined(ctx context.Context, x *learner.Example, b *outBatch) error {
	if w.cfg.head != nil {
		// The epochs learn; the head only lets go of what is decided.
		j := w.joined.join
		for {
			if _, decided, ok := j.Next(); !ok || !decided {
				break
			}
			j.Learned()
		}
	} else if err := w.learnTail(ctx, x, b); err != nil && ctx.Err() == nil {
		return err
	}
	w.writeMark(b)
	w.observeJoin()
	return nil
}

// joinedIdle learns what the join decided without a batch of input, and
// writes a mark if one is due, into a batch without messages; nil when
// that did nothing.
func (w *Worker) joinedIdle(ctx context.Context, x *learner.Example) (*outBatch, error) {
	b := w.batchPool.Get().(*outBatch)
	b.reset()
	b.messages, b.fetched = 0, time.Now()
	if b.resume == nil {
		b.resume = map[string]int64{}
	}
	w.refreshLimits()
	if err := w.afterJoined(ctx, x, b); err != nil {
		w.batchPool.Put(b)
		return nil, err
	}
	if len(b.resume) == 0 && b.count() == 0 {
		w.batchPool.Put(b)
		return nil, nil
	}
	b.seal()
	return b, nil
}

// fetchJoined is the next batch of either input, with the worker not
// ready while the join is full.
func (w *Worker) fetchJoined(ctx context.Context) (fetched, error) {
	if j := w.joined.join; j.Full() {
		w.readiness.fail(NotReadyJoin, fmt.Sprintf("%d examples wait for their labels (labels.max_pending); reading no more until some are learned", j.Pending()))
	} else {
		w.readiness.ok(NotReadyJoin)
	}
	return w.joined.fetch(ctx)
}

// JoinCounts are the outcomes of the join of labels that come later, as
// of the last batch; zero without labels. Only safe to call once Run
// returned.
func (w *Worker) JoinCounts() JoinCounts {
	if w.joined == nil {
		return JoinCounts{}
	}
	return w.joined.join.Counts()
}

// JoinProgress is how far the join of labels that come later has got, as
// of the last batch: the Resume of the last example predicted (head) and
// of the last learned (tail), and how many delayed examples wait between
// them. ok is false without labels. It is safe to call while Run runs.
func (w *Worker) JoinProgress() (head, tail int64, pending int, ok bool) {
	if w.joined == nil {
		return 0, 0, 0, false
	}
	p := &w.joined.progress
	p.Lock()
	defer p.Unlock()
	return p.head, p.tail, p.pending, true
}

// observeJoin records the join's progress after a batch.
func (w *Worker) observeJoin() {
	j := w.joined
	n := j.join.Pending()
	w.metrics.Join.observe(j.cfg.Shard.String(), j.join.Counts(), n, j.join.Held())
	j.progress.Lock()
	j.progress.head, j.progress.tail, j.progress.pending = j.head, j.tail, n
	j.progress.Unlock()
}

// joinSettle is how long AwaitJoined waits, once the labels' reader has
// read every label there is, for the tail to move again before it takes
// the labels' log to close no more windows.
const joinSettle = 2 * time.Second

// AwaitJoined waits, once the worker has predicted the examples up to
// the Resume through, until the join has learned every one of them, or
// until the labels' reader (labels, the worker's LabelsConfig.Source) has
// read every label and the tail and the positions stay where they are for
// joinSettle: the labels' log then holds nothing that closes the windows
// still open, and a live worker's model does not include those examples
// either. stopped is the worker's Run; AwaitJoined returns its error if it
// ends first, and nil when ctx is done: ctx's error when it takes the
// worker's clean stop that ctx caused.
func (w *Worker) AwaitJoined(ctx context.Context, labels Source, through func() int64, stopped <-chan error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lr, _ := labels.(LagReporter)
	var last string
	since := time.Now()
	for {
		select {
		case err := <-stopped:
			if err == nil && ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("the worker stopped: %w", err)
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		head, tail, pending, _ := w.JoinProgress()
		if head < through() {
			continue
		}
		if pending == 0 && tail >= head {
			return nil
		}
		now := fmt.Sprint(tail, w.Positions())
		reading := false
		if lr != nil {
			lag := lr.Lag()
			reading = len(lag) > 0 && !Drained(lag)
		}
		switch {
		case now != last || reading:
			last, since = now, time.Now()
		case time.Since(since) >= joinSettle:
			return nil
		}
	}
}
