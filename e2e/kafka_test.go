package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

const partitions = 3

// kafkaCluster is an in-process Kafka with the test's topics: examples
// (three partitions) in, one partition each for the events.
func kafkaCluster(t *testing.T) *testbroker.KafkaCluster {
	t.Helper()
	return testbroker.Kafka(t, kfake.SeedTopics(partitions, "examples"), kfake.SeedTopics(1, "predictions", "misclassifications", "dead"))
}

// produce writes message i of in to partition i%3, so that message i is
// at offset i/3 of its partition.
func produce(t *testing.T, ctx context.Context, c *testbroker.KafkaCluster, in input) {
	t.Helper()
	cl := c.Client(t)
	defer cl.Close()
	var recs []*kgo.Record
	for i, m := range in.messages {
		recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(i % partitions), Value: m})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// topicReader collects every record of a topic in the background.
type topicReader struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func readTopic(t *testing.T, c *testbroker.KafkaCluster, topic string) *topicReader {
	t.Helper()
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	r := &topicReader{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) { r.recs = append(r.recs, rec) })
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return r
}

func (r *topicReader) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.recs)
}

func (r *topicReader) records() []*kgo.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*kgo.Record(nil), r.recs...)
}

func kafkaConfig(c *testbroker.KafkaCluster) string {
	return fmt.Sprintf(`
model:
  name: e2e
  learner:
    hash_bits: 16
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [examples]
outputs:
  predictions: kafka:predictions
  misclassifications: kafka:misclassifications
  dead_letter: kafka:dead
`, strings.Join(c.ListenAddrs(), ", "))
}

// position is where message i of the input sits.
func position(i int) string { return fmt.Sprintf("kafka:examples/%d/%d", i%partitions, i/partitions) }

// TestKafka: a three-partition topic in; one prediction per valid example
// keyed by its position, as many misclassifications as the worker's
// model counts mistakes, garbage in the dead letters.
func TestKafka(t *testing.T) {
	ctx := testContext(t)
	c := kafkaCluster(t)
	in := makeInput(3000, 5, 97)
	produce(t, ctx, c, in)
	preds, mis, dead := readTopic(t, c, "predictions"), readTopic(t, c, "misclassifications"), readTopic(t, c, "dead")

	p := start(t, "run", "--config", writeConfig(t, kafkaConfig(c)))
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction and dead letter", func() bool {
		return preds.count() == in.valid() && dead.count() == len(in.garbage)
	})
	var mistakes float64
	wait.For(t, time.Minute, 50*time.Millisecond, "a misclassification per mistake", func() bool {
		mistakes = p.metric(`hyperplane_examples_total{result="mistake"}`)
		return mistakes > 0 && float64(mis.count()) == mistakes
	})
	p.stop()

	want := map[string]bool{}
	for i := range in.messages {
		if !in.garbage[i] {
			want[position(i)] = true
		}
	}
	for _, r := range preds.records() {
		e := decodeEvents(t, [][]byte{r.Value})[0]
		if string(r.Key) != e.EventID || !want[e.EventID] {
			t.Fatalf("prediction keyed %q with event id %q: not a valid input position, or repeated", r.Key, e.EventID)
		}
		delete(want, e.EventID)
	}
	if len(want) != 0 {
		t.Fatalf("%d positions without a prediction", len(want))
	}
	for _, r := range dead.records() {
		e := decodeEvents(t, [][]byte{r.Value})[0]
		var p, off int
		fmt.Sscanf(e.EventID, "kafka:examples/%d/%d", &p, &off)
		if !in.garbage[off*partitions+p] || e.Error == "" {
			t.Fatalf("dead letter %+v is not one of the malformed messages", e)
		}
	}
}

// TestKafkaOutputOutage makes the broker refuse every produce request for
// a while: the worker reports not ready, retries, and holds back; once the
// broker takes writes again every example has its prediction (at least
// once).
func TestKafkaOutputOutage(t *testing.T) {
	ctx := testContext(t)
	c := kafkaCluster(t)
	var down atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if down.Load() {
			return nil, errors.New("injected outage"), true
		}
		return nil, nil, false
	})
	in := makeInput(3000, 6, 0)
	preds := readTopic(t, c, "predictions")
	produce(t, ctx, c, in)

	down.Store(true)
	p := start(t, "run", "--config", writeConfig(t, kafkaConfig(c)))
	wait.For(t, time.Minute, 50*time.Millisecond, "failed publishes", func() bool { return p.metric("hyperplane_publish_errors_total") > 0 })
	if p.ready() || preds.count() != 0 {
		t.Fatalf("ready %v with %d predictions while every produce request fails", p.ready(), preds.count())
	}
	// The outage lasts until the worker has retried and failed again.
	failed := p.metric("hyperplane_publish_errors_total")
	wait.For(t, time.Minute, 50*time.Millisecond, "a retried publish to fail", func() bool {
		return p.metric("hyperplane_publish_errors_total") > failed
	})
	down.Store(false)
	wait.For(t, time.Minute, 50*time.Millisecond, "ready again", p.ready)
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction", func() bool {
		seen := map[string]bool{}
		for _, r := range preds.records() {
			seen[string(r.Key)] = true
		}
		return len(seen) == len(in.messages)
	})
	p.stop()
}
