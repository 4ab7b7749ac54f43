package consumer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Format is the encoding of examples in a file or message.
type Format string

// The formats.
const (
	// FormatAuto detects the format from the first byte: '{' is JSON, a
	// msgpack map header is msgpack.
	FormatAuto    Format = "auto"
	FormatJSON    Format = "jsonl"
	FormatMsgpack Format = "msgpack"
)

// Record is one example read from a stream of examples.
type Record struct {
	// N numbers the record from 1: the line for JSON lines, the map's
	// place in the stream for msgpack.
	N       int
	Example *learner.Example
	Meta    Meta
	// Err is why the record could not be decoded; Example is then unusable.
	Err error
	// Payload is the record's bytes.
	Payload []byte
}

// ReadOptions tune ReadExamples.
type ReadOptions struct {
	// Format is the input's format; empty means FormatAuto.
	Format Format
	// Workers is the number of decoding goroutines; 0 means GOMAXPROCS.
	Workers int
	// ChunkSize is how many bytes are read and handed to a worker at a
	// time; 0 means 1 MiB. A record longer than a chunk grows it.
	ChunkSize int
}

// ReadExamples reads JSON lines or a stream of msgpack maps from r,
// decodes them on opts.Workers goroutines with decoders from newDecoder,
// and calls fn for every record, in input order, on the calling goroutine.
// A record that does not decode reaches fn with Err set; blank lines are
// skipped. The Record and everything it points to are valid only during
// fn. ReadExamples stops at the end of r, at fn's first error (which it
// returns), or when ctx is done; bytes that cannot be split into records
// (a msgpack stream with a bad type byte, a truncated last map) end it
// with an error.
func ReadExamples(ctx context.Context, r io.Reader, newDecoder func() *Decoder, opts ReadOptions, fn func(*Record) error) error {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	size := opts.ChunkSize
	if size <= 0 {
		size = 1 << 20
	}
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	p := &pipeline{
		chunks:  make(chan *chunk, workers),
		decoded: make(chan *chunk, workers),
		free:    make(chan *chunk, 2*workers+2),
	}
	for range cap(p.free) {
		p.free <- &chunk{}
	}
	var wg sync.WaitGroup
	var readErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.chunks)
		readErr = p.split(ctx, r, opts.Format, size)
	}()
	var workersWG sync.WaitGroup
	for range workers {
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			d := newDecoder()
			for c := range p.chunks {
				c.decode(d)
				select {
				case p.decoded <- c:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		workersWG.Wait()
		close(p.decoded)
	}()

	err := p.deliver(ctx, fn)
	cancel()
	// Drain so that the reader and the workers can finish.
	for range p.decoded {
	}
	wg.Wait()
	if err != nil {
		return err
	}
	if readErr != nil && !errors.Is(readErr, context.Canceled) {
		return readErr
	}
	return parent.Err()
}

type pipeline struct {
	chunks  chan *chunk // split, to decode
	decoded chan *chunk // decoded, to deliver in order
	free    chan *chunk
}

// chunk is a run of whole records and, once decoded, their examples.
type chunk struct {
	seq    int
	first  int // record number of the first record
	format Format
	data   []byte
	// spans are the records' [start, end) in data and their numbers.
	spans []span
	recs  []Record
	xs    []learner.Example
	ids   []byte // the records' ids, copied out of the decoder's scratch
}

type span struct{ start, end, n int }

// split reads r and sends chunks of whole records, numbered in order.
func (p *pipeline) split(ctx context.Context, r io.Reader, format Format, size int) error {
	buf := make([]byte, 0, size)
	seq, record := 0, 1
	eof := false
	for {
		if !eof && len(buf) < cap(buf) {
			n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			switch {
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				eof = true
			case err != nil:
				return fmt.Errorf("read: %w", err)
			}
		}
		if format == FormatAuto || format == "" {
			format = detect(buf, eof)
			if format == FormatAuto {
				if eof {
					return nil // nothing but white space
				}
				continue
			}
		}
		var c *chunk
		select {
		case c = <-p.free:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.seq, c.first, c.format = seq, record, format
		c.spans = c.spans[:0]
		used, next, err := cut(buf, format, eof, record, &c.spans)
		if err != nil {
			return err
		}
		if used == 0 && !eof {
			// One record fills the buffer: grow it and read on.
			p.free <- c
			grown := make([]byte, len(buf), 2*cap(buf))
			copy(grown, buf)
			buf = grown
			continue
		}
		c.data = append(c.data[:0], buf[:used]...)
		record = next
		if len(c.spans) > 0 {
			select {
			case p.chunks <- c:
			case <-ctx.Done():
				return ctx.Err()
			}
			seq++
		} else {
			p.free <- c
		}
		rest := copy(buf, buf[used:])
		buf = buf[:rest]
		if eof && rest == 0 {
			return nil
		}
		if eof && used == 0 {
			return fmt.Errorf("record %d: the input ends inside it (truncated msgpack)", record)
		}
	}
}

// detect is the format of the first non-space byte, or FormatAuto if there
// is none yet.
func detect(buf []byte, eof bool) Format {
	t := bytes.TrimLeft(buf, " \t\r\n")
	if len(t) == 0 {
		return FormatAuto
	}
	if t[0] == '{' {
		return FormatJSON
	}
	if t[0]&0xf0 == 0x80 || t[0] == 0xde || t[0] == 0xdf {
		return FormatMsgpack
	}
	// Neither: let the JSON decoder say what is wrong, line by line.
	return FormatJSON
}

// cut finds the whole records at the front of buf, appends their spans,
// and returns how many bytes they use and the next record number.
func cut(buf []byte, format Format, eof bool, record int, spans *[]span) (int, int, error) {
	used := 0
	if format == FormatJSON {
		for used < len(buf) {
			nl := bytes.IndexByte(buf[used:], '\n')
			end := used + nl + 1
			if nl < 0 {
				if !eof {
					break
				}
				end = len(buf)
			}
			line := buf[used:end]
			if len(bytes.TrimSpace(line)) > 0 {
				*spans = append(*spans, span{used, end, record})
			}
			record++
			used = end
		}
		return used, record, nil
	}
	for used < len(buf) {
		if len(bytes.TrimLeft(buf[used:], " \t\r\n")) == 0 {
			return len(buf), record, nil
		}
		adv, tok, err := SplitMsgpack(buf[used:], eof)
		if err != nil {
			if used > 0 {
				break // deliver the whole records first; the next cut fails
			}
			return 0, 0, fmt.Errorf("record %d: %w", record, err)
		}
		if adv == 0 || tok == nil {
			break
		}
		*spans = append(*spans, span{used + adv - len(tok), used + adv, record})
		record++
		used += adv
	}
	return used, record, nil
}

// decode decodes every record of c with d. The ids are copied into c,
// since a decoder's Meta.ID may point into its own scratch space.
func (c *chunk) decode(d *Decoder) {
	n := len(c.spans)
	if cap(c.xs) < n {
		c.xs = make([]learner.Example, n)
		c.recs = make([]Record, n)
	}
	c.xs, c.recs = c.xs[:n], c.recs[:n]
	c.ids = c.ids[:0]
	for i, s := range c.spans {
		payload := c.data[s.start:s.end]
		x := &c.xs[i]
		var meta Meta
		var err error
		if c.format == FormatJSON {
			meta, err = d.DecodeJSON(payload, x)
		} else {
			meta, err = d.Decode(payload, x)
		}
		c.ids = append(c.ids, meta.ID...)
		c.recs[i] = Record{N: s.n, Example: x, Meta: Meta{ID: meta.ID, HasID: meta.HasID}, Err: err, Payload: payload}
	}
	off := 0
	for i := range c.recs {
		l := len(c.recs[i].Meta.ID)
		c.recs[i].Meta.ID = c.ids[off : off+l : off+l]
		off += l
	}
}

// deliver calls fn for the records of the decoded chunks in order.
func (p *pipeline) deliver(ctx context.Context, fn func(*Record) error) error {
	pending := map[int]*chunk{}
	next := 0
	for c := range p.decoded {
		pending[c.seq] = c
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			for i := range c.recs {
				if err := fn(&c.recs[i]); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			p.free <- c
		}
	}
	return nil
}
