package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// errShardsClosed is what Open returns once the Shards is closed.
var errShardsClosed = errors.New("kafka: shards closed")

// Shards is the partitions of a set of topics as shards of the epoch
// protocol (docs/scale-out.md): "kafka:<topic>/<partition>", each read
// alone from any offset. It implements consumer.Shards.
//
// Positions are next offsets, as everywhere in this package: a shard's end
// is its high watermark, and a source opened at from reads the offsets
// from on. The Shards keeps one connection pool for its lookups, which the
// sources it opens share for theirs; each source's partition reader has
// its own connection to the partition's leader.
type Shards struct {
	topics  []string
	log     *zap.Logger
	cluster *cluster

	mu      sync.Mutex
	sources map[*Source]struct{} // opened and not closed yet
	closed  bool
	once    sync.Once
}

var _ consumer.Shards = (*Shards)(nil)

// NewShards returns the shards of topics on the cluster cfg reaches. It
// does not connect: the first request does.
func NewShards(cfg Config, topics []string, log *zap.Logger) (*Shards, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	topics = unique(topics)
	if len(topics) == 0 {
		return nil, errors.New("kafka: no topics to read")
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Shards{topics: topics, log: log, cluster: newCluster(cfg, topics), sources: map[*Source]struct{}{}}, nil
}

// Spread is 1: a partition's offsets are its own.
func (s *Shards) Spread() int { return 1 }

// Ends returns every partition the topics have now, with its high
// watermark, from one Metadata request and the partitions' ends alone
// (kafka-go asks each offset in a ListOffsets request of its own). It
// fails if a topic has no partitions (it does not exist) or the broker
// lists no offsets for one of them.
func (s *Shards) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	parts, err := s.cluster.partitions(ctx, s.topics)
	if err != nil {
		return nil, err
	}
	offsets, err := s.cluster.ends(ctx, parts)
	if err != nil {
		return nil, err
	}
	ends := make(map[shardid.ID]int64, len(offsets))
	for _, po := range offsets {
		ends[po.shard()] = po.end
	}
	return ends, nil
}

// Start resolves start on shard now, as NewSource does for a partition
// without a resume position: the first offset for earliest, the high
// watermark for latest, the offset, or the first offset at or after the
// time (the high watermark if no message is that recent). It fails, naming
// the shard, if the offset lies below the partition's first offset or
// beyond its end.
func (s *Shards) Start(ctx context.Context, shard shardid.ID, start wire.Start) (int64, error) {
	if err := start.Validate(); err != nil {
		return 0, fmt.Errorf("kafka: %s: %w", shard, err)
	}
	var at time.Time
	if start.Kind == wire.StartTime {
		at = start.Time
	}
	po, err := s.lookup(ctx, shard, at)
	if err != nil {
		return 0, err
	}
	ps := startAt(po, start)
	if err := ps.check(); err != nil {
		return 0, err
	}
	return ps.offset, nil
}

// Open returns a source that reads shard's partition alone, in order,
// from offset from. As with NewSource, from must lie between the
// partition's first offset and its end, inclusive, or Open fails naming
// the shard, and the source's Fetch fails if retention deletes offsets
// it has not read yet. Its Commit does nothing, its Close stops its reader
// (within maxWait), and ctx bounds only the lookups Open makes.
func (s *Shards) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	if s.isClosed() {
		return nil, errShardsClosed
	}
	po, err := s.lookup(ctx, shard, time.Time{})
	if err != nil {
		return nil, err
	}
	ps := partitionStart{partitionOffsets: po, offset: from, from: "range start"}
	if err := ps.check(); err != nil {
		return nil, err
	}
	var src *Source
	src, err = newSource(s.cluster, "", []partitionStart{ps}, shardBuffered, s.log, func() { s.forget(src) })
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.sources[src] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		src.Close()
		return nil, errShardsClosed
	}
	return src, nil
}

// lookup finds shard's partition and lists its offsets (for at too, if
// not zero). It fails, naming shard, if shard is no partition of the
// topics.
func (s *Shards) lookup(ctx context.Context, shard shardid.ID, at time.Time) (partitionOffsets, error) {
	tp, ok := kafkaPartition(shard)
	if !ok || !slices.Contains(s.topics, tp.topic) {
		return partitionOffsets{}, fmt.Errorf("kafka: %q is not a shard of topics %q", shard, s.topics)
	}
	parts, err := s.cluster.partitions(ctx, []string{tp.topic})
	if err != nil {
		return partitionOffsets{}, err
	}
	if !slices.Contains(parts, tp) {
		return partitionOffsets{}, fmt.Errorf("kafka: %s: %w: topic %s has %d", shard, consumer.ErrNoShard, tp.topic, len(parts))
	}
	offsets, err := s.cluster.offsets(ctx, []topicPartition{tp}, at)
	if err != nil {
		return partitionOffsets{}, err
	}
	return offsets[0], nil
}

// CoPartition is the shard of topic co-partitioned with shard: the
// partition of topic with shard's number, "kafka:<topic>/<partition>",
// and that number. ok is false when shard is no Kafka partition.
func CoPartition(shard shardid.ID, topic string) (co shardid.ID, partition int, ok bool) {
	tp, ok := kafkaPartition(shard)
	if !ok {
		return shardid.ID{}, 0, false
	}
	return shardid.Kafka(topic, tp.id), tp.id, true
}

// OpenCoPartition opens the partition of topic, one of s's, that is
// co-partitioned with shard, a partition of another topic (CoPartition):
// from its position in positions, or from its earliest offset without
// one. partition is its number.
func (s *Shards) OpenCoPartition(ctx context.Context, shard shardid.ID, topic string, positions map[string]int64) (_ consumer.Source, partition int, err error) {
	co, k, ok := CoPartition(shard, topic)
	if !ok {
		return nil, 0, fmt.Errorf("shard %s is no Kafka partition to join the partitions of topic %s to", shard, topic)
	}
	from, ok := positions[co.String()]
	if !ok {
		if from, err = s.Start(ctx, co, wire.Start{Kind: wire.StartEarliest}); err != nil {
			return nil, k, fmt.Errorf("partition %d of %s, co-partitioned with %s: %w", k, topic, shard, err)
		}
	}
	src, err := s.Open(ctx, co, from)
	if err != nil {
		return nil, k, fmt.Errorf("partition %d of %s, co-partitioned with %s: %w", k, topic, shard, err)
	}
	return src, k, nil
}

// kafkaPartition is the topic-partition of a Kafka shard,
// "kafka:<topic>/<partition>"; false for a shard of another kind.
func kafkaPartition(id shardid.ID) (topicPartition, bool) {
	p, partitioned := id.Partition()
	if id.Kind() != shardid.KindKafka || !partitioned {
		return topicPartition{}, false
	}
	return topicPartition{id.Name(), p}, true
}

func (s *Shards) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// forget drops a closed source from the open ones.
func (s *Shards) forget(src *Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sources, src)
}

// Close closes the sources Open returned that are still open, then the
// connection pool. Open then fails. Close is idempotent.
func (s *Shards) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		open := make([]*Source, 0, len(s.sources))
		for src := range s.sources {
			open = append(open, src)
		}
		s.mu.Unlock()
		var wg sync.WaitGroup
		for _, src := range open {
			wg.Go(func() { src.Close() })
		}
		wg.Wait()
		s.cluster.close()
	})
	return nil
}
