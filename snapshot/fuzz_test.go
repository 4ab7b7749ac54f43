package snapshot_test

import (
	"errors"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// fuzzSnapshot is a snapshot of a small trained model of algorithm a,
// a few hundred bytes: the fuzzer mutates small inputs fast.
func fuzzSnapshot(f *testing.F, a learner.Algorithm) *snapshot.Snapshot {
	cfg := storetest.GenerationConfig()
	cfg.Algorithm, cfg.HashBits, cfg.Window = a, 2, 4
	cfg.Budget = 4
	m, err := learner.New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 12 {
		x := learner.Example{Labeled: true, Label: 1 - 2*(i%2)}
		x.Add(uint32(i%4), float64(i%3+1))
		m.Learn(&x)
	}
	return &snapshot.Snapshot{Model: "clicks", Generation: 3, Created: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		Writer: "worker-a", Positions: map[string]int64{"kafka:examples/0": 300}, State: m.State()}
}

// FuzzUnmarshal: whatever body a snapshot's envelope holds, sealed with a
// good checksum so that the decoder reaches it, Unmarshal gives a
// snapshot or an error wrapping ErrCorrupt; a snapshot it gives is one
// Marshal writes again, and reads back to the same state.
//
// Run with -fuzzminimizetime 1s: minimizing each new input for a
// minute, the default, leaves little time to fuzz.
func FuzzUnmarshal(f *testing.F) {
	for _, snap := range []*snapshot.Snapshot{fuzzSnapshot(f, learner.AROW), fuzzSnapshot(f, learner.Kernel)} {
		data, err := snapshot.Marshal(snap)
		if err != nil {
			f.Fatal(err)
		}
		raw, err := snapshot.Unseal(data)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, raw []byte) {
		data, err := snapshot.Seal(msgpack.RawMessage(raw))
		if err != nil {
			return
		}
		s, err := snapshot.Unmarshal(data)
		if err != nil {
			if !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", err)
			}
			return
		}
		again, err := snapshot.Marshal(s)
		if err != nil {
			t.Fatalf("a snapshot Unmarshal gives is one Marshal refuses: %v", err)
		}
		back, err := snapshot.Unmarshal(again)
		if err != nil {
			t.Fatalf("a snapshot written again does not read: %v", err)
		}
		if back.State.Digest() != s.State.Digest() || back.Generation != s.Generation || back.Model != s.Model {
			t.Fatalf("written again, generation %d of %s reads as generation %d of %s, or another state", s.Generation, s.Model, back.Generation, back.Model)
		}
	})
}
