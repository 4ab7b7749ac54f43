package snapshot

import (
	"fmt"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/vmihailenco/msgpack/v5"
)

// Range is a shard's part of an epoch (docs/scale-out.md): for Kafka the
// offsets o with From <= o < To (positions are next offsets), for
// JetStream the shard's messages with From < sequence <= To (positions
// are last sequences). A generation of a model learned in epochs lists
// its epoch's ranges (Snapshot.Boundary), as the epoch's boundary in the
// epoch log does (epochlog.Boundary, whose Range this is).
//
// A range is stored as rangeBody, its shard by name (shardid.ID.String);
// decoding one reads the name back with shardid.Parse, so that a range
// naming no shard fails to decode and naming the name it holds.
type Range struct {
	Shard    shardid.ID
	From, To int64
	// Labels, for a model that joins labels that come later, is the
	// range of the labels' partition co-partitioned with the shard that
	// the epoch reads (docs/labels.md, section 11); From and To are then
	// an upper bound of the examples the epoch learns. nil without
	// labels: such a range encodes as it did before labels.
	Labels *LabelsRange
}

// rangeBody is the wire form of a Range.
type rangeBody struct {
	Shard  string       `msgpack:"shard"`
	From   int64        `msgpack:"from"`
	To     int64        `msgpack:"to"`
	Labels *LabelsRange `msgpack:"labels,omitempty"`
}

// EncodeMsgpack writes r as its wire form, the shard by name.
func (r Range) EncodeMsgpack(enc *msgpack.Encoder) error {
	return enc.Encode(&rangeBody{Shard: r.Shard.String(), From: r.From, To: r.To, Labels: r.Labels})
}

// DecodeMsgpack reads r from its wire form; a shard's name that
// shardid.Parse refuses is an error quoting it.
func (r *Range) DecodeMsgpack(dec *msgpack.Decoder) error {
	var b rangeBody
	if err := dec.Decode(&b); err != nil {
		return err
	}
	id, err := shardid.Parse(b.Shard)
	if err != nil {
		return fmt.Errorf("range: %w", err)
	}
	*r = Range{Shard: id, From: b.From, To: b.To, Labels: b.Labels}
	return nil
}

// LabelsRange is the part of a labels' partition an epoch reads: the
// positions p with From <= p < To, as a Kafka partition's offsets are.
type LabelsRange struct {
	From int64 `msgpack:"from" json:"from"`
	To   int64 `msgpack:"to" json:"to"`
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

// CheckRanges is nil when every range names a shard that has a name
// (shardid.ID.Segment fails for one that has not, as for the zero ID),
// runs forward from a position that is not negative, and follows the one
// before it in shard order (shardid.Compare), each shard once: the ranges
// of a boundary, which no reader accepts otherwise.
func CheckRanges(rs []Range) error {
	for i, r := range rs {
		if _, err := r.Shard.Segment(); err != nil {
			return err
		}
		if r.From < 0 || r.To < r.From {
			return fmt.Errorf("shard %s: range from %d to %d (want 0 <= from <= to)", r.Shard, r.From, r.To)
		}
		if l := r.Labels; l != nil && (l.From < 0 || l.To < l.From) {
			return fmt.Errorf("shard %s: labels' range from %d to %d (want 0 <= from <= to)", r.Shard, l.From, l.To)
		}
		if i > 0 && shardid.Compare(rs[i-1].Shard, r.Shard) >= 0 {
			return fmt.Errorf("shards %s and %s are not in shard order, or repeat", rs[i-1].Shard, r.Shard)
		}
	}
	return nil
}
