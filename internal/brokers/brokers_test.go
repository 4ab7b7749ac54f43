package brokers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestClients: a destination of none needs no broker, one sink is made
// per kind and shared, a source of no kind names the key, and Close
// closes what was opened, the deferred too.
func TestClients(t *testing.T) {
	cfg := config.Default()
	cfg.NATS.URL = testbroker.NATS(t).URL()
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	if d, err := b.Destination("outputs.drift", config.Destination{}); err != nil || d.Sink != nil {
		t.Fatalf("a destination of none = %v, %v; want none", d, err)
	}
	first, err := b.Destination("outputs.predictions", config.Destination{Kind: config.KindNATS, Topic: "p"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Destination("outputs.misclassifications", config.Destination{Kind: config.KindNATS, Topic: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Sink != second.Sink || first.Topic != "p" || second.Topic != "m" {
		t.Errorf("two NATS destinations: sinks %p and %p, topics %q and %q; want one sink", first.Sink, second.Sink, first.Topic, second.Topic)
	}
	if _, err := b.Source(context.Background(), config.Source{}, "", nil); err == nil || !strings.Contains(err.Error(), "source.kind") {
		t.Errorf("a source of no kind: %v, want an error naming source.kind", err)
	}
	nc, err := b.NATSConn()
	if err != nil {
		t.Fatal(err)
	}
	deferred := errors.New("not closed")
	b.Defer(func() error { deferred = nil; return nil })
	b.Close()
	if deferred != nil || !nc.IsClosed() {
		t.Errorf("after Close: deferred %v, NATS connection closed %v; want both closed", deferred, nc.IsClosed())
	}
}

// TestCoPartitioned: the labels' topic is opened when it has as many
// partitions as the examples', and refused otherwise.
func TestCoPartitioned(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "examples", 2)
	c.CreateTopic(t, "labels", 2)
	c.CreateTopic(t, "three", 3)
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	defer b.Close()
	examples := config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
	if n, err := b.KafkaPartitions(context.Background(), examples); err != nil || n != 2 {
		t.Fatalf("KafkaPartitions = %d, %v; want 2", n, err)
	}
	shards, err := b.CoPartitioned(context.Background(), examples, config.Source{Kind: config.KindKafka, Topics: []string{"labels"}})
	if err != nil {
		t.Fatal(err)
	}
	if ends, err := shards.Ends(context.Background()); err != nil || len(ends) != 2 {
		t.Errorf("the labels' shards: %v, %v; want its 2 partitions", ends, err)
	}
	_, err = b.CoPartitioned(context.Background(), examples, config.Source{Kind: config.KindKafka, Topics: []string{"three"}})
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") {
		t.Errorf("a labels' topic of 3 partitions beside 2: %v, want it refused", err)
	}
}

// TestLabelsTopicMissing: a labels' topic that does not exist is named,
// as labels.topics, for a source of one partition and for one of
// several: not source.topics, whose topics do.
func TestLabelsTopicMissing(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "one", 1)
	c.CreateTopic(t, "two", 2)
	for _, topic := range []string{"one", "two"} {
		cfg := config.Default()
		cfg.Kafka.Brokers = c.ListenAddrs()
		cfg.Source = config.Source{Kind: config.KindKafka, Topics: []string{topic}}
		cfg.Labels.Kind, cfg.Labels.Topics = config.KindKafka, []string{"nosuch"}
		b := brokers.New(cfg, "test", zaptest.NewLogger(t))
		var err error
		if topic == "one" {
			err = b.OnePartition(context.Background(), cfg)
		} else {
			_, err = b.CoPartitioned(context.Background(), cfg.Source, cfg.Labels.Source(cfg.Source))
		}
		b.Close()
		if err == nil || !strings.Contains(err.Error(), "every topic of labels.topics exists") || strings.Contains(err.Error(), "source") {
			t.Errorf("source topic %s, labels' topic missing: %v, want an error that names labels.topics and not the source", topic, err)
		}
	}
}

// examplesOfThree is a broker whose topic examples, of one partition,
// holds three examples.
func examplesOfThree(t *testing.T) *testbroker.KafkaCluster {
	t.Helper()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "examples", 1)
	cl := c.Client(t)
	for range 3 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "examples", Value: []byte(`{"label":1,"x":[1]}`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// TestSourceBeyondEnd: a start offset or a resumed position beyond a
// partition's end is refused naming the offsets, without the advice for an
// unreachable broker or a missing topic, since the broker answered.
func TestSourceBeyondEnd(t *testing.T) {
	c := examplesOfThree(t)
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	defer b.Close()
	for _, tc := range []struct {
		name      string
		start     wire.Start
		positions map[string]int64
	}{
		{"start", wire.Start{Kind: wire.StartOffset, Offset: 5}, nil},
		{"resume", wire.Start{}, map[string]int64{"kafka:examples/0": 5}},
	} {
		s := config.Source{Kind: config.KindKafka, Topics: []string{"examples"}, Start: tc.start}
		_, err := b.OpenSource(context.Background(), s, "", tc.positions)
		if err == nil || !strings.Contains(err.Error(), "offset 5 is beyond the partition's end 3") || strings.Contains(err.Error(), "check kafka.brokers") {
			t.Errorf("%s at offset 5 of a partition that ends at 3: %v, want the offsets named, without advice about the brokers", tc.name, err)
		}
	}
}

// TestSourceRetentionGap: a model whose next offset the broker no longer
// holds is refused with the offsets deleted, and without the advice for an
// unreachable broker or a missing topic, since the broker answered.
func TestSourceRetentionGap(t *testing.T) {
	c := examplesOfThree(t)
	c.DeleteRecords(t, "examples", 0, 2)
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	defer b.Close()
	s := config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
	_, err := b.Source(context.Background(), s, "", map[string]int64{"kafka:examples/0": 1})
	if err == nil || !errors.Is(err, consumer.ErrFatal) || !strings.Contains(err.Error(), "refusing to skip") || strings.Contains(err.Error(), "check kafka.brokers") {
		t.Errorf("resuming at offset 1 of a partition that begins at 2: %v, want the gap named, without advice about the brokers", err)
	}
}
