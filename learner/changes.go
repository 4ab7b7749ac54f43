package learner

import (
	"math/bits"
)

// Coords is a set of coordinates of a linear model's per-weight vectors
// (State.Weights, SumWeights and Variance, which share one layout): flat
// indices in the layout of Weights, strictly increasing, or every
// coordinate. It is how the epochs keep an epoch's cost proportional to
// what the epoch changed rather than to the model: a range records what
// it wrote, and the result's encoding, the mix and the next ranges'
// models work over those coordinates alone.
type Coords struct {
	// All is every coordinate; Index is then unused.
	All   bool
	Index []uint32
}

// AllCoords is every coordinate.
var AllCoords = Coords{All: true}

// UnionCoords is the union of cs, every coordinate when one of them is,
// in a new slice.
func UnionCoords(cs ...Coords) Coords {
	var n int
	var top uint32
	for _, c := range cs {
		if c.All {
			return AllCoords
		}
		n += len(c.Index)
		if len(c.Index) > 0 {
			top = max(top, c.Index[len(c.Index)-1])
		}
	}
	// A bit per coordinate up to the largest, read word by word, when
	// that is no more words than the coordinates given: the sets of an
	// epoch's ranges mostly overlap, and merging them two at a time
	// would allocate and compare the whole of every set again.
	if words := int(top/64) + 1; words <= n {
		set := make([]uint64, words)
		for _, c := range cs {
			for _, i := range c.Index {
				set[i/64] |= 1 << (i % 64)
			}
		}
		return Coords{Index: appendBits(make([]uint32, 0, min(n, 64*words)), set)}
	}
	var u []uint32
	for _, c := range cs {
		u = mergeIndex(u, c.Index, n)
	}
	return Coords{Index: u}
}

// appendBits appends to dst the positions of the bits set in set, in
// increasing order.
func appendBits(dst []uint32, set []uint64) []uint32 {
	for w, word := range set {
		for word != 0 {
			dst = append(dst, uint32(w*64+bits.TrailingZeros64(word)))
			word &= word - 1
		}
	}
	return dst
}

// mergeIndex is the union of a and b, both strictly increasing, in a new
// slice of capacity at least size (a and b are not modified).
func mergeIndex(a, b []uint32, size int) []uint32 {
	out := make([]uint32, 0, max(size, len(a)+len(b)))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// changeSet records the features whose per-weight coordinates a model's
// learning wrote since TrackChanges.
type changeSet struct {
	marked []uint64 // a bit per feature
	n      int      // how many are marked
	all    bool
}

// TrackChanges makes m record, from now on, which coordinates of its
// per-weight vectors (weights, averaging sums, variances) learning
// writes, for Changed, including what a pending mini-batch will write.
// Recording costs a bit per feature of every example
// that updates the model. A Pegasos model, whose steps may rescale every
// weight, and a kernel model, which has no such vectors, record every
// coordinate. The model's challengers record theirs too (read with each
// one's Changed).
func (m *Model) TrackChanges() {
	cs := &changeSet{all: true}
	if l, ok := m.eng.(*linear); ok && l.cfg.Algorithm != Pegasos {
		cs = &changeSet{marked: make([]uint64, (m.cfg.Dimension()+63)/64)}
		// A pending mini-batch is applied later, by the next flush.
		for _, j := range l.touched {
			cs.mark(j / uint32(l.k))
		}
	}
	m.changes = cs
	for _, c := range m.challengers {
		c.Model.TrackChanges()
	}
}

// markChanged records the features of x, which updated the model, or
// every coordinate after a drift restarted it.
func (m *Model) markChanged(x *Example, restarted bool) {
	cs := m.changes
	if cs.all {
		return
	}
	if restarted {
		cs.all = true
		return
	}
	for _, i := range x.Index {
		cs.mark(i)
	}
	for i := range x.Dense {
		cs.mark(uint32(i))
	}
}

func (cs *changeSet) mark(feature uint32) {
	w, bit := feature/64, uint64(1)<<(feature%64)
	if cs.marked[w]&bit == 0 {
		cs.marked[w] |= bit
		cs.n++
	}
}

// Changed is the set of coordinates of m's per-weight vectors that
// learning may have written since TrackChanges (and Flush, which applies
// what those examples pended): outside it every coordinate has the bits
// it had then. It is every coordinate without TrackChanges, after a drift
// restarted the model, and for the models TrackChanges names.
func (m *Model) Changed() Coords {
	cs := m.changes
	if cs == nil || cs.all {
		return AllCoords
	}
	// The bitmap, read word by word, gives the features in order: a pass
	// over a bit per feature, with no sort of what was marked.
	k := uint32(m.cfg.outputs())
	idx := make([]uint32, 0, cs.n*int(k))
	for w, word := range cs.marked {
		for word != 0 {
			f := uint32(w*64 + bits.TrailingZeros64(word))
			word &= word - 1
			for c := range k {
				idx = append(idx, f*k+c)
			}
		}
	}
	return Coords{Index: idx}
}

// SpareFor is a spare for RestoreInto with AllCoords: a state holding
// per-weight vectors of st's lengths and nothing else, its challengers
// spares of theirs. Every page of its vectors is written once here, so
// the memory is the process's before a model learns in it: a spare made
// while little else runs (a worker's start, while its consumer group
// forms) takes the first touch of new memory, a fault per page, off the
// path of the first examples. A kernel model has no such vectors: its
// spare is empty, and RestoreInto copies st as Restore does.
func SpareFor(st *State) *State {
	fresh := func(src []float64) []float64 {
		if len(src) == 0 {
			return nil
		}
		v := make([]float64, len(src))
		clear(v)
		return v
	}
	sp := &State{Config: st.Config}
	if st.Config.Algorithm != Kernel {
		sp.Weights, sp.SumWeights, sp.Variance = fresh(st.Weights), fresh(st.SumWeights), fresh(st.Variance)
	}
	for _, c := range st.Challengers {
		sp.Challengers = append(sp.Challengers, ChallengerState{Name: c.Name, State: SpareFor(c.State)})
	}
	return sp
}

// RestoreInto is Restore(st) built in the per-weight vectors of spare, a
// state that Release returned from a model of st's configuration, so that
// no vector is allocated: spare's vectors take st's values at the
// coordinates of diff, the set outside which they already have st's
// bits (AllCoords when not known). spare must not be used afterwards.
//
// st must have passed Validate, as the mixed model the epochs restore
// their ranges from has, when it was made: RestoreInto checks its
// configuration and the lengths of spare's vectors, and copies st's
// whole vectors when those differ from st's.
//
// Each challenger of st is built likewise in the vectors of spare's
// challenger of the same name and place, if it has one, with
// challengers[i] the set for challenger i (AllCoords for one not given).
func RestoreInto(st, spare *State, diff Coords, challengers ...Coords) (*Model, error) {
	if err := st.Config.Validate(); err != nil {
		return nil, err
	}
	if st.Config.Algorithm == Kernel || spare == nil {
		return Restore(st)
	}
	return restore(st, func(cfg Config) engine {
		l := restoredLinearOnto(cfg, st, spare, diff)
		return l
	}, func(i int, cst *State) (*Model, error) {
		var cspare *State
		if i < len(spare.Challengers) && spare.Challengers[i].Name == st.Challengers[i].Name {
			cspare = spare.Challengers[i].State
		}
		d := AllCoords
		if i < len(challengers) {
			d = challengers[i]
		}
		return RestoreInto(cst, cspare, d)
	})
}

// restoredLinearOnto is restoredLinear with the per-weight vectors of
// spare, set to st's at diff.
func restoredLinearOnto(cfg Config, st, spare *State, diff Coords) *linear {
	reuse := func(dst, src []float64) []float64 {
		if len(dst) != len(src) || len(src) == 0 {
			return clone(src)
		}
		copyAt(dst, src, diff)
		return dst
	}
	l := &linear{cfg: cfg, k: cfg.outputs(), w: reuse(spare.Weights, st.Weights), b: clone(st.Bias)}
	l.raw = make([]float64, l.k)
	switch cfg.Algorithm {
	case Averaged:
		l.u, l.ub = reuse(spare.SumWeights, st.SumWeights), clone(st.SumBias)
	case Pegasos:
		l.scale, l.vnorm2 = st.Scale, st.VNorm2
	case AROW:
		l.sigma = reuse(spare.Variance, st.Variance)
		if l.k == 1 {
			l.sigmaB = []float64{st.VarianceBias}
		} else {
			l.sigmaB = clone(st.VarianceBiases)
		}
	}
	if cfg.Batch > 1 {
		l.pw = make([]float64, len(l.w))
		l.pb = make([]float64, l.k)
		for n, j := range st.PendingIndex {
			l.pw[j] = st.PendingValue[n]
		}
		l.touched = clone(st.PendingIndex)
		copy(l.pb, st.PendingBias)
	}
	return l
}

// copyAt copies src's values at c into dst, of src's length.
func copyAt(dst, src []float64, c Coords) {
	if c.All {
		copy(dst, src)
		return
	}
	for _, i := range c.Index {
		dst[i] = src[i]
	}
}

// Adopt is the model of st that takes over st's per-weight vectors
// rather than copying them, as RestoreInto does with st as its own spare:
// what the model learns changes st. It is for a state that nothing else
// uses afterwards, such as a mix's. st must have passed Validate (a mix's
// output has): its configuration alone is checked. Its challengers take
// over their states' vectors likewise.
func Adopt(st *State) (*Model, error) {
	return RestoreInto(st, st, Coords{}, make([]Coords, len(st.Challengers))...)
}
