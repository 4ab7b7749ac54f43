package retry

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestBackoffDelays(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Backoff
		want []time.Duration // Next, from the first retry on
	}{
		{"zero is the defaults", Backoff{}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"worker", Backoff{Min: 50 * ms, Max: 5 * time.Second}, []time.Duration{50 * ms, 100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"max a power of two of min", Backoff{Min: 100 * ms, Max: 1600 * ms}, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 1600 * ms}},
		{"odd max", Backoff{Min: 1, Max: 5}, []time.Duration{1, 2, 4, 5, 5}},
		{"max below min", Backoff{Min: time.Second, Max: ms}, []time.Duration{time.Second, time.Second}},
		{"only min", Backoff{Min: 2 * time.Second}, []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second}},
		{"only max", Backoff{Max: 300 * ms}, []time.Duration{100 * ms, 200 * ms, 300 * ms}},
		{"huge max does not overflow", Backoff{Min: time.Hour, Max: math.MaxInt64}, []time.Duration{time.Hour, 2 * time.Hour, 4 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []time.Duration
			for range tc.want {
				got = append(got, tc.b.Next())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("delays %v, want %v", got, tc.want)
			}
			tc.b.Reset()
			if d := tc.b.Next(); d != tc.want[0] {
				t.Fatalf("after Reset the delay is %v, want %v", d, tc.want[0])
			}
		})
	}
}

// TestBackoffDelay checks Delay as the NATS client's reconnect rounds use
// it, far beyond the cap, and that it leaves the count alone.
func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: 100 * ms, Max: 2 * time.Second}
	for n, want := range map[int]time.Duration{-1: 100 * ms, 0: 100 * ms, 1: 100 * ms, 2: 200 * ms, 5: 1600 * ms, 6: 2 * time.Second, 1 << 30: 2 * time.Second, math.MaxInt: 2 * time.Second} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if d := b.Next(); d != 100*ms {
		t.Fatalf("Delay changed the count: Next is %v", d)
	}
	for d := range 64 {
		b := Backoff{Min: time.Duration(1) << d, Max: math.MaxInt64}
		for n := range 70 {
			if got := b.Delay(n); got <= 0 {
				t.Fatalf("Backoff{Min: %v, Max: MaxInt64}.Delay(%d) = %v", b.Min, n, got)
			}
		}
	}
}

func TestBackoffWait(t *testing.T) {
	var slept []time.Duration
	b := Backoff{Min: 10 * ms, Max: 40 * ms, sleep: func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}}
	ctx := context.Background()
	for range 4 {
		if err := b.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b.Reset()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on a done context: %v, want its error", err)
	}
	if want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 40 * ms, 10 * ms}; !slices.Equal(slept, want) {
		t.Fatalf("waited %v, want %v", slept, want)
	}
}

// TestBackoffWaitAtMost: the bound shortens a wait longer than it and
// leaves a shorter one, and 0 is no bound; each counts as a retry.
func TestBackoffWaitAtMost(t *testing.T) {
	var slept []time.Duration
	b := Backoff{Min: 10 * ms, Max: 40 * ms, sleep: func(ctx context.Context, d time.Duration) error {
		slept = append(slept, d)
		return ctx.Err()
	}}
	ctx := context.Background()
	for _, bound := range []time.Duration{15 * ms, 15 * ms, 0, 100 * ms} {
		if err := b.WaitAtMost(ctx, bound); err != nil {
			t.Fatal(err)
		}
	}
	if want := []time.Duration{10 * ms, 15 * ms, 40 * ms, 40 * ms}; !slices.Equal(slept, want) {
		t.Fatalf("waited %v, want %v", slept, want)
	}
}

// TestSleep checks the real wait without depending on how long anything
// takes: a done context wins over any delay, and a zero delay on a live
// context returns nil.
func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if err := sleep(ctx, 0); err != nil {
		t.Fatalf("sleep(0) = %v", err)
	}
	cancel()
	if err := sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep(1h) on a cancelled context = %v, want context.Canceled", err)
	}
	if err := sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep(0) on a cancelled context = %v, want context.Canceled", err)
	}
	// A context that ends while the timer runs.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("sleep(1h) cancelled while waiting = %v, want context.Canceled", err)
	}
}
