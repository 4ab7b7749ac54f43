package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"gocloud.dev/blob"
)

// stallTimeout bounds how long one operation on the store may go without
// moving a byte. The drivers set no such bound: an S3 server that accepts
// connections and never answers (a process stopped or hung, a proxy that
// holds requests) leaves a request waiting for as long as the connection
// lives, and the worker waiting on it with no error to report, ready by
// every measure while it commits nothing. Past this bound the operation
// fails, and its caller reports and retries it as any failure of the
// store. A variable for tests.
var stallTimeout = time.Minute

// slowestUpload is the slowest rate, in bytes a second, an upload is
// allowed beyond stallTimeout: the S3 driver reads a large object's parts
// ahead of sending them, several at a time, so that a slow link may
// send for long after the last byte read.
const slowestUpload = 128 << 10

// errStalled is the cause of an operation's context cancelled by its
// watch.
var errStalled = errors.New("stalled")

// watch bounds one operation on the store by stallTimeout from its start
// or from the last byte it moved (see progress).
type watch struct {
	bound  time.Duration
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// watch starts watching an operation that sends size bytes: it must run
// under w.ctx and end with w.done.
func (s *Store) watch(ctx context.Context, size int) *watch {
	w := &watch{parent: ctx, bound: stallTimeout + time.Duration(size)*time.Second/slowestUpload}
	w.ctx, w.cancel = context.WithCancelCause(ctx)
	w.timer = time.AfterFunc(w.bound, func() { w.cancel(errStalled) })
	return w
}

// progress restarts the bound: the operation moved bytes.
func (w *watch) progress() { w.timer.Reset(w.bound) }

// done ends the watch and returns the operation's err, or, if the watch
// cut the operation short, an error saying that the store did not
// answer, which does not wrap a context's error: the caller's context is
// still live, and the failure is the store's, to be retried.
func (w *watch) done(err error) error {
	w.timer.Stop()
	stalled := err != nil && w.parent.Err() == nil && errors.Is(context.Cause(w.ctx), errStalled)
	w.cancel(nil)
	if stalled {
		return fmt.Errorf("the store did not answer for %s (is it up, and not stopped or overloaded?): %v", w.bound, err)
	}
	return err
}

// progressReader counts what a reader moves as progress of a watch.
type progressReader struct {
	r io.Reader
	w *watch
}

func (p progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.w.progress()
	}
	return n, err
}

// readAll reads the object at key under a watch.
func (s *Store) readAll(ctx context.Context, key string) ([]byte, error) {
	w := s.watch(ctx, 0)
	data, err := func() ([]byte, error) {
		r, err := s.bucket.NewReader(w.ctx, key, nil)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return io.ReadAll(progressReader{r, w})
	}()
	return data, w.done(err)
}

// seekingReader is a progressReader of bytes that seeks and reads at an
// offset, as the S3 driver needs to know an upload's length (and send
// one under its part size in one request) and to send it again.
type seekingReader struct {
	r *bytes.Reader
	w *watch
}

func (p seekingReader) Read(b []byte) (int, error) { return progressReader{p.r, p.w}.Read(b) }

func (p seekingReader) Seek(offset int64, whence int) (int64, error) {
	return p.r.Seek(offset, whence)
}

func (p seekingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.r.ReadAt(b, off)
	if n > 0 {
		p.w.progress()
	}
	return n, err
}

// upload creates or writes the object at key from data under a watch.
func (s *Store) upload(ctx context.Context, key string, data []byte, opts *blob.WriterOptions) error {
	w := s.watch(ctx, len(data))
	return w.done(s.bucket.Upload(w.ctx, key, seekingReader{bytes.NewReader(data), w}, opts))
}

// exists is the bucket's Exists under a watch.
func (s *Store) exists(ctx context.Context, key string) (bool, error) {
	w := s.watch(ctx, 0)
	ok, err := s.bucket.Exists(w.ctx, key)
	return ok, w.done(err)
}

// delete is the bucket's Delete under a watch.
func (s *Store) delete(ctx context.Context, key string) error {
	w := s.watch(ctx, 0)
	return w.done(s.bucket.Delete(w.ctx, key))
}
