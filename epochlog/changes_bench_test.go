package epochlog

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// synthLearn continues a model of base's state (a new model of cfg when
// base is nil) with n examples of s, features f<k> hashed as a worker
// hashes them, and returns its state.
func synthLearn(b *testing.B, cfg learner.Config, base *learner.State, s *synth.Stream, n int) *learner.State {
	b.Helper()
	var m *learner.Model
	var err error
	if base == nil {
		m, err = learner.New(cfg)
	} else {
		m, err = learner.Restore(base)
	}
	if err != nil {
		b.Fatal(err)
	}
	h := learner.NewHasher(cfg.HashBits, cfg.HashSeed)
	var x learner.Example
	for range n {
		rec := s.Next()
		x.Reset()
		for i, k := range rec.Names {
			x.Add(learner.Index(h, "f"+strconv.Itoa(k)), rec.Values[i])
		}
		x.Labeled, x.Label = rec.Labeled, rec.Label
		m.Learn(&x)
	}
	m.Flush()
	return m.State()
}

// BenchmarkShardResult measures a shard's result of the default learner
// (AROW, 2^18 weights) over synth streams, after a base that learned
// 10,000 examples, at several examples per shard: the bytes stored
// whole (as every result was before the changes form) and as changes
// against the base, and the time to encode and decode each form.
// vocab is the stream's number of distinct features (synth's default is
// 10,000; 1M touches up to 40 new weights an example).
//
//	go test ./epochlog/ -run '^$' -bench BenchmarkShardResult -benchtime 20x
func BenchmarkShardResult(b *testing.B) {
	cfg := learner.DefaultConfig()
	for _, vocab := range []int{10_000, 1_000_000} {
		o := synth.DefaultOptions()
		o.Vocab = vocab
		s := synth.New(o)
		baseState := synthLearn(b, cfg, nil, s, 10_000)
		base := NewBase(baseState)
		for _, n := range []int{250, 1_000, 10_000, 100_000} {
			st := synthLearn(b, cfg, baseState, synth.New(o), n)
			r := &ShardResult{
				Model: "clicks", Epoch: 2, Shard: shardid.Kafka("clicks", 0), From: 0, To: int64(n),
				BoundarySHA256: base.digest, ConfigDigest: base.digest, BaseStateSHA256: base.digest,
				Messages: uint64(n), Last: int64(n), State: st, Writer: "worker-a", Created: time.Now(),
			}
			for _, form := range []string{"whole", "changes"} {
				b.Run(fmt.Sprintf("vocab=%d/examples=%d/%s", vocab, n, form), func(b *testing.B) {
					with := base
					if form == "whole" {
						with = nil
					}
					var size int
					for b.Loop() {
						data, err := marshalShard(r, with, true)
						if err != nil {
							b.Fatal(err)
						}
						got, body, err := unmarshalShard("key", r.Model, r.Epoch, r.Shard, data)
						if err != nil {
							b.Fatal(err)
						}
						if err := resolveState("key", got, body, base); err != nil {
							b.Fatal(err)
						}
						size = len(data)
					}
					b.ReportMetric(float64(size), "stored-B")
				})
			}
		}
	}
}
