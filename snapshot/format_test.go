package snapshot_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// train runs a reproducible stream through a model of cfg.
func train(t testing.TB, cfg learner.Config, n int) *learner.Model {
	t.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	d := cfg.Dimension()
	for e := range n {
		x := learner.Example{Labeled: e%5 != 0}
		var f float64
		for range 5 {
			i, v := r.IntN(d), float64(r.IntN(5)-2)
			x.Add(uint32(i), v)
			f += float64(i%3-1) * v
		}
		switch {
		case cfg.Multiclass():
			x.Label = int(uint(f*7) % uint(len(cfg.Classes)))
		case f >= 0:
			x.Label = 1
		default:
			x.Label = -1
		}
		m.Learn(&x)
	}
	return m
}

func snap(st *learner.State) *snapshot.Snapshot {
	return &snapshot.Snapshot{
		Model:      "clicks",
		Generation: 7,
		Created:    time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC),
		Writer:     "worker-a",
		Positions:  map[string]int64{"kafka:examples/0": 1200, "kafka:examples/1": 977},
		State:      st,
	}
}

func TestRoundTrip(t *testing.T) {
	algorithms := []learner.Algorithm{learner.Perceptron, learner.Averaged, learner.Margin, learner.PA, learner.PA1, learner.PA2, learner.Pegasos, learner.AROW, learner.Kernel}
	for _, a := range algorithms {
		for _, batch := range []int{1, 3} {
			cfg := learner.DefaultConfig()
			cfg.Algorithm, cfg.HashBits = a, 6
			if batch > 1 {
				if a != learner.Perceptron && a != learner.Averaged {
					continue
				}
				cfg.Batch = batch
			}
			if a == learner.Averaged {
				cfg.Classes = []string{"a", "b", "c"}
			}
			t.Run(string(a), func(t *testing.T) {
				m := train(t, cfg, 301)
				want := snap(m.State())
				data, err := snapshot.Marshal(want)
				if err != nil {
					t.Fatal(err)
				}
				got, err := snapshot.Unmarshal(data)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip changed the snapshot:\n got %+v\nwant %+v", got, want)
				}
				again, err := snapshot.Marshal(got)
				if err != nil || !bytes.Equal(again, data) {
					t.Fatalf("encoding is not deterministic (err %v)", err)
				}
			})
		}
	}
}

// TestGolden pins the format: the golden file must decode to the model
// that wrote it and re-encode to the same bytes. A change of layout that
// breaks it needs a new Format number.
func TestGolden(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Bias, cfg.AROWR = learner.Averaged, 4, learner.BiasR2, 1
	want := snap(train(t, cfg, 50).State())
	data, err := snapshot.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "averaged.msgpack")
	if *update {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./snapshot -update to create it)", err)
	}
	if !bytes.Equal(golden, data) {
		t.Fatal("the encoding differs from testdata/averaged.msgpack")
	}
	got, err := snapshot.Unmarshal(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("the golden file decodes to another snapshot")
	}
	// The golden model predicts like the model that wrote it.
	m, err := learner.Restore(got.State)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := learner.Restore(want.State)
	x := &learner.Example{Index: []uint32{1, 5, 9}, Value: []float64{1, -2, 0.5}}
	if a, b := m.Predict(x), orig.Predict(x); a.Score != b.Score || a.Score == 0 {
		t.Fatalf("score %v, the writer's %v", a.Score, b.Score)
	}
}

func TestCorruption(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	good, err := snapshot.Marshal(snap(train(t, cfg, 100).State()))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-40] ^= 0x10
	cases := map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)/2],
		"flipped":   flipped,
		"json":      []byte(`{"format":1}`),
		"random":    []byte("\x93\x01\x02\x03not a snapshot"),
	}
	for name, data := range cases {
		if _, err := snapshot.Unmarshal(data); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := snapshot.Unmarshal(flipped); err == nil || !bytes.Contains([]byte(err.Error()), []byte("checksum")) {
		t.Errorf("a flipped bit should be reported as a checksum mismatch, got %v", err)
	}
}

func TestNewerFormatIsRefused(t *testing.T) {
	data, err := msgpack.Marshal(map[string]any{"format": snapshot.Format + 1, "checksum": 0, "body": []byte{0x80}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = snapshot.Unmarshal(data)
	if want := fmt.Sprintf("format %d", snapshot.Format+1); err == nil || errors.Is(err, snapshot.ErrCorrupt) || !errors.Is(err, snapshot.ErrNewerFormat) || !bytes.Contains([]byte(err.Error()), []byte(want)) {
		t.Fatalf("got %v, want ErrNewerFormat naming %s", err, want)
	}
}

func TestStateThatDoesNotFitItsConfigIsCorrupt(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	st := train(t, cfg, 10).State()
	st.Weights = st.Weights[:10]
	if _, err := snapshot.Unmarshal(forge(t, st)); !errors.Is(err, snapshot.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("weights")) {
		t.Fatalf("got %v, want ErrCorrupt naming weights", err)
	}
}

// invalidStates are states the loader refuses, each with the field its
// error names: the pills a model could swallow before the learner bounded
// its arithmetic (r2 = +Inf from ‖x‖² of x = 1e200, NaN weights from a
// step of infinite length), and states that do not fit their
// configuration.
func invalidStates(t testing.TB) map[string]struct {
	state *learner.State
	field string
} {
	trained := func(modify func(*learner.Config)) *learner.State {
		cfg := learner.DefaultConfig()
		cfg.HashBits = 6
		modify(&cfg)
		return train(t, cfg, 40).State()
	}
	keep := func(*learner.Config) {}
	out := map[string]struct {
		state *learner.State
		field string
	}{}
	add := func(name, field string, st *learner.State, spoil func(*learner.State)) {
		spoil(st)
		out[name] = struct {
			state *learner.State
			field string
		}{st, field}
	}
	inf, nan := math.Inf(1), math.NaN()
	add("r2 +Inf", "r2", trained(keep), func(st *learner.State) { st.R2 = inf })
	add("r2 NaN", "r2", trained(keep), func(st *learner.State) { st.R2 = nan })
	add("weight NaN", "weights", trained(keep), func(st *learner.State) { st.Weights[3] = nan })
	add("weight -Inf", "weights", trained(keep), func(st *learner.State) { st.Weights[63] = -inf })
	add("bias +Inf", "bias", trained(keep), func(st *learner.State) { st.Bias[0] = inf })
	add("averaged sum NaN", "sum_weights", trained(func(c *learner.Config) { c.Algorithm = learner.Averaged }),
		func(st *learner.State) { st.SumWeights[5] = nan })
	add("arow variance NaN", "variance", trained(func(c *learner.Config) { c.Algorithm = learner.AROW }),
		func(st *learner.State) { st.Variance[0] = nan })
	add("arow variance bias +Inf", "variance_bias", trained(func(c *learner.Config) { c.Algorithm = learner.AROW }),
		func(st *learner.State) { st.VarianceBias = inf })
	add("pegasos vnorm2 +Inf", "vnorm2", trained(func(c *learner.Config) { c.Algorithm = learner.Pegasos }),
		func(st *learner.State) { st.VNorm2 = inf })
	add("pegasos scale 0", "scale", trained(func(c *learner.Config) { c.Algorithm = learner.Pegasos }),
		func(st *learner.State) { st.Scale = 0 })
	add("kernel coefficient NaN", "support", trained(func(c *learner.Config) { c.Algorithm = learner.Kernel }),
		func(st *learner.State) { st.Support[0].Coef = nan })
	add("kernel r2 +Inf", "kernel_r2", trained(func(c *learner.Config) { c.Algorithm = learner.Kernel }),
		func(st *learner.State) { st.KernelR2 = inf })
	add("weights too few", "weights", trained(keep), func(st *learner.State) { st.Weights = st.Weights[:10] })
	add("counters", "counters", trained(keep), func(st *learner.State) { st.Mistakes = st.Labeled + 1 })
	return out
}

// TestMarshalRefusesWhatUnmarshalRefuses: the writer runs the loader's
// check, so a state the loader would skip as corrupt is never written.
func TestMarshalRefusesWhatUnmarshalRefuses(t *testing.T) {
	for name, tc := range invalidStates(t) {
		t.Run(name, func(t *testing.T) {
			want := "state " + tc.field + ":"
			data, err := snapshot.Marshal(snap(tc.state))
			var se *learner.StateError
			if !errors.Is(err, snapshot.ErrInvalidState) || !errors.As(err, &se) || se.Field != tc.field || data != nil {
				t.Fatalf("Marshal: %d bytes, %v; want ErrInvalidState naming %s", len(data), err, tc.field)
			}
			// The same state, written by a writer without the check, is
			// what the loader refuses, naming the same field.
			_, err = snapshot.Unmarshal(forge(t, tc.state))
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), want) {
				t.Fatalf("Unmarshal of the forged snapshot: %v, want ErrCorrupt naming %s", err, tc.field)
			}
		})
	}
}

// forge encodes st as a snapshot without Marshal's check, as a writer
// without it did: it takes the body of a valid snapshot of st's
// configuration and puts st's fields in it.
func forge(t testing.TB, st *learner.State) []byte {
	t.Helper()
	m, err := learner.New(st.Config)
	if err != nil {
		t.Fatal(err)
	}
	valid, err := snapshot.Marshal(snap(m.State()))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := msgpack.Unmarshal(valid, &env); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := msgpack.Unmarshal(env["body"].([]byte), &body); err != nil {
		t.Fatal(err)
	}
	f64 := func(v []float64) []byte {
		if v == nil {
			return nil
		}
		out := make([]byte, 8*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(f))
		}
		return out
	}
	u32 := func(v []uint32) []byte {
		out := make([]byte, 4*len(v))
		for i, u := range v {
			binary.LittleEndian.PutUint32(out[4*i:], u)
		}
		return out
	}
	body["examples"], body["labeled"], body["mistakes"], body["updates"] = st.Examples, st.Labeled, st.Mistakes, st.Updates
	body["r2"], body["scale"], body["vnorm2"] = st.R2, st.Scale, st.VNorm2
	body["variance_bias"], body["kernel_r2"], body["support_next"] = st.VarianceBias, st.KernelR2, st.SupportNext
	body["weights"], body["bias"] = f64(st.Weights), f64(st.Bias)
	body["sum_weights"], body["sum_bias"], body["variance"] = f64(st.SumWeights), f64(st.SumBias), f64(st.Variance)
	var support []map[string]any
	for _, sv := range st.Support {
		support = append(support, map[string]any{"index": u32(sv.Index), "value": f64(sv.Value), "coef": sv.Coef, "norm2": sv.Norm2})
	}
	body["support"] = support
	raw, err := msgpack.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := msgpack.Marshal(map[string]any{"format": snapshot.Format, "checksum": crc32.ChecksumIEEE(raw), "body": raw})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCompatible(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	s := snap(train(t, cfg, 10).State())
	if err := s.Compatible(cfg); err != nil {
		t.Fatalf("same config: %v", err)
	}
	cases := map[string]func(*learner.Config){
		"algorithm": func(c *learner.Config) { c.Algorithm = learner.Averaged },
		"hash_bits": func(c *learner.Config) { c.HashBits = 7 },
		"hash_seed": func(c *learner.Config) { c.HashSeed = 1 },
		"classes":   func(c *learner.Config) { c.Classes = []string{"no", "yes"} },
		"arow_r":    func(c *learner.Config) { c.AROWR = 3 },
	}
	for field, modify := range cases {
		other := cfg
		modify(&other)
		err := s.Compatible(other)
		var ie *snapshot.IncompatibleError
		if !errors.As(err, &ie) || ie.Field != field {
			t.Errorf("%s: got %v, want an incompatibility on %s", field, err, field)
		}
	}
	// A setting the algorithm does not read does not count: a model of
	// the perceptron written when arow_r's default was 1 continues under
	// today's default.
	old := cfg
	old.Algorithm, old.AROWR = learner.Perceptron, 1
	p := snap(train(t, old, 10).State())
	now := old
	now.AROWR, now.Lambda = learner.DefaultConfig().AROWR, 0.5
	if err := p.Compatible(now); err != nil {
		t.Fatalf("settings the perceptron does not read: %v", err)
	}
	now.Eta = 0.5
	if err := p.Compatible(now); err == nil {
		t.Fatal("eta, which the perceptron reads, differs, and the snapshot is compatible")
	}
}

func TestSummarize(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	cfg.Classes = []string{"a", "b", "c"}
	m := train(t, cfg, 200)
	sum := snapshot.Summarize(snap(m.State()), 5)
	if sum.Metrics != m.Metrics() {
		t.Errorf("metrics %+v, model says %+v", sum.Metrics, m.Metrics())
	}
	if want := m.State().StateSHA256(); sum.StateSHA256 != want {
		t.Errorf("state_sha256 %s, learner says %s", sum.StateSHA256, want)
	}
	if sum.Weights == nil || sum.Weights.Count != 3*64 || sum.Weights.NonZero == 0 {
		t.Fatalf("weight stats %+v", sum.Weights)
	}
	if len(sum.Largest) != 5 {
		t.Fatalf("%d largest weights, want 5", len(sum.Largest))
	}
	st := m.State()
	for i, w := range sum.Largest {
		if w.Class == "" || st.Weights[int(w.Index)*3+cfg.ClassIndex(w.Class)] != w.Weight {
			t.Errorf("largest %d: %+v does not match the weights", i, w)
		}
		if i > 0 && abs(w.Weight) > abs(sum.Largest[i-1].Weight) {
			t.Errorf("largest weights out of order at %d", i)
		}
	}
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// epochSnap is a snapshot of the mixed model of epoch 7.
func epochSnap(t testing.TB) *snapshot.Snapshot {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	s := snap(train(t, cfg, 60).State())
	s.Epoch = s.Generation
	s.ConfigDigest = sha256.Sum256([]byte("history"))
	s.Boundary = []snapshot.Range{{Shard: shardid.Kafka("examples", 0), From: 1000, To: 1200}, {Shard: shardid.Kafka("examples", 1), From: 900, To: 977}}
	s.BoundarySHA256 = sha256.Sum256([]byte("B_7"))
	s.Scope = "global"
	return s
}

// bodyOf decodes the body of an encoded snapshot as a map.
func bodyOf(t testing.TB, data []byte) map[string]any {
	t.Helper()
	var env map[string]any
	if err := msgpack.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := msgpack.Unmarshal(env["body"].([]byte), &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// reseal encodes body as the snapshot it is the body of.
func reseal(t testing.TB, body map[string]any) []byte {
	t.Helper()
	raw, err := msgpack.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	out, err := msgpack.Marshal(map[string]any{"format": snapshot.Format, "checksum": crc32.ChecksumIEEE(raw), "body": raw})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var epochKeys = []string{"epoch", "config_digest", "boundary", "boundary_sha256", "scope", "shard"}

// TestEpochKeysRoundTrip: the mixed model of an epoch carries its epoch
// keys through a round trip, as the documented keys.
func TestEpochKeysRoundTrip(t *testing.T) {
	want := epochSnap(t)
	data, err := snapshot.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the snapshot:\n got %+v\nwant %+v", got, want)
	}
	if again, err := snapshot.Marshal(got); err != nil || !bytes.Equal(again, data) {
		t.Fatalf("encoding is not deterministic (err %v)", err)
	}
	body := bodyOf(t, data)
	if fmt.Sprint(body["epoch"]) != "7" || body["scope"] != "global" || !bytes.Equal(body["config_digest"].([]byte), want.ConfigDigest[:]) ||
		!bytes.Equal(body["boundary_sha256"].([]byte), want.BoundarySHA256[:]) {
		t.Fatalf("epoch keys in the body: %v", body)
	}
	if _, ok := body["shard"]; ok {
		t.Error("a global-scope snapshot has a shard key")
	}
	ranges := body["boundary"].([]any)
	if r := ranges[1].(map[string]any); len(ranges) != 2 || r["shard"] != "kafka:examples/1" || fmt.Sprint(r["from"], r["to"]) != "900 977" {
		t.Fatalf("boundary %v", ranges)
	}
}

// TestLegacySnapshotIsEpochZero: a snapshot outside the epoch log has
// none of the epoch keys, and the golden one, written before they
// existed, loads as epoch 0.
func TestLegacySnapshotIsEpochZero(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	data, err := snapshot.Marshal(snap(train(t, cfg, 30).State()))
	if err != nil {
		t.Fatal(err)
	}
	body := bodyOf(t, data)
	for _, key := range epochKeys {
		if _, ok := body[key]; ok {
			t.Errorf("a snapshot outside the log has key %s", key)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "averaged.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Unmarshal(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got.Epoch != 0 || got.ConfigDigest != ([32]byte{}) || got.Boundary != nil || got.BoundarySHA256 != ([32]byte{}) || got.Scope != "" || got.Shard != "" {
		t.Fatalf("the golden snapshot loads with epoch keys: %+v", got)
	}
}

func TestEpochKeysRefused(t *testing.T) {
	for name, spoil := range map[string]func(s *snapshot.Snapshot){
		"epoch is not the generation": func(s *snapshot.Snapshot) { s.Epoch = 6 },
		"boundary out of order":       func(s *snapshot.Snapshot) { s.Boundary[0], s.Boundary[1] = s.Boundary[1], s.Boundary[0] },
		"boundary backwards":          func(s *snapshot.Snapshot) { s.Boundary[0].To = 10 },
		"boundary shard":              func(s *snapshot.Snapshot) { s.Boundary[1].Shard = shardid.Kafka("ex/amples", 1) },
		"boundary without a shard":    func(s *snapshot.Snapshot) { s.Boundary[1].Shard = shardid.ID{} },
	} {
		s := epochSnap(t)
		spoil(s)
		if _, err := snapshot.Marshal(s); err == nil {
			t.Errorf("%s: Marshal succeeded", name)
		}
	}
	valid, err := snapshot.Marshal(epochSnap(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(body map[string]any){
		"epoch is not the generation": func(b map[string]any) { b["epoch"] = 6 },
		"short config digest":         func(b map[string]any) { b["config_digest"] = []byte{1, 2, 3} },
		"long boundary sha":           func(b map[string]any) { b["boundary_sha256"] = make([]byte, 33) },
		"boundary out of order": func(b map[string]any) {
			r := b["boundary"].([]any)
			r[0], r[1] = r[1], r[0]
		},
		"boundary shard": func(b map[string]any) {
			b["boundary"].([]any)[1].(map[string]any)["shard"] = "examples"
		},
	} {
		body := bodyOf(t, valid)
		spoil(body)
		if _, err := snapshot.Unmarshal(reseal(t, body)); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Errorf("%s: Unmarshal: %v, want ErrCorrupt", name, err)
		}
	}
	body := bodyOf(t, valid)
	body["boundary"].([]any)[1].(map[string]any)["shard"] = "kafka:examples/01"
	if _, err := snapshot.Unmarshal(reseal(t, body)); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), `"kafka:examples/01"`) {
		t.Errorf("a boundary naming shard kafka:examples/01: Unmarshal: %v, want ErrCorrupt naming the shard", err)
	}
}

// nested is a msgpack value of depth arrays, one inside the next, around
// a nil.
func nested(depth int) []byte {
	return append(bytes.Repeat([]byte{0x91}, depth), 0xc0)
}

// TestDeepNestingIsCorrupt: a stored object that nests arrays millions
// deep, in its envelope or in a body with a valid checksum, is refused
// as corrupt before the decoder, which recurses into each, runs out of
// stack (a fatal error, not a panic). The depth of a real snapshot is
// far below the bound.
func TestDeepNestingIsCorrupt(t *testing.T) {
	const depth = 8_000_000
	// An envelope with an unknown key holding the nesting: the decoder
	// skips an unknown key's value by recursing into it.
	envelope := append([]byte("\x84\xa6format\x02\xa8checksum\x00\xa4body\xc4\x00\xa1x"), nested(depth)...)
	body := append([]byte("\x81\xa1x"), nested(depth)...)
	inBody, err := msgpack.Marshal(map[string]any{"format": snapshot.Format, "checksum": crc32.ChecksumIEEE(body), "body": body})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"envelope": envelope, "body": inBody} {
		_, err := snapshot.Unmarshal(data)
		if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "nests more than 64") || !strings.Contains(err.Error(), name) {
			t.Errorf("nested %d deep in the %s: got %v, want ErrCorrupt naming the %s's depth", depth, name, err, name)
		}
	}
	// Within the bound, nesting is left to the decoder.
	shallow := reseal(t, map[string]any{"x": msgpack.RawMessage(nested(63))})
	if _, err := snapshot.Unmarshal(shallow); err == nil || strings.Contains(err.Error(), "nests") {
		t.Errorf("nested 63 deep: got %v, want the decoder's own error", err)
	}
	valid, err := snapshot.Marshal(epochSnap(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.Unmarshal(valid); err != nil {
		t.Fatal(err)
	}
}

// TestHugeCountIsCorrupt: an array whose count says billions of
// elements, in a body of a few bytes with a valid checksum, is refused
// as corrupt before the decoder, which allocates the elements a count
// says before reading them, runs out of memory (a fatal error, not a
// panic). So is a body that ends inside a value, and one with a byte
// that is no msgpack type.
func TestHugeCountIsCorrupt(t *testing.T) {
	array32 := []byte{0xdd, 0x7f, 0xff, 0xff, 0xff}
	for _, key := range []string{"challengers", "support", "boundary", "promotions"} {
		data := reseal(t, map[string]any{key: msgpack.RawMessage(array32)})
		_, err := snapshot.Unmarshal(data)
		if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "the body is truncated") {
			t.Errorf("%s of 2^31-1 elements: got %v, want ErrCorrupt saying the body is truncated", key, err)
		}
	}
	invalid := reseal(t, map[string]any{"x": msgpack.RawMessage{0xc1}})
	if _, err := snapshot.Unmarshal(invalid); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "no msgpack type") {
		t.Errorf("a body holding 0xc1: got %v, want ErrCorrupt naming the byte", err)
	}
}

// TestTinyElementsAreCorrupt: an array of the body's structs whose
// elements are one byte each (nil), in a body with a valid checksum, is
// refused as corrupt, naming the key, without decoding a struct for each:
// a body of a megabyte used to take a gigabyte for its challengers.
func TestTinyElementsAreCorrupt(t *testing.T) {
	const n = 1 << 18
	valid, err := snapshot.Marshal(epochSnap(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"challengers", "support", "boundary", "promotions"} {
		t.Run(key, func(t *testing.T) {
			body := bodyOf(t, valid)
			body[key] = make([]any, n)
			data := reseal(t, body)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := snapshot.Unmarshal(data)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), key+": element 0 is stored in 1 bytes") {
				t.Errorf("%s of %d nils: got %v, want ErrCorrupt naming %s's element 0", key, n, err, key)
			}
			if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8*uint64(len(data)) {
				t.Errorf("%s of %d nils: %d bytes allocated for a snapshot of %d", key, n, allocated, len(data))
			}
		})
	}
}

// TestNegativePositionIsRefused: positions count from 0. Marshal refuses
// a negative one, and a snapshot that holds one is corrupt, so that a
// worker loads the generation before it rather than resuming from it.
func TestNegativePositionIsRefused(t *testing.T) {
	s := epochSnap(t)
	s.Positions = map[string]int64{"kafka:examples/0": 1200, "kafka:examples/1": -100}
	if _, err := snapshot.Marshal(s); err == nil || !strings.Contains(err.Error(), "kafka:examples/1 at -100") {
		t.Errorf("Marshal: got %v, want an error naming the negative position", err)
	}
	valid, err := snapshot.Marshal(epochSnap(t))
	if err != nil {
		t.Fatal(err)
	}
	body := bodyOf(t, valid)
	body["positions"] = map[string]any{"kafka:examples/0": 1200, "kafka:examples/1": -100}
	if _, err := snapshot.Unmarshal(reseal(t, body)); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), "kafka:examples/1 at -100") {
		t.Errorf("Unmarshal: got %v, want ErrCorrupt naming the negative position", err)
	}
}

// BenchmarkUnmarshalKernel decodes a kernel model holding its budget of
// support vectors: the body's arrays of structs decode element by
// element (records).
func BenchmarkUnmarshalKernel(b *testing.B) {
	cfg := learner.DefaultConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Budget = learner.Kernel, 12, 1000
	m := train(b, cfg, 20_000)
	if n := len(m.State().Support); n < cfg.Budget {
		b.Fatalf("%d support vectors, want the budget, %d", n, cfg.Budget)
	}
	data, err := snapshot.Marshal(snap(m.State()))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := snapshot.Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}
