package epochlog_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// learnFrom continues a model of base's state with n examples drawn from
// r, and returns its state: a shard's W_{e,s} learned from W_{e-1}.
// base nil starts a new model of cfg.
func learnFrom(t testing.TB, cfg learner.Config, base *learner.State, r *rand.Rand, n int) *learner.State {
	t.Helper()
	st, _ := learnTracked(t, cfg, base, r, n)
	return st
}

// learnTracked is learnFrom that also returns the coordinates the model
// recorded changing (learner.Model.Changed).
func learnTracked(t testing.TB, cfg learner.Config, base *learner.State, r *rand.Rand, n int) (*learner.State, learner.Coords) {
	t.Helper()
	var m *learner.Model
	var err error
	if base == nil {
		m, err = learner.New(cfg)
	} else {
		m, err = learner.Restore(base)
	}
	if err != nil {
		t.Fatal(err)
	}
	m.TrackChanges()
	classes := max(len(cfg.Classes), 1)
	for range n {
		x := learner.Example{Labeled: r.IntN(8) != 0}
		var f float64
		for range 6 {
			i, v := r.IntN(cfg.Dimension()), float64(r.IntN(5)-2)
			x.Add(uint32(i), v)
			f += float64(i%3-1) * v
		}
		switch {
		case classes > 1:
			x.Label = r.IntN(classes)
		case f >= 0:
			x.Label = 1
		default:
			x.Label = -1
		}
		m.Learn(&x)
	}
	return m.State(), m.Changed()
}

// resultOf is the result of shard kafka:clicks/0 for epoch 3 of clicks
// whose state is st, learned from base.
func resultOf(st *learner.State, base *epochlog.Base, writer string) *epochlog.ShardResult {
	return &epochlog.ShardResult{
		Model: "clicks", Epoch: 3, Shard: shardid.Kafka("clicks", 0), From: 200, To: 300,
		BoundarySHA256: storetest.Digest("B_3"), ConfigDigest: storetest.Digest("history"), BaseStateSHA256: base.Digest(),
		Messages: 100, DeadLetters: 1, Last: 300,
		State: st, Writer: writer, Created: time.Date(2026, 11, 21, 12, 1, 0, 9, time.UTC),
	}
}

// TestShardChangesEveryAlgorithm writes a result of every algorithm as
// changes against its base and reads it back bit for bit: weights,
// averaged sums, AROW's variances (binary and multiclass), Pegasos's
// scale, a mini-batch's pending update, and the kernel's support set,
// which has no per-weight vector and is stored whole, as is a state most
// of whose weights changed.
func TestShardChangesEveryAlgorithm(t *testing.T) {
	config := func(a learner.Algorithm, set func(c *learner.Config)) learner.Config {
		c := learner.DefaultConfig()
		c.Algorithm, c.HashBits, c.Window = a, 10, 50
		if set != nil {
			set(&c)
		}
		return c
	}
	multiclass := func(c *learner.Config) { c.Classes = []string{"a", "b", "c"} }
	batch := func(c *learner.Config) { c.Batch = 8 }
	for _, tc := range []struct {
		name string
		cfg  learner.Config
		// form is the state_form the result is stored in.
		form string
		more int
	}{
		{"perceptron", config(learner.Perceptron, nil), "changes", 20},
		{"averaged", config(learner.Averaged, nil), "changes", 20},
		{"margin", config(learner.Margin, nil), "changes", 20},
		{"pa", config(learner.PA, nil), "changes", 20},
		{"pa1", config(learner.PA1, nil), "changes", 20},
		{"pa2", config(learner.PA2, nil), "changes", 20},
		{"pegasos", config(learner.Pegasos, nil), "changes", 20},
		{"arow", config(learner.AROW, nil), "changes", 20},
		{"arow multiclass", config(learner.AROW, multiclass), "changes", 20},
		{"averaged multiclass", config(learner.Averaged, multiclass), "changes", 20},
		{"perceptron mini-batch", config(learner.Perceptron, batch), "changes", 21},
		{"averaged mini-batch", config(learner.Averaged, batch), "changes", 21},
		{"kernel", config(learner.Kernel, nil), "", 20},
		{"arow, most weights changed", config(learner.AROW, func(c *learner.Config) { c.HashBits = 3 }), "", 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFixture(storetest.Backends()[0].Open(t, "models"))
			ctx := context.Background()
			r := rand.New(rand.NewPCG(3, 4))
			baseState := learnFrom(t, tc.cfg, nil, r, 200)
			st, changed := learnTracked(t, tc.cfg, baseState, r, tc.more)
			if tc.cfg.Batch > 1 && len(st.PendingIndex) == 0 {
				t.Fatal("the learned state has no pending update to carry")
			}
			want := st.Digest()
			base := epochlog.NewBase(baseState)
			if err := s.WriteShard(ctx, resultOf(st, base, "worker-a"), base); err != nil {
				t.Fatal(err)
			}
			key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, shardid.Kafka("clicks", 0))
			body := storedBody(t, s, key)
			// Written with the coordinates the range changed, it is the
			// same object.
			hinted := newFixture(storetest.Backends()[0].Open(t, "models"))
			res := resultOf(st, base, "worker-a")
			res.Changed = &changed
			if err := hinted.WriteShard(ctx, res, base); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(storedBody(t, hinted, key), body) {
				t.Fatalf("written with the coordinates changed (%d, all %v), the result differs", len(changed.Index), changed.All)
			}
			if form, _ := body["state_form"].(string); form != tc.form {
				t.Fatalf("state_form %q, want %q", form, tc.form)
			}
			if _, has := body["changes"]; has != (tc.form == "changes") {
				t.Fatalf("changes present: %v, with state_form %q", has, tc.form)
			}
			got, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), base)
			if err != nil {
				t.Fatal(err)
			}
			if got.State.Digest() != want || !reflect.DeepEqual(got.State, st) {
				t.Fatalf("the state read differs from the one written")
			}
			if base.Digest() != baseState.Digest() || baseState.Digest() == want {
				t.Fatal("reading changed the base, or the range learned nothing")
			}
			// A second writer of the same result compares equal.
			if err := s.another().WriteShard(ctx, resultOf(learnFrom(t, tc.cfg, baseState, rand.New(rand.NewPCG(3, 4)), 0), base, "worker-b"), base); err == nil {
				t.Fatal("a result with another state compared equal")
			}
			if err := s.another().WriteShard(ctx, resultOf(got.State, base, "worker-b"), base); err != nil {
				t.Fatalf("the same result from another worker: %v", err)
			}
		})
	}
}

// TestShardWrongBase: a result is not read against a base other than
// the one it was learned from, nor written with one.
func TestShardWrongBase(t *testing.T) {
	s := newFixture(storetest.Backends()[0].Open(t, "models"))
	ctx := context.Background()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	r := rand.New(rand.NewPCG(5, 6))
	baseState := learnFrom(t, cfg, nil, r, 100)
	st := learnFrom(t, cfg, baseState, r, 10)
	base, other := epochlog.NewBase(baseState), epochlog.NewBase(learnFrom(t, cfg, baseState, r, 1))
	if err := s.WriteShard(ctx, resultOf(st, base, "worker-a"), other); err == nil || !strings.Contains(err.Error(), "base_state_sha256") {
		t.Fatalf("WriteShard with another base: %v, want an error naming base_state_sha256", err)
	}
	if keys := storetest.ListKeys(t, s.raw, ""); len(keys) != 0 {
		t.Fatalf("the store holds %v", keys)
	}
	if err := s.WriteShard(ctx, resultOf(st, base, "worker-a"), nil); err == nil {
		t.Fatal("WriteShard without a base succeeded")
	}
	if err := s.WriteShard(ctx, resultOf(st, base, "worker-a"), base); err != nil {
		t.Fatal(err)
	}
	_, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), other)
	if !errors.Is(err, epochlog.ErrOtherHistory) || !epochlog.Fatal(err) {
		t.Fatalf("Shard with another base: %v, want a fatal ErrOtherHistory", err)
	}
	d, o := base.Digest(), other.Digest()
	for _, want := range []string{"epoch 3", "kafka:clicks/0", hex.EncodeToString(d[:]), hex.EncodeToString(o[:])} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if _, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), nil); err == nil {
		t.Fatal("Shard without a base succeeded")
	}
}

// TestShardDamagedChanges: changes that no writer makes are a damaged
// log, named by its key.
func TestShardDamagedChanges(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	r := rand.New(rand.NewPCG(7, 8))
	baseState := learnFrom(t, cfg, nil, r, 100)
	st := learnFrom(t, cfg, baseState, r, 10)
	base := epochlog.NewBase(baseState)
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	weights := func(body map[string]any) map[string]any {
		return body["changes"].(map[string]any)["weights"].(map[string]any)
	}
	for name, spoil := range map[string]func(body map[string]any){
		"unknown form":      func(b map[string]any) { b["state_form"] = "delta" },
		"no form":           func(b map[string]any) { delete(b, "state_form") },
		"no changes":        func(b map[string]any) { delete(b, "changes") },
		"index beyond base": func(b map[string]any) { w := weights(b); w["index"] = u32(1 << 20); w["value"] = make([]byte, 8) },
		"index decreasing": func(b map[string]any) {
			w := weights(b)
			idx := w["index"].([]byte)
			w["index"] = slices.Concat(idx[4:8], idx[0:4], idx[8:])
		},
		"value of the base": func(b map[string]any) {
			w := weights(b)
			i := binary.LittleEndian.Uint32(w["index"].([]byte))
			w["value"] = slices.Concat(f64le(baseState.Weights[i]), w["value"].([]byte)[8:])
		},
		"short value": func(b map[string]any) { w := weights(b); w["value"] = w["value"].([]byte)[8:] },
		"weights in state": func(b map[string]any) {
			b["state"].(map[string]any)["weights"] = make([]byte, 8*len(baseState.Weights))
		},
		"variance not valid": func(b map[string]any) {
			b["changes"].(map[string]any)["variance"] = map[string]any{"index": u32(0), "value": f64le(2)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := newFixture(storetest.Backends()[0].Open(t, "models"))
			ctx := context.Background()
			if err := s.WriteShard(ctx, resultOf(st, base, "worker-a"), base); err != nil {
				t.Fatal(err)
			}
			key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, shardid.Kafka("clicks", 0))
			body := storedBody(t, s, key)
			spoil(body)
			data, err := snapshot.Seal(body)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.raw.WriteAll(ctx, key, data, nil); err != nil {
				t.Fatal(err)
			}
			_, err = s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), base)
			if !errors.Is(err, epochlog.ErrDamagedLog) || !strings.Contains(err.Error(), key) {
				t.Fatalf("Shard: %v, want ErrDamagedLog naming %s", err, key)
			}
			// The result learned again is written over it, and reads.
			if err := s.WriteShard(ctx, resultOf(st, base, "worker-b"), base); err != nil {
				t.Fatalf("WriteShard over it: %v", err)
			}
			if _, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), base); err != nil {
				t.Fatalf("the result written again does not read: %v", err)
			}
		})
	}
}

// f64le is v as a value of changes holds it.
func f64le(v float64) []byte {
	return binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
}

// TestShardWholeStateStillRead reads a result written before the changes
// form existed (testdata/whole-result.msgpack, written by the previous
// WriteShard: the whole state, no state_form), learned from the state of
// testdata/whole-result-base.msgpack; and a second writer of the same
// result, which would store changes, compares equal to it.
func TestShardWholeStateStillRead(t *testing.T) {
	ctx := context.Background()
	read := func(name string) []byte {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	snap, err := snapshot.Unmarshal(read("whole-result-base.msgpack"))
	if err != nil {
		t.Fatal(err)
	}
	base := epochlog.NewBase(snap.State)
	eachBackend(t, func(t *testing.T, s fixture) {
		key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, shardid.Kafka("clicks", 2))
		if err := s.raw.WriteAll(ctx, key, read("whole-result.msgpack"), nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 2), base)
		if err != nil {
			t.Fatal(err)
		}
		d := got.State.Digest()
		if h := hex.EncodeToString(d[:]); h != "08578d23992becfa6c6c0b7fdc272afcba2ca5e0292f3fe3a0c80872017ff8a4" ||
			got.Writer != "worker-a" || got.Messages != 10 || got.From != 40 || got.To != 50 {
			t.Fatalf("read %+v with state digest %s", got, h)
		}
		again := *got
		again.Writer, again.Created = "worker-b", time.Now()
		if err := s.another().WriteShard(ctx, &again, base); err != nil {
			t.Fatalf("the same result from a worker that writes changes: %v", err)
		}
		again.State = learnFrom(t, got.State.Config, got.State, rand.New(rand.NewPCG(1, 1)), 1)
		if err := s.another().WriteShard(ctx, &again, base); !errors.Is(err, epochlog.ErrOtherHistory) || !strings.Contains(err.Error(), "state") {
			t.Fatalf("another state: %v, want ErrOtherHistory naming the state", err)
		}
	})
}

// TestShardChangesSmaller: the stored result of a range that touched few
// of the default learner's weights is a small fraction of the whole
// state's.
func TestShardChangesSmaller(t *testing.T) {
	cfg := learner.DefaultConfig()
	r := rand.New(rand.NewPCG(9, 10))
	baseState := learnFrom(t, cfg, nil, r, 50)
	st := learnFrom(t, cfg, baseState, r, 50)
	whole, err := snapshot.EncodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	wholeBytes, err := msgpack.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	s := newFixture(storetest.Backends()[0].Open(t, "models"))
	base := epochlog.NewBase(baseState)
	if err := s.WriteShard(context.Background(), resultOf(st, base, "worker-a"), base); err != nil {
		t.Fatal(err)
	}
	key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, shardid.Kafka("clicks", 0))
	stored, err := s.raw.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored)*10 > len(wholeBytes) {
		t.Fatalf("the result takes %d bytes, the whole state %d", len(stored), len(wholeBytes))
	}
	t.Logf("%d bytes, the whole state %d", len(stored), len(wholeBytes))
}

// TestShardInvalidChangesRefused: a result whose changed coordinates hold
// a value no state may hold is not written, and the error names the
// vector and the coordinate. The result's lean state is checked without
// its vectors, so the changes are what catch it.
func TestShardInvalidChangesRefused(t *testing.T) {
	ctx := context.Background()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	for _, tc := range []struct {
		name, want string
		spoil      func(st *learner.State, i uint32)
	}{
		{"nan weight", "weights: value", func(st *learner.State, i uint32) { st.Weights[i] = math.NaN() }},
		{"infinite weight", "weights: value", func(st *learner.State, i uint32) { st.Weights[i] = math.Inf(-1) }},
		{"variance above 1", "variance: value", func(st *learner.State, i uint32) { st.Variance[i] = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFixture(storetest.Backends()[0].Open(t, "models"))
			r := rand.New(rand.NewPCG(7, 8))
			baseState := learnFrom(t, cfg, nil, r, 100)
			st, changed := learnTracked(t, cfg, baseState, r, 10)
			if changed.All || len(changed.Index) == 0 {
				t.Fatalf("the range changed %+v: want some coordinates", changed)
			}
			i := changed.Index[0]
			tc.spoil(st, i)
			res := resultOf(st, epochlog.NewBase(baseState), "worker-a")
			res.Changed = &changed
			err := s.WriteShard(ctx, res, epochlog.NewBase(baseState))
			if !errors.Is(err, snapshot.ErrInvalidState) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WriteShard: %v, want ErrInvalidState naming %q", err, tc.want)
			}
			if keys := storetest.ListKeys(t, s.raw, ""); len(keys) != 0 {
				t.Fatalf("the store holds %v", keys)
			}
		})
	}
}
