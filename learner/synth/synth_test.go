package synth_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/vmihailenco/msgpack/v5"
)

type wire struct {
	ID       string             `json:"id" msgpack:"id"`
	Label    *int               `json:"label" msgpack:"label"`
	Features map[string]float64 `json:"features" msgpack:"features"`
}

func TestStreamIsReproducibleAndEncodesBothWays(t *testing.T) {
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled = 9, 0.2
	a, b := synth.New(o), synth.New(o)
	var unlabeled, positive int
	const n = 2000
	for i := range n {
		ra := a.Next()
		js := synth.AppendJSON(nil, ra)
		mp := synth.AppendMsgpack(nil, ra)
		if rb := synth.AppendJSON(nil, b.Next()); !bytes.Equal(js, rb) {
			t.Fatalf("record %d differs between two streams of one seed", i)
		}
		var fromJSON, fromMsgpack wire
		if err := json.Unmarshal(js, &fromJSON); err != nil {
			t.Fatalf("record %d: %v in %s", i, err, js)
		}
		if err := msgpack.Unmarshal(mp, &fromMsgpack); err != nil {
			t.Fatalf("record %d: msgpack: %v", i, err)
		}
		if !reflect.DeepEqual(fromJSON, fromMsgpack) {
			t.Fatalf("record %d: JSON %+v, msgpack %+v", i, fromJSON, fromMsgpack)
		}
		if len(fromJSON.Features) != o.Features {
			t.Fatalf("record %d has %d features, want %d", i, len(fromJSON.Features), o.Features)
		}
		for _, v := range fromJSON.Features {
			if v < 0 || v >= 1 || math.Abs(v*10000-math.Round(v*10000)) > 1e-6 {
				t.Fatalf("record %d: value %v is not a multiple of 0.0001 in [0,1)", i, v)
			}
		}
		switch {
		case fromJSON.Label == nil:
			unlabeled++
		case *fromJSON.Label == 1:
			positive++
		case *fromJSON.Label != -1:
			t.Fatalf("record %d: binary label %d", i, *fromJSON.Label)
		}
	}
	if unlabeled < n/10 || unlabeled > n*3/10 {
		t.Errorf("%d of %d unlabeled, want about 20%%", unlabeled, n)
	}
	if positive < n/5 || positive > n*3/5 {
		t.Errorf("%d of %d positive: the hidden hyperplane should split the stream", positive, n)
	}
}

func TestMulticlassLabels(t *testing.T) {
	o := synth.DefaultOptions()
	o.Classes = 5
	s := synth.New(o)
	seen := map[int]int{}
	for range 1000 {
		seen[s.Next().Label]++
	}
	for c := range 5 {
		if seen[c] == 0 {
			t.Errorf("class %d never drawn: %v", c, seen)
		}
	}
	if len(seen) != 5 {
		t.Errorf("labels outside 0..4: %v", seen)
	}
}

func TestValidate(t *testing.T) {
	bad := []synth.Options{
		{Features: 5, Vocab: 0},
		{Features: 11, Vocab: 10},
		{Features: 1, Vocab: 10, Noise: 1.5},
		{Features: 1, Vocab: 10, Unlabeled: -0.1},
		{Features: 1, Vocab: 10, Classes: 1},
	}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if err := synth.DefaultOptions().Validate(); err != nil {
		t.Error(err)
	}
}

// TestDrift: a stream that drifts draws the examples of the stream that
// does not, and labels them by its first hidden hyperplane before the
// change and by an independent one after it (about half the labels
// agree, as with any two random hyperplanes); a gradual change moves from
// one to the other around DriftAt.
func TestDrift(t *testing.T) {
	const n, at = 6000, 3000
	o := synth.DefaultOptions()
	o.Seed, o.Noise, o.Classes = 4, 0, 0
	agreement := func(d synth.Options, from, to int) float64 {
		plain, drifting := synth.New(o), synth.New(d)
		same := 0
		for i := range to {
			a, b := plain.Next(), drifting.Next()
			if !reflect.DeepEqual(a.Names, b.Names) || !reflect.DeepEqual(a.Values, b.Values) || a.Labeled != b.Labeled {
				t.Fatalf("example %d: the drifting stream drew other features", i)
			}
			if i >= from && a.Label == b.Label {
				same++
			}
		}
		return float64(same) / float64(to-from)
	}
	abrupt := o
	abrupt.DriftAt = at
	if got := agreement(abrupt, 0, at); got != 1 {
		t.Errorf("before an abrupt change %.3f of the labels agree, want all", got)
	}
	if got := agreement(abrupt, at, n); got < 0.35 || got > 0.65 {
		t.Errorf("after an abrupt change %.3f of the labels agree, want about half", got)
	}
	gradual := o
	gradual.DriftAt, gradual.DriftWidth = at, 1000
	early, late := agreement(gradual, 0, at-1000), agreement(gradual, at+1000, n)
	if early < 0.97 || late < 0.35 || late > 0.65 {
		t.Errorf("a gradual change: %.3f of the labels agree well before it, %.3f well after; want nearly all, then about half", early, late)
	}
	if mid := agreement(gradual, at-200, at+200); mid <= late || mid >= early {
		t.Errorf("a gradual change: %.3f of the labels agree around it, want between %.3f and %.3f", mid, late, early)
	}
}
