package snapshot

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// shardName is a shard's name taken apart: its kind ("kafka" or
// "jetstream"), its topic or stream, and its partition (-1 for an
// unpartitioned stream).
type shardName struct {
	kind, name string
	partition  int64
}

// parseShard reads a shard's name: "kafka:<topic>/<partition>",
// "jetstream:<stream>#<k>" or "jetstream:<stream>" (docs/scale-out.md,
// section 1). Partitions are decimal numbers written as strconv writes
// them, so that one shard has one name.
func parseShard(shard string) (shardName, error) {
	kind, rest, _ := strings.Cut(shard, ":")
	n := shardName{kind: kind}
	var part string
	switch kind {
	case "kafka", "memory":
		// memory:<log>/<partition> is a partition of consumer/memory's
		// log, which tests run the protocol on.
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return n, fmt.Errorf("shard %q: no partition (want kafka:<topic>/<partition>)", shard)
		}
		n.name, part = rest[:i], rest[i+1:]
	case "jetstream":
		var partitioned bool
		if n.name, part, partitioned = strings.Cut(rest, "#"); !partitioned {
			n.partition = -1
		}
	default:
		return n, fmt.Errorf("shard %q: not kafka:<topic>/<partition>, jetstream:<stream>#<k> or jetstream:<stream>", shard)
	}
	if n.name == "" {
		return n, fmt.Errorf("shard %q: no topic or stream name", shard)
	}
	if strings.ContainsFunc(n.name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '/' || r == '\\' }) {
		return n, fmt.Errorf("shard %q: the topic or stream name has a slash, backslash or control character", shard)
	}
	if n.kind == "jetstream" && strings.ContainsAny(n.name, ".#") {
		return n, fmt.Errorf("shard %q: a stream name has no '.' or '#'", shard)
	}
	if n.partition != -1 {
		p, err := strconv.ParseInt(part, 10, 64)
		if err != nil || p < 0 || strconv.FormatInt(p, 10) != part {
			return n, fmt.Errorf("shard %q: partition %q is not a decimal number without leading zeros", shard, part)
		}
		n.partition = p
	}
	return n, nil
}

// ShardSegment is the shard's name inside an object key:
// "kafka:<topic>/<p>" is "kafka.<topic>.<p>", "jetstream:<stream>#<k>" is
// "jetstream.<stream>.<k>" and "jetstream:<stream>" is
// "jetstream.<stream>" (and consumer/memory's "memory:<log>/<p>" is
// "memory.<log>.<p>"). Topics have no '/', streams no '.', and the
// partition is the last part, so two shards never share a segment. Any
// other name is an error.
func ShardSegment(shard string) (string, error) {
	n, err := parseShard(shard)
	if err != nil {
		return "", err
	}
	seg := n.kind + "." + n.name
	if n.partition >= 0 {
		seg += "." + strconv.FormatInt(n.partition, 10)
	}
	if strings.Contains(seg, "/") {
		return "", fmt.Errorf("shard %q: segment %q has a slash", shard, seg)
	}
	return seg, nil
}

// CompareShards orders shards in shard order, the order in which
// boundaries list them and mixes sum them: by kind, then by topic or
// stream (bytewise), then by partition (numerically; an unpartitioned
// stream first). Names that do not parse compare bytewise, after those
// that do.
func CompareShards(a, b string) int {
	na, errA := parseShard(a)
	nb, errB := parseShard(b)
	switch {
	case errA != nil && errB != nil:
		return strings.Compare(a, b)
	case errA != nil:
		return 1
	case errB != nil:
		return -1
	}
	if c := strings.Compare(na.kind, nb.kind); c != 0 {
		return c
	}
	if c := strings.Compare(na.name, nb.name); c != 0 {
		return c
	}
	return cmp.Compare(na.partition, nb.partition)
}

// Range is a shard's part of an epoch (docs/scale-out.md): for Kafka the
// offsets o with From <= o < To (positions are next offsets), for
// JetStream the shard's messages with From < sequence <= To (positions
// are last sequences). A generation of a model learned in epochs lists
// its epoch's ranges (Snapshot.Boundary), as the epoch's boundary in the
// epoch log does (epochlog.Boundary, whose Range this is).
type Range struct {
	Shard string `msgpack:"shard"`
	From  int64  `msgpack:"from"`
	To    int64  `msgpack:"to"`
	// Labels, for a model that joins labels that come later, is the
	// range of the labels' partition co-partitioned with the shard that
	// the epoch reads (docs/labels.md, section 11); From and To are then
	// an upper bound of the examples the epoch learns. nil without
	// labels: such a range encodes as it did before labels.
	Labels *LabelsRange `msgpack:"labels,omitempty"`
}

// LabelsRange is the part of a labels' partition an epoch reads: the
// positions p with From <= p < To, as a Kafka partition's offsets are.
type LabelsRange struct {
	From int64 `msgpack:"from"`
	To   int64 `msgpack:"to"`
}

// Equal reports whether r and o are the same range, of the same labels.
func (r Range) Equal(o Range) bool {
	if (r.Labels == nil) != (o.Labels == nil) || (r.Labels != nil && *r.Labels != *o.Labels) {
		return false
	}
	return r.Shard == o.Shard && r.From == o.From && r.To == o.To
}

// Empty reports whether r reads nothing: no example and no label.
func (r Range) Empty() bool {
	return r.From == r.To && (r.Labels == nil || r.Labels.From == r.Labels.To)
}

// CheckRanges is nil when every range names a shard, runs forward from
// a position that is not negative, and follows the one before it in
// shard order, each shard once: the ranges of a boundary, which no
// reader accepts otherwise.
func CheckRanges(rs []Range) error {
	for i, r := range rs {
		if _, err := parseShard(r.Shard); err != nil {
			return err
		}
		if r.From < 0 || r.To < r.From {
			return fmt.Errorf("shard %s: range from %d to %d (want 0 <= from <= to)", r.Shard, r.From, r.To)
		}
		if l := r.Labels; l != nil && (l.From < 0 || l.To < l.From) {
			return fmt.Errorf("shard %s: labels' range from %d to %d (want 0 <= from <= to)", r.Shard, l.From, l.To)
		}
		if i > 0 && CompareShards(rs[i-1].Shard, r.Shard) >= 0 {
			return errors.New("shards " + rs[i-1].Shard + " and " + r.Shard + " are not in shard order, or repeat")
		}
	}
	return nil
}
