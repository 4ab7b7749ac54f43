package consumer

import (
	"context"
	"math/rand/v2"
	"testing"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// TestEpochsFirstRangesLearnInReadySpares: the spares made as the epochs
// start are the memory the first epoch's ranges and its early mix's
// target are built in, and each holds W_{e-1} to the bit there; once the
// epoch is mixed, none is handed out any more.
func TestEpochsFirstRangesLearnInReadySpares(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 10
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.SetChallengers([]learner.ChallengerConfig{{Name: "c", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var ex learner.Example
		for range 5 {
			ex.Add(uint32(rng.IntN(cfg.Dimension())), rng.NormFloat64())
		}
		ex.Labeled, ex.Label = true, 2*rng.IntN(2)-1
		m.Learn(&ex)
	}
	want := m.State().Digest()
	x := NewEpochs(EpochConfig{ReadyShards: 2}, m, 1, nil, nil, nil, zap.NewNop())
	x.makeReady(context.Background(), 3)()
	x.mu.Lock()
	ready := append([]*learner.State(nil), x.ready...)
	x.mu.Unlock()
	if len(ready) != 3 {
		t.Fatalf("%d spares made ready, want 3", len(ready))
	}
	// Each is handed out once, from the last made.
	for i := range 2 {
		r, err := x.rangeModel()
		if err != nil {
			t.Fatal(err)
		}
		sp := ready[2-i]
		if got := r.State().Digest(); got != want {
			t.Errorf("range %d: a model of %x, W_{e-1} is %x", i, got[:4], want[:4])
		}
		st := r.Release()
		if &st.Weights[0] != &sp.Weights[0] || &st.Variance[0] != &sp.Variance[0] {
			t.Errorf("range %d does not learn in the spare made ready for it", i)
		}
		if &st.Challengers[0].State.Weights[0] != &sp.Challengers[0].State.Weights[0] {
			t.Errorf("range %d's challenger does not learn in the spare made ready for it", i)
		}
	}
	target, err := x.mixTarget()
	if err != nil {
		t.Fatal(err)
	}
	if &target.Weights[0] != &ready[0].Weights[0] {
		t.Error("the early mix's target is not the spare made ready for it")
	}
	if got := target.Digest(); got != want {
		t.Errorf("the early mix's target is %x, W_{e-1} is %x", got[:4], want[:4])
	}
	x.spareStates(nil)
	x.makeReady(context.Background(), 1)()
	x.mu.Lock()
	left := len(x.ready)
	x.mu.Unlock()
	if left != 0 {
		t.Errorf("%d spares made ready after the first mix", left)
	}
}

// TestEpochsReadySparesFitTheAssignment: once the group has assigned
// this worker its shards, no more spares are made than its ranges and
// its early mix can use; before, one for every shard of the source.
func TestEpochsReadySparesFitTheAssignment(t *testing.T) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	for _, c := range []struct {
		name    string
		settled bool
		want    int
	}{{"assigned", true, 2}, {"joining", false, 5}} {
		t.Run(c.name, func(t *testing.T) {
			m, err := learner.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ecfg := EpochConfig{
				ReadyShards: 4,
				Owned:       func() []shardid.ID { return []shardid.ID{shardid.Kafka("t", 1)} },
				Settled:     func() bool { return c.settled },
			}
			x := NewEpochs(ecfg, m, 1, nil, nil, nil, zap.NewNop())
			x.makeReady(context.Background(), ecfg.ReadyShards+1)()
			x.mu.Lock()
			got := len(x.ready)
			x.mu.Unlock()
			if got != c.want {
				t.Errorf("%d spares made, want %d", got, c.want)
			}
		})
	}
}
