package learner

import "math"

// sinceVersion opens the encoding that DigestSince hashes.
const sinceVersion = "hyperplane/learner.State/since/v1"

// endOfChanges ends the list of a vector's changed coordinates in a step
// digest: no coordinate is this large.
const endOfChanges = math.MaxUint64

// Since is what DigestSince needs of the state a step began from: its
// digest, and its per-weight values at the coordinates the step may
// change, taken before the step writes over them (a mix may write W_e
// into W_{e-1}'s own vectors).
type Since struct {
	prev [32]byte
	at   Coords
	// was holds the values at at of the weights, sum_weights and variance
	// vectors, in that order; lens their lengths.
	was  [3][]float64
	lens [3]int

	// challengers are what each challenger's step digest needs, with
	// the challenger's name (a Since of its own, with no prev).
	challengers []namedSince
}

// namedSince is a challenger's Since, with its name.
type namedSince struct {
	name  string
	since *Since
}

// SinceOf takes what DigestSince needs of base, whose digest is prev, for
// a step that may change base's per-weight vectors only at at and its
// challenger i's only at challengersAt[i] (every coordinate where not
// given).
func SinceOf(prev [32]byte, base *State, at Coords, challengersAt []Coords) *Since {
	s := sinceOf(base, at)
	s.prev = prev
	for i, c := range base.Challengers {
		cat := AllCoords
		if i < len(challengersAt) {
			cat = challengersAt[i]
		}
		s.challengers = append(s.challengers, namedSince{c.Name, sinceOf(c.State, cat)})
	}
	return s
}

// sinceOf is SinceOf for one state, without its challengers. Coordinates
// beyond a vector are taken as every coordinate.
func sinceOf(base *State, at Coords) *Since {
	if n := len(at.Index); n > 0 && int(at.Index[n-1]) >= max(len(base.Weights), len(base.SumWeights), len(base.Variance)) {
		at = AllCoords
	}
	s := &Since{at: at}
	for n, v := range [3][]float64{base.Weights, base.SumWeights, base.Variance} {
		s.lens[n] = len(v)
		if at.All {
			s.was[n] = clone(v)
		} else {
			s.was[n] = gatherAt(v, at.Index)
		}
	}
	return s
}

// DigestSince is the digest of st as a step from the state s was taken
// of: the SHA-256 of the encoding Digest hashes, with three changes. It
// opens with the string "hyperplane/learner.State/since/v1" and the 32
// bytes of the digest the step began from, not Digest's string; each of
// the weights, sum_weights and variance vectors is its length (uint),
// then, for each coordinate in increasing order whose bits differ from
// the value it had (uint, float: the coordinate and its new value), then
// the uint 2^64−1; and a challenger that was the old state's, at the same
// place and of the same name, adds the 32 bytes of its own step digest
// (with 32 zero bytes for the digest it began from) rather than its
// Digest. A vector whose length changed is whole, as Digest has it.
//
// Two states holding the same model have the same step digest from one
// state, whatever coordinates each step was known to have written,
// provided those include every coordinate it changed. Its cost follows
// those coordinates, not the model's size: it is the digest that
// continues a chain of steps, each naming the one before (the epochs'
// base digest, docs/scale-out.md, section 2.2).
func (st *State) DigestSince(s *Since) [32]byte { return st.digest(s) }

// perWeight encodes v, the per-weight vector n (weights, sum_weights,
// variance): whole, or with e.since only where it changed.
func (e *digestEncoder) perWeight(v []float64, n int) {
	s := e.since
	if s == nil || len(v) != s.lens[n] {
		e.floats(v)
		return
	}
	e.uint(uint64(len(v)))
	was := s.was[n]
	change := func(k int, i uint32) {
		if math.Float64bits(v[i]) != math.Float64bits(was[k]) {
			e.uint(uint64(i))
			e.float(v[i])
		}
	}
	switch {
	case len(v) == 0:
	case s.at.All:
		for i := range v {
			change(i, uint32(i))
		}
	default:
		for k, i := range s.at.Index {
			change(k, i)
		}
	}
	e.uint(endOfChanges)
}
