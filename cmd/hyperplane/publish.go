package main

import (
	"context"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The demo's feeder and gen publish to JetStream asynchronously, with at
// most pubWindow messages awaiting their acknowledgement. nats.go has its
// own limit, PublishAsyncMaxPending: a publish beyond it stalls, and fails
// with ErrTooManyStalledMsgs if no acknowledgement frees a place within
// the stall wait (200ms by default), which on a busy machine it often does
// not. The window stays below that limit, so the client never stalls: the
// publisher waits for its oldest acknowledgement instead, for as long as it
// takes.
const (
	pubWindow     = 1024
	pubMaxPending = 2 * pubWindow
)

// jsPublisher publishes messages to JetStream in order, keeping up to
// pubWindow in flight, and counts what the streams did with them. It is
// used by one goroutine.
type jsPublisher struct {
	js       jetstream.JetStream
	inflight [pubWindow]jetstream.PubAckFuture // a ring, oldest at head
	head, n  int

	// stored counts the messages a stream stored; duplicates those it
	// dropped because it already held a message with the same
	// Nats-Msg-Id, received within its duplicate window.
	stored, duplicates int

	failed []*natsgo.Msg // messages that failed since the last flush
	err    error         // the first of their errors
}

// newJSPublisher publishes on nc. An acknowledgement missing for
// ackTimeout fails its message (0: wait for as long as it takes).
func newJSPublisher(nc *natsgo.Conn, ackTimeout time.Duration) (*jsPublisher, error) {
	opts := []jetstream.JetStreamOpt{jetstream.WithPublishAsyncMaxPending(pubMaxPending)}
	if ackTimeout > 0 {
		opts = append(opts, jetstream.WithPublishAsyncTimeout(ackTimeout))
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &jsPublisher{js: js}, nil
}

// send publishes m, once fewer than pubWindow messages are in flight. It
// returns ctx's error if ctx is done first (m is then not sent). Otherwise
// m is sent, or kept among the failed messages that flush returns, and
// send returns the first failure since the last flush, if any, so that a
// caller can stop early.
//
// m is kept until it is acknowledged (nats.go sends it again when no
// stream answered yet): its Data must not be reused.
func (p *jsPublisher) send(ctx context.Context, m *natsgo.Msg) error {
	if p.n == len(p.inflight) {
		if err := p.settleOldest(ctx); err != nil {
			return err
		}
	}
	f, err := p.js.PublishMsgAsync(m)
	if err != nil {
		p.fail(m, err)
	} else {
		p.inflight[(p.head+p.n)%len(p.inflight)] = f
		p.n++
	}
	return p.err
}

// flush waits for every acknowledgement in flight, or until ctx is done.
// It returns the messages that failed since the last flush, in the order
// they were sent, to be sent again (a stream that did store one drops the
// copy by its Nats-Msg-Id), and the first of their errors.
func (p *jsPublisher) flush(ctx context.Context) (failed []*natsgo.Msg, err error) {
	for p.n > 0 {
		if err := p.settleOldest(ctx); err != nil {
			return nil, err
		}
	}
	failed, err = p.failed, p.err
	p.failed, p.err = nil, nil
	return failed, err
}

func (p *jsPublisher) settleOldest(ctx context.Context) error {
	f := p.inflight[p.head]
	select {
	case ack := <-f.Ok():
		if ack.Duplicate {
			p.duplicates++
		} else {
			p.stored++
		}
	case err := <-f.Err():
		p.fail(f.Msg(), err)
	case <-ctx.Done():
		return ctx.Err()
	}
	p.inflight[p.head] = nil
	p.head = (p.head + 1) % len(p.inflight)
	p.n--
	return nil
}

func (p *jsPublisher) fail(m *natsgo.Msg, err error) {
	p.failed = append(p.failed, m)
	if p.err == nil {
		if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
			err = fmt.Errorf("message %s: %w", id, err)
		}
		p.err = fmt.Errorf("jetstream publish to %s: %w", m.Subject, err)
	}
}
