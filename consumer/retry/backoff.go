// Package retry is how the worker and the broker adapters wait between
// attempts of something that keeps failing, and how they report it
// without flooding the log: one Backoff, one loop over it (Do) and one
// LogLimiter, so that every retry loop in the project paces itself and
// speaks the same way.
package retry

import (
	"context"
	"time"
)

// The delays a zero Backoff uses.
const (
	// DefaultMin is the first delay: short, so that a blip (a leader
	// moving, a connection dropped once) costs little.
	DefaultMin = 100 * time.Millisecond
	// DefaultMax is the longest delay: during a long outage an attempt is
	// made at least this often, so recovery is noticed within it.
	DefaultMax = 5 * time.Second
)

// Backoff is an exponential delay between the attempts of an operation:
// Min before the first retry, doubling with each further one up to Max,
// and Min again after Reset. Call Wait after each failure and Reset after
// a success.
//
// A zero Min is DefaultMin and a zero Max is DefaultMax; a Max below Min
// is Min. The delays are exact (no jitter): each worker retries its own
// broker connection, so there is no herd to spread.
//
// A Backoff is not safe for concurrent use: each retry loop has its own.
type Backoff struct {
	Min, Max time.Duration

	retries int // waits since the last Reset
	// sleep replaces the real wait in tests; nil means sleep.
	sleep func(ctx context.Context, d time.Duration) error
}

// Delay is the delay before retry n, counting from 1: Min·2^(n-1), at
// most Max. An n below 1 counts as 1. It does not change the Backoff, so
// it also serves a client that counts its own attempts (a NATS
// connection's reconnect rounds).
func (b *Backoff) Delay(n int) time.Duration {
	lo, hi := b.bounds()
	d := lo
	for i := 1; i < n && d < hi; i++ {
		if d > hi/2 {
			return hi // doubling would pass Max, or overflow
		}
		d *= 2
	}
	return d
}

// Next returns the delay before the next retry and counts that retry.
func (b *Backoff) Next() time.Duration {
	b.retries++
	return b.Delay(b.retries)
}

// Wait waits for Next's delay. It returns ctx's error as soon as ctx is
// done (the retry is still counted), and nil once the delay has passed.
func (b *Backoff) Wait(ctx context.Context) error {
	d := b.Next()
	if b.sleep != nil {
		return b.sleep(ctx, d)
	}
	return sleep(ctx, d)
}

// WaitAtMost is Wait for at most d: a poll that knows when what it waits
// for falls due looks then, not after a longer delay. A d of 0 or less
// is no bound.
func (b *Backoff) WaitAtMost(ctx context.Context, d time.Duration) error {
	next := b.Next()
	if d > 0 {
		next = min(next, d)
	}
	if b.sleep != nil {
		return b.sleep(ctx, next)
	}
	return sleep(ctx, next)
}

// Reset makes the next delay Min again: the operation succeeded.
func (b *Backoff) Reset() { b.retries = 0 }

func (b *Backoff) bounds() (lo, hi time.Duration) {
	lo, hi = b.Min, b.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	return lo, max(lo, hi)
}

// sleep waits for d or until ctx is done, whichever comes first; a done
// ctx wins even when d is 0.
func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
