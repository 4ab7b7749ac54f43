package snapshot_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/vmihailenco/msgpack/v5"
)

// TestDetectorRoundTrip: a snapshot keeps the change detector's settings
// and state, drifts included, bit for bit, in a snapshot and in an
// EncodedState, and the model it loads continues as the one saved.
func TestDetectorRoundTrip(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	// A detector this eager finds drifts in the noise of train's stream.
	cfg.Drift = learner.DriftConfig{Enabled: true, Delta: 0.01, Threshold: 3, MinExamples: 20}
	m := train(t, cfg, 2001)
	st := m.State()
	if st.Detector.Drifts == 0 || st.Detector.N == 0 {
		t.Fatalf("detector %+v: want drifts and a running test", st.Detector)
	}
	want := snap(st)
	data, err := snapshot.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.State.Config.Drift != cfg.Drift || got.State.Detector != st.Detector {
		t.Fatalf("round trip changed the detector: got %+v %+v, want %+v %+v", got.State.Config.Drift, got.State.Detector, cfg.Drift, st.Detector)
	}
	enc, err := snapshot.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := snapshot.Seal(struct {
		S snapshot.EncodedState `msgpack:"s"`
	}{enc})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := snapshot.Unseal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		S snapshot.EncodedState `msgpack:"s"`
	}
	if err := msgpack.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if s, err := back.S.State(); err != nil || s.Config.Drift != cfg.Drift || s.Detector != st.Detector {
		t.Fatalf("an EncodedState changed the detector (err %v)", err)
	}
	loaded, err := learner.Restore(got.State)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Drifts() != m.Drifts() {
		t.Fatalf("loaded model counts %d drifts, saved %d", loaded.Drifts(), m.Drifts())
	}
}

// TestSnapshotBeforeDetectors: a snapshot written before the change
// detector existed (testdata/averaged-before-drift.msgpack, TestGolden's
// file of then) has no drift settings nor detector state; it loads with
// the default settings and a fresh detector, its digest what it was, and
// the model learns on with its detector running.
func TestSnapshotBeforeDetectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "averaged-before-drift.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	st := got.State
	if st.Config.Drift != learner.DefaultDrift() || st.Detector != (learner.Detector{}) {
		t.Fatalf("drift settings %+v, detector %+v: want the defaults and a fresh one", st.Config.Drift, st.Detector)
	}
	cfg := learner.DefaultConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Bias = learner.Averaged, 4, learner.BiasR2
	if err := got.Compatible(cfg); err != nil {
		t.Fatalf("the old snapshot is not compatible with the default settings: %v", err)
	}
	off := cfg
	off.Drift.Enabled = false
	var ie *snapshot.IncompatibleError
	if err := got.Compatible(off); !errors.As(err, &ie) || ie.Field != "drift.enabled" {
		t.Fatalf("under a disabled detector: got %v, want an IncompatibleError naming drift.enabled", err)
	}
	// The model of then: the same parameters as today's, which also runs
	// a detector (50 examples raise no drift).
	now := train(t, cfg, 50).State()
	now.Detector = learner.Detector{}
	if !reflect.DeepEqual(st.Weights, now.Weights) || !reflect.DeepEqual(st.SumWeights, now.SumWeights) {
		t.Fatal("the old golden model is not today's model of its stream")
	}
	m, err := learner.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	x := learner.Example{Index: []uint32{1, 2}, Value: []float64{1, -1}, Labeled: true, Label: 1}
	m.Learn(&x)
	if d := m.State().Detector; d.N != 1 {
		t.Fatalf("detector %+v after one labeled example, want n 1", d)
	}
}
