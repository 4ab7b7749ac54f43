// Package synth generates reproducible example streams with a hidden
// hyperplane, for tests, demos and load generation. The same Options give
// the same stream on every machine.
package synth

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
)

// Options shape a stream.
type Options struct {
	// Features is the number of non-zero features per example, drawn
	// without repeats from a vocabulary of Vocab names f0, f1, ...
	Features int
	Vocab    int
	// Noise is the probability that a label is replaced: flipped for a
	// binary stream, drawn uniformly for a multiclass one.
	Noise float64
	// Unlabeled is the probability that an example carries no label.
	Unlabeled float64
	// Classes is 0 for a binary stream (labels 1 and -1) or the number of
	// classes of a multiclass one (labels 0 .. Classes-1).
	Classes int
	Seed    uint64
	// DriftAt, when more than 0, is the index of the example (from 0) at
	// which the concept changes: from there on labels follow a second
	// hidden hyperplane, independent of the first, while the examples
	// themselves are drawn as without drift. DriftWidth makes the change
	// gradual: example i follows the new concept with probability
	// 1/(1+e^(-4(i-DriftAt)/DriftWidth)), as MOA's concept drift stream
	// does; 0 is an abrupt change.
	DriftAt    uint64
	DriftWidth uint64
}

// DefaultOptions are 40 features from 10,000 names with 5% label noise.
func DefaultOptions() Options {
	return Options{Features: 40, Vocab: 10000, Noise: 0.05}
}

// Validate names the option that is out of range.
func (o Options) Validate() error {
	switch {
	case o.Vocab < 1:
		return fmt.Errorf("vocab: must be at least 1, got %d", o.Vocab)
	case o.Features < 0 || o.Features > o.Vocab || o.Features > 65535:
		return fmt.Errorf("features: must be between 0 and the vocabulary size %d (at most 65535), got %d", o.Vocab, o.Features)
	case !(o.Noise >= 0 && o.Noise <= 1):
		return fmt.Errorf("noise: must be a probability in [0, 1], got %v", o.Noise)
	case !(o.Unlabeled >= 0 && o.Unlabeled <= 1):
		return fmt.Errorf("unlabeled: must be a probability in [0, 1], got %v", o.Unlabeled)
	case o.Classes < 0 || o.Classes == 1 || o.Classes > 1000:
		return fmt.Errorf("classes: must be 0 or 2 (binary) or 3 to 1000, got %d", o.Classes)
	case o.DriftWidth > 0 && o.DriftAt == 0:
		return fmt.Errorf("drift-width: a gradual change needs drift-at, the example where it is halfway")
	}
	return nil
}

// Record is one generated example.
type Record struct {
	Seq     uint64
	Labeled bool
	// Label is 1 or -1 for a binary stream, the class for a multiclass one.
	Label int
	// Names are vocabulary indices (feature "f<n>"), Values their values:
	// multiples of 0.0001 in [0, 1).
	Names  []int
	Values []float64
}

// Stream generates records. It is not safe for concurrent use.
type Stream struct {
	opt    Options
	rng    *rand.Rand
	hidden []float64 // Vocab × outputs
	// after is the hidden hyperplane from DriftAt on, and drift draws
	// which concept an example of a gradual change follows: both apart
	// from rng, so that the examples are those of the stream without
	// drift.
	after   []float64
	drift   *rand.Rand
	outputs int
	seq     uint64
	seen    map[int]bool
	rec     Record
	scores  []float64
}

// New returns the stream for o, which must be valid.
func New(o Options) *Stream {
	outputs := 1
	if o.Classes > 2 {
		outputs = o.Classes
	}
	r := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	hidden := make([]float64, o.Vocab*outputs)
	for i := range hidden {
		hidden[i] = r.NormFloat64()
	}
	s := &Stream{
		opt:     o,
		rng:     r,
		hidden:  hidden,
		outputs: outputs,
		seen:    make(map[int]bool, o.Features),
		scores:  make([]float64, outputs),
	}
	if o.DriftAt > 0 {
		d := rand.New(rand.NewPCG(o.Seed, 0xd1b54a32d192ed03))
		s.after = make([]float64, len(hidden))
		for i := range s.after {
			s.after[i] = d.NormFloat64()
		}
		s.drift = d
	}
	return s
}

// drifted reports whether the example of index i (from 0) follows the
// concept after the drift.
func (s *Stream) drifted(i uint64) bool {
	o := s.opt
	switch {
	case o.DriftAt == 0:
		return false
	case o.DriftWidth == 0:
		return i >= o.DriftAt
	}
	p := 1 / (1 + math.Exp(-4*(float64(i)-float64(o.DriftAt))/float64(o.DriftWidth)))
	return s.drift.Float64() < p
}

// Next returns the next record. It is valid until the following call.
func (s *Stream) Next() *Record {
	r, o := s.rng, s.opt
	rec := &s.rec
	s.seq++
	rec.Seq = s.seq
	rec.Names, rec.Values = rec.Names[:0], rec.Values[:0]
	clear(s.seen)
	clear(s.scores)
	hidden, scores := s.hidden, s.scores
	if s.drifted(s.seq - 1) {
		hidden = s.after
	}
	for len(rec.Names) < o.Features {
		n := r.IntN(o.Vocab)
		if s.seen[n] {
			continue
		}
		s.seen[n] = true
		v := float64(r.IntN(10000)) / 10000
		rec.Names = append(rec.Names, n)
		rec.Values = append(rec.Values, v)
		for c := range s.outputs {
			scores[c] += hidden[n*s.outputs+c] * v
		}
	}
	rec.Labeled = r.Float64() >= o.Unlabeled
	noisy := r.Float64() < o.Noise
	if s.outputs == 1 {
		rec.Label = 1
		if scores[0] < 0 {
			rec.Label = -1
		}
		if noisy {
			rec.Label = -rec.Label
		}
		return rec
	}
	best := 0
	for c, v := range scores {
		if v > scores[best] {
			best = c
		}
	}
	rec.Label = best
	if noisy {
		rec.Label = r.IntN(o.Classes)
	}
	return rec
}

// AppendJSON appends rec as one line of JSON, newline included:
// {"id":"<seq>","label":1,"features":{"f12":0.5,...}}.
func AppendJSON(dst []byte, rec *Record) []byte {
	dst = append(dst, `{"id":"`...)
	dst = strconv.AppendUint(dst, rec.Seq, 10)
	dst = append(dst, '"')
	if rec.Labeled {
		dst = append(dst, `,"label":`...)
		dst = strconv.AppendInt(dst, int64(rec.Label), 10)
	}
	dst = append(dst, `,"features":{`...)
	for i, n := range rec.Names {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"f`...)
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, `":`...)
		dst = strconv.AppendFloat(dst, rec.Values[i], 'f', -1, 64)
	}
	return append(dst, "}}\n"...)
}

// AppendMsgpack appends rec as a msgpack map with the keys of AppendJSON.
func AppendMsgpack(dst []byte, rec *Record) []byte {
	n := 2
	if rec.Labeled {
		n = 3
	}
	dst = append(dst, 0x80|byte(n))
	dst = appendMsgpackStr(dst, "id")
	var num [24]byte
	dst = appendMsgpackStr(dst, strconv.AppendUint(num[:0], rec.Seq, 10))
	if rec.Labeled {
		dst = appendMsgpackStr(dst, "label")
		dst = appendMsgpackInt(dst, int64(rec.Label))
	}
	dst = appendMsgpackStr(dst, "features")
	if len(rec.Names) < 16 {
		dst = append(dst, 0x80|byte(len(rec.Names)))
	} else {
		dst = append(dst, 0xde, byte(len(rec.Names)>>8), byte(len(rec.Names)))
	}
	for i, name := range rec.Names {
		k := append(num[:0], 'f')
		k = strconv.AppendInt(k, int64(name), 10)
		dst = appendMsgpackStr(dst, k)
		bits := math.Float64bits(rec.Values[i])
		dst = append(dst, 0xcb, byte(bits>>56), byte(bits>>48), byte(bits>>40), byte(bits>>32), byte(bits>>24), byte(bits>>16), byte(bits>>8), byte(bits))
	}
	return dst
}

func appendMsgpackStr[T string | []byte](dst []byte, s T) []byte {
	if len(s) < 32 {
		dst = append(dst, 0xa0|byte(len(s)))
	} else {
		dst = append(dst, 0xd9, byte(len(s)))
	}
	return append(dst, s...)
}

func appendMsgpackInt(dst []byte, v int64) []byte {
	if v >= -32 && v <= 127 {
		return append(dst, byte(int8(v)))
	}
	return append(dst, 0xd3, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// StreamID names the stream o makes, written in format: the same options
// and format give the same stream, so gen-<id>-<index>, the key and
// message id `hyperplane gen` publishes example index under, identifies
// an example across runs. The options of a stream without drift are
// hashed as they were before drift existed, so that its ids do not
// change.
func (o Options) StreamID(format string) string {
	stream := struct {
		Features, Vocab  int
		Noise, Unlabeled float64
		Classes          int
		Seed             uint64
	}{o.Features, o.Vocab, o.Noise, o.Unlabeled, o.Classes, o.Seed}
	h := fnv.New64a()
	fmt.Fprintf(h, "%+v %s", stream, format)
	if o.DriftAt > 0 {
		fmt.Fprintf(h, " drift %d %d", o.DriftAt, o.DriftWidth)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}
