package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
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
	// Also holds the example as each decoder of ReadOptions.Also decodes
	// it, in that order, when Err is nil.
	Also []*learner.Example
}

// ReadOptions tune ReadExamples.
type ReadOptions struct {
	// Format is the input's format; empty means FormatAuto.
	Format Format
	// Workers is the number of decoding goroutines; 0 means GOMAXPROCS.
	Workers int
	// ChunkSize is how many bytes are read and handed to a worker at a
	// time; 0 means 1 MiB. A record longer than a chunk grows it, up to
	// the decoder's limit (DecoderOptions.MaxBytes); a longer one is
	// refused as too large, with its size, without being held.
	ChunkSize int
	// Also makes decoders for examples wanted under other model
	// configurations, which differ from the reader's only in their hashing
	// (see Decoder.DecodeHashings): every record reaches Record.Also as
	// each would decode it, its feature names hashed under every hashing
	// in one pass on the workers, not decoded again. A record that one of
	// them refuses has that decoder's error as its Err.
	Also []func() *Decoder
	// Live delivers the records of each read as soon as it returns,
	// rather than once a chunk is full or the input ends: for an input
	// whose records must be answered as they come (a pipe from a live
	// stream, a terminal). A file fills its chunks either way; a pipe
	// read live gives chunks of at most its buffer (64 KiB on Linux),
	// which cost a piped train about a tenth of its rate (BENCHMARKS.md,
	// "hyperplane train end to end").
	Live bool
}

// ReadExamples reads JSON lines or a stream of msgpack maps from r,
// decodes them with decoders from newDecoder, and calls fn for every
// record, in input order, on the calling goroutine. JSON lines are decoded
// on opts.Workers goroutines; msgpack maps are decoded as they are read,
// which is how their ends are found, and their feature names hashed on
// opts.Workers goroutines.
// A record that does not decode reaches fn with Err set; blank lines are
// skipped. The Record and everything it points to are valid only during
// fn. ReadExamples stops at the end of r, at fn's first error (which it
// returns), or when ctx is done; bytes that cannot be split into records
// (a msgpack stream with a bad type byte, a truncated last map) end it
// with an error. When ctx is done or fn fails, it returns at once, without
// waiting for a Read of r in progress, which only r's writer may end
// (standard input at a terminal, an idle pipe): that Read's bytes are
// dropped, and r is not read again.
func ReadExamples(ctx context.Context, r io.Reader, newDecoder func() *Decoder, opts ReadOptions, fn func(*Record) error) error {
	return ReadRecords(ctx, r, newDecoder, opts, func(recs []Record) error {
		for i := range recs {
			if err := fn(&recs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadRecords is ReadExamples handing fn the records a run at a time
// rather than one by one: every call has the records that follow the
// last call's, in input order, at least one of them, valid only during
// fn. A run is the records of one chunk of ReadOptions.ChunkSize bytes,
// so that a caller can work on many records at once, such as learning
// them on several goroutines.
func ReadRecords(ctx context.Context, r io.Reader, newDecoder func() *Decoder, opts ReadOptions, fn func([]Record) error) error {
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
		readErr = p.split(ctx, r, opts.Format, size, opts.Live, newDecoder)
	}()
	var workersWG sync.WaitGroup
	for range workers {
		workersWG.Add(1)
		go func() {
			defer workersWG.Done()
			d := newDecoder()
			also := make([]*Decoder, len(opts.Also))
			for k, f := range opts.Also {
				also[k] = f()
			}
			errs := make([]error, len(also))
			for c := range p.chunks {
				if c.decoded {
					c.hash(d, also, errs)
				} else {
					c.decode(d, also, errs)
				}
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
	if err != nil {
		// The reader and the workers stop on ctx, the reader once a
		// Read in progress returns: not waited for.
		return err
	}
	// deliver saw p.decoded closed: the reader and the workers are done.
	wg.Wait()
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
	// decoded is set when split decoded the records (msgpack) but for
	// hashing their feature names (span.hash).
	decoded bool
	// spans are the records' [start, end) in data and their numbers.
	spans []span
	recs  []Record
	xs    []learner.Example
	// also are the records' examples as ReadOptions.Also's decoders
	// decode them: also[k][i] is record i's for decoder k; alsoPtrs
	// holds every record's Record.Also end to end.
	also     [][]learner.Example
	alsoPtrs []*learner.Example
	ids      []byte // the records' ids, copied out of the decoder's scratch
	// index and value are the backing of the decoded examples' sparse
	// features, end to end (see decode).
	index []uint32
	value []float64
}

// span is a record's [start, end) in a chunk's data and its number; for a
// record the splitter decoded, id is the length of its id in the chunk's
// ids.
type span struct {
	start, end, n, id int
	// size is the length of a record over the decoder's limit, whose
	// bytes are not held (start and end are 0); 0 for every other.
	size int
	// hash is set when the record's feature names are still to hash.
	hash bool
}

// split reads r and sends chunks of whole records, numbered in order. It
// reads into the chunks' own buffers, each starting with the bytes the
// previous chunk left over (the start of a record), and decodes msgpack
// as it splits it: finding where a map ends takes as long as decoding it.
func (p *pipeline) split(ctx context.Context, r io.Reader, format Format, size int, live bool, newDecoder func() *Decoder) error {
	var (
		carry  []byte // read but in no chunk yet: the start of a record
		d      *Decoder
		seq    int
		record = 1
		eof    bool
	)
	for {
		var c *chunk
		select {
		case c = <-p.free:
		case <-ctx.Done():
			return ctx.Err()
		}
		if cap(c.data) < size {
			c.data = make([]byte, 0, size)
		}
		// carry may be the end of c.data itself, if c came back from
		// delivery already: append moves it to the front.
		buf := append(c.data[:0], carry...)
		if !eof && len(buf) < cap(buf) {
			if err := ctx.Err(); err != nil {
				return err
			}
			var n int
			var err error
			if live {
				n, err = readAvailable(r, buf[len(buf):cap(buf)])
			} else {
				n, err = io.ReadFull(r, buf[len(buf):cap(buf)])
			}
			buf = buf[:len(buf)+n]
			switch {
			case err == io.EOF || err == io.ErrUnexpectedEOF:
				eof = true
			case err != nil:
				return fmt.Errorf("read: %w", err)
			}
		}
		c.data = buf
		if format == FormatMsgpack && seq == 0 && detect(buf, eof) == FormatJSON && bytes.HasPrefix(bytes.TrimLeft(buf, " \t\r\n"), []byte("{")) {
			// No msgpack map begins with '{' (a positive integer): read
			// as msgpack, every byte of JSON text would be a record of
			// its own that is no example.
			return errors.New("the input begins with '{', as JSON does, and no msgpack map does: it is read as msgpack (format msgpack); read it as jsonl, or auto (by the first byte)")
		}
		if format == FormatAuto || format == "" {
			format = detect(buf, eof)
			if format == FormatAuto {
				if eof {
					return nil // nothing but white space
				}
				carry = buf
				p.free <- c
				if len(buf) == cap(buf) {
					size = 2 * cap(buf)
				}
				continue
			}
		}
		c.seq, c.first, c.format = seq, record, format
		var used, next int
		c.decoded = format == FormatMsgpack
		if c.decoded {
			if d == nil {
				d = newDecoder()
			}
			var err error
			if used, next, err = c.cutMsgpack(buf, eof, record, d); err != nil {
				return err
			}
		} else {
			c.spans = c.spans[:0]
			used, next = cutLines(buf, eof, record, &c.spans)
		}
		carry = buf[used:]
		if used == 0 && !eof {
			if d == nil {
				d = newDecoder()
			}
			if len(buf) > d.maxBytes {
				// A record longer than any example may be: it is refused
				// as a message over the limit is, without holding it, and
				// the records after it are read on.
				var err error
				if carry, eof, err = c.skipRecord(ctx, r, record, d); err != nil {
					return err
				}
				record++
				select {
				case p.chunks <- c:
				case <-ctx.Done():
					return ctx.Err()
				}
				seq++
				if eof && len(carry) == 0 {
					return nil
				}
				continue
			}
		}
		if used == 0 && !eof {
			// No record ends in the buffer: read on, into a larger one
			// if the record fills it.
			p.free <- c
			if len(buf) == cap(buf) {
				size = 2 * cap(buf)
			}
			continue
		}
		if c.decoded {
			c.rebase()
		}
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
		if eof && len(carry) == 0 {
			return nil
		}
		if eof && used == 0 {
			return fmt.Errorf("record %d: the input ends inside it (truncated msgpack)", record)
		}
	}
}

// readAvailable reads r into buf until buf is full, r ends (io.EOF, or
// io.ErrUnexpectedEOF when it read anything) or a read returns fewer
// bytes than it had room for (ReadOptions.Live). A file fills buf; a pipe
// or a terminal returns what its writer has written so far, and the
// records that holds are delivered now, not once a whole chunk has come.
func readAvailable(r io.Reader, buf []byte) (n int, err error) {
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		switch {
		case err == io.EOF && n > 0:
			return n, io.ErrUnexpectedEOF
		case err != nil:
			return n, err
		case k > 0 && n < len(buf):
			return n, nil
		}
	}
	return n, nil
}

// skipRecord reads r on to the end of the record c.data begins with,
// which fills it and is longer than d's limit, reading into c.data
// without holding what it read, and makes c a chunk of that one record,
// numbered record, refused as too large. It returns the bytes read after
// the record's end, which are the end of c.data, and whether r ended. A
// msgpack value that is no value, or that the input ends inside, is an
// error, as where the values are held.
func (c *chunk) skipRecord(ctx context.Context, r io.Reader, record int, d *Decoder) (rest []byte, eof bool, err error) {
	buf := c.data[:cap(c.data)]
	var value msgpackscan.Stream
	size, n := 0, len(c.data) // the record's bytes walked; bytes in buf to walk
	for {
		k, done := n, false
		if c.format == FormatJSON {
			if nl := bytes.IndexByte(buf[:n], '\n'); nl >= 0 {
				k, done = nl+1, true
			}
		} else {
			var st msgpackscan.Status
			if k, done, st = value.Feed(buf[:n]); st != msgpackscan.OK {
				return nil, false, fmt.Errorf("record %d: %w", record, decodeErr("example", "invalid msgpack type byte 0x%02x at byte %d", buf[k], size+k))
			}
		}
		size += k
		if done {
			rest = buf[k:n]
			break
		}
		if eof {
			if c.format == FormatJSON {
				break // the last line, without its newline
			}
			return nil, false, fmt.Errorf("record %d: the input ends inside it (truncated msgpack)", record)
		}
		// A msgpack header the read cut is walked again with what follows.
		held := copy(buf, buf[k:n])
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		m, err := io.ReadFull(r, buf[held:])
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
		case err != nil:
			return nil, false, fmt.Errorf("read: %w", err)
		}
		n = held + m
	}
	c.data = buf[:0]
	c.spans = append(c.spans[:0], span{n: record, size: size})
	if c.decoded {
		c.xs = append(c.xs[:0], learner.Example{})
		c.recs = append(c.recs[:0], Record{N: record, Err: d.sizeError(size)})
		c.ids = c.ids[:0]
		c.rebase()
	}
	return rest, eof, nil
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

// cutLines finds the whole JSON lines at the front of buf (the last one
// may lack its newline at the end of the input), appends the spans of
// those that are not blank, and returns how many bytes they use and the
// next record number.
func cutLines(buf []byte, eof bool, record int, spans *[]span) (int, int) {
	used := 0
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
			*spans = append(*spans, span{start: used, end: end, n: record})
		}
		record++
		used = end
	}
	return used, record
}

// cutMsgpack decodes the whole msgpack values at the front of buf into c,
// each map with d where it starts, which is also how its end is found:
// the stream is walked once. The feature names are left for hash to
// hash on a worker. It returns how many bytes the records use and the
// next record number. A value that is not a map, or a map that does not
// decode, is split off with SplitMsgpack and decoded with Decode, as a
// message from a broker would be: its record and error are those of a
// value found alone. White space at the end of the input is no record;
// a value SplitMsgpack cannot split ends the input with its error once
// the records before it are delivered. Records and ids point into buf
// and d until rebase.
func (c *chunk) cutMsgpack(buf []byte, eof bool, record int, d *Decoder) (int, int, error) {
	c.spans, c.recs, c.ids = c.spans[:0], c.recs[:0], c.ids[:0]
	used := 0
	for used < len(buf) {
		rest := buf[used:]
		if !msgpackscan.IsMap(rest[0]) && len(bytes.TrimLeft(rest, " \t\r\n")) == 0 {
			if eof {
				used = len(buf)
			}
			break // or more may follow, which makes the white space records
		}
		k := len(c.spans)
		if k < cap(c.xs) {
			c.xs = c.xs[:k+1] // keep the slices of the example there
		} else {
			c.xs = append(c.xs, learner.Example{})
		}
		x := &c.xs[k]
		var (
			n    int
			meta Meta
			err  error
		)
		// The offsets that hashing needs must fit x.Index.
		hash := uint64(len(rest)) <= math.MaxUint32
		if msgpackscan.IsMap(rest[0]) {
			n, meta, err = d.decodeMsgpackFront(rest, x, hash)
		}
		if n == 0 || err != nil {
			adv, tok, serr := SplitMsgpack(rest, eof)
			if serr != nil {
				c.xs = c.xs[:k]
				if used > 0 {
					break // deliver the whole records first; the next cut fails
				}
				return 0, 0, fmt.Errorf("record %d: %w", record, serr)
			}
			if adv == 0 {
				c.xs = c.xs[:k]
				break // the value goes on past buf
			}
			n, hash = adv, false
			meta, err = d.Decode(tok, x)
		}
		c.spans = append(c.spans, span{start: used, end: used + n, n: record, id: len(meta.ID), hash: hash && err == nil})
		c.ids = append(c.ids, meta.ID...)
		c.recs = append(c.recs, Record{N: record, Meta: Meta{HasID: meta.HasID}, Err: err})
		record++
		used += n
	}
	return used, record, nil
}

// rebase points the records cutMsgpack decoded at their examples, at
// c.data and at their ids, copied into c.ids.
func (c *chunk) rebase() {
	off := 0
	for i, s := range c.spans {
		r := &c.recs[i]
		r.Example, r.Payload = &c.xs[i], c.data[s.start:s.end]
		r.Meta.ID = c.ids[off : off+s.id : off+s.id]
		off += s.id
	}
}

// hash finishes the records that cutMsgpack decoded without hashing
// their feature names, and decodes them with also (ReadOptions.Also),
// errs being scratch space as long as also.
func (c *chunk) hash(d *Decoder, also []*Decoder, errs []error) {
	c.prepareAlso(len(also))
	for i, s := range c.spans {
		r := &c.recs[i]
		switch {
		case s.hash && len(also) == 0:
			d.hashNames(r.Payload, r.Example)
		case s.hash:
			d.hashAll(r.Payload, false, r.Example, also, r.Also, errs)
			r.Err = firstErr(errs)
		case r.Err == nil:
			// Decoded whole by the splitter: decode it again with each.
			for j, o := range also {
				if _, err := o.Decode(r.Payload, r.Also[j]); err != nil {
					r.Err = err
					break
				}
			}
		}
	}
}

// decode decodes every record of c with d, and with also
// (ReadOptions.Also), errs being scratch space as long as also. The ids
// are copied into c, since a decoder's Meta.ID may point into its own
// scratch space.
func (c *chunk) decode(d *Decoder, also []*Decoder, errs []error) {
	n := len(c.spans)
	if cap(c.xs) < n {
		c.xs = append(c.xs[:cap(c.xs)], make([]learner.Example, n-cap(c.xs))...)
	}
	if cap(c.recs) < n {
		c.recs = make([]Record, n)
	}
	c.xs, c.recs = c.xs[:n], c.recs[:n]
	c.prepareAlso(len(also))
	c.ids = c.ids[:0]
	// The examples' sparse features go end to end into c.index and
	// c.value, room for a feature per 8 bytes of the chunk's data, or
	// more after a use that overflowed them: each example is given the
	// rest of them to append to, and is cut to its own length after. An
	// example that overflows them grows on the heap as before, and the
	// next use of c has them larger. Without them, every example of a
	// chunk's first use grew its own slices by doubling, a dozen
	// allocations an example.
	if need := len(c.data) / 8; cap(c.index) < need {
		c.index = make([]uint32, need)
		c.value = make([]float64, need)
	}
	used, overflow := 0, 0
	for i, s := range c.spans {
		payload := c.data[s.start:s.end]
		x := &c.xs[i]
		r := &c.recs[i]
		x.Index, x.Value = c.index[used:used:len(c.index)], c.value[used:used:len(c.value)]
		var meta Meta
		var err error
		switch {
		case s.size > 0:
			d.start(x)
			err = d.sizeError(s.size)
		case len(also) > 0:
			if meta, err = d.DecodeHashings(payload, c.format, x, also, r.Also, errs); err == nil {
				err = firstErr(errs)
			}
		case c.format == FormatJSON:
			meta, err = d.DecodeJSON(payload, x)
		default:
			meta, err = d.Decode(payload, x)
		}
		// A slice longer than the room left has moved to the heap; one
		// within it is still at used.
		room, n := len(c.index)-used, max(len(x.Index), len(x.Value))
		x.Index, x.Value = x.Index[:len(x.Index):len(x.Index)], x.Value[:len(x.Value):len(x.Value)]
		used += min(n, room)
		overflow += max(n-room, 0)
		c.ids = append(c.ids, meta.ID...)
		*r = Record{N: s.n, Example: x, Meta: Meta{ID: meta.ID, HasID: meta.HasID}, Err: err, Payload: payload, Also: r.Also}
	}
	if overflow > 0 {
		n := used + overflow + (used+overflow)/4
		c.index, c.value = make([]uint32, n), make([]float64, n)
	}
	off := 0
	for i := range c.recs {
		l := len(c.recs[i].Meta.ID)
		c.recs[i].Meta.ID = c.ids[off : off+l : off+l]
		off += l
	}
}

// firstErr is the first error of errs that is not nil, or nil.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// prepareAlso points every record of c at its k examples of
// ReadOptions.Also's decoders: also[j][i] is record i's for decoder j;
// alsoPtrs holds every record's Record.Also end to end.
func (c *chunk) prepareAlso(k int) {
	n := len(c.recs)
	if k == 0 {
		for i := range c.recs {
			c.recs[i].Also = nil
		}
		return
	}
	for len(c.also) < k {
		c.also = append(c.also, nil)
	}
	for j := range k {
		if cap(c.also[j]) < n {
			c.also[j] = append(c.also[j][:cap(c.also[j])], make([]learner.Example, n-cap(c.also[j]))...)
		}
		c.also[j] = c.also[j][:n]
	}
	if cap(c.alsoPtrs) < n*k {
		c.alsoPtrs = make([]*learner.Example, n*k)
	}
	c.alsoPtrs = c.alsoPtrs[:n*k]
	for i := range c.recs {
		r := &c.recs[i]
		r.Also = c.alsoPtrs[i*k : (i+1)*k : (i+1)*k]
		for j := range k {
			r.Also[j] = &c.also[j][i]
		}
	}
}

// deliver calls fn for the records of the decoded chunks in order.
func (p *pipeline) deliver(ctx context.Context, fn func([]Record) error) error {
	pending := map[int]*chunk{}
	next := 0
	for {
		var c *chunk
		var ok bool
		select {
		case c, ok = <-p.decoded:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return nil
		}
		pending[c.seq] = c
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if len(c.recs) > 0 {
				if err := fn(c.recs); err != nil {
					return err
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			p.free <- c
		}
	}
}
