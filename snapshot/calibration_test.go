package snapshot_test

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/vmihailenco/msgpack/v5"
)

// TestCalibrationRoundTrip: a binary and a multiclass model's calibration
// is written under the key calibration with the documented keys and
// reads back bit for bit, in a snapshot of the current format.
func TestCalibrationRoundTrip(t *testing.T) {
	for _, classes := range [][]string{nil, {"a", "b", "c"}} {
		cfg := learner.DefaultConfig()
		cfg.HashBits, cfg.Classes = 6, classes
		st := train(t, cfg, 300).State()
		if st.Calibration.Count == 0 {
			t.Fatal("the trained model measured no probability")
		}
		data, err := snapshot.Marshal(snap(st))
		if err != nil {
			t.Fatal(err)
		}
		var env map[string]any
		if err := msgpack.Unmarshal(data, &env); err != nil {
			t.Fatal(err)
		}
		if f, _ := env["format"].(int8); int(f) != snapshot.Format || snapshot.Format != 3 {
			t.Fatalf("format %v, want %d", env["format"], snapshot.Format)
		}
		c, ok := bodyOf(t, data)["calibration"].(map[string]any)
		if !ok {
			t.Fatal("no calibration key")
		}
		keys := []string{"parameters", "count", "log_loss", "brier", "bin_count", "bin_events", "bin_sum", "window_probability", "window_event", "window_log_loss", "window_brier"}
		if classes == nil {
			keys = append(keys, "auc_positive", "auc_negative")
		}
		for _, k := range keys {
			if _, ok := c[k]; !ok {
				t.Errorf("calibration has no key %s", k)
			}
		}
		if len(c) != len(keys) {
			t.Errorf("calibration has keys %v, want %v", c, keys)
		}
		got, err := snapshot.Unmarshal(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.State, st) || got.State.Digest() != st.Digest() {
			t.Fatal("the state read back differs")
		}
	}
}

// TestFormat1LoadsWithFreshCalibration: a snapshot of format 1
// (testdata/averaged-format1.msgpack, written before calibration existed)
// loads, its model calibrates afresh and learns on, and it is written
// again in the current format.
func TestFormat1LoadsWithFreshCalibration(t *testing.T) {
	data := testdataOfFormat(t, "averaged-format1.msgpack", 1)
	if _, ok := bodyOf(t, data)["calibration"]; ok {
		t.Fatal("a format-1 snapshot with a calibration key")
	}
	s, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !s.State.Calibration.IsZero() {
		t.Fatalf("calibration %+v, want none", s.State.Calibration)
	}
	m, err := learner.Restore(s.State)
	if err != nil {
		t.Fatal(err)
	}
	x := learner.Example{Index: []uint32{1, 5, 9}, Value: []float64{1, -2, 0.5}, Labeled: true, Label: 1}
	if p := m.Predict(&x); p.Probability != 0.5 || p.Score == 0 {
		t.Fatalf("a fresh calibrator gives %v for score %v, want 0.5", p.Probability, p.Score)
	}
	m.Learn(&x)
	if mt := m.Metrics(); mt.LogLoss == 0 || mt.Labeled != s.State.Labeled+1 {
		t.Fatalf("after one labeled example: %+v", mt)
	}
	_, back := writtenAgain(t, m)
	if back.State.Calibration.Count != 1 {
		t.Fatalf("written again, the calibration counts %d", back.State.Calibration.Count)
	}
}

// TestCalibrationDamaged: a calibration key whose vectors do not fit is
// refused as corrupt, naming the field.
func TestCalibrationDamaged(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	data, err := snapshot.Marshal(snap(train(t, cfg, 200).State()))
	if err != nil {
		t.Fatal(err)
	}
	for field, spoil := range map[string]func(c map[string]any){
		"bin_count":          func(c map[string]any) { c["bin_count"] = c["bin_count"].([]byte)[:7] },
		"calibration_bins":   func(c map[string]any) { c["bin_events"] = c["bin_events"].([]byte)[:8] },
		"window_probability": func(c map[string]any) { c["window_probability"] = []byte{} },
		"parameters":         func(c map[string]any) { c["parameters"] = []byte{1, 2, 3} },
	} {
		body := bodyOf(t, data)
		spoil(body["calibration"].(map[string]any))
		_, err := snapshot.Unmarshal(reseal(t, body))
		if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v, want ErrCorrupt naming it", field, err)
		}
	}
}

// TestFormat2LoadsItsHistogram: a snapshot of format 2
// (testdata/averaged-format2.msgpack, written before the calibrator's
// histogram had two corrections) loads, its calibrator upgraded to the
// current layout with the bins' expected positives estimated and neither
// correction preferred, and it is written again in the current format.
func TestFormat2LoadsItsHistogram(t *testing.T) {
	data := testdataOfFormat(t, "averaged-format2.msgpack", 2)
	s, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	const format2, now = 46, 86 // a binary calibrator's values
	if n := len(s.State.Calibration.Parameters); n != format2 {
		t.Fatalf("the format-2 calibrator has %d values, want %d", n, format2)
	}
	m, err := learner.Restore(s.State)
	if err != nil {
		t.Fatal(err)
	}
	params := m.State().Calibration.Parameters
	if len(params) != now {
		t.Fatalf("restored, the calibrator has %d values, want %d", len(params), now)
	}
	for j := range 20 {
		n, e, d := params[26+j], params[46+j], params[66+j]
		if want := n * (float64(j) + 0.5) / 20; e != want || d != 0 {
			t.Errorf("bin %d of %v examples expects %v positives with squared errors %v apart, want %v and 0", j, n, e, d, want)
		}
	}
	again, back := writtenAgain(t, m)
	var env map[string]any
	if err := msgpack.Unmarshal(again, &env); err != nil {
		t.Fatal(err)
	}
	if f, _ := env["format"].(int8); int(f) != snapshot.Format {
		t.Fatalf("written again as format %v, want %d", env["format"], snapshot.Format)
	}
	if len(back.State.Calibration.Parameters) != now {
		t.Fatalf("read back, the calibrator has %d values", len(back.State.Calibration.Parameters))
	}
}

// TestFormat2HistogramBeyondItsEstimate: a format-2 calibrator whose bin
// counts are so large that the expected positives estimated from them
// (n_j·(j + ½)/20) are not finite is refused as corrupt, naming the
// calibration: loaded, it would give a state that no snapshot can hold.
func TestFormat2HistogramBeyondItsEstimate(t *testing.T) {
	data := testdataOfFormat(t, "averaged-format2.msgpack", 2)
	body := bodyOf(t, data)
	c := body["calibration"].(map[string]any)
	params := c["parameters"].([]byte)
	if len(params) != 46*8 {
		t.Fatalf("the format-2 calibrator has %d bytes", len(params))
	}
	const bin = 19
	for _, i := range []int{6 + bin, 26 + bin} { // pos_19 and n_19
		binary.LittleEndian.PutUint64(params[8*i:], math.Float64bits(1e308))
	}
	raw, err := msgpack.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := msgpack.Marshal(map[string]any{"format": 2, "checksum": crc32.ChecksumIEEE(raw), "body": raw})
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Unmarshal(sealed)
	if err == nil {
		m, rerr := learner.Restore(s.State)
		if rerr == nil {
			_, err := snapshot.Marshal(snap(m.State()))
			t.Fatalf("loaded; written again: %v", err)
		}
		t.Fatalf("loaded; restored: %v", rerr)
	}
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "calibration") || !strings.Contains(err.Error(), "bin 19") {
		t.Fatalf("got %v, want ErrCorrupt naming the calibration's bin 19", err)
	}
}

// TestCalibrationLearnedNothing: a calibrator's parameters that count no
// example learned but are not empty are refused as corrupt, naming the
// calibration. Loaded, such a calibrator published probabilities from its
// other numbers, and the next snapshot of the model, which writes a
// calibrator that learned nothing as none, dropped them: after a restart
// the same model published other probabilities.
func TestCalibrationLearnedNothing(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	data, err := snapshot.Marshal(snap(train(t, cfg, 200).State()))
	if err != nil {
		t.Fatal(err)
	}
	body := bodyOf(t, data)
	params := body["calibration"].(map[string]any)["parameters"].([]byte)
	binary.LittleEndian.PutUint64(params, math.Float64bits(0)) // n, the examples learned
	s, err := snapshot.Unmarshal(reseal(t, body))
	if err == nil {
		x := learner.Example{Index: []uint32{1, 5, 9}, Value: []float64{1, -2, 0.5}}
		m, err := learner.Restore(s.State)
		if err != nil {
			t.Fatal(err)
		}
		_, back := writtenAgain(t, m)
		m2, err := learner.Restore(back.State)
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("loaded: it predicts %v, and written and read again %v", m.Predict(&x).Probability, m2.Predict(&x).Probability)
	}
	if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "calibration") {
		t.Fatalf("got %v, want ErrCorrupt naming the calibration", err)
	}
}

// TestFormat2KeepsItsDigest: a model restored from a snapshot of format 2
// has the digest the snapshot (and an epoch log, which chains digests)
// records for it, and states of format 2 mix as a hyperplane of format 2
// mixes them, to the same digest: a worker upgraded to format 3 continues
// an epoch log that older workers wrote, and replays it, instead of
// taking each boundary they cut for another history.
func TestFormat2KeepsItsDigest(t *testing.T) {
	data := testdataOfFormat(t, "averaged-format2.msgpack", 2)
	load := func() *learner.State {
		s, err := snapshot.Unmarshal(data)
		if err != nil {
			t.Fatal(err)
		}
		return s.State
	}
	base := load()
	const format2 = 46
	if n := len(base.Calibration.Parameters); n != format2 {
		t.Fatalf("the format-2 calibrator has %d values, want %d", n, format2)
	}
	m, err := learner.Restore(base)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.State().StateSHA256(), base.StateSHA256(); got != want {
		t.Fatalf("restored from format 2, the model's digest is %s, the snapshot's %s", got, want)
	}

	// Two shards' results of format 2, each having learned some labeled
	// examples beyond base: their calibrators' bins counted them.
	states := []*learner.State{load(), load()}
	for i, st := range states {
		d := uint64(10 * (i + 1))
		st.Examples += d
		st.Labeled += d
		p := st.Calibration.Parameters
		p[0] += float64(d)
		p[6+5+i] += float64(i + 1)   // pos_j
		p[26+5+i] += float64(d)      // n_j
		p[2] += 0.125 * float64(i+1) // a
	}
	mixed, err := learner.Mix(base, states, []float64{1, 1})
	if err != nil {
		t.Fatal(err)
	}
	// Format 2's mix: the parameters' mean weighted by the labeled
	// examples each learned, in the layout of format 2.
	want := make([]float64, format2)
	for i, st := range states {
		mu := float64(10*(i+1)) / 30
		for j, v := range st.Calibration.Parameters {
			want[j] += mu * v
		}
	}
	format2Mix := *mixed
	format2Mix.Calibration.Parameters = want
	if got, want := mixed.StateSHA256(), format2Mix.StateSHA256(); got != want {
		t.Fatalf("states of format 2 mix to the digest %s, a hyperplane of format 2 mixes them to %s", got, want)
	}
	m, err = learner.Restore(mixed)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.State().StateSHA256(), mixed.StateSHA256(); got != want {
		t.Fatalf("restored, the mixed model's digest is %s, the mix's %s", got, want)
	}
}

// testdataOfFormat is the file name in testdata, whose envelope must say
// it is of the format given.
func testdataOfFormat(t *testing.T, name string, format int) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := msgpack.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	if f, _ := env["format"].(int8); int(f) != format {
		t.Fatalf("the test file %s is of format %v, want %d", name, env["format"], format)
	}
	return data
}

// writtenAgain is m's state written as a snapshot and read back: the
// bytes and what they read as.
func writtenAgain(t *testing.T, m *learner.Model) ([]byte, *snapshot.Snapshot) {
	t.Helper()
	data, err := snapshot.Marshal(snap(m.State()))
	if err != nil {
		t.Fatal(err)
	}
	back, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return data, back
}
