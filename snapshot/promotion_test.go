package snapshot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// TestResumePromoted: a model whose history ends with the promotion of a
// challenger the configuration lists under the same configuration
// resumes, with model.learner as the challenger named by the
// configuration's model name; one the history does not explain is
// refused, as any other incompatible snapshot.
func TestResumePromoted(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	arow := learner.DefaultConfig()
	arow.HashBits = 8
	perceptron := arow
	perceptron.Algorithm = learner.Perceptron
	seed := arow
	seed.HashSeed = 3
	configured := []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}, {Name: "seed", Config: seed}}
	m, err := learner.New(arow)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers(configured); err != nil {
		t.Fatal(err)
	}
	x := learner.Example{Labeled: true, Label: 1}
	x.Add(3, 1)
	m.Learn(&x)
	if err := m.Promote(learner.Promotion{Challenger: "perceptron", Replaced: "champ", Request: "r1", Examples: 1, Source: "s", Offset: 0}); err != nil {
		t.Fatal(err)
	}
	w := snapshot.NewSnapshotter(store, "champ", "test", 1, 3, zap.NewNop())
	if err := w.Snapshot(ctx, m.State(), map[string]int64{"s": 1}, nil); err != nil {
		t.Fatal(err)
	}

	r, err := snapshot.Resume(ctx, store, "champ", arow, snapshot.ResumeOptions{Writer: "test", Keep: 3, Challengers: configured})
	if err != nil {
		t.Fatalf("Resume of a promoted model: %v", err)
	}
	if r.Model.Config().Algorithm != learner.Perceptron || r.Model.State().Digest() != m.State().Digest() {
		t.Fatal("the resumed model is not the promoted one")
	}
	if len(r.Challengers) != 2 || r.Challengers[0].Name != "champ" || r.Challengers[0].Config.Algorithm != learner.AROW || r.Challengers[1].Name != "seed" {
		t.Fatalf("challengers to go on with: %+v", r.Challengers)
	}
	// Set as the worker sets them, every challenger goes on.
	if started, dropped, err := r.Model.SetChallengers(r.Challengers); err != nil || started != nil || dropped != nil {
		t.Fatalf("started %v, dropped %v, err %v", started, dropped, err)
	}

	// The file updated: the promoted configuration is model.learner.
	if _, err := snapshot.Resume(ctx, store, "champ", perceptron, snapshot.ResumeOptions{Writer: "test", Keep: 3}); err != nil {
		t.Fatalf("Resume with model.learner the promoted configuration: %v", err)
	}
	// Not explained: the promoted challenger is no longer configured.
	_, err = snapshot.Resume(ctx, store, "champ", arow, snapshot.ResumeOptions{Writer: "test", Keep: 3, Challengers: configured[1:]})
	if err == nil || !strings.Contains(err.Error(), "algorithm") {
		t.Fatalf("Resume without the promoted challenger: %v, want the incompatible setting named", err)
	}
}

// TestResumePromotedBesideATwin: a model promoted over model.learner's
// configuration, with a configured challenger of that same
// configuration, resumes under the unchanged configuration: model.learner
// goes on under the name the promotion gave it, with its comparison, and
// the twin under its own. With the twin no longer configured, it alone
// is dropped.
func TestResumePromotedBesideATwin(t *testing.T) {
	ctx := context.Background()
	store, err := snapshot.OpenStore(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	arow := learner.DefaultConfig()
	arow.HashBits = 8
	seed := arow
	seed.HashSeed = 7
	configured := []learner.ChallengerConfig{{Name: "twin", Config: arow}, {Name: "seed", Config: seed}}
	m, err := learner.New(arow)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers(configured); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		x := learner.Example{Labeled: true, Label: 1 - 2*(i%2)}
		x.Add(uint32(i%5), 1)
		m.Learn(&x)
	}
	if err := m.Promote(learner.Promotion{Challenger: "seed", Replaced: "champ", Request: "r1", Examples: 20, Source: "s", Offset: 19}); err != nil {
		t.Fatal(err)
	}
	if err := snapshot.NewSnapshotter(store, "champ", "test", 1, 3, zap.NewNop()).Snapshot(ctx, m.State(), map[string]int64{"s": 20}, nil); err != nil {
		t.Fatal(err)
	}

	r, err := snapshot.Resume(ctx, store, "champ", arow, snapshot.ResumeOptions{Writer: "test", Keep: 3, Challengers: configured})
	if err != nil {
		t.Fatalf("Resume of a promoted model under the unchanged configuration: %v", err)
	}
	if len(r.Challengers) != 2 || r.Challengers[0].Name != "twin" || r.Challengers[1].Name != "champ" {
		t.Fatalf("challengers to go on with: %+v, want twin and champ", r.Challengers)
	}
	if started, dropped, err := r.Model.SetChallengers(r.Challengers); err != nil || started != nil || dropped != nil {
		t.Fatalf("started %v, dropped %v, err %v; want every challenger to go on", started, dropped, err)
	}
	if r.Model.State().Digest() != m.State().Digest() {
		t.Fatal("the resumed model and its challengers are not the promoted ones")
	}

	// The twin no longer configured: model.learner still goes on as champ.
	r, err = snapshot.Resume(ctx, store, "champ", arow, snapshot.ResumeOptions{Writer: "test", Keep: 3, Challengers: configured[1:]})
	if err != nil {
		t.Fatal(err)
	}
	started, dropped, err := r.Model.SetChallengers(r.Challengers)
	if err != nil || started != nil || len(dropped) != 1 || dropped[0] != "twin" {
		t.Fatalf("challengers %+v: started %v, dropped %v, err %v; want twin alone dropped", r.Challengers, started, dropped, err)
	}
}

// TestResumePromotedLogsWhere: the log line of a resumed promoted model
// names its algorithm and where the promotion took effect: the
// example's position, or for a model learned in epochs the epoch, which
// has no single position.
func TestResumePromotedLogsWhere(t *testing.T) {
	arow := learner.DefaultConfig()
	arow.HashBits = 8
	perceptron := arow
	perceptron.Algorithm = learner.Perceptron
	configured := []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}}
	for _, tc := range []struct {
		name      string
		promotion learner.Promotion
		want      map[string]any
	}{
		{"after an example", learner.Promotion{Source: "kafka:clicks/0", Offset: 41},
			map[string]any{"algorithm": "perceptron", "source": "kafka:clicks/0", "offset": int64(41)}},
		{"after an epoch", learner.Promotion{Epoch: 7}, map[string]any{"algorithm": "perceptron", "epoch": uint64(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			store := snapshot.NewStore(memblob.OpenBucket(nil), "")
			defer store.Close()
			m, err := learner.New(arow)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := m.SetChallengers(configured); err != nil {
				t.Fatal(err)
			}
			x := learner.Example{Labeled: true, Label: 1}
			x.Add(3, 1)
			m.Learn(&x)
			p := tc.promotion
			p.Challenger, p.Replaced, p.Auto, p.Examples = "perceptron", "champ", true, 1
			if err := m.Promote(p); err != nil {
				t.Fatal(err)
			}
			if err := snapshot.NewSnapshotter(store, "champ", "test", 1, 3, zap.NewNop()).Snapshot(ctx, m.State(), map[string]int64{"s": 1}, nil); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			if _, err := snapshot.Resume(ctx, store, "champ", arow, snapshot.ResumeOptions{Writer: "test", Keep: 3, Challengers: configured, Log: zap.New(core)}); err != nil {
				t.Fatal(err)
			}
			lines := logs.FilterMessageSnippet("serves a promoted challenger's configuration").All()
			if len(lines) != 1 {
				t.Fatalf("want one line saying the model is promoted, got %v", logs.All())
			}
			got := lines[0].ContextMap()
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: %v, want %v (line %v)", k, got[k], v, got)
				}
			}
			for _, k := range []string{"source", "offset", "epoch"} {
				if _, ok := tc.want[k]; !ok {
					if v, logged := got[k]; logged {
						t.Errorf("%s logged as %v, want it left out (line %v)", k, v, got)
					}
				}
			}
		})
	}
}

// TestPromotionRequest: a request written is read back; a model without
// one has none; a newer request replaces it; Applied finds its id in a
// history.
func TestPromotionRequest(t *testing.T) {
	ctx := context.Background()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "p")
	defer store.Close()
	if r, err := store.PromotionRequest(ctx, "champ"); r != nil || err != nil {
		t.Fatalf("no request: %v, %v", r, err)
	}
	first := snapshot.NewPromotionRequest("perceptron", time.Now())
	second := snapshot.NewPromotionRequest("seed", time.Now())
	if first.ID == second.ID {
		t.Fatal("two requests of one id")
	}
	for _, want := range []snapshot.PromotionRequest{first, second} {
		if err := store.RequestPromotion(ctx, "champ", want); err != nil {
			t.Fatal(err)
		}
		got, err := store.PromotionRequest(ctx, "champ")
		if err != nil || got == nil || got.ID != want.ID || got.Challenger != want.Challenger || !got.Requested.Equal(want.Requested) {
			t.Fatalf("read %+v, %v; want %+v", got, err, want)
		}
	}
	if !second.Applied([]learner.Promotion{{Request: first.ID}, {Request: second.ID}}) || second.Applied([]learner.Promotion{{Request: first.ID}}) {
		t.Fatal("Applied")
	}
	if gens, err := store.Generations(ctx, "champ"); err != nil || len(gens) != 0 {
		t.Fatalf("the request is listed as generations %v (%v)", gens, err)
	}
}

// TestPromotionEpochRoundTrip: the epoch of a promotion made between two
// epochs is written, read back and in the digest; a history without one
// keeps the digest it had before epochs were recorded.
func TestPromotionEpochRoundTrip(t *testing.T) {
	arow := learner.DefaultConfig()
	arow.HashBits = 8
	perceptron := arow
	perceptron.Algorithm = learner.Perceptron
	promoted := func(epoch uint64) *learner.State {
		m, err := learner.New(arow)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}}); err != nil {
			t.Fatal(err)
		}
		if err := m.Promote(learner.Promotion{Challenger: "perceptron", Replaced: "champ", Auto: true, Examples: 9, Epoch: epoch}); err != nil {
			t.Fatal(err)
		}
		return m.State()
	}
	none, e3, e4 := promoted(0), promoted(3), promoted(4)
	if none.Digest() == e3.Digest() || e3.Digest() == e4.Digest() {
		t.Fatal("the digest does not cover the promotion's epoch")
	}
	snap := &snapshot.Snapshot{Model: "champ", Generation: 3, Created: time.Now().UTC(), Writer: "test", Positions: map[string]int64{}, State: e3}
	data, err := snapshot.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	back, err := snapshot.Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if ps := back.State.Promotions; len(ps) != 1 || ps[0].Epoch != 3 || back.State.Digest() != e3.Digest() {
		t.Fatalf("read back %+v, digest %x; want epoch 3 and %x", ps, back.State.Digest(), e3.Digest())
	}
	if sum := snapshot.Summarize(back, 0); len(sum.Promotions) != 1 || sum.Promotions[0].Epoch != 3 {
		t.Fatalf("summary %+v", sum.Promotions)
	}
}
