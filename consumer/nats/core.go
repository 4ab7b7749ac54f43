package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/wire"
	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// CoreSource reads a core NATS subject. Core NATS stores nothing, so this
// source is at-most-once and cannot replay: it sees only what is published
// while it is subscribed and connected. Messages published while the
// connection is down are lost, and so are messages the client drops because
// the worker falls too far behind (a slow consumer: logged, and the source
// carries on). After a reconnect the client subscribes again by itself.
//
// A message's position is {Source: "nats:<subject>", Offset: n}, Resume n.
// The offsets count the messages this source delivers, on from a base: the
// larger of the time the source subscribed, in nanoseconds since 1970, and
// the position it resumes from. The worker's events take their ids from
// these positions, so no two messages get the same one, in one process or
// in those before it, crashed or stopped (the clock would have to step
// back by more than the time between the two processes), and a JetStream
// output does not drop a new message's events as repeats of an old one's.
// A recorded position says nothing about which message a new process
// reads first: core NATS has none to go back to.
type CoreSource struct {
	sub   *natsgo.Subscription
	key   string
	n     int64
	batch []consumer.Message
	log   *zap.Logger
}

// NewCoreSource subscribes to subject (wildcards allowed) on nc. The
// subscription is registered on the server when this returns, so messages
// published afterwards reach the source. Its offsets count on from
// resume["nats:<subject>"], the last position a model includes, or from
// now in nanoseconds since 1970 if that is larger (see CoreSource).
func NewCoreSource(nc *natsgo.Conn, subject string, resume map[string]int64, log *zap.Logger) (*CoreSource, error) {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("nats subscribe %s: %w", subject, err)
	}
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("nats subscribe %s: %w", subject, err)
	}
	key := "nats:" + subject
	return &CoreSource{
		sub: sub,
		key: key,
		n:   max(resume[key], time.Now().UnixNano()),
		log: log.With(zap.String("source", key)),
	}, nil
}

// Fetch waits for the next message and returns it with those already
// received after it, up to limit, in arrival order. Message.Time is when
// this process received the message (core NATS carries no timestamp). It
// returns ctx's error when ctx is done and keeps waiting while the
// connection is down.
func (s *CoreSource) Fetch(ctx context.Context, limit int) ([]consumer.Message, error) {
	s.batch = s.batch[:0]
	for len(s.batch) == 0 {
		m, err := s.sub.NextMsgWithContext(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if errors.Is(err, natsgo.ErrSlowConsumer) {
				s.dropped()
				continue
			}
			return nil, fmt.Errorf("%s: %w", s.key, err)
		}
		s.add(m)
	}
	for len(s.batch) < limit {
		// A message that is waiting is returned at once; otherwise
		// NextMsg gives up after a zero timeout.
		m, err := s.sub.NextMsg(0)
		if errors.Is(err, natsgo.ErrSlowConsumer) {
			s.dropped()
			continue
		}
		if err != nil {
			break
		}
		s.add(m)
	}
	return s.batch, nil
}

func (s *CoreSource) add(m *natsgo.Msg) {
	s.n++
	s.batch = append(s.batch, consumer.Message{
		Position: wire.Position{Source: s.key, Offset: s.n},
		Resume:   s.n,
		Value:    m.Data,
		Time:     time.Now(),
	})
}

func (s *CoreSource) dropped() {
	s.log.Warn("core NATS messages dropped by the client: the worker is too slow for the subject")
}

// Commit does nothing: core NATS has no position to tell.
func (s *CoreSource) Commit(ctx context.Context, resume map[string]int64) error {
	return nil
}

// Close unsubscribes; messages received but not fetched are lost. It does
// not close the connection.
func (s *CoreSource) Close() error {
	if err := s.sub.Unsubscribe(); err != nil && !errors.Is(err, natsgo.ErrBadSubscription) && !errors.Is(err, natsgo.ErrConnectionClosed) {
		return fmt.Errorf("%s: unsubscribe: %w", s.key, err)
	}
	return nil
}
