package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestInspectAndPredictFindSnapshots: inspect and predict take a model
// where snapshot.Load finds it (its test has every form): here a model's
// directory in a file store, a file URL of it and one generation's file;
// and they report Load's error when nothing is there.
func TestInspectAndPredictFindSnapshots(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	genFile(t, dir, "train.jsonl", "-examples", "500", "-seed", "2")
	genFile(t, dir, "test.jsonl", "-examples", "20", "-seed", "3")
	twoGenerations(t, dir)

	found := map[string]uint64{
		"data/clicks":           2,
		"file://./data/clicks":  2,
		"data/clicks/1.msgpack": 1,
	}
	for where, gen := range found {
		var sum snapshot.Summary
		out, stderr, err := runCmd(t, "", "inspect", "-top", "0", where)
		if err != nil {
			t.Errorf("inspect %s: %v\n%s", where, err, stderr)
			continue
		}
		if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Model != "clicks" || sum.Generation != gen {
			t.Errorf("inspect %s: model %q generation %d (%v), want clicks generation %d", where, sum.Model, sum.Generation, err, gen)
		}
		out, stderr, err = runCmd(t, "", "predict", "-model", where, "-input", "test.jsonl")
		if err != nil || strings.Count(out, "\n") != 20 || !strings.Contains(out, `"model":{"name":"clicks"`) {
			t.Errorf("predict -model %s: %v\n%s%s", where, err, stderr, out)
		}
	}

	want := filepath.ToSlash(dir) + "/data is a snapshot store, not one model's directory"
	for _, args := range [][]string{{"inspect", "data"}, {"predict", "-model", "data", "-input", "test.jsonl"}} {
		if _, _, err := runCmd(t, "", args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	if _, _, err := runCmd(t, "", "inspect", "data/views"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing model: %v, want os.ErrNotExist", err)
	}
}

// TestInspectStateSHA256: inspect prints the learner's digest of the
// state, and the same training in another store, under another name and
// generation, gives the same state_sha256.
func TestInspectStateSHA256(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "train.jsonl", "-examples", "500", "-seed", "2")
	other := genFile(t, dir, "other.jsonl", "-examples", "500", "-seed", "3")
	inspect := func(where string) snapshot.Summary {
		t.Helper()
		var sum snapshot.Summary
		if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "-top", "0", where)), &sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}

	first := filepath.Join(dir, "a.model")
	mustRun(t, "", "train", "-input", data, "-name", "clicks", "-hash-bits", "10", "-out", first)
	a := inspect(first)
	if want := readModel(t, first).State.StateSHA256(); a.StateSHA256 != want || len(want) != 64 {
		t.Fatalf("inspect says state_sha256 %q, the learner %q", a.StateSHA256, want)
	}

	// The same run under another name, moved to generation 7 of another
	// store.
	second := filepath.Join(dir, "b.model")
	mustRun(t, "", "train", "-input", data, "-name", "views", "-hash-bits", "10", "-out", second)
	s := readModel(t, second)
	s.Generation = 7
	if err := os.MkdirAll(filepath.Join(dir, "store", "views"), 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := snapshot.OpenStore(context.Background(), "file://"+filepath.ToSlash(filepath.Join(dir, "store")))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	b := inspect("file://" + filepath.ToSlash(filepath.Join(dir, "store", "views")))
	if b.Model != "views" || b.Generation != 7 || a.Model != "clicks" {
		t.Fatalf("inspected %s generation %d and %s generation %d", a.Model, a.Generation, b.Model, b.Generation)
	}
	if a.StateSHA256 != b.StateSHA256 {
		t.Fatalf("identical training runs have state_sha256 %s and %s", a.StateSHA256, b.StateSHA256)
	}

	third := filepath.Join(dir, "c.model")
	mustRun(t, "", "train", "-input", other, "-name", "clicks", "-hash-bits", "10", "-out", third)
	if c := inspect(third); c.StateSHA256 == a.StateSHA256 {
		t.Fatal("training on other examples gave the same state_sha256")
	}
}

// TestInspectNamesAnEpochLogObject: inspect given a boundary of an epoch
// log says what the file is and what inspect reads, not that it is
// damaged.
func TestInspectNamesAnEpochLogObject(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store, err := snapshot.OpenStore(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := &epochlog.Boundary{
		Model: "clicks", Epoch: 1,
		ConfigDigest:    sha256.Sum256([]byte("history")),
		BaseStateSHA256: sha256.Sum256([]byte("base")),
		Shards:          []epochlog.Range{{Shard: shardid.Kafka("clicks", 0), From: 0, To: 100}},
		Cut:             epochlog.Cut{Writer: "w", Created: time.Now().UTC(), Reason: epochlog.CutExamples, EpochExamples: 100, Interval: time.Second},
	}
	if _, _, err := epochlog.New(store).CreateBoundary(ctx, b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.FromSlash(epochlog.BoundaryKey("", "clicks", 1)))
	_, _, err = runCmd(t, "", "inspect", path)
	if err == nil || !strings.Contains(err.Error(), "is a boundary of an epoch log, not a generation") {
		t.Fatalf("inspect of a boundary: %v, want an error that names it a boundary", err)
	}
}

// TestInspectAndPredictWarnOfDamagedNewest: a model's newest generation
// is damaged; inspect and predict read the one before it, as the worker
// resumes from it, and say so on standard error, naming the generation
// skipped, rather than show an older generation as the newest.
func TestInspectAndPredictWarnOfDamagedNewest(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	genFile(t, dir, "train.jsonl", "-examples", "300", "-seed", "2")
	genFile(t, dir, "test.jsonl", "-examples", "5", "-seed", "3")
	model := filepath.Join("data", "clicks")
	twoGenerations(t, dir)
	second := filepath.Join(model, "00000000000000000002.msgpack")
	data, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(second, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"inspect", "-top", "0", "data/clicks"},
		{"inspect", "-top", "0", "file://" + filepath.ToSlash(filepath.Join(dir, model))},
		{"predict", "-model", "data/clicks", "-input", "test.jsonl"},
	} {
		out, stderr, err := runCmd(t, "", args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, stderr)
			continue
		}
		if args[0] == "inspect" {
			var sum snapshot.Summary
			if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Generation != 1 {
				t.Errorf("%s: generation %d (%v), want 1, the newest undamaged", strings.Join(args, " "), sum.Generation, err)
			}
		}
		if !strings.Contains(stderr, "skipping unreadable snapshot") || !strings.Contains(stderr, "00000000000000000002.msgpack") {
			t.Errorf("%s: standard error %q does not name the damaged generation 2 it skipped", strings.Join(args, " "), stderr)
		}
	}
}

// twoGenerations stores two generations of model clicks under dir/data,
// learned from dir/train.jsonl: generation 1 as train writes it, then
// generation 2 through the store.
func twoGenerations(t *testing.T, dir string) {
	t.Helper()
	model := filepath.Join(dir, "data", "clicks")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(model, "00000000000000000001.msgpack")
	mustRun(t, "", "train", "-input", filepath.Join(dir, "train.jsonl"), "-name", "clicks", "-out", first)
	s := readModel(t, first)
	s.Generation = 2
	store, err := snapshot.OpenStore(context.Background(), "file://"+filepath.ToSlash(filepath.Join(dir, "data")))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	store.Close()
}

// TestInspectSaysTheFilesFormat: inspect prints the format a file was
// written in, not the one this hyperplane writes: an operator checking
// which generations an older worker wrote reads it there.
func TestInspectSaysTheFilesFormat(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "train.jsonl", "-examples", "200", "-seed", "2")
	fresh := filepath.Join(dir, "fresh.model")
	mustRun(t, "", "train", "-input", data, "-name", "clicks", "-hash-bits", "10", "-out", fresh)
	for path, want := range map[string]int{
		"../../snapshot/testdata/averaged-format1.msgpack": 1,
		"../../snapshot/testdata/averaged-format2.msgpack": 2,
		fresh: snapshot.Format,
	} {
		var sum snapshot.Summary
		if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "-top", "0", path)), &sum); err != nil {
			t.Fatalf("inspect %s: %v", path, err)
		}
		if sum.Format != want {
			t.Errorf("inspect %s: format %d, want %d", path, sum.Format, want)
		}
	}
}

// TestInspectPrintsEpochKeys: a generation of an epoch log is shown with
// its epoch, the ranges its boundary recorded and its digests, which an
// operator auditing the log reads beside the boundaries; a model learned
// by one worker alone shows none of them.
func TestInspectPrintsEpochKeys(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "train.jsonl", "-examples", "200", "-seed", "2")
	alone := filepath.Join(dir, "alone.model")
	mustRun(t, "", "train", "-input", data, "-name", "clicks", "-hash-bits", "10", "-out", alone)
	out := mustRun(t, "", "inspect", "-top", "0", alone)
	for _, key := range []string{`"epoch"`, `"boundary"`, `"base_sha256"`, `"config_sha256"`, `"boundary_sha256"`} {
		if strings.Contains(out, key) {
			t.Fatalf("inspect of a model learned alone prints %s:\n%s", key, out)
		}
	}

	s := readModel(t, alone)
	s.Generation, s.Epoch = 3, 3
	s.ConfigDigest = sha256.Sum256([]byte("history"))
	s.BaseDigest = sha256.Sum256([]byte("base"))
	s.BoundarySHA256 = sha256.Sum256([]byte("boundary"))
	s.Boundary = []snapshot.Range{
		{Shard: shardid.Kafka("clicks", 0), From: 100, To: 250, Labels: &snapshot.LabelsRange{From: 7, To: 9}},
		{Shard: shardid.Kafka("clicks", 1), From: 90, To: 240},
	}
	store, err := snapshot.OpenStore(context.Background(), "file://"+filepath.ToSlash(filepath.Join(dir, "store"))+"?create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	var sum snapshot.Summary
	if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "-top", "0", "file://"+filepath.ToSlash(filepath.Join(dir, "store", "clicks")))), &sum); err != nil {
		t.Fatal(err)
	}
	want := []snapshot.RangeSummary{
		{Shard: "kafka:clicks/0", From: 100, To: 250, Labels: &snapshot.LabelsRange{From: 7, To: 9}},
		{Shard: "kafka:clicks/1", From: 90, To: 240},
	}
	if sum.Epoch != 3 || !reflect.DeepEqual(sum.Boundary, want) {
		t.Fatalf("inspect: epoch %d, boundary %+v; want epoch 3, boundary %+v", sum.Epoch, sum.Boundary, want)
	}
	for key, got := range map[string]struct {
		got  string
		want [32]byte
	}{"config_sha256": {sum.ConfigSHA256, s.ConfigDigest}, "base_sha256": {sum.BaseSHA256, s.BaseDigest}, "boundary_sha256": {sum.BoundarySHA256, s.BoundarySHA256}} {
		if got.got != hex.EncodeToString(got.want[:]) {
			t.Errorf("inspect: %s %q, want %x", key, got.got, got.want)
		}
	}
}
