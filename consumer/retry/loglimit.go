package retry

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// LogLimiter logs a warning that may repeat on every attempt (a broker
// that is down, a dead letter with nowhere to go) at most once per period,
// and counts the warnings it holds back: each line it lets through says
// in its "suppressed" field how many were held back since the one before.
// The first warning always goes through. A warning held back is only
// counted; the last ones of a burst show up as the count on the next line
// let through, if there is one.
//
// A LogLimiter is safe for concurrent use.
type LogLimiter struct {
	log   *zap.Logger
	every time.Duration
	now   func() time.Time // the clock; replaced in tests

	mu         sync.Mutex
	last       time.Time // when the last line went out; zero before the first
	suppressed int
}

// NewLogLimiter returns a limiter that writes to log at most one line per
// every.
func NewLogLimiter(log *zap.Logger, every time.Duration) *LogLimiter {
	return &LogLimiter{log: log, every: every, now: time.Now}
}

// Allow reports whether a line may go out now and, if so, how many were
// held back since the last one that did; if not, it counts this one as
// held back. Callers whose fields cost something to build call it first
// and log themselves, with Suppressed(n); Warn does both.
func (l *LogLimiter) Allow() (suppressed int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		return 0, false
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return n, true
}

// Warn logs msg with fields and Suppressed at warn level, if Allow lets it.
func (l *LogLimiter) Warn(msg string, fields ...zap.Field) {
	if n, ok := l.Allow(); ok {
		// A full slice expression: never write into the caller's array.
		l.log.Warn(msg, append(fields[:len(fields):len(fields)], Suppressed(n))...)
	}
}

// Suppressed is the field that says how many lines a LogLimiter held back
// before this one.
func Suppressed(n int) zap.Field { return zap.Int("suppressed", n) }
