package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// TestStoreFencingNamesWhatDiffers: a second writer is told which of the
// fields that matter the stored generation holds otherwise.
func TestStoreFencingNamesWhatDiffers(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		if err := s.Write(ctx, storetest.Generation(t, "clicks", 3)); err != nil {
			t.Fatal(err)
		}
		second := storetest.Generation(t, "clicks", 3)
		second.Positions = map[string]int64{"kafka:examples/0": 1}
		err := s.Write(ctx, second)
		if !errors.Is(err, snapshot.ErrFenced) || !strings.Contains(err.Error(), "another positions") {
			t.Fatalf("a generation with other positions: %v, want ErrFenced naming the positions", err)
		}
	})
}

// TestStoreWriteOverAHalfWrittenGeneration: when the generation's key
// holds less than a whole snapshot (another writer's object as some
// stores serve it while it is created), the write is not fenced: it fails
// with an error to retry, and succeeds once the object reads whole.
func TestStoreWriteOverAHalfWrittenGeneration(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		snap := storetest.Generation(t, "clicks", 3)
		whole, err := snapshot.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		key := snapshot.Key(s.Prefix(), "clicks", 3)
		if err := s.Raw.WriteAll(ctx, key, whole[:len(whole)/2], nil); err != nil {
			t.Fatal(err)
		}
		err = s.Write(ctx, snap)
		if err == nil || errors.Is(err, snapshot.ErrFenced) || errors.Is(err, snapshot.ErrCorrupt) || snapshot.Fatal(err) {
			t.Fatalf("writing over half a generation: %v, want an error to retry", err)
		}
		if err := s.Raw.WriteAll(ctx, key, whole, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Write(ctx, snap); err != nil {
			t.Fatalf("writing again once the generation reads whole: %v", err)
		}
	})
}

// TestStoreWriteReplacesADamagedEpochGeneration: the mixed model of an
// epoch is a function of the epoch log, so a generation of one that is
// damaged at rest (the same bytes on two reads, failing the checksum) is
// written again; a generation of one worker's model (no epoch) never is.
func TestStoreWriteReplacesADamagedEpochGeneration(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		for _, epoch := range []uint64{0, 3} {
			snap := storetest.Generation(t, "clicks", 3)
			snap.Model = fmt.Sprintf("clicks-%d", epoch)
			snap.Epoch = epoch
			if epoch > 0 {
				snap.Scope, snap.ConfigDigest = "global", [32]byte{1}
			}
			whole, err := snapshot.Marshal(snap)
			if err != nil {
				t.Fatal(err)
			}
			damaged := bytes.Clone(whole)
			damaged[len(damaged)-1] ^= 0xff
			key := snapshot.Key(s.Prefix(), snap.Model, 3)
			if err := s.Raw.WriteAll(ctx, key, damaged, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(ctx, snap.Model, 3); !errors.Is(err, snapshot.ErrCorrupt) {
				t.Fatalf("epoch %d: loading the damaged generation: %v, want ErrCorrupt", epoch, err)
			}
			err = s.Write(ctx, snap)
			if epoch == 0 {
				if err == nil || errors.Is(err, snapshot.ErrFenced) {
					t.Fatalf("writing over one worker's damaged generation: %v, want an error to retry", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("writing over an epoch's damaged generation: %v", err)
			}
			got, err := s.Load(ctx, snap.Model, 3)
			if err != nil {
				t.Fatalf("loading the generation written again: %v", err)
			}
			if got.State.Digest() != snap.State.Digest() || got.Epoch != epoch {
				t.Fatalf("the generation written again holds epoch %d, state %x; want %d, %x", got.Epoch, got.State.Digest(), epoch, snap.State.Digest())
			}
		}
	})
}

// TestStoreWriteReplacesAnEpochGenerationHoldingAnotherKey: a generation
// of an epoch whose key holds a whole snapshot of another generation or
// model (an older generation's bytes, another model's copied over it) is
// damaged, as Load finds it, and written again; one worker's is fenced.
func TestStoreWriteReplacesAnEpochGenerationHoldingAnotherKey(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		for _, epoch := range []uint64{0, 3} {
			for _, other := range []struct {
				model string
				gen   uint64
			}{{"", 2}, {"elsewhere", 3}} {
				model := fmt.Sprintf("clicks-%d-%s", epoch, other.model)
				snap := storetest.Generation(t, model, 3)
				snap.Epoch = epoch
				if epoch > 0 {
					snap.Scope, snap.ConfigDigest = "global", [32]byte{1}
				}
				older := storetest.Generation(t, model, other.gen)
				if other.model != "" {
					older.Model = other.model
				}
				olderBytes, err := snapshot.Marshal(older)
				if err != nil {
					t.Fatal(err)
				}
				key := snapshot.Key(s.Prefix(), model, 3)
				if err := s.Raw.WriteAll(ctx, key, olderBytes, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Load(ctx, model, 3); !errors.Is(err, snapshot.ErrCorrupt) {
					t.Fatalf("%s: loading generation 3 holding generation %d of %s: %v, want ErrCorrupt", model, older.Generation, older.Model, err)
				}
				err = s.Write(ctx, snap)
				if epoch == 0 {
					if !errors.Is(err, snapshot.ErrFenced) {
						t.Fatalf("%s: writing over one worker's generation holding another: %v, want ErrFenced", model, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: writing over an epoch's generation holding generation %d of %s: %v", model, older.Generation, older.Model, err)
				}
				got, err := s.Load(ctx, model, 3)
				if err != nil {
					t.Fatalf("%s: loading the generation written again: %v", model, err)
				}
				if got.State.Digest() != snap.State.Digest() || got.Epoch != epoch {
					t.Fatalf("%s: the generation written again holds epoch %d, state %x; want %d, %x", model, got.Epoch, got.State.Digest(), epoch, snap.State.Digest())
				}
			}
		}
	})
}
