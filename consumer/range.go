package consumer

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrRangeDone is what a Range's Fetch reports once the range is complete.
var ErrRangeDone = errors.New("range complete")

// LagReporter is a source that knows the broker's view of its lag: for
// each of its sources, how many messages the broker holds beyond what it
// has delivered.
type LagReporter interface{ Lag() map[string]int64 }

// Range reads a Source up to an end and no further: the range of one
// shard in an epoch, or the span of the log a replay rebuilds. It delivers
// the messages within the end and drops those beyond it. A source's part
// of the range is complete once Range delivered its last message or met
// one beyond the end; the range is complete once every source's part is,
// or, with no end, once the source has nothing left to read. Done is
// closed then, after the Fetch that returned the last messages; later
// Fetches report ErrRangeDone, or with Idle wait for their context (a
// worker that joins labels goes on after its examples' range is read).
//
// Its fields are set before the first Fetch, which a single goroutine
// calls, as a worker does.
type Range struct {
	Source
	// End places a message against the range's end: in, it is delivered;
	// last, its source's part of the range is complete with it (with the
	// one before it when it is not in). nil: the range has no end, and is
	// complete when the source's Lag reports nothing left.
	End func(m *Message) (in, last bool)
	// Sources are the sources whose parts make the range; nil: those the
	// Source's Lag names, or, when it reports none, any one.
	Sources []string
	// Idle makes Fetch wait for its context once the range is complete,
	// rather than report ErrRangeDone.
	Idle bool
	// Drain, with End, makes the range complete also when the Source's
	// Lag says nothing is left, as a range with no end is: a log that
	// ends before End ends the range there rather than wait for records
	// that may never come (a replay --to offset:N past the log's end).
	// Without it a range with End waits for End, as an epoch's range
	// waits for the records its boundary names.
	Drain bool
	// Poll bounds each wait on the Source so that a range with no end sees
	// an idle source as complete (time.Second when 0).
	Poll time.Duration
	// Last is the Resume of the last message delivered: the range's start
	// before the first.
	Last int64

	mu       sync.Mutex
	reached  map[string]bool
	complete bool
	messages uint64
	done     chan struct{}
	once     sync.Once
	closed   sync.Once
}

// Done is closed once the range is complete.
func (r *Range) Done() <-chan struct{} {
	r.once.Do(func() { r.done = make(chan struct{}) })
	return r.done
}

// Complete reports whether the range is complete.
func (r *Range) Complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.complete
}

// Messages is the number of messages delivered.
func (r *Range) Messages() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.messages
}

// Returned is the Resume of the last message delivered.
func (r *Range) Returned() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Last
}

func (r *Range) finish() {
	r.mu.Lock()
	r.complete = true
	r.mu.Unlock()
	r.Done()
	r.closed.Do(func() { close(r.done) })
}

// Fetch returns the next messages of the range.
func (r *Range) Fetch(ctx context.Context, max int) ([]Message, error) {
	for {
		if r.Complete() {
			if !r.Idle {
				return nil, ErrRangeDone
			}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		msgs, err := r.fetch(ctx, max)
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// Idle: a range with no end is complete when the broker
				// has nothing more.
				if (r.End == nil || r.Drain) && r.drained() {
					r.finish()
				}
				continue
			}
			return nil, err
		}
		kept, all := r.keep(msgs)
		switch {
		case len(kept) > 0 && all:
			// Complete once the worker has these.
			defer r.finish()
			return kept, nil
		case len(kept) > 0:
			return kept, nil
		case all:
			r.finish()
		}
	}
}

// fetch is one Fetch of the Source, bounded by Poll when the range has no
// end or drains.
func (r *Range) fetch(ctx context.Context, max int) ([]Message, error) {
	if r.End != nil && !r.Drain {
		return r.Source.Fetch(ctx, max)
	}
	poll := r.Poll
	if poll <= 0 {
		poll = time.Second
	}
	fctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	return r.Source.Fetch(fctx, max)
}

// keep is msgs within the end, in place, and whether the range is
// complete with them.
func (r *Range) keep(msgs []Message) (kept []Message, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.End == nil {
		if n := len(msgs); n > 0 {
			r.messages += uint64(n)
			r.Last = max(r.Last, msgs[n-1].Resume)
		}
		return msgs, r.drainedLocked()
	}
	if r.reached == nil {
		r.reached = map[string]bool{}
	}
	kept = msgs[:0]
	for i := range msgs {
		m := &msgs[i]
		if r.reached[m.Position.Source] {
			continue
		}
		in, last := r.End(m)
		if in {
			kept = append(kept, *m)
			r.messages++
			r.Last = m.Resume
		}
		if last {
			r.reached[m.Position.Source] = true
		}
	}
	return kept, r.allReached()
}

func (r *Range) allReached() bool {
	sources := r.Sources
	if sources == nil {
		if lr, ok := r.Source.(LagReporter); ok {
			for src := range lr.Lag() {
				sources = append(sources, src)
			}
		}
	}
	if len(sources) == 0 {
		return len(r.reached) > 0
	}
	for _, src := range sources {
		if !r.reached[src] {
			return false
		}
	}
	return true
}

// drained reports whether the Source's Lag says it has nothing left.
func (r *Range) drained() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drainedLocked()
}

func (r *Range) drainedLocked() bool {
	lr, ok := r.Source.(LagReporter)
	return ok && Drained(lr.Lag())
}

// Drained reports whether lag, a LagReporter's, names a source and says
// each has nothing left.
func Drained(lag map[string]int64) bool {
	for _, n := range lag {
		if n > 0 {
			return false
		}
	}
	return len(lag) > 0
}

// ResumeTo is a Range's End for a range whose last message is the one at
// Resume to, inclusive: the range of one shard in an epoch.
func ResumeTo(to int64) func(m *Message) (in, last bool) {
	return func(m *Message) (in, last bool) {
		return m.Resume <= to, m.Resume >= to
	}
}

// OffsetBefore is a Range's End for a range that stops before offset end
// (a Kafka offset, a JetStream sequence) of every source.
func OffsetBefore(end int64) func(m *Message) (in, last bool) {
	return func(m *Message) (in, last bool) {
		in = m.Position.Offset < end
		return in, !in || m.Resume >= end
	}
}
