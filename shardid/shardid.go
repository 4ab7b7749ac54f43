// Package shardid is the identity of a shard, one partition of a source
// that the epochs and partition scope learn from (docs/scale-out.md,
// section 1): its kind, its topic or stream, and its partition.
//
// A shard has one name, its String, which is also the position key of
// its messages and what boundaries and snapshots store:
//
//	kafka:<topic>/<partition>    a Kafka topic-partition
//	jetstream:<stream>#<k>       partition k of a partitioned JetStream stream
//	jetstream:<stream>           a JetStream stream of one shard
//	memory:<log>/<partition>     a partition of consumer/memory's log, for tests
//
// and one segment, its Segment, the form it takes inside an object key
// ("kafka.<topic>.<partition>", ...). The adapters make an ID with
// Kafka, JetStream, Stream or Memory; a name read back from stored bytes
// is read with Parse, the one reader of these names, and a segment read
// back from a key with ParseSegment. Nothing else takes a name apart.
package shardid

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Kind is the kind of source a shard belongs to.
type Kind string

// The kinds of shards.
const (
	KindKafka     Kind = "kafka"
	KindJetStream Kind = "jetstream"
	KindMemory    Kind = "memory" // consumer/memory's log, which tests run the protocol on
)

// ID is a shard. The zero ID is no shard. IDs are comparable: two are
// == when they name the same shard.
type ID struct {
	kind Kind
	name string
	// partition is the partition's number, -1 for a stream of one shard.
	partition int64
}

// Kafka is partition p of topic, "kafka:<topic>/<p>".
func Kafka(topic string, p int) ID { return ID{KindKafka, topic, int64(p)} }

// JetStream is partition k of stream, partitioned by subject transform:
// "jetstream:<stream>#<k>".
func JetStream(stream string, k int) ID { return ID{KindJetStream, stream, int64(k)} }

// Stream is a JetStream stream read whole as one shard,
// "jetstream:<stream>".
func Stream(stream string) ID { return ID{KindJetStream, stream, -1} }

// Memory is partition p of consumer/memory's log named log,
// "memory:<log>/<p>".
func Memory(log string, p int) ID { return ID{KindMemory, log, int64(p)} }

// Kind is the shard's kind; "" for the zero ID.
func (id ID) Kind() Kind { return id.kind }

// Name is the shard's topic, stream or log.
func (id ID) Name() string { return id.name }

// Partition is the shard's partition number, and false for a stream of
// one shard (or the zero ID).
func (id ID) Partition() (int, bool) { return int(id.partition), id.kind != "" && id.partition >= 0 }

// IsZero reports whether id is the zero ID, no shard.
func (id ID) IsZero() bool { return id == ID{} }

// String is the shard's name: "kafka:<topic>/<partition>",
// "jetstream:<stream>#<k>", "jetstream:<stream>" or
// "memory:<log>/<partition>"; "" for the zero ID.
func (id ID) String() string {
	switch {
	case id.kind == "":
		return ""
	case id.partition < 0:
		return string(id.kind) + ":" + id.name
	case id.kind == KindJetStream:
		return string(id.kind) + ":" + id.name + "#" + strconv.FormatInt(id.partition, 10)
	default:
		return string(id.kind) + ":" + id.name + "/" + strconv.FormatInt(id.partition, 10)
	}
}

// Segment is the shard inside an object key: "kafka:<topic>/<p>" is
// "kafka.<topic>.<p>", "jetstream:<stream>#<k>" is "jetstream.<stream>.<k>",
// "jetstream:<stream>" is "jetstream.<stream>" and "memory:<log>/<p>" is
// "memory.<log>.<p>". Topics have no '/', streams no '.', and the
// partition is the last part, so two shards never share a segment. It
// fails, as Parse of the shard's name would, for an ID whose name no
// shard has (a topic with a slash, say) and for the zero ID.
func (id ID) Segment() (string, error) {
	if err := id.check(); err != nil {
		return "", fmt.Errorf("shard %q: %w", id.String(), err)
	}
	seg := string(id.kind) + "." + id.name
	if id.partition >= 0 {
		seg += "." + strconv.FormatInt(id.partition, 10)
	}
	return seg, nil
}

// check is nil when id is a shard that has a name Parse reads back.
func (id ID) check() error {
	switch id.kind {
	case KindKafka, KindMemory:
		if id.partition < 0 {
			return fmt.Errorf("no partition (want %s:<topic>/<partition>)", id.kind)
		}
	case KindJetStream:
		if strings.ContainsAny(id.name, ".#") {
			return fmt.Errorf("a stream name has no '.' or '#'")
		}
	case "":
		return fmt.Errorf("no shard")
	default:
		return fmt.Errorf("kind %q is not kafka, jetstream or memory", id.kind)
	}
	if id.name == "" {
		return fmt.Errorf("no topic or stream name")
	}
	if strings.ContainsFunc(id.name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' || r == '\\' }) {
		return fmt.Errorf("the topic or stream name has a slash, backslash or control character")
	}
	return nil
}

// Parse reads a shard's name, the String of an ID: "kafka:<topic>/<p>",
// "jetstream:<stream>#<k>", "jetstream:<stream>" or "memory:<log>/<p>".
// Partitions are decimal numbers written as strconv writes them, so that
// one shard has one name: Parse(s).String() == s whenever Parse succeeds.
// Any other name is an error that quotes it.
func Parse(s string) (ID, error) {
	kind, rest, _ := strings.Cut(s, ":")
	id := ID{kind: Kind(kind)}
	var part string
	switch id.kind {
	case KindKafka, KindMemory:
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return ID{}, fmt.Errorf("shard %q: no partition (want %s:<topic>/<partition>)", s, kind)
		}
		id.name, part = rest[:i], rest[i+1:]
	case KindJetStream:
		var partitioned bool
		if id.name, part, partitioned = strings.Cut(rest, "#"); !partitioned {
			id.partition = -1
		}
	default:
		return ID{}, fmt.Errorf("shard %q: not kafka:<topic>/<partition>, jetstream:<stream>#<k> or jetstream:<stream>", s)
	}
	if id.partition != -1 {
		p, err := strconv.ParseInt(part, 10, 64)
		if err != nil || p < 0 || strconv.FormatInt(p, 10) != part {
			return ID{}, fmt.Errorf("shard %q: partition %q is not a decimal number without leading zeros", s, part)
		}
		id.partition = p
	}
	if err := id.check(); err != nil {
		return ID{}, fmt.Errorf("shard %q: %w", s, err)
	}
	return id, nil
}

// ParseSegment reads a shard's segment back, as an object key holds it
// (Segment): ParseSegment(seg).Segment() is seg whenever ParseSegment
// succeeds. Any other segment is an error that quotes it.
func ParseSegment(seg string) (ID, error) {
	kind, rest, _ := strings.Cut(seg, ".")
	name := kind + ":" + rest
	switch Kind(kind) {
	case KindKafka, KindMemory:
		// The partition is the last part: a topic may hold dots.
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			name = kind + ":" + rest[:i] + "/" + rest[i+1:]
		}
	case KindJetStream:
		// A stream has no dot: one is the partition's.
		name = kind + ":" + strings.Replace(rest, ".", "#", 1)
	}
	id, err := Parse(name)
	if err != nil {
		return ID{}, fmt.Errorf("segment %q: not a shard's", seg)
	}
	if again, err := id.Segment(); err != nil || again != seg {
		return ID{}, fmt.Errorf("segment %q: not a shard's", seg)
	}
	return id, nil
}

// Set makes id the shard named s (Parse), the zero ID for "", so that
// a flag can hold a shard (flag.Value).
func (id *ID) Set(s string) error {
	if s == "" {
		*id = ID{}
		return nil
	}
	parsed, err := Parse(s)
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// Compare orders shards in shard order, the order in which boundaries
// list them and mixes sum them: by kind, then by topic or stream
// (bytewise), then by partition (numerically; a stream of one shard
// first).
func Compare(a, b ID) int {
	if c := strings.Compare(string(a.kind), string(b.kind)); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}
