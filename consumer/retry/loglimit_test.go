package retry

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// clock is a time that the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func observed(every time.Duration) (*LogLimiter, *observer.ObservedLogs, *clock) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := NewLogLimiter(zap.New(core), every)
	c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	l.now = c.now
	return l, logs, c
}

func TestLogLimiter(t *testing.T) {
	l, logs, c := observed(time.Second)
	steps := []struct {
		after time.Duration // since the step before
		out   bool          // logged
		n     int64         // its suppressed count
	}{
		{0, true, 0}, // the first always goes out
		{0, false, 0},
		{999 * time.Millisecond, false, 0},
		{time.Millisecond, true, 2}, // a full period after the last line out
		{500 * time.Millisecond, false, 0},
		{10 * time.Second, true, 1},
		{time.Second, true, 0},
	}
	for i, s := range steps {
		c.advance(s.after)
		before := logs.Len()
		l.Warn("broker down", zap.String("broker", "b1"))
		if out := logs.Len() > before; out != s.out {
			t.Fatalf("step %d: logged %v, want %v", i, out, s.out)
		}
		if !s.out {
			continue
		}
		e := logs.All()[logs.Len()-1]
		f := e.ContextMap()
		if e.Level != zapcore.WarnLevel || e.Message != "broker down" || f["broker"] != "b1" || f["suppressed"] != s.n {
			t.Fatalf("step %d: logged %s %q %v, want a warning with broker b1 and suppressed %d", i, e.Level, e.Message, f, s.n)
		}
	}
}

func TestLogLimiterAllow(t *testing.T) {
	l, logs, c := observed(10 * time.Second)
	if n, ok := l.Allow(); !ok || n != 0 {
		t.Fatalf("first Allow = %d, %v; want 0, true", n, ok)
	}
	for range 5 {
		if _, ok := l.Allow(); ok {
			t.Fatal("Allow within the period")
		}
	}
	c.advance(10 * time.Second)
	if n, ok := l.Allow(); !ok || n != 5 {
		t.Fatalf("Allow after the period = %d, %v; want 5, true", n, ok)
	}
	if logs.Len() != 0 {
		t.Fatal("Allow logged")
	}
	// Zero period: everything goes out.
	l, logs, _ = observed(0)
	for range 3 {
		l.Warn("x")
	}
	if logs.Len() != 3 {
		t.Fatalf("%d lines with a zero period, want 3", logs.Len())
	}
}

// TestLogLimiterConcurrent: under concurrent use (run with -race) every
// warning is either logged or counted in a later line.
func TestLogLimiterConcurrent(t *testing.T) {
	l, logs, _ := observed(time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Warn("x")
			}
		})
	}
	wg.Wait()
	l.now = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	l.Warn("last")
	if logs.Len() != 2 {
		t.Fatalf("%d lines, want the first and the last", logs.Len())
	}
	if n := logs.All()[1].ContextMap()["suppressed"]; n != int64(799) {
		t.Fatalf("the last line counts %v suppressed, want 799", n)
	}
}

// TestLogLimiterKeepsCallersFields: Warn adds its field to a copy, never
// to spare room in the caller's slice.
func TestLogLimiterKeepsCallersFields(t *testing.T) {
	l, logs, _ := observed(time.Second)
	fields := make([]zap.Field, 1, 4)
	fields[0] = zap.String("a", "b")
	l.Warn("x", fields...)
	if spare := fields[:2][1]; spare.Key != "" {
		t.Fatalf("Warn wrote %q into the caller's slice", spare.Key)
	}
	if f := logs.All()[0].ContextMap(); f["a"] != "b" || f["suppressed"] != int64(0) {
		t.Fatalf("logged fields %v", f)
	}
}
