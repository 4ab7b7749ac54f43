package snapshot_test

import (
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// FuzzUnmarshal: whatever body a snapshot's envelope holds, sealed with a
// good checksum so that the decoder reaches it, Unmarshal gives a
// snapshot or an error wrapping ErrCorrupt; a snapshot it gives is one
// Marshal writes again, and reads back to the same state.
func FuzzUnmarshal(f *testing.F) {
	for _, g := range []uint64{1, 7} {
		data, err := snapshot.Marshal(storetest.Generation(f, "clicks", g))
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
