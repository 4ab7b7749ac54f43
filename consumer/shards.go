package consumer

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// ErrNoShard marks a shard that Shards does not list: in Start or Open,
// a partition that the broker's metadata as this worker last read it
// does not have yet, though the consumer group already assigned it (a
// topic that gained partitions moments ago).
var ErrNoShard = errors.New("no such partition")

// Shards is a source whose partitions (its shards: a Kafka
// topic-partition, a partition of a JetStream stream) can be read one by
// one from any position: what the epoch protocol learns from
// (docs/scale-out.md). A shard is a shardid.ID that the adapter makes
// from what the broker says (a topic and partition, a stream and
// partition); its name, the ID's String ("kafka:<topic>/<partition>",
// ...), is the position key of its messages (Position.Source).
//
// Its methods are safe for concurrent use.
type Shards interface {
	// Ends returns every shard the source has now, with its end: the
	// position after the last message the broker holds (for Kafka the
	// high watermark, the next offset to be written). A shard that holds
	// no message may be left out until it holds one (a partition of a
	// JetStream stream, whose positions are the stream's sequence); the
	// epochs take it up as a shard that is new.
	Ends(ctx context.Context) (map[shardid.ID]int64, error)
	// Start resolves where a shard that no boundary has yet begins, as
	// start says (earliest, latest, an offset or a time), to a position.
	Start(ctx context.Context, shard shardid.ID, start wire.Start) (int64, error)
	// Open reads shard from position from (the Resume of the last
	// message already learned, or the shard's start), in order. The
	// Source's Commit does nothing; Close releases it.
	Open(ctx context.Context, shard shardid.ID, from int64) (Source, error)
	// Spread is how many positions of a shard there are for each of its
	// messages: 1 where every message has a position of its own (a
	// Kafka partition's offsets), N where N shards share one sequence of
	// positions (the partitions of a JetStream stream). The epoch limits
	// count messages, and a range spans Spread positions for each.
	Spread() int
}

// byName is ends, or positions, by the shards' names (shardid.ID.String):
// the position keys of their messages, which generations record and
// brokers commit.
func byName(ends map[shardid.ID]int64) map[string]int64 {
	named := make(map[string]int64, len(ends))
	for id, end := range ends {
		named[id.String()] = end
	}
	return named
}

// ShardIDs returns the shards s has now (Ends), in shard order
// (shardid.Compare).
func ShardIDs(ctx context.Context, s Shards) ([]shardid.ID, error) {
	ends, err := s.Ends(ctx)
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Keys(ends), shardid.Compare), nil
}
