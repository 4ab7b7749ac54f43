// Package wait is how tests wait for an event that nothing signals: they
// poll the condition that shows it happened. A test that sleeps for a
// guessed duration instead passes on an idle machine and fails on a busy
// one; a test that polls fails only when the event does not come within
// a timeout long enough for any machine.
//
// It is for tests only.
package wait

import (
	"testing"
	"time"
)

// For calls cond at once and then every tick until it returns true, and
// fails t with t.Fatalf, naming what it waited for, if cond has not
// returned true within timeout. cond runs on the caller's goroutine, so
// it may itself fail t; For, like t.Fatalf, must be called from the
// goroutine running the test.
func For(t testing.TB, timeout, tick time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(tick)
	}
}
