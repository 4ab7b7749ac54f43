package learner_test

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// epochCut is one call of an epoch schedule in a simulation: the mixed
// model's counts, the examples the shards had learned and the limit.
type epochCut struct {
	counts  modelCounts
	learned int // the shards' examples learned before the epoch
	left    []int
	limit   int
}

// recordSchedule wraps sched, appending every cut to *cuts and checking
// that countsOf reads what the worker reads of the mixed model through
// learner.Restore: Counts and SinceRestart.
func recordSchedule(t *testing.T, sched epochSchedule, lens []int, cuts *[]epochCut) epochSchedule {
	return func(e int, w *learner.State, left []int) int {
		m, err := learner.Restore(w)
		if err != nil {
			t.Fatalf("epoch %d: Restore: %v", e, err)
		}
		c := countsOf(w)
		since, restarted := m.SinceRestart()
		if got := m.Counts(); got.Examples != c.examples || got.Labeled != c.labeled || since != c.since || restarted != c.restarted {
			t.Fatalf("epoch %d: countsOf = %+v, the model counts %d examples, %d labeled, %d since a restart (%v)", e, c, got.Examples, got.Labeled, since, restarted)
		}
		learned := 0
		for s, l := range left {
			learned += lens[s] - l
		}
		limit := sched(e, w, left)
		*cuts = append(*cuts, epochCut{counts: c, learned: learned, left: append([]int(nil), left...), limit: limit})
		return limit
	}
}

// positionLimit is the schedule computed from the shards' positions
// alone: the model's examples are those the shards learned, as they are
// while no drift restarted it and every example is labeled.
func positionLimit(learned int, left []int, growth, epochExamples, every int) int {
	limit := min(epochExamples, max(minEpochExamples, learned/len(left)/growth))
	if every > 0 {
		n := 0
		for _, l := range left {
			if l > 0 {
				n++
			}
		}
		n = max(n, 1)
		if share := max((every-learned%every+n-1)/n, minSnapshotShare); share < limit {
			limit = share
		}
	}
	return limit
}

// TestDefaultEpochsFollowTheModel checks that the simulation's schedule
// at the defaults is the worker's epochLimit, a function of the mixed
// model: on a stream of 120,000 examples whose concept changes at 40,000,
// in 4 partitions (growth 16, epoch_examples 100,000, snapshot.every
// 20,000):
//   - with the detector off, no epoch restarts the model and every limit
//     is the one the shards' positions give;
//   - with it on, the limits are the positions' until a drift restarts
//     the mixed model; the next epoch falls back from the larger limit
//     before it to minEpochExamples (or 1/restartShrink of the limit the
//     whole history gives, when that is more), and the epochs grow again
//     from there,
//     so that the last full epoch's limit is below the positions'.
func TestDefaultEpochsFollowTheModel(t *testing.T) {
	const n, at, shards, growth, epochEx, every = 120_000, 40_000, 4, 16, 100_000, 20_000
	cfg := perceptronConfig()
	o := synth.DefaultOptions()
	o.DriftAt = at
	s := genStream(o, n, cfg)
	split := s.kafkaShards(shards)
	lens := make([]int, len(split))
	for i, idx := range split {
		lens[i] = len(idx)
	}
	mix := func(base *learner.State, states []*learner.State) (*learner.State, error) {
		return learner.MixWithRule(learner.MixAuto.For(cfg.Algorithm), base, states, learner.MixWeightsOf(learner.MixExamples, base, states))
	}

	t.Run("detector off", func(t *testing.T) {
		off := cfg
		off.Drift.Enabled = false
		var cuts []epochCut
		r := simulateSchedule(t, off, s.xs, split, recordSchedule(t, defaultEpochs(growth, epochEx, every), lens, &cuts), mix, cutBacklog)
		if r.restarts != 0 {
			t.Fatalf("%d restarts with the detector off", r.restarts)
		}
		for e, c := range cuts {
			if want := positionLimit(c.learned, c.left, growth, epochEx, every); c.limit != want {
				t.Errorf("epoch %d: limit %d, the positions give %d", e+1, c.limit, want)
			}
		}
	})

	t.Run("detector on", func(t *testing.T) {
		var cuts []epochCut
		r := simulateSchedule(t, cfg, s.xs, split, recordSchedule(t, defaultEpochs(growth, epochEx, every), lens, &cuts), mix, cutBacklog)
		if r.restarts == 0 {
			t.Fatalf("no drift restarted the mixed model over %d epochs", r.epochs)
		}
		first := -1 // the first epoch that learns from a restarted model
		for e, c := range cuts {
			if c.counts.restarted {
				first = e
				break
			}
			if want := positionLimit(c.learned, c.left, growth, epochEx, every); c.limit != want {
				t.Errorf("epoch %d, before any restart: limit %d, the positions give %d", e+1, c.limit, want)
			}
		}
		if first < 1 {
			t.Fatalf("the first restart is seen at cut %d", first)
		}
		before, after := cuts[first-1].limit, cuts[first].limit
		t.Logf("%d restarts; the first after %d examples learned: limit %d, then %d", r.restarts, cuts[first].learned, before, after)
		if floor := max(minEpochExamples, int(cuts[first].counts.examples)/shards/growth/restartShrink); before <= minEpochExamples || after != floor {
			t.Errorf("at the first restart the limit went from %d to %d, want from more than %d to %d", before, after, minEpochExamples, floor)
		}
		// An epoch after the restart whose limit grew past the floor and
		// stays below the positions' (where the snapshot's share does not
		// bound both).
		grown := false
		for e, c := range cuts[first:] {
			pos := positionLimit(c.learned, c.left, growth, epochEx, every)
			if !c.counts.restarted || c.limit > pos {
				t.Errorf("epoch %d, after a restart: limit %d (restarted %v), above the positions' %d", first+e+1, c.limit, c.counts.restarted, pos)
			}
			if c.limit > minEpochExamples && c.limit < pos && !grown {
				grown = true
				t.Logf("epoch %d: %d examples learned, %d since the restart: limit %d, the positions give %d", first+e+1, c.learned, c.counts.since, c.limit, pos)
			}
		}
		if !grown {
			t.Errorf("after the restart no limit grew past %d and stayed below the positions'", minEpochExamples)
		}
	})
}

// TestDefaultEpochsAfterARestart checks the schedule's limit once a drift
// has restarted the model, at growth 16 over 4 shards: 1/16 of what each
// shard learned since the restart, but not less than 1/restartShrink of
// what the model's whole history gives, nor less than minEpochExamples.
func TestDefaultEpochsAfterARestart(t *testing.T) {
	const shards, growth, epochEx = 4, 16, 100_000
	left := make([]int, shards)
	for i := range left {
		left[i] = epochEx
	}
	for _, c := range []struct {
		examples, since uint64
		want            int
	}{
		{1_000_000, 10_000, 1_000_000 / shards / growth / restartShrink}, // 3,906: the history's, shrunk
		{1_000_000, 400_000, 400_000 / shards / growth},                  // 6,250: grown again past it
		{40_000, 1_000, minEpochExamples},                                // a short history: the floor
		{1_000_000, 0, 1_000_000 / shards / growth / restartShrink},      // at the restart itself
	} {
		w := &learner.State{Examples: c.examples, Labeled: c.examples}
		w.Detector.Drifts, w.Detector.Restarted = 1, c.examples-c.since
		if got := defaultEpochs(growth, epochEx, 0)(1, w, left); got != c.want {
			t.Errorf("%d examples, %d since the restart: limit %d, want %d", c.examples, c.since, got, c.want)
		}
	}
}
