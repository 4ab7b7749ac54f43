package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// text is a fmt.Stringer, for ResumeOptions.Start.
type text string

func (s text) String() string { return string(s) }

// TestResume: which model a worker continues from the store, and from
// which generation on it writes.
func TestResume(t *testing.T) {
	cases := []struct {
		name    string
		gens    []uint64 // valid generations in the store
		corrupt []uint64 // generations whose keys hold garbage
		cfg     func() learner.Config
		reset   bool

		generation uint64 // the generation resumed; 0 for a new model
		next       uint64 // the generation the snapshotter writes first
		err        string // a substring of the error; "" for none
		field      string // the key the error names
		logged     string // a substring of a message logged
	}{
		{name: "new model", cfg: storetest.GenerationConfig, next: 1, logged: "no snapshot: a new model"},
		{name: "newest valid generation", gens: []uint64{1, 2, 3}, cfg: storetest.GenerationConfig, generation: 3, next: 4, logged: "resuming from snapshot"},
		{name: "corrupt newest skipped", gens: []uint64{1, 2}, corrupt: []uint64{3, 4}, cfg: storetest.GenerationConfig, generation: 2, next: 5, logged: "skipping unreadable snapshot"},
		{name: "only corrupt keys", corrupt: []uint64{1, 2}, cfg: storetest.GenerationConfig, next: 3, logged: "no snapshot: a new model"},
		{name: "incompatible refused", gens: []uint64{1, 2}, cfg: learner.DefaultConfig, field: "hash_bits",
			err: "model clicks generation 2: snapshot is incompatible with the configuration: hash_bits is 6 in the snapshot but 18 in the configuration " +
				"(to continue it, set model.learner.hash_bits explicitly to its value in the snapshot, 6; or set snapshot.reset to start a new model (over one partition; over several, give it its own model.name))"},
		{name: "another algorithm refused", gens: []uint64{1, 2}, cfg: perceptronGenerationConfig, field: "algorithm",
			err: "algorithm is arow in the snapshot but perceptron in the configuration (to continue it, set model.learner.algorithm explicitly to its value in the snapshot, arow;"},
		{name: "another drift threshold refused", gens: []uint64{1, 2}, cfg: thresholdGenerationConfig, field: "drift.threshold",
			err: "drift.threshold is 100 in the snapshot but 50 in the configuration (to continue it, set model.drift.threshold explicitly to its value in the snapshot, 100;"},
		{name: "incompatible reset", gens: []uint64{1, 2}, corrupt: []uint64{3}, cfg: learner.DefaultConfig, reset: true, next: 4, logged: "starting a new model (snapshot.reset)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			bucket := memblob.OpenBucket(nil)
			store := snapshot.NewStore(bucket, "models")
			defer store.Close()
			storetest.Write(t, store, "clicks", tc.gens...)
			for _, g := range tc.corrupt {
				if err := bucket.WriteAll(ctx, snapshot.Key("models", "clicks", g), []byte("garbage"), nil); err != nil {
					t.Fatal(err)
				}
			}
			core, logs := observer.New(zapcore.InfoLevel)
			r, err := snapshot.Resume(ctx, store, "clicks", tc.cfg(), snapshot.ResumeOptions{
				Writer: "worker-a", Keep: 10, Reset: tc.reset, Start: text("earliest"), Log: zap.New(core),
			})
			if tc.err != "" {
				var ie *snapshot.IncompatibleError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &ie) || ie.Field != tc.field {
					t.Fatalf("err = %v, want an *IncompatibleError naming %s: %s", err, tc.field, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if logs.FilterMessageSnippet(tc.logged).Len() == 0 {
				t.Errorf("nothing logged says %q: %v", tc.logged, logs.All())
			}
			if r.Generation != tc.generation {
				t.Errorf("resumed generation %d, want %d", r.Generation, tc.generation)
			}
			if tc.generation == 0 {
				if r.Positions != nil || !r.Created.IsZero() || r.Model.Metrics().Examples != 0 || !reflect.DeepEqual(r.Model.Config(), tc.cfg()) {
					t.Errorf("not a new model of the configuration: %+v", r)
				}
			} else {
				want := storetest.Generation(t, "clicks", tc.generation)
				if !reflect.DeepEqual(r.Model.State(), want.State) || !reflect.DeepEqual(r.Positions, want.Positions) {
					t.Errorf("the model or its positions are not generation %d's", tc.generation)
				}
				if s, _ := store.Load(ctx, "clicks", tc.generation); !r.Created.Equal(s.Created) {
					t.Errorf("created %v, want the snapshot's, %v", r.Created, s.Created)
				}
			}

			// The snapshotter writes after every key, unreadable ones too.
			if err := r.Snapshotter.Snapshot(ctx, r.Model.State(), map[string]int64{"kafka:examples/0": 1}, nil); err != nil {
				t.Fatal(err)
			}
			gens, err := store.Generations(ctx, "clicks")
			if err != nil {
				t.Fatal(err)
			}
			if gens[len(gens)-1] != tc.next {
				t.Errorf("generations %v after a snapshot, want %d written", gens, tc.next)
			}
			if s, err := store.Load(ctx, "clicks", tc.next); err != nil || s.Writer != "worker-a" {
				t.Errorf("the snapshot written: %+v, %v", s, err)
			}
		})
	}
}

// TestResumeAfterTheLastGeneration: a key at the last generation a key
// can number, garbage or not, leaves no generation to write after it:
// the snapshotter refuses, naming the key, with an error no retry mends,
// where it tried to write generation 0 for ever without naming it.
func TestResumeAfterTheLastGeneration(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "models")
	defer store.Close()
	storetest.Write(t, store, "clicks", 1, 2)
	key := snapshot.Key("models", "clicks", math.MaxUint64)
	if err := bucket.WriteAll(ctx, key, []byte("garbage"), nil); err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.Resume(ctx, store, "clicks", storetest.GenerationConfig(), snapshot.ResumeOptions{Writer: "worker-a", Keep: 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Generation != 2 {
		t.Fatalf("resumed generation %d, want 2, the newest readable", r.Generation)
	}
	err = r.Snapshotter.Snapshot(ctx, r.Model.State(), map[string]int64{"kafka:examples/0": 1}, nil)
	for _, want := range []string{"model clicks: ", key, "no generation can follow it"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want one saying %q", err, want)
		}
	}
	if !snapshot.Fatal(err) {
		t.Fatalf("snapshot.Fatal(%v) is false: the worker would try again for ever", err)
	}
}

// TestResumeWithoutStore: no store is allowed, with a warning that the
// model is lost at every stop, and nothing to write snapshots with.
func TestResumeWithoutStore(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	r, err := snapshot.Resume(context.Background(), nil, "clicks", storetest.GenerationConfig(), snapshot.ResumeOptions{Start: text("offset:5"), Log: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Snapshotter != nil || r.Model == nil || r.Positions != nil {
		t.Fatalf("resumed %+v, want a new model and no snapshotter", r)
	}
	warned := logs.FilterMessageSnippet("no snapshot.url: the model is not saved").All()
	if len(warned) != 1 || warned[0].Level != zapcore.WarnLevel || warned[0].ContextMap()["start"] != "offset:5" {
		t.Fatalf("want one warning naming the start, got %v", logs.All())
	}
}

// TestResumeBadConfiguration: a configuration no model can have is named
// as model.learner, store or not.
func TestResumeBadConfiguration(t *testing.T) {
	cfg := storetest.GenerationConfig()
	cfg.HashBits = 0
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	for _, s := range []*snapshot.Store{nil, store} {
		if _, err := snapshot.Resume(context.Background(), s, "clicks", cfg, snapshot.ResumeOptions{Writer: "worker-a", Keep: 1}); err == nil || !strings.HasPrefix(err.Error(), "model.learner: ") {
			t.Errorf("store %v: err = %v, want one naming model.learner", s != nil, err)
		}
	}
}

// TestResumeNeedsWriter: with a store, the caller names the writer;
// Resume does not default it (config.Config.SnapshotWriter does).
func TestResumeNeedsWriter(t *testing.T) {
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	_, err := snapshot.Resume(context.Background(), store, "clicks", storetest.GenerationConfig(), snapshot.ResumeOptions{Keep: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "snapshot.writer: ") {
		t.Fatalf("err = %v, want one naming snapshot.writer", err)
	}
}

// TestFatal: the snapshot errors no retry mends (epochlog.TestFatal adds
// the epoch log's).
func TestFatal(t *testing.T) {
	for _, tc := range []struct {
		err   error
		fatal bool
	}{
		{nil, false},
		{errors.New("store unreachable"), false},
		{snapshot.ErrFenced, true},
		{errors.Join(errors.New("wrapped"), snapshot.ErrInvalidState), true},
		{fmt.Errorf("epoch log: %w", snapshot.ErrNotFound), false},
		{snapshot.ErrCorrupt, false},
	} {
		if got := snapshot.Fatal(tc.err); got != tc.fatal {
			t.Errorf("Fatal(%v) = %v, want %v", tc.err, got, tc.fatal)
		}
	}
}

// perceptronGenerationConfig is storetest.GenerationConfig but for the
// algorithm: the configuration of a worker that names another algorithm
// than the one its model's snapshots were learned with.
func perceptronGenerationConfig() learner.Config {
	cfg := storetest.GenerationConfig()
	cfg.Algorithm = learner.Perceptron
	return cfg
}

// thresholdGenerationConfig is storetest.GenerationConfig with another
// drift threshold: a key of the group model.drift.
func thresholdGenerationConfig() learner.Config {
	cfg := storetest.GenerationConfig()
	cfg.Drift.Threshold = 50
	return cfg
}
