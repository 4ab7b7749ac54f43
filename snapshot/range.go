package snapshot

import (
	"errors"
	"fmt"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

// Range is a shard's part of an epoch (docs/scale-out.md): for Kafka the
// offsets o with From <= o < To (positions are next offsets), for
// JetStream the shard's messages with From < sequence <= To (positions
// are last sequences). A generation of a model learned in epochs lists
// its epoch's ranges (Snapshot.Boundary), as the epoch's boundary in the
// epoch log does (epochlog.Boundary, whose Range this is).
type Range struct {
	// Shard is the shard's name, a shardid.ID's String.
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

// CheckRanges is nil when every range names a shard (shardid.Parse),
// runs forward from a position that is not negative, and follows the one
// before it in shard order (shardid.Compare), each shard once: the ranges
// of a boundary, which no reader accepts otherwise.
func CheckRanges(rs []Range) error {
	var prev shardid.ID
	for i, r := range rs {
		id, err := shardid.Parse(r.Shard)
		if err != nil {
			return err
		}
		if r.From < 0 || r.To < r.From {
			return fmt.Errorf("shard %s: range from %d to %d (want 0 <= from <= to)", r.Shard, r.From, r.To)
		}
		if l := r.Labels; l != nil && (l.From < 0 || l.To < l.From) {
			return fmt.Errorf("shard %s: labels' range from %d to %d (want 0 <= from <= to)", r.Shard, l.From, l.To)
		}
		if i > 0 && shardid.Compare(prev, id) >= 0 {
			return errors.New("shards " + rs[i-1].Shard + " and " + r.Shard + " are not in shard order, or repeat")
		}
		prev = id
	}
	return nil
}
