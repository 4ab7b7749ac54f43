package consumer

import (
	"bytes"
	"hash/maphash"
	"slices"
)

// fifo is a queue of values with string ids, addressed by sequence
// numbers that stay valid while the value is in it, and found by id: what
// the join holds while examples and labels wait (docs/labels.md,
// section 3). It is built to be small and never to copy what it holds:
// values lie in chunks of fifoChunk, each with its values' ids end to end
// in one buffer, and the index is open addressing over slots of 4 bytes
// and a tag of one, so that a value costs its own size, 4 bytes for its
// id's end, 4 for the link to the value before it with its id, and 7 to
// 13 for the index, beyond its id's bytes.
//
// The index holds one slot an id, naming its newest value; each value
// links to the one before it with the same id. So an id that many values
// share (an id reused, or the same id sent for every record) costs one
// slot, and a push, a pop or a lookup of it costs the same whatever their
// number, but for the lookup's walk over the values it returns.
type fifo[T any] struct {
	chunks []*fifoChunkOf[T]
	base   int64 // the sequence of chunks[0]'s first value
	head   int64 // the first value still held
	tail   int64 // the sequence the next push takes

	index idIndex
	seqs  []int64 // scratch for chain
	// spare is the last chunk emptied, taken again by the next push that
	// needs a chunk: a queue that values pass through reuses its chunks.
	spare *fifoChunkOf[T]
}

// fifoChunk is how many values a chunk holds.
const fifoChunk = 4096

type fifoChunkOf[T any] struct {
	items [fifoChunk]T
	// idEnd[i] is where items[i]'s id ends in ids; it starts where the
	// one before ends.
	idEnd [fifoChunk]uint32
	// prev[i] is how many sequences before items[i] the value before it
	// with its id is; 0 for none.
	prev [fifoChunk]uint32
	ids  []byte
}

func newFIFO[T any]() fifo[T] { return fifo[T]{index: newIDIndex()} }

func (f *fifo[T]) len() int     { return int(f.tail - f.head) }
func (f *fifo[T]) first() int64 { return f.head }
func (f *fifo[T]) end() int64   { return f.tail }

func (f *fifo[T]) locate(seq int64) (*fifoChunkOf[T], int) {
	i := seq - f.base
	return f.chunks[i/fifoChunk], int(i % fifoChunk)
}

func (f *fifo[T]) at(seq int64) *T {
	c, i := f.locate(seq)
	return &c.items[i]
}

// idBytes is the id of seq, valid while seq is held.
func (f *fifo[T]) idBytes(seq int64) []byte {
	c, i := f.locate(seq)
	var start uint32
	if i > 0 {
		start = c.idEnd[i-1]
	}
	return c.ids[start:c.idEnd[i]]
}

// key is the id of seq.
func (f *fifo[T]) key(seq int64) string { return string(f.idBytes(seq)) }

// push appends v with id and returns its sequence, and whether a value
// with id was held already.
func (f *fifo[T]) push(id []byte, v T) (int64, bool) {
	seq := f.tail
	h := maphash.Bytes(f.index.seed, id)
	f.index.reserve(f)
	slot, found := f.index.lookup(id, h, f)
	if int((seq-f.base)/fifoChunk) == len(f.chunks) {
		if n := len(f.chunks); n > 0 {
			// The last chunk is full: its ids take no more room than they need.
			last := f.chunks[n-1]
			last.ids = append([]byte(nil), last.ids...)
		}
		c := f.spare
		if c == nil {
			c = new(fifoChunkOf[T])
		}
		f.spare = nil
		f.chunks = append(f.chunks, c)
	}
	c, i := f.locate(seq)
	c.items[i] = v
	c.ids = append(c.ids, id...)
	c.idEnd[i] = uint32(len(c.ids))
	c.prev[i] = 0
	f.tail++
	if found {
		// The id's slot names its newest value from now on.
		c.prev[i] = uint32(seq - seqAt(f.index.slots[slot], f))
		f.index.slots[slot] = uint32(seq)
		return seq, true
	}
	f.index.slots[slot], f.index.tags[slot] = uint32(seq), tagOf(h)
	f.index.n++
	return seq, false
}

func (f *fifo[T]) pop() {
	seq := f.head
	if slot, ok := f.index.slotOf(seq, maphash.Bytes(f.index.seed, f.idBytes(seq))); ok {
		// The newest value with its id, and so the last: values go
		// oldest first.
		f.index.removeAt(slot, f)
	}
	c, i := f.locate(seq)
	var zero T
	c.items[i] = zero
	f.head++
	if f.head-f.base == fifoChunk {
		// Its values are zero, each as it was popped.
		f.spare = f.chunks[0]
		f.spare.ids = f.spare.ids[:0]
		f.chunks[0] = nil
		f.chunks = f.chunks[1:]
		f.base += fifoChunk
		if cap(f.chunks) > 2*len(f.chunks)+64 {
			f.chunks = append([]*fifoChunkOf[T](nil), f.chunks...)
		}
	}
}

// chain returns the sequences of the values with id, oldest first. The
// slice is valid until the next call.
func (f *fifo[T]) chain(id []byte) []int64 {
	f.seqs = f.seqs[:0]
	slot, ok := f.index.lookup(id, maphash.Bytes(f.index.seed, id), f)
	if !ok {
		return f.seqs
	}
	for seq := seqAt(f.index.slots[slot], f); ; {
		f.seqs = append(f.seqs, seq)
		c, i := f.locate(seq)
		d := c.prev[i]
		if d == 0 || seq-int64(d) < f.head {
			break
		}
		seq -= int64(d)
	}
	slices.Reverse(f.seqs)
	return f.seqs
}

// idIndex finds a fifo's values by id: linear probing over slots holding
// the low 32 bits of the sequence of each id's newest value (the fifo never
// holds 2^32 values, so they name one), at most three quarters full. Each slot has a tag of one byte,
// 0 when it is empty and otherwise 1 to 255 from the top bits of its id's
// hash, so that a probe reads the id of a slot only when the tags agree:
// the ids lie elsewhere in memory, and a lookup of an id that is not held
// would otherwise read one for every slot of its run.
type idIndex struct {
	seed  maphash.Seed
	slots []uint32
	tags  []uint8
	n     int
}

func newIDIndex() idIndex {
	const size = 64
	return idIndex{seed: maphash.MakeSeed(), slots: make([]uint32, size), tags: make([]uint8, size)}
}

type keyed interface {
	first() int64
	idBytes(seq int64) []byte
}

func (x *idIndex) mask() uint64 { return uint64(len(x.slots) - 1) }

// tagOf is the tag of an id whose hash is h: never 0, which marks an empty
// slot.
func tagOf(h uint64) uint8 {
	if t := uint8(h >> 56); t != 0 {
		return t
	}
	return 1
}

// seqAt is the full sequence in slot i: the one of the fifo's live values
// whose low 32 bits it holds.
func seqAt(slot uint32, f keyed) int64 {
	first := f.first()
	return first + int64(slot-uint32(first))
}

// reserve makes room for one more value, before it is pushed.
func (x *idIndex) reserve(f keyed) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow(f)
	}
}

// insert adds seq, whose id hashes to h; reserve made room for it.
func (x *idIndex) insert(seq int64, h uint64) {
	i := h & x.mask()
	for x.tags[i] != 0 {
		i = (i + 1) & x.mask()
	}
	x.slots[i], x.tags[i] = uint32(seq), tagOf(h)
	x.n++
}

// grow doubles the table and puts back every value it holds.
func (x *idIndex) grow(f keyed) {
	old, oldTags := x.slots, x.tags
	size := len(old) * 2
	x.slots, x.tags, x.n = make([]uint32, size), make([]uint8, size), 0
	for i, s := range old {
		if oldTags[i] == 0 {
			continue
		}
		seq := seqAt(s, f)
		x.insert(seq, maphash.Bytes(x.seed, f.idBytes(seq)))
	}
}

// lookup finds the slot of id, whose hash is h; when no value has it
// (ok is false), slot is the empty slot where id's probe ends, where
// insert would put it.
func (x *idIndex) lookup(id []byte, h uint64, f keyed) (slot uint64, ok bool) {
	tag := tagOf(h)
	i := h & x.mask()
	for ; x.tags[i] != 0; i = (i + 1) & x.mask() {
		if x.tags[i] == tag && bytes.Equal(f.idBytes(seqAt(x.slots[i], f)), id) {
			return i, true
		}
	}
	return i, false
}

// slotOf finds the slot naming seq, whose id hashes to h: ok is false when
// the index names a newer value with its id. A slot holds the low 32
// bits of a live sequence, which name it alone, so no id is read.
func (x *idIndex) slotOf(seq int64, h uint64) (slot uint64, ok bool) {
	m := x.mask()
	for i := h & m; x.tags[i] != 0; i = (i + 1) & m {
		if x.slots[i] == uint32(seq) {
			return i, true
		}
	}
	return 0, false
}

// removeAt empties slot i, moving back the values after it in its run so
// that every probe still finds them.
func (x *idIndex) removeAt(i uint64, f keyed) {
	m := x.mask()
	x.tags[i] = 0
	x.n--
	for j := (i + 1) & m; x.tags[j] != 0; j = (j + 1) & m {
		k := maphash.Bytes(x.seed, f.idBytes(seqAt(x.slots[j], f))) & m
		// The value at j may move to i if its home k is not in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			x.slots[i], x.tags[i] = x.slots[j], x.tags[j]
			x.tags[j] = 0
			i = j
		}
	}
}
