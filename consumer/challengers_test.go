package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// challengedConfig is the model of the challenger tests and its four
// challengers: another algorithm, which reads the model's decoded
// example, and two other hashings, which decode their own, one of them
// shared by a fourth.
func challengedConfig() (learner.Config, []learner.ChallengerConfig) {
	base := learner.DefaultConfig()
	base.HashBits = 12
	perceptron := base
	perceptron.Algorithm = learner.Perceptron
	bits := base
	bits.HashBits = 13
	seed := base
	seed.HashSeed = 7
	bitsPA := bits
	bitsPA.Algorithm = learner.PA1
	return base, []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}, {Name: "bits13", Config: bits}, {Name: "seed7", Config: seed},
		{Name: "bits13-pa1", Config: bitsPA}}
}

// challengedLog is n generated examples, a fifth unlabeled and every
// 97th not an example.
func challengedLog(n int) *memory.Log {
	l := memory.NewLog("in", 1)
	o := synth.DefaultOptions()
	o.Vocab, o.Features, o.Unlabeled = 300, 10, 0.2
	s := synth.New(o)
	for i := range n {
		if i%97 == 96 {
			l.Append(0, []byte(`{"label": "maybe"}`))
			continue
		}
		b := synth.AppendJSON(nil, s.Next())
		l.Append(0, b[:len(b)-1])
	}
	return l
}

// challengedRun resumes the challenged model from store, learns the log
// until the model is at stopAt (its end if 0) and stops the worker, which
// writes its last snapshot.
func challengedRun(t *testing.T, in *memory.Log, store *snapshot.Store, sink *memory.Sink, reg prometheus.Registerer, stopAt int64) *consumer.Worker {
	t.Helper()
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	base, challengers := challengedConfig()
	res, err := snapshot.Resume(ctx, store, "m", base, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := res.Model.SetChallengers(challengers); err != nil {
		t.Fatal(err)
	}
	cfg := consumer.WorkerConfig{
		Model:                 "m",
		Predictions:           consumer.Destination{Sink: sink, Topic: "pred"},
		ChallengerPredictions: consumer.Destination{Sink: sink, Topic: "challenger-pred"},
		Snapshots:             res.Snapshotter,
		SnapshotEvery:         300,
		Batch:                 50,
	}
	w := consumer.NewWorker(cfg, memory.NewSource(in, res.Positions), res.Model, res.Positions, consumer.NewMetrics(reg), log)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	end := int64(in.Len(0))
	if stopAt <= 0 || stopAt > end {
		stopAt = end
	}
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("the worker to learn %d messages", stopAt), func() bool {
		return w.Published()[in.Key(0)] >= stopAt
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return w
}

// TestChallengersResumeExactly: a worker with four challengers stopped
// three times, once as if killed before its last snapshot, ends with the
// state, challengers and comparisons included, of one that never stopped;
// the model's predictions go to their output alone and the challengers'
// to theirs, named.
func TestChallengersResumeExactly(t *testing.T) {
	const n = 3000
	in := challengedLog(n)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	sink := memory.NewSink()
	reg := prometheus.NewPedanticRegistry()
	whole := challengedRun(t, in, store, sink, reg, 0)
	st := whole.Model().State()
	if len(st.Challengers) != 4 {
		t.Fatalf("the state holds %d challengers, want 4", len(st.Challengers))
	}
	for _, c := range st.Challengers {
		if c.State.Labeled != st.Labeled || c.State.Examples != st.Examples {
			t.Errorf("challenger %s learned %d of %d examples, the model %d of %d", c.Name, c.State.Labeled, c.State.Examples, st.Labeled, st.Examples)
		}
		r, err := compare.ResultOf(&c, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		if r.Examples != int(st.Labeled) {
			t.Errorf("challenger %s compared on %d examples, want the %d labeled", c.Name, r.Examples, st.Labeled)
		}
	}
	want := st.StateSHA256()

	// The outputs: the model's alone in pred, each challenger's in its own.
	valid := n - n/97
	if got := len(sink.Outputs("pred")); got != valid {
		t.Errorf("%d predictions, want the model's %d", got, valid)
	}
	byName := map[string]int{}
	for _, o := range sink.Outputs("challenger-pred") {
		var ev struct {
			Model struct{ Name string } `json:"model"`
		}
		if err := json.Unmarshal(o.Value, &ev); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(o.Key), "#"+ev.Model.Name) {
			t.Errorf("challenger prediction keyed %s, named %s", o.Key, ev.Model.Name)
		}
		byName[ev.Model.Name]++
	}
	for _, c := range st.Challengers {
		if byName[c.Name] != valid {
			t.Errorf("%d predictions of challenger %s, want %d", byName[c.Name], c.Name, valid)
		}
	}

	// The metrics: the model's series keep their labels, each
	// challenger's has its name.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	series := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "hyperplane_rolling_accuracy" && mf.GetName() != "hyperplane_rolling_log_loss" {
			continue
		}
		for _, m := range mf.GetMetric() {
			model := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" {
					model = l.GetValue()
				}
			}
			series[mf.GetName()+"/"+model] = true
			if model != "" && !(m.GetGauge().GetValue() > 0) {
				t.Errorf("%s{model=%q} is %v", mf.GetName(), model, m.GetGauge().GetValue())
			}
		}
	}
	for _, name := range []string{"", "perceptron", "bits13", "seed7", "bits13-pa1"} {
		for _, metric := range []string{"hyperplane_rolling_accuracy", "hyperplane_rolling_log_loss"} {
			if !series[metric+"/"+name] {
				t.Errorf("no series %s{model=%q}", metric, name)
			}
		}
	}

	// Stopped three times; the second stop loses its last generation,
	// as a kill would.
	store2 := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store2.Close()
	sink2 := memory.NewSink()
	for i, at := range []int64{n / 5, n / 2, 4 * n / 5} {
		challengedRun(t, in, store2, sink2, nil, at)
		if i == 1 {
			ctx := context.Background()
			gens, err := store2.Generations(ctx, "m")
			if err != nil || len(gens) < 2 {
				t.Fatalf("generations %v: %v", gens, err)
			}
			if err := store2.Delete(ctx, snapshot.Key(store2.Prefix(), "m", gens[len(gens)-1])); err != nil {
				t.Fatal(err)
			}
		}
	}
	resumed := challengedRun(t, in, store2, sink2, nil, 0)
	if got := resumed.Model().State().StateSHA256(); got != want {
		t.Fatalf("resumed state_sha256 %s, want the uninterrupted %s", got, want)
	}
	latest, err := store2.Latest(context.Background(), "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := latest.State.StateSHA256(); got != want {
		t.Fatalf("the last generation's state_sha256 %s, want %s", got, want)
	}
}

// TestChallengersInPartitionScope: in partition scope each partition's
// model learns its own challengers, equal to the bit to one worker's
// model and challengers over the partition alone, and each has its
// series by shard and model.
func TestChallengersInPartitionScope(t *testing.T) {
	r := newPartitionRig(t)
	r.appendPart(0)
	base, challengers := challengedConfig()
	r.cfg = base
	cfg := r.config(t, "a")
	open := cfg.Open
	cfg.Open = func(ctx context.Context, shard shardid.ID) (consumer.Chain, error) {
		c, err := open(ctx, shard)
		if err == nil {
			_, _, err = c.Model.SetChallengers(challengers)
		}
		return c, err
	}
	reg := prometheus.NewPedanticRegistry()
	p := consumer.NewPartitions(cfg, consumer.NewMetrics(reg), zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := runPartitions(ctx, p)
	r.waitChains(t, map[string]<-chan error{"a": done})
	stopPartitions(t, "a", cancel, done)

	for q := range partitionShards {
		shard := r.log.Key(q)
		// One model over the partition alone, with its challengers, each
		// decoding with its own hashing.
		m, err := learner.New(base)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := m.SetChallengers(challengers); err != nil {
			t.Fatal(err)
		}
		live, err := compare.NewLive(m, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		dec := wire.NewDecoder(base, wire.DecoderOptions{})
		var decs []*wire.Decoder
		xs := make([]*learner.Example, len(challengers))
		for i, c := range challengers {
			decs = append(decs, wire.NewDecoder(c.Config, wire.DecoderOptions{}))
			xs[i] = new(learner.Example)
		}
		var x learner.Example
		for _, v := range r.data[q] {
			if _, err := dec.Decode(v, &x); err != nil {
				continue
			}
			o := m.Learn(&x)
			for i, d := range decs {
				if _, err := d.Decode(v, xs[i]); err != nil {
					t.Fatal(err)
				}
			}
			live.Learn(&o, x.Label, xs)
		}
		got := p.Model(r.log.Shard(q)).State()
		if len(got.Challengers) != len(challengers) {
			t.Fatalf("%s: %d challengers, want %d", shard, len(got.Challengers), len(challengers))
		}
		if got.StateSHA256() != m.State().StateSHA256() {
			t.Errorf("%s: the model with its challengers differs from one worker's over the partition alone", shard)
		}
		if snap := r.newest(shard); snap == nil || snap.State.StateSHA256() != got.StateSHA256() {
			t.Errorf("%s: the chain's newest generation is not the model with its challengers", shard)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series int
	for _, mf := range mfs {
		if mf.GetName() != "hyperplane_shard_rolling_accuracy" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 2 {
				series++
			}
		}
	}
	if series != partitionShards*len(challengers) {
		t.Errorf("%d hyperplane_shard_rolling_accuracy{shard,model} series, want %d", series, partitionShards*len(challengers))
	}
}

// TestChallengersUnmixableRefusedInEpochs: a source of several partitions
// learned in epochs mixes the challengers by the model's rule, and
// refuses one the rule cannot mix, naming the field.
func TestChallengersUnmixableRefusedInEpochs(t *testing.T) {
	data := memory.NewLog("ex", 2)
	msgs, _ := messages(100)
	data.Append(0, msgs...)
	data.Append(1, msgs...)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	logger := zaptest.NewLogger(t)
	mixing := epochConfig(data, store, memory.NewSink(), "w")
	wcfg := mixing.Worker
	mixing.Worker, mixing.Shards, mixing.Log = consumer.WorkerConfig{}, nil, nil
	mixing.Rule = learner.MixAROW
	perceptron := epochLearner()
	perceptron.Algorithm = learner.Perceptron
	p, err := consumer.Open(context.Background(), consumer.Options{
		Model:   "mixed",
		Learner: epochLearner(),
		Store:   store,
		Resume:  snapshot.ResumeOptions{Writer: "w", Keep: 10, Log: logger},
		Connect: func(context.Context) (consumer.Connection, error) {
			return consumer.Connection{Worker: wcfg, Shards: data, ShardCount: 2}, nil
		},
		Mixing:      mixing,
		Challengers: []learner.ChallengerConfig{{Name: "perceptron", Config: perceptron}},
		Log:         logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Engine(nil).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "model.challengers[0].algorithm") || !strings.Contains(err.Error(), "arow") {
		t.Fatalf("Run: %v, want the refusal of a challenger that rule arow cannot mix", err)
	}
}

// challengedJoinRun resumes the challenged model from store with
// challengers, each of the model's hashing, and learns the delayed logs
// with their join until the tail is at stopAt (the end if 0).
func challengedJoinRun(t *testing.T, ex, labels *memory.Log, store *snapshot.Store, sink *memory.Sink, stopAt int64) *consumer.Worker {
	t.Helper()
	ctx := context.Background()
	log := zaptest.NewLogger(t)
	base, challengers := challengedConfig()
	pa := base
	pa.Algorithm = learner.PA1
	challengers = []learner.ChallengerConfig{challengers[0], {Name: "pa1", Config: pa}}
	res, err := snapshot.Resume(ctx, store, "joined", base, snapshot.ResumeOptions{Writer: "w", Keep: 100, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := res.Model.SetChallengers(challengers); err != nil {
		t.Fatal(err)
	}
	var st *consumer.JoinState
	head := map[string]int64{}
	if res.Snapshot != nil && res.Snapshot.Join != nil {
		if st, err = consumer.DecodeJoinState(res.Snapshot.Join); err != nil {
			t.Fatal(err)
		}
		head[ex.Key(0)] = st.Head
	}
	cfg := consumer.WorkerConfig{
		Model:                 "joined",
		Predictions:           consumer.Destination{Sink: sink, Topic: "pred"},
		ChallengerPredictions: consumer.Destination{Sink: sink, Topic: "challenger-pred"},
		Snapshots:             res.Snapshotter,
		SnapshotEvery:         500,
		Batch:                 64,
		Labels: &consumer.LabelsConfig{
			Join:   consumer.JoinConfig{Window: joinWindow, Default: -1, HasDefault: true},
			Source: memory.NewSource(labels, res.Positions),
			OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
				return memory.NewSource(ex, resume), nil
			},
			Format: wire.FormatJSON,
			Marks:  consumer.Destination{Sink: markSink{labels}, Topic: "marks"},
			Writer: "w",
			State:  st,
		},
	}
	w := consumer.NewWorker(cfg, memory.NewSource(ex, head), res.Model, res.Positions, nil, log)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	end := int64(ex.Len(0))
	if stopAt <= 0 || stopAt > end {
		stopAt = end
	}
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("the tail to learn %d examples", stopAt), func() bool {
		return w.Positions()[ex.Key(0)] >= stopAt
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	return w
}

// TestChallengersWithLabelsThatComeLater: with a join, the challengers
// learn each example where the model does, at the join's tail; a worker
// stopped twice ends with the state, challengers included, of one that
// never stopped, and no challenger prediction is published (the tail's
// predictions are not served).
func TestChallengersWithLabelsThatComeLater(t *testing.T) {
	const n = 2000
	ex, labels := delayedLogs(n)
	sink := memory.NewSink()
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	w := challengedJoinRun(t, ex, labels, store, sink, 0)
	st := w.Model().State()
	for _, c := range st.Challengers {
		if c.State.Labeled != st.Labeled || c.Comparison.LogLoss.Count != st.Labeled {
			t.Errorf("challenger %s learned %d labeled examples and compared %d, the model learned %d", c.Name, c.State.Labeled, c.Comparison.LogLoss.Count, st.Labeled)
		}
	}
	if got := len(sink.Outputs("challenger-pred")); got != 0 {
		t.Errorf("%d challenger predictions published at the tail", got)
	}
	if len(st.Challengers) != 2 {
		t.Fatalf("%d challengers, want 2", len(st.Challengers))
	}

	// A challenger of another hashing is refused, by field.
	m, err := learner.Restore(st)
	if err != nil {
		t.Fatal(err)
	}
	_, all := challengedConfig()
	if _, _, err := m.SetChallengers(all); err != nil {
		t.Fatal(err)
	}
	other := consumer.NewWorker(consumer.WorkerConfig{Labels: &consumer.LabelsConfig{}}, memory.NewSource(ex, nil), m, nil, nil, zaptest.NewLogger(t))
	if err := other.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "model.challengers: bits13 hashes otherwise") {
		t.Errorf("Run with labels and a challenger of another hashing: %v", err)
	}

	ex2, labels2 := delayedLogs(n)
	store2 := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store2.Close()
	for _, at := range []int64{n / 4, n / 2} {
		challengedJoinRun(t, ex2, labels2, store2, memory.NewSink(), at)
	}
	resumed := challengedJoinRun(t, ex2, labels2, store2, memory.NewSink(), 0)
	if got, want := resumed.Model().State().StateSHA256(), st.StateSHA256(); got != want {
		t.Fatalf("resumed state_sha256 %s, want the uninterrupted %s", got, want)
	}
}
