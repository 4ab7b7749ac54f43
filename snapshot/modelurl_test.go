package snapshot_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

func TestLoadURL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := snapshot.OpenStore(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	var written []*snapshot.Snapshot
	for gen := uint64(1); gen <= 3; gen++ {
		s := snap(train(t, cfg, int(gen)*50).State())
		s.Model, s.Generation = "clicks", gen
		if err := store.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
		written = append(written, s)
	}
	cases := map[string]*snapshot.Snapshot{
		"file://" + dir + "/clicks":                              written[2],
		"file://" + dir + "/clicks/":                             written[2],
		"file://" + dir + "/clicks/00000000000000000002.msgpack": written[1],
		"file://" + dir + "/clicks/00000000000000000001.msgpack": written[0],
	}
	for u, want := range cases {
		got, err := snapshot.LoadURL(ctx, u, nil)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if got.Generation != want.Generation || !reflect.DeepEqual(got.State, want.State) {
			t.Fatalf("%s: generation %d, want %d", u, got.Generation, want.Generation)
		}
	}
	for _, bad := range []string{"file://" + dir + "/views", "file://" + dir + "/clicks/00000000000000000009.msgpack", "file://" + dir + "/clicks/x.msgpack"} {
		if _, err := snapshot.LoadURL(ctx, bad, nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
