package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// attempts is an operation that fails with the errors of fails, in turn,
// then succeeds, and records how often it ran.
type attempts struct {
	fails []error
	calls int
}

func (a *attempts) op(context.Context) error {
	a.calls++
	if a.calls <= len(a.fails) {
		return a.fails[a.calls-1]
	}
	return nil
}

func TestDo(t *testing.T) {
	down := errors.New("broker down")
	gone := errors.New("closed")
	for _, tc := range []struct {
		name      string
		fails     []error
		cancelAt  int // cancel ctx in the wait before this retry (1 is the first); 0: never
		want      error
		calls     int
		failed    []error
		waits     []time.Duration
		wantReset bool
	}{
		{name: "success at once", calls: 1, wantReset: true},
		{
			name:  "retried until success",
			fails: []error{down, down, down}, calls: 4,
			failed: []error{down, down, down}, waits: []time.Duration{10 * ms, 20 * ms, 40 * ms}, wantReset: true,
		},
		{
			name:  "permanent is final and unwrapped",
			fails: []error{down, Permanent(fmt.Errorf("open: %w", gone))}, calls: 2, want: gone,
			failed: []error{down}, waits: []time.Duration{10 * ms},
		},
		{
			name:  "ctx done in a wait: the last error",
			fails: []error{down, gone, down, down}, cancelAt: 2, calls: 2, want: gone,
			failed: []error{down, gone}, waits: []time.Duration{10 * ms, 20 * ms},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var waits []time.Duration
			bo := Backoff{Min: 10 * ms, Max: time.Second, sleep: func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				if len(waits) == tc.cancelAt {
					cancel()
				}
				return ctx.Err()
			}}
			a := &attempts{fails: tc.fails}
			var failed []error
			err := Do(ctx, &bo, a.op, func(err error) { failed = append(failed, err) })
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Do returned %v, want %v", err, tc.want)
			}
			if errors.As(err, new(*permanentError)) {
				t.Fatalf("Do returned %v still marked permanent", err)
			}
			if a.calls != tc.calls {
				t.Errorf("op ran %d times, want %d", a.calls, tc.calls)
			}
			if !slices.Equal(failed, tc.failed) {
				t.Errorf("failed saw %v, want %v", failed, tc.failed)
			}
			if !slices.Equal(waits, tc.waits) {
				t.Errorf("waits %v, want %v", waits, tc.waits)
			}
			if reset := bo.retries == 0; reset != tc.wantReset {
				t.Errorf("backoff reset: %v, want %v", reset, tc.wantReset)
			}
		})
	}
}

// TestDoDoneCtx: an error op returns once ctx is done ends Do without a
// wait and without being reported as retried, whatever op makes of ctx.
func TestDoDoneCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	down := errors.New("broker down")
	bo := Backoff{sleep: func(context.Context, time.Duration) error {
		t.Fatal("Do waited with ctx done")
		return nil
	}}
	a := &attempts{fails: []error{down}}
	err := Do(ctx, &bo, a.op, func(err error) { t.Fatalf("failed(%v) with ctx done", err) })
	if !errors.Is(err, down) || a.calls != 1 {
		t.Fatalf("Do = %v after %d calls, want %v after 1", err, a.calls, down)
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
}
