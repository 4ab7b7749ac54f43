package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// isTerminal reports whether w is a character device, a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a one-line progress bar on a terminal, at most five
// times a second. On anything else it draws nothing.
type progress struct {
	w     io.Writer
	on    bool
	total int64         // bytes, or 0 if unknown
	read  *atomic.Int64 // bytes read so far
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, total int64, read *atomic.Int64) *progress {
	now := time.Now()
	return &progress{w: w, on: isTerminal(w), total: total, read: read, start: now, last: now}
}

// update redraws the bar if it is time; status is what follows the bar.
func (p *progress) update(examples uint64, status func() string) {
	if !p.on || examples%4096 != 0 {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond {
		return
	}
	p.last = now
	p.draw(examples, status())
}

func (p *progress) draw(examples uint64, status string) {
	rate := float64(examples) / time.Since(p.start).Seconds()
	bar := ""
	if p.total > 0 {
		frac := min(1, float64(p.read.Load())/float64(p.total))
		const width = 24
		n := int(frac * width)
		bar = fmt.Sprintf("%3.0f%% [%s%s] ", frac*100, strings.Repeat("=", n), strings.Repeat(" ", width-n))
	}
	fmt.Fprintf(p.w, "\r%s%d examples  %.0f/s  %s\x1b[K", bar, examples, rate, status)
}

// done clears the bar.
func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}
