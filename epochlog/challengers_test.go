package epochlog_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// learnChallenged has m and its challengers learn n examples drawn from r.
func learnChallenged(m *learner.Model, r *rand.Rand, n int) {
	dim := m.Config().Dimension()
	for range n {
		x := learner.Example{Labeled: r.IntN(8) != 0, Label: 1}
		for range 6 {
			x.Add(uint32(r.IntN(dim)), float64(r.IntN(5)-2))
		}
		if r.IntN(2) == 0 {
			x.Label = -1
		}
		m.Learn(&x)
		for _, c := range m.Challengers() {
			c.Model.Learn(&x)
		}
	}
}

// TestShardChallengersAsChanges: a result whose state has challengers
// stores their vectors as changes against the base's challengers
// (challenger_changes) when the model's are, reads back bit for bit with
// each challenger's changed coordinates, and compares equal to the same
// result written without the coordinates hinted.
func TestShardChallengersAsChanges(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	perceptron := cfg
	perceptron.Algorithm = learner.Perceptron
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "same", Config: cfg}, {Name: "perceptron", Config: perceptron}}); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	learnChallenged(m, r, 200)
	baseState := m.State()
	ranged, err := learner.Restore(baseState)
	if err != nil {
		t.Fatal(err)
	}
	ranged.TrackChanges()
	learnChallenged(ranged, r, 20)
	changed := ranged.Changed()
	var cchanged []*learner.Coords
	for _, c := range ranged.Challengers() {
		cc := c.Model.Changed()
		cchanged = append(cchanged, &cc)
	}
	st := ranged.State()

	s := newFixture(storetest.Backends()[0].Open(t, "models"))
	ctx := context.Background()
	base := epochlog.NewBase(baseState)
	res := resultOf(st, base, "worker-a")
	res.Changed, res.ChallengersChanged = &changed, cchanged
	if err := s.WriteShard(ctx, res, base); err != nil {
		t.Fatal(err)
	}
	key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, shardid.Kafka("clicks", 0))
	body := storedBody(t, s, key)
	if cc, _ := body["challenger_changes"].([]any); body["state_form"] != "changes" || len(cc) != 2 {
		t.Fatalf("state_form %v with %d challenger_changes, want changes and 2", body["state_form"], len(cc))
	}
	got, err := s.Shard(ctx, "clicks", 3, shardid.Kafka("clicks", 0), base)
	if err != nil {
		t.Fatal(err)
	}
	if got.State.Digest() != st.Digest() || !reflect.DeepEqual(got.State, st) {
		t.Fatal("the state read differs from the one written")
	}
	if len(got.ChallengersChanged) != 2 || got.ChallengersChanged[0] == nil || len(got.ChallengersChanged[0].Index) == 0 {
		t.Fatalf("the challengers' changed coordinates read: %v", got.ChallengersChanged)
	}
	if err := s.another().WriteShard(ctx, resultOf(st, base, "worker-b"), base); err != nil {
		t.Fatalf("the same result from another worker, without hints: %v", err)
	}
}
