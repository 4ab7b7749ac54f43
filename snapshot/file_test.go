package snapshot_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestLoadFindsSnapshots: Load takes a model's snapshots by the directory
// of a file store (relative or absolute), by a file URL (file:///abs,
// file://./rel, file://rel, file:rel) or by one generation's file, such as
// WriteFile writes; and when nothing is there, the error names the
// absolute place searched and the URL of the models found next to it.
func TestLoadFindsSnapshots(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, d := range []string{"clicks", "empty"} {
		if err := os.MkdirAll(filepath.Join("data", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	// Generation 1 by WriteFile, then generation 2 through the store.
	s := snap(train(t, cfg, 100).State())
	s.Model, s.Generation = "clicks", 1
	if err := snapshot.WriteFile(filepath.Join("data", "clicks", "00000000000000000001.msgpack"), s); err != nil {
		t.Fatal(err)
	}
	s.Generation = 2
	store, err := snapshot.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Write(ctx, s); err != nil {
		t.Fatal(err)
	}
	store.Close()
	abs := filepath.ToSlash(dir)

	found := map[string]uint64{
		"data/clicks":                                     2,
		"data/clicks/":                                    2,
		"./data/clicks":                                   2,
		dir + "/data/clicks":                              2,
		"file://data/clicks":                              2,
		"file://./data/clicks":                            2,
		"file:data/clicks":                                2,
		"file://" + abs + "/data/clicks":                  2,
		"file://localhost" + abs + "/data/clicks":         2,
		"file://" + abs + "/data/clicks?create_dir=1":     2,
		"data/clicks/00000000000000000001.msgpack":        1,
		"data/clicks/1.msgpack":                           1,
		"file://data/clicks/00000000000000000001.msgpack": 1,
		"file://" + abs + "/data/clicks/1.msgpack":        1,
	}
	for where, gen := range found {
		got, err := snapshot.Load(ctx, where)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		if got.Model != "clicks" || got.Generation != gen || !reflect.DeepEqual(got.State, s.State) {
			t.Errorf("%s: model %q generation %d, want clicks generation %d and its state", where, got.Model, got.Generation, gen)
		}
	}

	clicksURL := "file://" + abs + "/data/clicks"
	missing := []struct {
		where string
		want  []string
	}{
		{"data", []string{abs + "/data is a snapshot store, not one model's directory", clicksURL}},
		{"file://data", []string{abs + "/data is a snapshot store", clicksURL}},
		{"data/views", []string{"no model file or snapshot directory " + abs + "/data/views", clicksURL}},
		{"data/empty", []string{"no snapshot in " + abs + "/data/empty", clicksURL}},
		{"file://elsewhere/clicks", []string{abs + "/elsewhere/clicks", "read as elsewhere/clicks, relative to the current directory", "file:///path"}},
		{"data/clicks/9.msgpack", []string{"generation 9 in " + abs + "/data/clicks", "no snapshot"}},
		// The store's URL as a config has it, with a query.
		{"file://./data?create_dir=1", []string{"no model in " + abs + "/data", abs + "/data is a snapshot store", clicksURL}},
		{"file://" + abs + "/data/views?create_dir=1", []string{"no model in " + abs + "/data/views", clicksURL}},
	}
	for _, c := range missing {
		_, err := snapshot.Load(ctx, c.where)
		if err == nil {
			t.Errorf("%s: no error", c.where)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\ndoes not say %q", c.where, err, w)
			}
		}
	}
	if _, err := snapshot.Load(ctx, "data/views"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing model: %v, want os.ErrNotExist", err)
	}
}

// TestLoadCopiedModelDirectory: a model's directory copied under another
// name holds snapshots of the model it was copied from, which Load of the
// copy refuses; the error says so and what to do, where it said that
// every generation there was damaged, and no warning calls one damaged.
func TestLoadCopiedModelDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	s := snap(train(t, cfg, 100).State())
	s.Model, s.Generation = "clicks", 2
	copied := filepath.Join(dir, "clicks-backup")
	if err := os.MkdirAll(copied, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.WriteFile(filepath.Join(copied, "00000000000000000002.msgpack"), s); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	_, err := snapshot.LoadLogged(ctx, copied, zap.New(core))
	if err == nil {
		t.Fatal("Load of a copied model directory: no error")
	}
	for _, e := range logs.All() {
		t.Errorf("Load of a copied model directory warned %q (%v): its snapshots are not damaged", e.Message, e.ContextMap()["error"])
	}
	for _, w := range []string{copied + " holds snapshots of model clicks", "rename it clicks", filepath.Join(copied, "00000000000000000002.msgpack")} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load of a copied model directory: %v\ndoes not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "damaged") {
		t.Errorf("Load of a copied model directory: %v\ncalls an undamaged snapshot damaged", err)
	}
}

// TestWriteFileReplaces: WriteFile over an existing file replaces it
// whole and leaves no temporary file beside it; into a missing directory
// it fails.
func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.model")
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	for gen := uint64(1); gen <= 2; gen++ {
		s := snap(train(t, cfg, int(gen)*50).State())
		s.Model, s.Generation = "clicks", gen
		if err := snapshot.WriteFile(path, s); err != nil {
			t.Fatal(err)
		}
		got, err := snapshot.Load(context.Background(), path)
		if err != nil || got.Generation != gen || !reflect.DeepEqual(got.State, s.State) {
			t.Fatalf("generation %d: read back %v, %v", gen, got, err)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Fatalf("the directory holds %v (%v), want the model file alone", entries, err)
	}
	if err := snapshot.WriteFile(filepath.Join(dir, "no", "m.model"), snap(train(t, cfg, 10).State())); err == nil {
		t.Error("a missing directory: no error")
	}
}

// TestLoadPartitionScopeModel: a model of partition scope has no
// generation of its own, only a chain per partition; Load given the
// model's directory or URL says so and names each partition's model URL,
// which Load then reads.
func TestLoadPartitionScopeModel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "file://" + filepath.ToSlash(dir)
	store, err := snapshot.OpenStore(ctx, storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	for _, name := range []string{"kafka:clicks/0", "kafka:clicks/1"} {
		id, err := shardid.Parse(name)
		if err != nil {
			t.Fatal(err)
		}
		chain, err := store.PartitionChain("per", id)
		if err != nil {
			t.Fatal(err)
		}
		s := snap(train(t, cfg, 50).State())
		s.Model, s.Generation = "per", 1
		if err := chain.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	first := storeURL + "/per/partition/kafka.clicks.0/per"
	for _, where := range []string{filepath.Join(dir, "per"), storeURL + "/per", storeURL + "/per?create_dir=1"} {
		_, err := snapshot.Load(ctx, where)
		if !errors.Is(err, snapshot.ErrNotFound) || !strings.Contains(err.Error(), "partition scope") ||
			!strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), storeURL+"/per/partition/kafka.clicks.1/per") {
			t.Errorf("Load(%s): %v, want an error naming the partitions' model URLs", where, err)
		}
	}
	if s, err := snapshot.Load(ctx, first); err != nil || s.Model != "per" || s.Generation != 1 {
		t.Errorf("Load(%s): %v, want generation 1 of per", first, err)
	}
}
