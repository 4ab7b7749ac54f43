package epochlog

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// formChanges is the state_form of a shard result that holds its
// per-weight vectors as changes against the epoch's base
// (docs/scale-out.md, section 2.1). A result without state_form holds
// its whole state.
const formChanges = "changes"

// vectorChanges is a vector of one value per weight as the coordinates
// whose bits differ from the base's: index (bin of little-endian uint32,
// strictly increasing) and value (bin of little-endian float64, the new
// values, not differences: w + (w'−w) is not always w' in floating
// point).
type vectorChanges struct {
	Index []byte `msgpack:"index"`
	Value []byte `msgpack:"value"`
}

// stateChanges is a result's weights, sum_weights and variance as
// changes against the base; a vector the state has not is absent.
type stateChanges struct {
	Weights    *vectorChanges `msgpack:"weights,omitempty"`
	SumWeights *vectorChanges `msgpack:"sum_weights,omitempty"`
	Variance   *vectorChanges `msgpack:"variance,omitempty"`
}

// changedVector is one of the vectors stateChanges holds, in a state,
// the base and the wire form.
type changedVector struct {
	name        string
	state, base []float64
	changes     **vectorChanges
}

func (c *stateChanges) vectors(st, base *learner.State) []changedVector {
	return []changedVector{
		{"weights", st.Weights, base.Weights, &c.Weights},
		{"sum_weights", st.SumWeights, base.SumWeights, &c.SumWeights},
		{"variance", st.Variance, base.Variance, &c.Variance},
	}
}

// changesOf is st's weights, sum_weights and variance as changes against
// base, and whether they are the smaller form: false when the whole
// vectors take fewer bytes (12 a changed coordinate against 8 a weight)
// or a vector of st has not the base's length. The choice depends on
// st and base only, so two writers of one result make the same. The
// changes are looked for at the coordinates of at alone (every one when
// at is nil), which must hold every coordinate where st differs from
// base: the same changes, at a cost in proportion to at.
func changesOf(st, base *learner.State, at *learner.Coords) (*stateChanges, bool) {
	c := &stateChanges{}
	var changed, whole int
	for _, v := range c.vectors(st, base) {
		if len(v.state) == 0 && len(v.base) == 0 {
			continue
		}
		if len(v.state) != len(v.base) {
			return nil, false
		}
		var vc *vectorChanges
		if at == nil || at.All {
			vc = wholeChanges(v.state, v.base)
		} else {
			vc = indexedChanges(v.state, v.base, at.Index)
		}
		*v.changes = vc
		changed += len(vc.Index) / 4
		whole += len(v.state)
	}
	return c, 12*changed < 8*whole
}

// check is nil when every value c holds is one a state may hold
// (learner.VectorValueOK). snapshot.EncodeStateLean checks a result's
// state without these vectors, so the values written are checked here,
// at a cost in proportion to the changes.
func (c *stateChanges) check() error {
	if c == nil {
		return nil
	}
	for _, v := range []struct {
		name string
		vc   *vectorChanges
	}{{"weights", c.Weights}, {"sum_weights", c.SumWeights}, {"variance", c.Variance}} {
		if v.vc == nil {
			continue
		}
		for n := range len(v.vc.Value) / 8 {
			x := math.Float64frombits(binary.LittleEndian.Uint64(v.vc.Value[8*n:]))
			if !learner.VectorValueOK(v.name, x) {
				return fmt.Errorf("%s: value %d is %v", v.name, binary.LittleEndian.Uint32(v.vc.Index[4*n:]), x)
			}
		}
	}
	return nil
}

// coords is the union of the coordinates c holds changes of.
func (c *stateChanges) coords() *learner.Coords {
	var sets []learner.Coords
	for _, v := range []*vectorChanges{c.Weights, c.SumWeights, c.Variance} {
		if v == nil {
			continue
		}
		idx := make([]uint32, len(v.Index)/4)
		for n := range idx {
			idx[n] = binary.LittleEndian.Uint32(v.Index[4*n:])
		}
		sets = append(sets, learner.Coords{Index: idx})
	}
	u := learner.UnionCoords(sets...)
	return &u
}

// apply is the vector base with the changes c replacing its values, in a
// new slice; nil when c is nil. It refuses changes that no writer makes:
// lengths that disagree, an index out of order or beyond the base, a
// value with the base's bits.
func (c *vectorChanges) apply(base []float64) ([]float64, error) {
	if c == nil {
		return nil, nil
	}
	if len(c.Index)%4 != 0 || len(c.Value)%8 != 0 || len(c.Index)/4 != len(c.Value)/8 {
		return nil, fmt.Errorf("%d bytes of index and %d of value are not as many uint32 as float64", len(c.Index), len(c.Value))
	}
	if len(base) == 0 {
		return nil, fmt.Errorf("the base has no such vector")
	}
	out := make([]float64, len(base))
	copy(out, base)
	prev := -1
	for n := range len(c.Index) / 4 {
		i := int(binary.LittleEndian.Uint32(c.Index[4*n:]))
		bits := binary.LittleEndian.Uint64(c.Value[8*n:])
		switch {
		case i <= prev:
			return nil, fmt.Errorf("index %d follows %d: the indices must increase", i, prev)
		case i >= len(base):
			return nil, fmt.Errorf("index %d is beyond the base's %d values", i, len(base))
		case bits == math.Float64bits(base[i]):
			return nil, fmt.Errorf("index %d: the value has the base's bits", i)
		}
		out[i] = math.Float64frombits(bits)
		prev = i
	}
	return out, nil
}

// wholeChanges is the changes of state against base at every
// coordinate: counted first, so that the vectors are allocated at their
// size, as most coordinates of a whole vector are not changed.
func wholeChanges(state, base []float64) *vectorChanges {
	var n int
	for i := range state {
		if math.Float64bits(state[i]) != math.Float64bits(base[i]) {
			n++
		}
	}
	idx, val := make([]byte, 0, 4*n), make([]byte, 0, 8*n)
	for i := range state {
		if bits := math.Float64bits(state[i]); bits != math.Float64bits(base[i]) {
			idx = binary.LittleEndian.AppendUint32(idx, uint32(i))
			val = binary.LittleEndian.AppendUint64(val, bits)
		}
	}
	return &vectorChanges{Index: idx, Value: val}
}

// indexedChanges is the changes of state against base at the
// coordinates of index (those past state's end skipped), in one pass:
// the coordinates a range marked changed mostly are, so the vectors are
// allocated for all of them.
func indexedChanges(state, base []float64, index []uint32) *vectorChanges {
	n := min(len(index), len(state))
	// Appended to locals, not to a heap value's fields: a slice header
	// stored into the heap on every append costs a write barrier while
	// the collector runs.
	idx, val := make([]byte, 0, 4*n), make([]byte, 0, 8*n)
	for _, i := range index {
		if int(i) >= len(state) {
			continue
		}
		if bits := math.Float64bits(state[i]); bits != math.Float64bits(base[i]) {
			idx = binary.LittleEndian.AppendUint32(idx, i)
			val = binary.LittleEndian.AppendUint64(val, bits)
		}
	}
	return &vectorChanges{Index: idx, Value: val}
}

// challengerChangesOf is the changes of each challenger of r's state
// against the base's challenger of the same name and place, in the
// changes form whether or not it is the smaller (the model's choice
// decides the result's form); nil when r's state has no challengers, or
// not the base's, or a vector's length differs.
func challengerChangesOf(r *ShardResult, base *learner.State) []*stateChanges {
	cs := r.State.Challengers
	if len(cs) == 0 || len(cs) != len(base.Challengers) {
		return nil
	}
	out := make([]*stateChanges, len(cs))
	for i, c := range cs {
		if c.Name != base.Challengers[i].Name {
			return nil
		}
		var at *learner.Coords
		if i < len(r.ChallengersChanged) {
			at = r.ChallengersChanged[i]
		}
		ch, _ := changesOf(c.State, base.Challengers[i].State, at)
		if ch == nil {
			return nil
		}
		out[i] = ch
	}
	return out
}
