package consumer

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestJoinStateEncodesInItsSizeHint: a join's state encodes to the bytes
// msgpack gives it, within the buffer sizeHint sizes, at the extremes of
// every field (the longest id, the largest and most negative numbers),
// so that a join holding many labels is encoded without being copied.
func TestJoinStateEncodesInItsSizeHint(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	id := func() string {
		switch r.IntN(3) {
		case 0:
			return ""
		case 1:
			return strings.Repeat("x", 1024)
		}
		return strings.Repeat("é", r.IntN(300))
	}
	st := &JoinState{Head: math.MaxInt64, Source: "kafka:examples/3", LabelsSource: "kafka:labels/3", WE: math.MinInt64, WL: math.MaxInt64,
		Window: math.MaxInt64, Default: math.MinInt32, HasDefault: true,
		Counts: JoinCountsState{Joined: math.MaxUint64, ServedLogLoss: math.MaxFloat64}}
	for range 500 {
		st.Examples = append(st.Examples, JoinedExample{ID: id(), Offset: math.MinInt64, T: math.MaxInt64, A: math.MinInt64,
			Version: math.MaxUint64, Probability: math.MaxFloat32, Predicted: math.MinInt32, Label: math.MaxInt32,
			Joined: true, Learned: true, LabelDelay: math.MinInt32})
		st.Labels = append(st.Labels, HeldLabelState{ID: id(), Offset: math.MinInt64, T: math.MaxInt64, B: math.MinInt64, Label: math.MinInt32})
	}
	want, err := msgpack.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encode gave %d bytes other than msgpack's %d", len(got), len(want))
	}
	if hint := st.sizeHint(); len(got) > hint {
		t.Fatalf("the state encodes to %d bytes, more than its size hint of %d: its buffer is copied as it grows", len(got), hint)
	}
}
