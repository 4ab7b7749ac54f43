package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// retryWarnEvery is how often an epoch-log or shard operation that keeps
// failing is logged; the failures in between are counted in the next line.
const retryWarnEvery = 10 * time.Second

// retry runs op, the operation what, until its answer is final: nil,
// snapshot.ErrNotFound (an answer, not a failure), an error no retry mends
// (epochlog.Fatal, a damaged artefact, one of a newer format), or ctx
// done (then it returns op's last error). While
// op fails the epochs are not ready for reason (NotReadySnapshots for the
// store, NotReadySource for the broker), with the error, and the epoch
// waits: an outage is back-pressure, never an exit. Every failure of the
// store counts in SnapshotErrors.
func (x *Epochs) retry(ctx context.Context, reason, what string, op func(context.Context) error) error {
	bo := retry.Backoff{Min: retryMinDelay, Max: retryMaxDelay}
	failed := false
	defer func() {
		if failed {
			x.recovered(reason)
		}
	}()
	answered := false // op's answer is final, not cut short by ctx
	err := retry.Do(ctx, &bo, func(ctx context.Context) error {
		err := op(ctx)
		if err == nil || errors.Is(err, snapshot.ErrNotFound) || epochlog.Fatal(err) || errors.Is(err, ErrFatal) ||
			errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, snapshot.ErrNewerFormat) {
			answered = true
			return retry.Permanent(err)
		}
		return err
	}, func(err error) {
		if !failed {
			failed = true
			x.mu.Lock()
			if x.failing == nil {
				x.failing = map[string]int{}
			}
			x.failing[reason]++
			x.mu.Unlock()
		}
		if reason == NotReadySnapshots {
			x.metrics.SnapshotErrors.Inc()
		}
		x.readiness.fail(reason, what+": "+err.Error())
		x.logWarns.Warn("operation failed; retrying", zap.String("operation", what), zap.Error(err))
	})
	if answered && failed {
		x.log.Info("retried operation succeeded", zap.String("operation", what))
	}
	return err
}

// recovered ends one operation's failures for reason; the reason is
// cleared once no operation of it fails.
func (x *Epochs) recovered(reason string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failing[reason]--; x.failing[reason] <= 0 {
		delete(x.failing, reason)
		x.readiness.ok(reason)
	}
}

// fatal marks an error no retry mends.
func fatal(err error) error {
	if epochlog.Fatal(err) {
		return fmt.Errorf("%w: %w", ErrFatal, err)
	}
	return err
}
