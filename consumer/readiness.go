package consumer

import (
	"slices"
	"sync"
)

// The reasons a worker can be not ready, as /readyz names them.
const (
	// NotReadySource: the worker is not consuming (not started yet, or
	// stopped).
	NotReadySource = "source"
	// NotReadyOutputs: publishing outputs fails; consumption is paused.
	NotReadyOutputs = "outputs"
	// NotReadySnapshots: writing a snapshot fails; the source is not
	// committed past the last snapshot written.
	NotReadySnapshots = "snapshots"
	// NotReadyJoin: labels.max_pending examples wait for their labels;
	// the worker reads no more examples until some are learned.
	NotReadyJoin = "join"
)

// readiness is the conjunction of independent reasons: the worker is
// ready only while none of them fails. Each reason is set and cleared by
// the one part of the worker that owns it, so a publish that succeeds
// never hides a snapshot writer that fails.
type readiness struct {
	mu      sync.Mutex
	failing map[string]string // reason -> why, for the reasons failing now
}

func (r *readiness) fail(reason, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing == nil {
		r.failing = map[string]string{}
	}
	r.failing[reason] = why
}

// ok marks reason fine, and reports whether it was failing.
func (r *readiness) ok(reason string) (was bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, was = r.failing[reason]
	delete(r.failing, reason)
	return was
}

func (r *readiness) ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failing) == 0
}

// reasons lists the failing reasons, sorted, each as "reason: why".
func (r *readiness) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.failing))
	for reason, why := range r.failing {
		out = append(out, reason+": "+why)
	}
	slices.Sort(out)
	return out
}

// withFailure adds to reasons the source's reason for failure, why the
// worker takes part in no assignment of its shards, if it reports one.
func withFailure(reasons []string, failure func() error) []string {
	if failure == nil {
		return reasons
	}
	if err := failure(); err != nil {
		reasons = append(reasons, NotReadySource+": "+err.Error())
	}
	return reasons
}
