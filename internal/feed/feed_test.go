package feed_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/feed"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

var examples = config.Destination{Kind: config.KindJetStream, Topic: "ex"}

// TestFeederLabelsLater: every example goes out in order without its
// label; every label not drawn missing follows, once, as a label record
// keyed as its example, after the last example.
func TestFeederLabelsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := memory.NewSink()
		labels := feed.NewLabels(sink, config.Destination{Kind: config.KindJetStream, Topic: "labels"}, 0, 0.25, wire.FormatJSON, 7)
		f := feed.Feeder{Sink: sink, To: examples, Batch: 64, Rate: 1000, Labels: labels, Log: zap.NewNop()}
		s := synth.New(synth.DefaultOptions())
		const n = 1000
		if err := f.Run(context.Background(), n, func(i int) consumer.Output {
			rec := s.Next()
			key := fmt.Appendf(nil, "k%d", i)
			labels.Hold(rec, key, "")
			return consumer.Output{Topic: "ex", Key: key, Value: synth.AppendJSON(nil, rec)}
		}); err != nil {
			t.Fatal(err)
		}
		out := sink.Outputs("ex")
		if len(out) != n {
			t.Fatalf("%d examples published, want %d", len(out), n)
		}
		for i, o := range out {
			if string(o.Key) != fmt.Sprintf("k%d", i) || strings.Contains(string(o.Value), `"label"`) {
				t.Fatalf("example %d: key %s, value %s: want it in order and without its label", i, o.Key, o.Value)
			}
		}
		got := sink.Outputs("labels")
		if len(got) != labels.Sent || labels.Sent+labels.Unlabeled != n || labels.Unlabeled < n/8 || labels.Unlabeled > n/2 {
			t.Fatalf("%d labels published, Sent %d, Unlabeled %d of %d (a quarter missing)", len(got), labels.Sent, labels.Unlabeled, n)
		}
		d := wire.NewDecoder(learner.DefaultConfig(), wire.DecoderOptions{})
		var x learner.Example
		seen := map[string]bool{}
		for _, o := range got {
			r, err := d.DecodeLabel(o.Value, wire.FormatJSON, &x)
			if err != nil || seen[string(r.ID)] {
				t.Fatalf("label record %s: %v (seen before: %v)", o.Value, err, seen[string(r.ID)])
			}
			seen[string(r.ID)] = true
		}
	})
}

// TestSendAllRetries: a batch that fails is tried again; after Attempts
// failures the error names the destination and the cause.
func TestSendAllRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := memory.NewSink()
		refused := errors.New("refused")
		sink.Fail(refused)
		batch := []consumer.Output{{Topic: "ex", Value: []byte("v")}}
		err := feed.SendAll(context.Background(), zap.NewNop(), sink, batch, examples, 1)
		if !errors.Is(err, refused) || !strings.Contains(err.Error(), examples.String()) || sink.Attempts() != feed.Attempts {
			t.Fatalf("after %d attempts: %v; want %d, naming %s", sink.Attempts(), err, feed.Attempts, examples)
		}
		sink.Fail(nil)
		if err := feed.SendAll(context.Background(), zap.NewNop(), sink, batch, examples, 1); err != nil || len(sink.Outputs("ex")) != 1 {
			t.Fatalf("a sink that takes it: %v, %d published", err, len(sink.Outputs("ex")))
		}
	})
}
