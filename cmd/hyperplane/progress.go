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
//
// The bar's line has no line end while it is live: whatever is printed
// next would be glued onto it. So a command ends the bar before it prints
// anything else on the same terminal, and before it returns, since main
// prints its error: done on success, end on every path (deferred).
type progress struct {
	w     io.Writer
	on    bool
	live  bool          // a line is drawn and not ended
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
	p.show(fmt.Sprintf("%s%d examples  %.0f/s  %s", bar, examples, rate, status))
}

// show draws line as the bar, in place of the previous one.
func (p *progress) show(line string) {
	if !p.on {
		return
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	p.live = true
}

// done clears the bar's line: the command finished, and its result takes
// the line's place.
func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.live = false
	}
}

// end ends a live line with a line end, leaving it in view to say how far
// the command got, so that what is printed next (the error that stopped the
// command) starts a line of its own. After done, it does nothing.
func (p *progress) end() {
	if p.live {
		fmt.Fprintln(p.w)
		p.live = false
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
