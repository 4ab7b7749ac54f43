package kafka_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestCreateTopics: the topics that are missing are created with the
// options given; a second call with other options reports them as the
// brokers describe them and changes none; a topic that exists is reported
// with its own settings, an unlimited retention included.
func TestCreateTopics(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "forever", 3, "retention.ms", "-1")
	ctx := context.Background()
	topics := []string{"examples", "predictions"}
	rs, err := kafka.CreateTopics(ctx, config(c), topics, kafka.TopicOptions{Partitions: 2, ReplicationFactor: -1, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		want := kafka.TopicResult{Topic: topics[i], State: kafka.Created, Partitions: 2, ReplicationFactor: -1, Retention: time.Hour}
		if r != want {
			t.Errorf("%+v, want %+v", r, want)
		}
	}

	topics = append(topics, "forever")
	rs, err = kafka.CreateTopics(ctx, config(c), topics, kafka.TopicOptions{Partitions: 3, ReplicationFactor: 1, Retention: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		want := kafka.TopicResult{Topic: topics[i], State: kafka.Exists, Partitions: 2, ReplicationFactor: 1, Retention: time.Hour}
		if topics[i] == "forever" {
			want.Partitions, want.Retention = 3, -1
		}
		if r != want {
			t.Errorf("again: %+v, want %+v", r, want)
		}
	}
	// As another client sees them.
	cl := c.Client(t)
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range resp.Topics {
		if want := map[string]int{"forever": 3}[*mt.Topic]; len(mt.Partitions) != max(want, 2) {
			t.Errorf("topic %s has %d partitions, want %d", *mt.Topic, len(mt.Partitions), max(want, 2))
		}
	}
}

// TestCreateTopicsFails: a topic the brokers refuse is a failed result
// saying why, beside the others (Kafka refuses a name that differs from
// one in use only by . for _); a cluster that cannot be reached is an
// error.
func TestCreateTopicsFails(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "clicks.raw", 1)
	rs, err := kafka.CreateTopics(context.Background(), config(c), []string{"good", "clicks_raw"}, kafka.TopicOptions{Partitions: 1, ReplicationFactor: -1})
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].State != kafka.Created || rs[0].Err != nil {
		t.Errorf("topic good: %+v, want created", rs[0])
	}
	if rs[1].State != kafka.Failed || rs[1].Err == nil || !strings.Contains(rs[1].Err.Error(), "could not create it: ") || rs[1].Topic != "clicks_raw" {
		t.Errorf("topic clicks_raw: %+v, want failed with its reason", rs[1])
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = kafka.CreateTopics(ctx, kafka.Config{Brokers: []string{closed}}, []string{"t"}, kafka.TopicOptions{Partitions: 1, ReplicationFactor: -1})
	if err == nil {
		t.Fatal("CreateTopics on a closed port: no error")
	}
}
