package wait_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// recorder is a testing.TB whose Fatalf records the failure and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	panic(r)
}

// run calls wait.For with r, recovering from the end of its goroutine
// that r.Fatalf stands in for.
func run(r *recorder, timeout time.Duration, cond func() bool) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	wait.For(r, timeout, time.Millisecond, "the event", cond)
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	run(r, time.Minute, func() bool { calls++; return calls == 3 })
	if r.failure != "" || calls != 3 {
		t.Fatalf("For failed with %q after %d calls; want it to return at the third", r.failure, calls)
	}
}

func TestForFailsNamingWhatItWaitedFor(t *testing.T) {
	calls := 0
	r := &recorder{TB: t}
	run(r, 20*time.Millisecond, func() bool { calls++; return false })
	if !strings.Contains(r.failure, "the event") || !strings.Contains(r.failure, "20ms") {
		t.Fatalf("For failed with %q, want the timeout and what it waited for", r.failure)
	}
	if calls < 2 {
		t.Fatalf("the condition was called %d times before the timeout, want it polled", calls)
	}
}
