package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestJoinedWorkerDriftCarriesTheID: with labels that come later the
// model learns at the join's tail, from the head's cache or from the
// examples read again; a drift found there is published, as without
// labels, with the id of the example it was found at (docs/events.md).
func TestJoinedWorkerDriftCarriesTheID(t *testing.T) {
	for _, c := range []struct {
		name  string
		cache int
	}{{"cache", 0}, {"read again", 1}} {
		t.Run(c.name, func(t *testing.T) {
			const n = 6000
			o := synth.DefaultOptions()
			o.Vocab, o.Features, o.DriftAt = 300, 12, n/2
			s := synth.New(o)
			ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			ids := map[int64]string{}
			for i := range n {
				rec := s.Next()
				y := rec.Label
				rec.Labeled = false
				at := base.Add(time.Duration(i) * 10 * time.Millisecond)
				b := synth.AppendJSON(nil, rec)
				ex.AppendAt(0, at, b[:len(b)-1])
				id := strconv.FormatUint(rec.Seq, 10)
				ids[int64(i)] = id
				labels.AppendAt(0, at.Add(time.Millisecond), fmt.Appendf(nil, `{"id":%q,"label":%d}`, id, y))
			}
			lcfg := learner.DefaultConfig()
			lcfg.HashBits = 14
			m, err := learner.New(lcfg)
			if err != nil {
				t.Fatal(err)
			}
			sink := memory.NewSink()
			cfg := consumer.WorkerConfig{
				Model: "joined", Drift: consumer.Destination{Sink: sink, Topic: "drift"}, Batch: 64,
				Labels: &consumer.LabelsConfig{
					Join:   consumer.JoinConfig{Window: joinWindow},
					Source: memory.NewSource(labels, nil),
					OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
						return memory.NewSource(ex, resume), nil
					},
					CacheBytes: c.cache,
					Format:     wire.FormatJSON,
				},
			}
			w := consumer.NewWorker(cfg, memory.NewSource(ex, nil), m, nil, nil, zaptest.NewLogger(t))
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			// The last label closes every window but the last example's.
			wait.For(t, time.Minute, 5*time.Millisecond, "the tail to learn the examples", func() bool {
				return w.Positions()[ex.Key(0)] >= n-1
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			events := sink.Outputs("drift")
			if len(events) == 0 {
				t.Fatal("no drift found: the stream does not exercise it")
			}
			for _, e := range events {
				var ev struct {
					ID       *string `json:"id"`
					Position struct {
						Offset int64 `json:"offset"`
					} `json:"position"`
				}
				if err := json.Unmarshal(e.Value, &ev); err != nil {
					t.Fatal(err)
				}
				if want := ids[ev.Position.Offset]; ev.ID == nil || *ev.ID != want {
					t.Errorf("drift event %s: want the id %q of its example", e.Value, want)
				}
			}
		})
	}
}
