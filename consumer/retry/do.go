package retry

import (
	"context"
	"errors"
)

// Do calls op until it succeeds, returns an error marked Permanent, or ctx
// is done, waiting bo's delay between attempts, and resets bo once op
// succeeds. The first attempt is made at once, even if ctx is already
// done: op gets ctx and decides what that means.
//
// failed, unless nil, is called with each error that is about to be
// retried, before the wait: it is where a loop logs, counts or reports the
// failure (readiness). It is not called for a permanent error, nor for an
// error op returned once ctx was done.
//
// Do returns nil once op has succeeded; the error op marked Permanent,
// without the mark; and, when ctx is done, the last error op returned
// (check ctx.Err() to tell that case apart).
func Do(ctx context.Context, bo *Backoff, op func(ctx context.Context) error, failed func(err error)) error {
	for {
		err := op(ctx)
		if err == nil {
			bo.Reset()
			return nil
		}
		if p, ok := errors.AsType[*permanentError](err); ok {
			return p.err
		}
		if ctx.Err() != nil {
			return err
		}
		if failed != nil {
			failed(err)
		}
		if bo.Wait(ctx) != nil {
			return err
		}
	}
}

// Permanent marks err as not worth retrying: Do returns it (without the
// mark) at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }
