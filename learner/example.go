package learner

// Example is one input to a model: a sparse part of hashed feature indices
// with their values, an optional dense part whose position is its weight
// index, an optional label and an importance weight.
//
// Index and Value have the same length. An index may repeat (two names that
// hash to the same slot); repeats add up in scores and updates, while
// ‖x‖², which R and the passive-aggressive steps use, counts them as
// separate features. Only the kernel model merges them first. Indices must be below the model's
// dimension 2^HashBits, and so must every dense position; decoders enforce
// this, and a Model panics on an index out of range rather than guess.
// Every value is within ±MaxValue and Weight at most MaxValue; decoders
// enforce this too, and a Model does not learn from an example whose
// numbers would put its arithmetic at risk (see MaxValue and Model.Learn).
type Example struct {
	Index []uint32
	Value []float64
	Dense []float64

	// Labeled reports whether Label holds a label.
	Labeled bool
	// Label is +1 or -1 for a binary model and the class index in
	// [0, classes) for a multiclass model.
	Label int
	// Weight is the example's importance h: the perceptron family's steps
	// are scaled by it, and Pegasos' gradient; the passive-aggressive
	// rules and AROW, whose steps go to the margin, take it as an
	// aggressiveness (PA-I's and PA-II's C, AROW's r over h) and go at
	// most to the margin, plain PA h of the way below 1. The zero value
	// means 1.
	Weight float64
}

// Reset empties x, keeping the capacity of its slices for reuse.
func (x *Example) Reset() {
	x.Index = x.Index[:0]
	x.Value = x.Value[:0]
	x.Dense = x.Dense[:0]
	x.Labeled = false
	x.Label = 0
	x.Weight = 0
}

// Add appends the sparse feature (index, value).
func (x *Example) Add(index uint32, value float64) {
	x.Index = append(x.Index, index)
	x.Value = append(x.Value, value)
}

// NNZ is the number of stored features, sparse and dense.
func (x *Example) NNZ() int { return len(x.Index) + len(x.Dense) }

func (x *Example) importance() float64 {
	if x.Weight == 0 {
		return 1
	}
	return x.Weight
}

// norm2 is ‖x‖².
func (x *Example) norm2() float64 {
	var s float64
	for _, v := range x.Value {
		s += float64(v * v)
	}
	for _, v := range x.Dense {
		s += float64(v * v)
	}
	return s
}
