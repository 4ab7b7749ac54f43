package testbroker

import (
	"context"
	"maps"
	"net"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaCluster is an in-process Kafka cluster (kfake) for one test. The
// embedded Cluster is the one running now: use it to inject failures
// (ControlKey) or compact (Compact).
//
// While the cluster is shut down, the embedded Cluster's methods, Client
// and CreateTopic block: kfake answers them from its stopped loop.
type KafkaCluster struct {
	*kfake.Cluster
	t     testing.TB
	opts  []kfake.Opt
	ports []int // where it listens, once started
}

// Kafka starts a one-broker kfake cluster on a free loopback port with
// opts (kfake.SeedTopics, kfake.BrokerConfigs, kfake.TLS, …; a
// kfake.NumBrokers among them overrides the one broker), and closes it
// when the test ends. Topics and records live in memory unless opts give a
// kfake.DataDir, which a cluster must have for its data to survive
// Shutdown and Start.
func Kafka(t testing.TB, opts ...kfake.Opt) *KafkaCluster {
	t.Helper()
	c := &KafkaCluster{t: t, opts: append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)}
	c.Start()
	t.Cleanup(c.Shutdown)
	return c
}

// Start starts the cluster again after Shutdown, on the same ports.
func (c *KafkaCluster) Start() {
	c.t.Helper()
	opts := c.opts
	if c.ports != nil {
		opts = append(slices.Clone(opts), kfake.Ports(c.ports...))
	}
	cl, err := kfake.NewCluster(opts...)
	if err != nil {
		c.t.Fatalf("kfake: %v", err)
	}
	c.Cluster = cl
	if c.ports == nil {
		for _, addr := range cl.ListenAddrs() {
			tcp, err := net.ResolveTCPAddr("tcp", addr)
			if err != nil {
				c.t.Fatalf("kfake address %s: %v", addr, err)
			}
			c.ports = append(c.ports, tcp.Port)
		}
	}
}

// Shutdown closes the cluster's listeners and connections, as in an
// outage; Start brings it back. Shutting down a cluster that is down does
// nothing.
func (c *KafkaCluster) Shutdown() { c.Close() }

// Client is a franz-go client of the cluster, closed when t ends, for what
// a test does besides the code under test: produce, read back, inspect.
// A record it produces goes to the partition it names (Record.Partition);
// opts add to that or override it.
func (c *KafkaCluster) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := c.client(t, opts...)
	t.Cleanup(cl.Close)
	return cl
}

// client is Client for the caller to close.
func (c *KafkaCluster) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		t.Fatalf("kgo: %v", err)
	}
	return cl
}

// CreateTopic creates a topic with the given partitions and topic configs,
// given as name, value pairs ("max.message.bytes", "20000").
func (c *KafkaCluster) CreateTopic(t testing.TB, topic string, partitions int, configs ...string) {
	t.Helper()
	if len(configs)%2 != 0 {
		t.Fatalf("create topic %s: configs %q are not name, value pairs", topic, configs)
	}
	cl := c.client(t)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	for i := 0; i+1 < len(configs); i += 2 {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = configs[i], &configs[i+1]
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// DeleteTopic deletes topic, as an operator would while a worker writes
// to it.
func (c *KafkaCluster) DeleteTopic(t testing.TB, topic string) {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	req := kmsg.NewPtrDeleteTopicsRequest()
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.TopicNames = append(req.TopicNames, topic)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
}

// DeleteRecords moves the first offset of topic's partition to before,
// as retention would.
func (c *KafkaCluster) DeleteRecords(t testing.TB, topic string, partition int32, before int64) {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, before
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 5000
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("delete the records of %s/%d before %d: %v", topic, partition, before, err)
	}
}

// ReadTopic returns the values of every record topic holds when it is
// called, partition by partition, each in offset order. It reads each
// partition up to the end offset it asks for first, so it returns as soon
// as it has them all, and finds a record too many as surely as one too few.
func (c *KafkaCluster) ReadTopic(t testing.TB, ctx context.Context, topic string) [][]byte {
	t.Helper()
	cl := c.client(t)
	defer cl.Close()
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err == nil && len(mresp.Topics) == 1 {
		err = kerr.ErrorForCode(mresp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("read topic %s: metadata: %v", topic, err)
	}
	// The start and end of each partition.
	bounds := map[int32][2]int64{}
	for i, ts := range []int64{-2, -1} { // earliest, latest
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range mresp.Topics[0].Partitions {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p.Partition, ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("read topic %s: list offsets: %v", topic, err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Fatalf("read topic %s/%d: list offsets: %v", topic, rp.Partition, err)
				}
				b := bounds[rp.Partition]
				b[i] = rp.Offset
				bounds[rp.Partition] = b
			}
		}
	}
	parts := map[int32]kgo.Offset{}
	next := map[int32]int64{} // the offset after the last record read
	for p, b := range bounds {
		if b[0] < b[1] {
			parts[p] = kgo.NewOffset().At(b[0])
			next[p] = b[0]
		}
	}
	if len(parts) == 0 {
		return nil
	}
	rd := c.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	defer rd.Close()
	read := map[int32][][]byte{}
	done := func() bool {
		for p := range parts {
			if next[p] < bounds[p][1] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read topic %s: %v, read up to %v of %v", topic, ctx.Err(), next, bounds)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("read topic %s/%d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < bounds[r.Partition][1] {
				read[r.Partition] = append(read[r.Partition], r.Value)
			}
			next[r.Partition] = r.Offset + 1
		})
	}
	var out [][]byte
	for _, p := range slices.Sorted(maps.Keys(read)) {
		out = append(out, read[p]...)
	}
	return out
}
