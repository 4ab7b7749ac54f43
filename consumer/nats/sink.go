package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

const (
	// ackTimeout bounds the wait for a window's JetStream publish
	// acknowledgements, counted from when its last message was sent (and
	// a core NATS flush when Publish's context has no deadline), so a
	// batch sent while the server is unreachable fails instead of hanging.
	ackTimeout = 10 * time.Second
	// maxPending is how many JetStream publishes are in flight at once; a
	// larger batch is sent in windows of this size.
	maxPending = 1024
	// stallWait is how long a publish waits for room among the
	// maxPending in flight before it fails.
	stallWait = time.Second
)

// Message size limits. The server counts a message's headers and data
// against its max_payload (the client refuses a larger message before
// sending it) and against the max_msg_size of the stream that stores it.
const (
	// FallbackMaxPayload is the max_payload assumed while the connection
	// has not yet heard the server's: the server's default, 1 MiB.
	FallbackMaxPayload = 1 << 20
	// msgIDHeaderOverhead is what the Nats-Msg-Id header adds to a
	// message besides the key: "NATS/1.0\r\n", "Nats-Msg-Id: <key>\r\n"
	// and the closing "\r\n".
	msgIDHeaderOverhead = len("NATS/1.0\r\n") + len(jetstream.MsgIDHeader+": \r\n") + len("\r\n")
	// lookupTimeout bounds the lookup of the stream that captures a
	// subject.
	lookupTimeout = 10 * time.Second
)

// Sink publishes outputs to NATS, each on the subject named by its Topic
// and with its Key in the Nats-Msg-Id header.
//
// To JetStream, Publish returns nil only once a stream has acknowledged
// every message (a message reported as a duplicate counts: the stream
// already holds it). On an error the caller publishes the batch again, and
// the stream drops the messages it already has by their Nats-Msg-Id,
// provided the retry comes within the stream's duplicate window (two
// minutes unless configured). A subject no stream captures is an error.
//
// To core NATS, Publish returns nil once the server has received every
// message (a flush), which says nothing about subscribers: core NATS
// delivers at most once, to whoever is subscribed at that moment.
//
// Sink is a consumer.SendSink too: Send hands a batch to the server and
// returns at once, and its wait is Publish's. Publish and Send may be
// called from several goroutines: each waits for its own messages'
// acknowledgements alone.
type Sink struct {
	nc  *natsgo.Conn
	js  jetstream.JetStream // nil for core NATS
	log *zap.Logger
	// pubOpts are the options of every JetStream publish, built once
	// rather than per message.
	pubOpts []jetstream.PublishOpt

	// stored and duplicates count the acknowledgements (see Acks).
	stored, duplicates atomic.Int64

	mu sync.Mutex
	// streamLimits is, by subject, the max_msg_size of the stream that
	// captures it, as first looked up: 0 if it sets none or the lookup
	// failed.
	streamLimits map[string]streamLimit
}

// NewSink returns a sink publishing on nc, to JetStream streams if
// jetStream is set and as core NATS messages otherwise.
func NewSink(nc *natsgo.Conn, jetStream bool, log *zap.Logger) (*Sink, error) {
	if log == nil {
		log = zap.NewNop()
	}
	s := &Sink{nc: nc, log: log, streamLimits: map[string]streamLimit{}}
	if jetStream {
		// No per-message acknowledgement timeout (one timer each): a
		// batch's wait bounds the whole batch's instead.
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(maxPending))
		if err != nil {
			return nil, fmt.Errorf("jetstream sink: %w", err)
		}
		s.js = js
		s.pubOpts = []jetstream.PublishOpt{jetstream.WithStallWait(stallWait)}
	}
	return s, nil
}

// MaxOutputBytes is the largest output, counted as len(Key)+len(Value),
// that Publish delivers to subject: the server's max_payload as the
// connection last heard it (FallbackMaxPayload before it has) and, to
// JetStream, the max_msg_size of the stream that captures subject if that
// is smaller, less the Nats-Msg-Id header. The stream is looked up on the
// first call for a subject, within lookupTimeout; if that fails (no stream
// captures the subject, no permission for the JetStream API), the sink
// logs a warning and goes by max_payload alone for the subject from then
// on. A stream's max_msg_size changed later is not seen until the sink is
// created again.
func (s *Sink) MaxOutputBytes(subject string) int {
	limit := int(s.nc.MaxPayload())
	if limit <= 0 {
		limit = FallbackMaxPayload
	}
	if s.js != nil {
		if m := s.streamLimit(subject); m > 0 {
			limit = min(limit, m)
		}
	}
	return max(0, limit-msgIDHeaderOverhead)
}

// streamLimit is a subject's stream limit as looked up: max_msg_size, or
// 0 for none (or none known).
type streamLimit struct {
	max int
	// retry, after a failed lookup, is when to ask again.
	retry time.Time
}

// lookupRetry is how long a subject goes by max_payload alone after a
// failed lookup of its stream before the sink asks again.
const lookupRetry = 30 * time.Second

// streamLimit is the max_msg_size of the stream that captures subject, or
// 0. The lookup holds the sink's lock: it happens once per subject, or
// once per lookupRetry while it fails.
func (s *Sink) streamLimit(subject string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.streamLimits[subject]; ok && (l.retry.IsZero() || time.Now().Before(l.retry)) {
		return l.max
	}
	m, err := s.lookupStreamLimit(subject)
	l := streamLimit{max: m}
	if err != nil {
		l.retry = time.Now().Add(lookupRetry)
		s.log.Warn("cannot look up the stream of a subject for its message size limit; going by the server's max_payload",
			zap.String("subject", subject), zap.Duration("retry_in", lookupRetry), zap.Error(err))
	}
	s.streamLimits[subject] = l
	return m
}

func (s *Sink) lookupStreamLimit(subject string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	name, err := s.js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return 0, fmt.Errorf("stream of %s: %w", subject, err)
	}
	st, err := s.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", name, err)
	}
	return max(0, int(st.CachedInfo().Config.MaxMsgSize)), nil // -1: no limit
}

// Publish sends batch, in order, and waits until it is held (see Sink):
// it is Send and its wait, to JetStream window by window, maxPending
// messages each. It fails at once while the connection is down, and
// otherwise when ctx is done or, at the latest, ackTimeout after a
// window's wait began (the connection dropped while the batch was in
// flight). Once the connection is back it succeeds again. The stream
// keeps the batch's order unless a failure interrupts it: then messages
// of the failed attempt may be stored after some of the retry's. An
// output larger than MaxOutputBytes of its subject fails on every
// attempt.
func (s *Sink) Publish(ctx context.Context, batch []consumer.Output) error {
	for len(batch) > 0 {
		n := len(batch)
		if s.js != nil {
			n = min(n, maxPending)
		}
		if err := s.Send(ctx, batch[:n])(ctx); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// Send sends batch, in order, and returns at once; its wait returns nil once
// every message is held (see consumer.SendSink). To JetStream the wait
// follows each message's acknowledgement, so that it is this batch's
// alone while other batches are in flight; it fails when ctx is done or,
// at the latest, ackTimeout after it began with acknowledgements still
// missing, and abandons those (and those of every batch in flight beside
// it). To core NATS, Send is Publish.
//
// Sending stalls while maxPending messages of this sink are in flight,
// until the oldest are acknowledged, for at most stallWait.
func (s *Sink) Send(ctx context.Context, batch []consumer.Output) func(context.Context) error {
	done := func(err error) func(context.Context) error {
		return func(context.Context) error { return err }
	}
	switch {
	case len(batch) == 0:
		return done(nil)
	case ctx.Err() != nil:
		return done(fmt.Errorf("nats publish: %w", ctx.Err()))
	case !s.nc.IsConnected():
		// Fail now rather than fill the client's reconnect buffer: its
		// contents would reach the server after the reconnect, behind
		// the caller's retry of the same batch and out of order.
		return done(fmt.Errorf("nats publish: %w (%s)", natsgo.ErrDisconnected, s.nc.Status()))
	case s.js == nil:
		return done(s.publishCore(ctx, batch))
	}
	acks, err := s.sendJetStream(batch)
	return func(ctx context.Context) error { return s.awaitJetStream(ctx, acks, len(batch), err) }
}

// awaitJetStream waits for the acknowledgements acks of the first
// len(acks) of n messages sent (sendErr: why the rest were not), counts
// them (Acks), and returns the first error: the acknowledgements missing
// when ctx is done or ackTimeout has passed, else the send that failed,
// else the first acknowledgement that failed. An acknowledgement already
// in counts, however late the wait. Those missing are abandoned, so that
// none holds a place among the maxPending: a batch in flight beside this
// one fails with them, and is published again. So are all in flight when a
// send stalled for stallWait with maxPending in flight (their waits may
// never be called, or come long after), once this batch's are in.
func (s *Sink) awaitJetStream(ctx context.Context, acks []jetstream.PubAckFuture, n int, sendErr error) error {
	var wait context.Context
	var failed error
	for i, ack := range acks {
		var pa *jetstream.PubAck
		var err error
		select {
		case pa = <-ack.Ok():
		case err = <-ack.Err():
		default:
			if wait == nil {
				var cancel context.CancelFunc
				wait, cancel = context.WithTimeout(ctx, ackTimeout)
				defer cancel()
			}
			select {
			case pa = <-ack.Ok():
			case err = <-ack.Err():
			case <-wait.Done():
				s.js.CleanupPublisher()
				return fmt.Errorf("jetstream publish: %d of %d acknowledgements missing: %w", len(acks)-i, n, wait.Err())
			}
		}
		switch {
		case err != nil:
			if failed == nil {
				m := ack.Msg()
				failed = fmt.Errorf("jetstream publish %s (%s): %w", m.Subject, m.Header.Get(jetstream.MsgIDHeader), err)
			}
		case pa.Duplicate:
			s.duplicates.Add(1)
		default:
			s.stored.Add(1)
		}
	}
	if errors.Is(sendErr, jetstream.ErrTooManyStalledMsgs) {
		s.js.CleanupPublisher()
	}
	return cmp.Or(sendErr, failed)
}

// sendJetStream hands batch to the client, in order, until a send fails,
// and returns the messages' acknowledgement futures, with the error of
// the send that failed. One allocation each for the messages, their
// header values and the keys' bytes; the client keeps a message until its
// acknowledgement.
func (s *Sink) sendJetStream(batch []consumer.Output) ([]jetstream.PubAckFuture, error) {
	msgs := make([]natsgo.Msg, len(batch))
	ids := keyStrings(batch)
	acks := make([]jetstream.PubAckFuture, 0, len(batch))
	for i, o := range batch {
		m := &msgs[i]
		m.Subject, m.Data = o.Topic, o.Value
		if len(o.Key) > 0 {
			m.Header = natsgo.Header{jetstream.MsgIDHeader: ids[i : i+1 : i+1]}
		}
		ack, err := s.js.PublishMsgAsync(m, s.pubOpts...)
		if err != nil {
			return acks, fmt.Errorf("jetstream publish %s (%s): %w", o.Topic, o.Key, s.tooLarge(err))
		}
		acks = append(acks, ack)
	}
	return acks, nil
}

// Acks counts the JetStream acknowledgements since the sink was made: the
// messages a stream stored, and those it dropped as duplicates, having
// stored a message with the same Nats-Msg-Id within its duplicate window.
// A batch counts once Publish, or Send's wait, has returned nil.
// A batch published again after an error counts again: its messages that
// were stored the first time count as duplicates. Core NATS acknowledges
// nothing, so both are 0 there.
func (s *Sink) Acks() (stored, duplicates int64) {
	return s.stored.Load(), s.duplicates.Load()
}

func (s *Sink) publishCore(ctx context.Context, batch []consumer.Output) error {
	ids := keyStrings(batch)
	for i, o := range batch {
		if err := s.nc.PublishMsg(message(o, ids[i])); err != nil {
			return fmt.Errorf("nats publish %s (%s): %w", o.Topic, o.Key, s.tooLarge(err))
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ackTimeout)
		defer cancel()
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("nats publish: flush: %w", err)
	}
	return nil
}

// tooLarge marks err, a publish's, with consumer.ErrOutputTooLarge when
// the message was over the server's max_payload as the connection heard
// it last: outputs are made to fit it (MaxOutputBytes), so the server
// lowered it since they were, and every attempt fails alike.
func (s *Sink) tooLarge(err error) error {
	if errors.Is(err, natsgo.ErrMaxPayload) {
		return fmt.Errorf("%w (the server's max_payload is %d bytes now): %w", consumer.ErrOutputTooLarge, s.nc.MaxPayload(), err)
	}
	return err
}

func message(o consumer.Output, id string) *natsgo.Msg {
	m := &natsgo.Msg{Subject: o.Topic, Data: o.Value}
	if id != "" {
		m.Header = natsgo.Header{jetstream.MsgIDHeader: []string{id}}
	}
	return m
}

// keyStrings returns the keys of batch as strings, the Nats-Msg-Id header
// values: a header value is a string, so the keys are copied, all into
// one, which the messages may keep after Publish returns.
func keyStrings(batch []consumer.Output) []string {
	n := 0
	for _, o := range batch {
		n += len(o.Key)
	}
	var all strings.Builder
	all.Grow(n)
	for _, o := range batch {
		all.Write(o.Key)
	}
	s := all.String()
	ids := make([]string, len(batch))
	for i, o := range batch {
		ids[i], s = s[:len(o.Key)], s[len(o.Key):]
	}
	return ids
}

// Close releases the sink's reply subscription; acknowledgements still
// outstanding from a failed Publish are abandoned. It does not close the
// connection.
func (s *Sink) Close() error {
	if s.js != nil {
		s.js.CleanupPublisher()
	}
	return nil
}
