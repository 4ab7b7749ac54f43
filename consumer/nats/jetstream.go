package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	subj "github.com/hyperplane-ml/hyperplane/internal/subject"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// bufferSize bounds the messages the JetStream source holds in the client:
// the pull requests ask for at most this many, and the hand-over to Fetch
// holds at most this many more.
const bufferSize = 1024

// deleteTimeout bounds Close's deletion of the consumer on the server: a
// consumer left behind expires by itself, so Close does not wait long.
const deleteTimeout = 2 * time.Second

// errClosed is what Fetch returns after Close.
var errClosed = errors.New("nats: source closed")

// JetStreamSource reads one stream, or the subjects of a filter in it (one
// partition's, for JetStreamShards.Open), in stream-sequence order, with an
// ordered consumer: an ephemeral, in-memory consumer with no acks, fed by
// pull requests of bounded size (the flow control) and recreated by the
// client, at the sequence after the last one it delivered, whenever the
// connection comes back, heartbeats stop or a delivery sequence is skipped.
// Should the client give up on it (the connection closes, a recreation
// fails), the source makes a new one itself, at the same place, after a
// backoff. So whatever happens to the server, Fetch delivers each sequence
// of the stream (matching the filter) once, in order, from where the source
// was opened.
//
// Nothing is acknowledged: the server does not know how far the worker has
// got, and the position is only what the worker's snapshots record. Fetch
// and Commit must not be called concurrently with each other; Lag may be
// called at any time.
type JetStreamSource struct {
	js     jetstream.JetStream
	nc     *natsgo.Conn
	stream string
	key    string
	log    *zap.Logger

	msgs  chan delivery // filled by run, in sequence order
	batch []consumer.Message
	stop  context.CancelFunc // stops run
	done  chan struct{}      // closed when run returns
	err   error              // why run returned; read after done

	// changed is closed, changedErr set, when watch finds the stream no
	// longer partitioned as when a partition's source was opened; nil
	// for a source that is not watched. watched is closed when watch
	// returns.
	changed    chan struct{}
	changedErr error
	watched    chan struct{}

	// read, when not nil, is the last sequence handed over (or the one
	// the source resumed after), for the check that the stream was not
	// recreated under it.
	read *atomic.Int64

	// gaps, when not nil, looks for messages the stream removed before
	// the source read them; used by run's goroutine alone.
	gaps *gapCheck

	closeOnce sync.Once
	mu        sync.Mutex
	iter      jetstream.MessagesContext // the current one, stopped by Close
	cons      jetstream.Consumer
	closed    bool
	pending   int64 // messages after the last fetched one, or after the start
	fetched   bool  // pending comes from a fetched message
}

type delivery struct {
	msg     consumer.Message
	pending uint64
}

// NewJetStreamSource opens stream (only the messages on subject, a subject
// filter with wildcards allowed, unless subject is empty) at the sequence
// after resume["jetstream:<stream>"], the last sequence the model includes.
// Without that key it opens at start: the stream's first message
// ("earliest"), the next message stored after this call ("latest": the
// sequence after the stream's last one now), the sequence start.Offset
// ("offset"), or the first message stored at or after start.Time ("time").
// It fails if the stream does not exist or start is invalid.
func NewJetStreamSource(ctx context.Context, nc *natsgo.Conn, stream, subject string, resume map[string]int64, start wire.Start, log *zap.Logger) (*JetStreamSource, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream %s: %w", stream, err)
	}
	key := shardid.Stream(stream).String()
	cfg := jetstream.OrderedConsumerConfig{}
	read := new(atomic.Int64)
	gaps := &gapCheck{filter: subject}
	if subject != "" {
		if err := checkFilter(ctx, js, stream, subject); err != nil {
			return nil, err
		}
		cfg.FilterSubjects = []string{subject}
	}
	if seq, ok := resume[key]; ok {
		if seq < 0 {
			return nil, fmt.Errorf("jetstream %s: resume sequence %d is negative", stream, seq)
		}
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = uint64(seq) + 1
		read.Store(seq)
		if err := checkBeyond(ctx, js, stream, seq); err != nil {
			return nil, err
		}
		gaps.next = max(cfg.OptStartSeq, warnGone(ctx, js, stream, subject, cfg.OptStartSeq, log))
	} else {
		if err := start.Validate(); err != nil {
			return nil, fmt.Errorf("jetstream %s: %w", stream, err)
		}
		switch start.Kind {
		case "", wire.StartEarliest:
			cfg.DeliverPolicy = jetstream.DeliverAllPolicy
		case wire.StartLatest:
			// A sequence rather than DeliverNew, so that a consumer recreated
			// before the first message arrives still starts at the same place.
			st, err := js.Stream(ctx, stream)
			if err != nil {
				return nil, fmt.Errorf("jetstream %s: %w", stream, err)
			}
			cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			cfg.OptStartSeq = st.CachedInfo().State.LastSeq + 1
			gaps.next = cfg.OptStartSeq
		case wire.StartOffset:
			if start.Offset < 1 {
				return nil, fmt.Errorf("jetstream %s: start offset %d: stream sequences start at 1", stream, start.Offset)
			}
			cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
			cfg.OptStartSeq = uint64(start.Offset)
		case wire.StartTime:
			t := start.Time
			cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
			cfg.OptStartTime = &t
		}
	}
	// A stream deleted and created again while the source reads it: the
	// ordered consumer goes on at the sequence after the last one read,
	// and would skip, without a word, every new message before it.
	check := func(ctx context.Context) error {
		return checkNotRecreated(ctx, js, stream, read.Load())
	}
	return newJetStreamSource(ctx, js, nc, stream, key, cfg, check, RecreatedCheck, read, gaps, log)
}

// RecreatedCheck is how often a source of a whole stream (or of
// source.subject) checks that the stream was not deleted and created
// again under it.
var RecreatedCheck = DefaultPartitioningCheck //nolint:gochecknoglobals // tests shorten it

// checkNotRecreated fails when seq, the last sequence read, is past the
// stream's last sequence, which never goes back but when the stream is
// created again. A failed lookup (an outage, a stream deleted and not yet
// created again) says nothing.
func checkNotRecreated(ctx context.Context, js jetstream.JetStream, stream string, seq int64) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	if last := st.CachedInfo().State.LastSeq; uint64(seq) > last {
		return &repartitionedError{fmt.Errorf("jetstream %s: sequence %d was read, and the stream's last sequence is now %d: was the stream recreated? Its messages are not those read before (a new model.name learns them from the start)", stream, seq, last)}
	}
	return nil
}

// checkBeyond fails when seq, the last sequence the model includes, is
// past the stream's last sequence: the stream was recreated (a stream's
// last sequence never goes back, whatever its limits or a purge remove),
// and the source would wait, without a word, for sequences its new
// messages reach only after the model's position, skipping them. A
// failed lookup says nothing: the consumer's creation will tell.
func checkBeyond(ctx context.Context, js jetstream.JetStream, stream string, seq int64) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil
	}
	if last := st.CachedInfo().State.LastSeq; uint64(seq) > last {
		return fmt.Errorf("jetstream %s: the model's position, sequence %d, is beyond the stream's last sequence %d: was the stream recreated? Its messages are not those the model was learned from (a new model.name learns them from the start)", stream, seq, last)
	}
	return nil
}

// warnGone logs a warning when the stream no longer holds the messages
// from sequence next on that the source resumes from: its limits (max age,
// messages or bytes) or a purge removed them, and they cannot be learned.
// It returns the stream's first sequence, or 0 if the lookup failed. A
// failed lookup says nothing: the consumer's creation will tell.
func warnGone(ctx context.Context, js jetstream.JetStream, stream, subject string, next uint64, log *zap.Logger) uint64 {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	first := st.CachedInfo().State.FirstSeq
	if first <= next {
		return first
	}
	msg := "the stream no longer holds the messages after the model's position: they are not learned (the stream's limits or a purge removed them)"
	fields := []zap.Field{zap.String("stream", stream), zap.Uint64("from_sequence", next), zap.Uint64("to_sequence", first-1), zap.Uint64("first_sequence", first)}
	if subject != "" {
		msg = "the stream no longer holds the messages after the model's position: those of the filter are not learned (the stream's limits or a purge removed them)"
		fields = append(fields, zap.String("filter", subject))
	}
	log.Warn(msg, fields...)
	return first
}

// gapLookupEvery bounds how often a filtered source asks the stream,
// after a jump in the sequences it reads, whether messages were removed.
const gapLookupEvery = time.Second

// gapCheck finds, while a source of a whole stream (or of source.subject)
// reads it, the messages the stream's limits or a purge removed before
// the source read them: the ordered consumer goes on at the stream's
// first message without a word, as it does at start-up, where warnGone
// says so. A partitioned stream's partitions share its sequences, so a
// jump there says nothing and is not checked.
type gapCheck struct {
	// filter is the source's subject filter, if any: a jump over other
	// subjects' sequences is then no loss, and the stream is asked.
	filter string
	// next is the sequence expected next, 0 while unknown.
	next uint64
	// asked is when the stream was last asked, for a filtered source.
	asked time.Time
}

// seen records that seq was read, and warns when the sequences from the
// one expected up to seq were removed from the stream unread.
func (g *gapCheck) seen(ctx context.Context, js jetstream.JetStream, stream string, seq uint64, log *zap.Logger) {
	next := g.next
	g.next = seq + 1
	if next == 0 || seq <= next {
		return
	}
	to := seq - 1
	if g.filter != "" {
		if time.Since(g.asked) < gapLookupEvery {
			return
		}
		g.asked = time.Now()
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		st, err := js.Stream(lctx, stream)
		cancel()
		if err != nil {
			return
		}
		first := st.CachedInfo().State.FirstSeq
		if first <= next {
			return
		}
		to = min(to, first-1)
	}
	msg := "the stream no longer holds messages the source had not read yet: they are not learned (the stream's limits or a purge removed them)"
	fields := []zap.Field{zap.String("stream", stream), zap.Uint64("from_sequence", next), zap.Uint64("to_sequence", to), zap.Uint64("next_sequence", seq)}
	if g.filter != "" {
		msg = "the stream no longer holds messages the source had not read yet: those of the filter are not learned (the stream's limits or a purge removed them)"
		fields = append(fields, zap.String("filter", g.filter))
	}
	log.Warn(msg, fields...)
}

// checkFilter fails when subject matches none of the subjects stream
// stores: the server accepts such a filter, and the source would wait for
// ever without a message. A stream that transforms its subjects, or takes
// its messages from other streams, is not checked.
func checkFilter(ctx context.Context, js jetstream.JetStream, stream, subject string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("jetstream %s: %w", stream, err)
	}
	c := st.CachedInfo().Config
	if len(c.Subjects) == 0 || c.SubjectTransform != nil {
		return nil
	}
	if slices.ContainsFunc(c.Subjects, func(s string) bool { return subj.Overlap(subject, s) }) {
		return nil
	}
	return fmt.Errorf("jetstream %s: filter %s matches none of the stream's subjects, %s", stream, subject, strings.Join(c.Subjects, ", "))
}

// newJetStreamSource opens an ordered consumer on stream as cfg says and
// returns the source that reads it, whose messages are under key.
//
// check, if not nil, is called every checkEvery while the source is open:
// an error it returns that wraps a *repartitionedError ends the source
// (read, if not nil, is kept at the last sequence handed over, for it),
// and Fetch returns it (a partition's ordered consumer, filtered to the
// partition's subjects, would otherwise wait for ever on a stream whose
// transform now stores elsewhere).
func newJetStreamSource(ctx context.Context, js jetstream.JetStream, nc *natsgo.Conn, stream, key string, cfg jetstream.OrderedConsumerConfig,
	check func(context.Context) error, checkEvery time.Duration, read *atomic.Int64, gaps *gapCheck, log *zap.Logger) (*JetStreamSource, error) {
	s := &JetStreamSource{
		js:     js,
		nc:     nc,
		stream: stream,
		key:    key,
		log:    log.With(zap.String("source", key)),
		msgs:   make(chan delivery, bufferSize),
		done:   make(chan struct{}),
		read:   read,
		gaps:   gaps,
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if err := s.open(ctx, cfg); err != nil {
		stop()
		return nil, err
	}
	go s.run(runCtx, cfg)
	if check != nil {
		s.changed, s.watched = make(chan struct{}), make(chan struct{})
		go s.watch(runCtx, check, checkEvery)
	}
	return s, nil
}

// watch calls check every every until ctx is done or check says the
// stream is partitioned otherwise: then it records that error in
// changedErr and closes changed. Other errors (an outage) are left to the
// consumer, which waits through them.
func (s *JetStreamSource) watch(ctx context.Context, check func(context.Context) error, every time.Duration) {
	defer close(s.watched)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		err := check(cctx)
		cancel()
		var r *repartitionedError
		if errors.As(err, &r) {
			s.changedErr = err
			close(s.changed)
			return
		}
	}
}

// open creates an ordered consumer from cfg and starts pulling from it.
func (s *JetStreamSource) open(ctx context.Context, cfg jetstream.OrderedConsumerConfig) error {
	cons, err := s.js.OrderedConsumer(ctx, s.stream, cfg)
	if err != nil {
		return fmt.Errorf("jetstream %s: ordered consumer: %w", s.stream, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(bufferSize))
	if err != nil {
		return fmt.Errorf("jetstream %s: pull: %w", s.stream, err)
	}
	info := cons.CachedInfo()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		iter.Stop()
		return errClosed
	}
	s.iter, s.cons = iter, cons
	if info != nil && !s.fetched {
		s.pending = int64(info.NumPending)
	}
	return nil
}

// run moves messages from the current iterator to s.msgs until ctx is done,
// and replaces the ordered consumer when the client gives up on it.
func (s *JetStreamSource) run(ctx context.Context, cfg jetstream.OrderedConsumerConfig) {
	defer close(s.done)
	var bo retry.Backoff
	for {
		s.mu.Lock()
		iter := s.iter
		s.mu.Unlock()
		err := s.pump(ctx, iter, &cfg)
		iter.Stop()
		if ctx.Err() != nil {
			s.err = errClosed
			return
		}
		if s.nc.IsClosed() {
			s.err = fmt.Errorf("jetstream %s: %w", s.stream, natsgo.ErrConnectionClosed)
			return
		}
		s.log.Warn("jetstream consumer stopped; recreating it", zap.Uint64("next_sequence", cfg.OptStartSeq), zap.Error(err))
		// The stopped consumer counts as the first failure: a consumer
		// that stops as soon as it is made is not remade in a tight loop.
		if bo.Wait(ctx) != nil {
			s.err = errClosed
			return
		}
		err = retry.Do(ctx, &bo, func(ctx context.Context) error {
			err := s.open(ctx, cfg)
			if errors.Is(err, errClosed) {
				return retry.Permanent(err)
			}
			return err
		}, func(err error) {
			s.log.Warn("jetstream consumer not recreated", zap.Error(err))
		})
		if err != nil {
			s.err = errClosed
			return
		}
	}
}

// pump hands the iterator's messages over until it fails, keeping cfg at
// the sequence after the last one handed over.
func (s *JetStreamSource) pump(ctx context.Context, iter jetstream.MessagesContext, cfg *jetstream.OrderedConsumerConfig) error {
	for {
		msg, err := iter.Next()
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("jetstream %s: message metadata: %w", s.stream, err)
		}
		seq := int64(meta.Sequence.Stream)
		if s.gaps != nil {
			s.gaps.seen(ctx, s.js, s.stream, meta.Sequence.Stream, s.log)
		}
		d := delivery{
			msg: consumer.Message{
				Position: wire.Position{Source: s.key, Offset: seq},
				Resume:   seq,
				Value:    msg.Data(),
				Time:     meta.Timestamp,
			},
			pending: meta.NumPending,
		}
		// A send that does not block first: with room in s.msgs, the
		// usual case, it skips the select on ctx.
		select {
		case s.msgs <- d:
		default:
			select {
			case s.msgs <- d:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = meta.Sequence.Stream + 1
		cfg.OptStartTime = nil
		if s.read != nil {
			s.read.Store(seq)
		}
	}
}

// Fetch waits for the next message and returns it with those already
// received after it, up to limit, in stream order. It waits through server
// restarts and returns ctx's error when ctx is done, and an error once the
// source is closed or its connection is.
func (s *JetStreamSource) Fetch(ctx context.Context, limit int) ([]consumer.Message, error) {
	select {
	case <-s.done:
		return nil, s.err
	case <-s.changed:
		return nil, s.changedErr
	default:
	}
	var last delivery
	select {
	case last = <-s.msgs:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		return nil, s.err
	case <-s.changed:
		return nil, s.changedErr
	}
	s.batch = append(s.batch[:0], last.msg)
more:
	for len(s.batch) < limit {
		select {
		case last = <-s.msgs:
			s.batch = append(s.batch, last.msg)
		default:
			break more
		}
	}
	s.mu.Lock()
	s.pending, s.fetched = int64(last.pending), true
	s.mu.Unlock()
	return s.batch, nil
}

// Commit does nothing and returns nil. The ordered consumer acknowledges
// nothing (AckNone) and is ephemeral, so there is no server-side position
// to move: the worker's snapshots hold it, and Lag reports the backlog
// without one.
func (s *JetStreamSource) Commit(ctx context.Context, resume map[string]int64) error {
	return nil
}

// Lag returns, under the source's key, how many messages matching the filter
// the stream held after the last fetched one when the server delivered it
// (before the first Fetch: after the start, when the consumer was created).
// It does not count messages stored since, so it is a lower bound that the
// next Fetch brings up to date.
func (s *JetStreamSource) Lag() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return map[string]int64{s.key: s.pending}
}

// Close stops reading, waits for the source's goroutine and deletes the
// consumer on the server (it would otherwise expire after five minutes of
// inactivity). It does not close the connection. If the client is in the
// middle of recreating its consumer after a reconnect, Close waits for that
// attempt, up to about 20s.
func (s *JetStreamSource) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.mu.Lock()
		s.closed = true
		iter, cons := s.iter, s.cons
		s.mu.Unlock()
		iter.Stop()
		<-s.done
		if s.watched != nil {
			<-s.watched
		}
		if !s.nc.IsConnected() {
			return
		}
		if info := cons.CachedInfo(); info != nil {
			ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
			defer cancel()
			if err := s.js.DeleteConsumer(ctx, s.stream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
				s.log.Debug("jetstream consumer not deleted", zap.String("consumer", info.Name), zap.Error(err))
			}
		}
	})
	return nil
}
