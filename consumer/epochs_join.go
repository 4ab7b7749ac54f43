package consumer

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// EpochLabels makes the epochs join labels that come later to the
// shards' examples (docs/labels.md, section 11): shard s's examples E_s
// are joined with the labels' partition co-partitioned with it, L_s, by
// the rule of Join, and each range learns E_s up to its first example
// whose join is not decided by the labels the boundary gives it.
type EpochLabels struct {
	Join JoinConfig
	// Format is the labels' encoding.
	Format wire.Format
	// Shards are the labels' partitions.
	Shards Shards
	// CoShard names the labels' partition co-partitioned with an
	// examples' shard; an error when there is none (the counts differ).
	CoShard func(shard shardid.ID) (shardid.ID, error)
	// State are the joins of the model the epochs continue from, by
	// shard (snapshot.Snapshot.Joins, DecodeJoins); nil for none.
	State map[shardid.ID]*JoinState
	// Marks, if set, is where the head of a shard appends its marks: the
	// shard's labels' partition (docs/labels.md, section 5). LateLabels
	// receives the labels that joined no example.
	Marks      func(shard shardid.ID) (Destination, error)
	LateLabels Destination
}

// joinedResult is what a range of a model with labels gives beside its
// state: where it reached, and the shard's join there.
type joinedResult struct {
	reached int64
	join    []byte
	// state is join decoded, when this worker learned the range: the mix
	// takes it rather than decoding join again.
	state *JoinState
}

// labelsFrom is where shard's labels begin in the next epoch: where the
// mixed model's epoch ended them, or for a shard new to the epochs the
// labels' partition's start.
func (x *Epochs) labelsFrom(ctx context.Context, shard shardid.ID) (int64, error) {
	x.mu.Lock()
	at, ok := x.labelsAt[shard]
	x.mu.Unlock()
	if ok {
		return at, nil
	}
	lshard, err := x.cfg.Labels.CoShard(shard)
	if err != nil {
		return 0, err
	}
	var from int64
	err = x.retry(ctx, NotReadySource, "find where the labels of shard "+shard.String()+" begin", func(ctx context.Context) (err error) {
		from, err = x.cfg.Labels.Shards.Start(ctx, lshard, x.cfg.Start)
		return err
	})
	return from, err
}

// labelsPace is the most labels shard's labels' range reads in the epoch
// being cut, whose examples' ranges hold at most limit messages
// (docs/labels.md, section 11.6): twice that, so that the labels keep
// ahead of the examples, or twice the labels the shard's range read in
// the epoch before if that range stalled (offered examples and reached
// none: its first example waits for labels further on).
func (x *Epochs) labelsPace(shard shardid.ID, limit int64) int64 {
	pace := 2 * max(limit, 1)
	if x.prev == nil {
		return pace
	}
	r, ok := x.prev.ShardRange(shard)
	if !ok || r.Labels == nil || r.To <= r.From {
		return pace
	}
	if reached, ok := x.from[shard]; ok && reached == r.From {
		read := (r.Labels.To - r.Labels.From) / spread(x.cfg.Labels.Shards)
		pace = max(pace, 2*read)
	}
	return pace
}

// offered is where shard's examples offered to an epoch before end: the
// end of its range in the epoch before, or from for a shard new to the
// epochs. An example offered and not decided is decided only by labels
// read after it, so examples offered again without new labels are no
// new data.
func (x *Epochs) offered(shard shardid.ID, from int64) int64 {
	if x.prev != nil {
		if r, ok := x.prev.ShardRange(shard); ok {
			return max(r.To, from)
		}
	}
	return from
}

// labelsRange is the labels' range of shard in the epoch being cut, to
// the labels' end the cutter sees (ends, by the examples' shard), but of
// at most pace labels (labelsPace) and labels.max_pending (Spread
// positions each), so that a range reads at most that many beside those
// its join, J_{e-1,s}, carries (docs/labels.md, section 11.6). The bound
// is not paced by the held labels as the head's reader is: J_{e-1,s}
// knows the examples only up to the reached end, and the labels of the
// examples after it are what moves the reached end on.
func (x *Epochs) labelsRange(ctx context.Context, shard shardid.ID, ends map[shardid.ID]int64, pace int64) (*epochlog.LabelsRange, error) {
	from, err := x.labelsFrom(ctx, shard)
	if err != nil {
		return nil, err
	}
	to, ok := ends[shard]
	if !ok {
		// A shard that left the source's ends keeps its place.
		to = from
	}
	limit := int64(x.cfg.Labels.Join.MaxPending)
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	if pace > 0 {
		limit = min(limit, pace)
	}
	to = min(to, from+limit*spread(x.cfg.Labels.Shards))
	// A label that arrived since the ends were read may put a new
	// shard's start beyond its end: it begins at the end.
	return &epochlog.LabelsRange{From: from, To: max(from, to)}, nil
}

// labelsEnds are the ends of the labels' partitions, by the examples'
// shard each is co-partitioned with. A shard whose labels' partition is
// missing (a partition added to the examples' topic and not yet to the
// labels', which no operator can add to both at once) is waited for, the
// worker not ready and saying which, rather than stopping the worker.
func (x *Epochs) labelsEnds(ctx context.Context, shards []shardid.ID) (map[shardid.ID]int64, error) {
	lshards := make([]shardid.ID, len(shards))
	for i, s := range shards {
		lshard, err := x.cfg.Labels.CoShard(s)
		if err != nil {
			return nil, err
		}
		lshards[i] = lshard
	}
	var by map[shardid.ID]int64
	err := x.retry(ctx, NotReadySource, "read the labels' ends", func(ctx context.Context) error {
		ends, err := x.cfg.Labels.Shards.Ends(ctx)
		if err != nil {
			return err
		}
		by = make(map[shardid.ID]int64, len(shards))
		for i, s := range shards {
			end, ok := ends[lshards[i]]
			if !ok {
				return fmt.Errorf("labels.topics: the labels have no partition %s, co-partitioned with shard %s: waiting for it to be added", lshards[i], s)
			}
			by[s] = end
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return by, nil
}

// restoreJoin is shard's join as the mixed model the epoch learns from
// holds it: J_{e-1,s}, a new join for a shard that has none. cfg is the
// configuration of the model the range learns.
func (x *Epochs) restoreJoin(shard shardid.ID, cfg learner.Config) (*Join, error) {
	x.mu.Lock()
	st := x.joins[shard]
	x.mu.Unlock()
	if st == nil {
		return NewJoin(x.cfg.Labels.Join), nil
	}
	// A range ends before the first example its join does not decide, so
	// J_{e-1,s} holds no pending example (docs/labels.md, section 11.2).
	// One that does (a crafted or foreign generation or shard result)
	// would be taken for the range's first delayed example.
	for i, e := range st.Examples {
		if !e.Learned {
			return nil, fmt.Errorf("join of shard %s: example %d at offset %d waits for its label, and the join a model learned in epochs records holds none: "+
				"the generation or shard result that recorded it is damaged", shard, i, e.Offset)
		}
	}
	return RestoreJoin(x.cfg.Labels.Join, st, cfg)
}

// readLabels gives join the labels of shard's range r: L_s from
// r.Labels.From to r.Labels.To, in order.
func (x *Epochs) readLabels(ctx context.Context, shard shardid.ID, r *epochlog.LabelsRange, join *Join, cfg learner.Config) error {
	if r.From == r.To {
		return nil
	}
	lshard, err := x.cfg.Labels.CoShard(shard)
	if err != nil {
		return err
	}
	// The labels' reader is kept from one range of the shard to the next,
	// as the examples' is: the next range's labels begin where these end.
	var src *rangeReader
	err = x.retry(ctx, NotReadySource, fmt.Sprintf("open the labels %s at %d", lshard, r.From), func(ctx context.Context) (err error) {
		src, err = x.labelReaders.open(ctx, lshard, r.From)
		return err
	})
	if err != nil {
		return fmt.Errorf("labels %s: %w", lshard, err)
	}
	src.end = ResumeTo(r.To)
	parked := false
	defer func() {
		if !parked {
			src.Close() //nolint:errcheck // it only read
		}
	}()
	rg := &Range{Source: src, End: src.end, Sources: []string{lshard.String()}, Last: r.From}
	dec := wire.NewDecoder(cfg, x.cfg.Worker.Decoder)
	var scratch learner.Example
	for !rg.Complete() {
		msgs, err := rg.Fetch(ctx, max(x.cfg.Worker.Batch, 1))
		if err != nil {
			if rg.Complete() {
				break
			}
			return fmt.Errorf("labels %s: %w", lshard, err)
		}
		for i := range msgs {
			joinLabel(join, dec, x.cfg.Labels.Format, &msgs[i], &scratch)
		}
	}
	x.labelReaders.park(src, r.To)
	parked = true
	return nil
}

// ownsLabelsOf says, of a labels' partition, whether it is co-partitioned
// with a shard of b this worker owns: its reader is kept.
func (x *Epochs) ownsLabelsOf(b *epochlog.Boundary) func(shardid.ID) bool {
	owned := map[shardid.ID]bool{}
	if x.cfg.Labels != nil {
		for _, r := range b.Shards {
			if l, err := x.cfg.Labels.CoShard(r.Shard); err == nil && x.owns(r.Shard) {
				owned[l] = true
			}
		}
	}
	return func(l shardid.ID) bool { return owned[l] }
}

// joinLabel gives join the record m of the labels' log, decoded with dec
// as format says (x is scratch): a label, a mark, or a record that is
// neither, whose time counts all the same, as the head counts it.
func joinLabel(join *Join, dec *wire.Decoder, format wire.Format, m *Message, x *learner.Example) {
	t := Millis(m.Time)
	rec, err := dec.DecodeLabel(m.Value, format, x)
	if err != nil {
		join.Skip(t)
		return
	}
	join.Label(m.Position.Offset, t, rec.Mark, rec.ID, rec.Label)
}

// rangeJoinOf is the join of range r, which reads labels: the shard's
// join as the mixed model holds it, given every label of the range's
// part of the labels' partition, before any example of the range.
// Reading the labels first is one of the orders in which the join
// decides alike (docs/labels.md, section 2), and the one that decides
// the most examples of the range without reading past its labels.
func (x *Epochs) rangeJoinOf(ctx context.Context, r epochlog.Range, cfg learner.Config) (*rangeJoin, error) {
	if x.cfg.Labels == nil {
		return nil, fmt.Errorf("%w: labels: the epoch log joins labels to shard %s, and this worker has no labels configured", ErrFatal, r.Shard)
	}
	join, err := x.restoreJoin(r.Shard, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFatal, err)
	}
	if err := x.readLabels(ctx, r.Shard, r.Labels, join, cfg); err != nil {
		return nil, err
	}
	return newRangeJoin(join, cfg, x.cfg.Worker.Decoder, x.cfg.Worker.Format, r.From, r.To), nil
}

// rangeJoin decides the delayed examples of one range of a model with
// labels, with the shard's join after the range's labels: it is the
// range's End, which places each example of the shard in the range while
// its join is decided and ends the range before the first whose join is
// not (docs/labels.md, section 11.1), and it gives the range's worker the
// label of each delayed example it placed.
//
// The range's reader and the range itself both place each message, in
// order: a message placed before is placed again as it was, from what
// was recorded of it, never decided twice.
type rangeJoin struct {
	join   *Join
	dec    *wire.Decoder
	format wire.Format
	to     int64
	x      learner.Example

	mu sync.Mutex
	// placed is the Resume of the last message placed; stop that of the
	// first not decided, math.MaxInt64 until one is met.
	placed, stop int64
	// labels are the decided labels of the delayed examples placed and
	// not yet taken by the worker, in order.
	labels []decidedLabel
	next   int
}

type decidedLabel struct {
	resume  int64
	label   int
	labeled bool
}

func newRangeJoin(join *Join, cfg learner.Config, opts wire.DecoderOptions, format wire.Format, from, to int64) *rangeJoin {
	return &rangeJoin{join: join, dec: wire.NewDecoder(cfg, opts), format: format, to: to, placed: from, stop: math.MaxInt64}
}

// reached is where the range reached once complete: returned, the Resume
// of the last message it delivered, of delivered; or its end when it
// delivered none and its join stopped before no example. Such a range
// holds no message of its shard (they were deleted, by a purge or
// retention, or its positions are those of other shards of a stream):
// ended at its start, it would be cut again as it was, and the shard
// would stop there for ever.
func (j *rangeJoin) reached(returned int64, delivered uint64) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if delivered == 0 && j.stop == math.MaxInt64 {
		return j.to
	}
	return returned
}

// end places m against the range's end (Range.End).
func (j *rangeJoin) end(m *Message) (in, last bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m.Resume <= j.placed || m.Resume >= j.stop {
		in = m.Resume < j.stop && m.Resume <= j.to
		return in, m.Resume >= j.to || m.Resume == j.stop
	}
	if m.Resume > j.to {
		return false, true
	}
	t := Millis(m.Time)
	meta, err := decodeExample(j.dec, j.format, m.Value, &j.x)
	delayed := err == nil && meta.HasID && !j.x.Labeled
	if delayed && !j.join.Decides(t, meta.ID) {
		j.stop = m.Resume
		return false, true
	}
	j.placed = m.Resume
	j.join.Example(m.Position.Offset, t, delayed, meta.ID, Served{})
	if delayed {
		off, decided, ok := j.join.Next()
		if !ok || !decided || off != m.Position.Offset {
			// Decides said it is: the rule is one, this cannot be.
			panic(fmt.Sprintf("the join of an epoch's range: example at offset %d decided and not", m.Position.Offset))
		}
		label, labeled, _ := j.join.Learned()
		j.labels = append(j.labels, decidedLabel{resume: m.Resume, label: label, labeled: labeled})
	}
	return true, m.Resume >= j.to
}

// take is the decided label of m, a delayed example the range placed,
// for the range's worker.
func (j *rangeJoin) take(m *Message) (label int, labeled bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.next >= len(j.labels) || j.labels[j.next].resume != m.Resume {
		// The worker decodes what end decoded: it cannot see another
		// delayed example.
		panic(fmt.Sprintf("the join of an epoch's range: no decided label for the example at %d", m.Resume))
	}
	d := j.labels[j.next]
	j.next++
	if j.next == len(j.labels) {
		j.labels, j.next = j.labels[:0], 0
	}
	if !d.labeled {
		return 0, false
	}
	return d.label, true
}

// state is the shard's join where the range reached.
func (j *rangeJoin) state(shard, labelsShard string, reached int64) *JoinState {
	st := j.join.State(reached)
	st.Source, st.LabelsSource = shard, labelsShard
	return st
}

// keepJoined records where a range this worker learned or read reached,
// and its join, for the mix of its epoch.
func (x *Epochs) keepJoined(res *epochlog.ShardResult) {
	if res.Labels == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.joinedResults == nil {
		x.joinedResults = map[resultKey]joinedResult{}
	}
	x.joinedResults[resultKey{res.Epoch, res.BoundarySHA256, res.Shard}] = joinedResult{reached: res.Reached, join: res.Join}
}

// mixJoins moves the model's positions and joins past epoch b, whose
// boundary's digest is sha: each shard with labels to where its range
// reached, with the join its result recorded, and a shard with an empty
// range where it was, with its join.
func (x *Epochs) mixJoins(b *epochlog.Boundary, sha [32]byte) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.labelsAt = labelsEnds(b)
	for _, r := range b.Shards {
		if r.Labels == nil || r.Empty() {
			continue
		}
		k := resultKey{b.Epoch, sha, r.Shard}
		jr, ok := x.joinedResults[k]
		if !ok {
			return fmt.Errorf("epoch %d, shard %s: no join in its result", b.Epoch, r.Shard)
		}
		st := jr.state
		if st == nil {
			var err error
			if st, err = DecodeJoinState(jr.join); err != nil {
				return fmt.Errorf("%w: epoch %d, shard %s: %w", ErrFatal, b.Epoch, r.Shard, err)
			}
		}
		if x.joins == nil {
			x.joins = map[shardid.ID]*JoinState{}
		}
		x.joins[r.Shard] = st
		x.from[r.Shard] = jr.reached
		delete(x.joinedResults, k)
	}
	return nil
}

// labelsEnds are where b ends each shard's labels, by shard; nil for a
// boundary without labels, or none.
func labelsEnds(b *epochlog.Boundary) map[shardid.ID]int64 {
	if b == nil {
		return nil
	}
	var at map[shardid.ID]int64
	for _, r := range b.Shards {
		if r.Labels != nil {
			if at == nil {
				at = map[shardid.ID]int64{}
			}
			at[r.Shard] = r.Labels.To
		}
	}
	return at
}

// encodedJoins are the shards' joins as a generation records them.
func (x *Epochs) encodedJoins() (map[string]msgpack.RawMessage, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.joins) == 0 {
		return nil, nil
	}
	out := make(map[string]msgpack.RawMessage, len(x.joins))
	for s, st := range x.joins {
		b, err := st.encode()
		if err != nil {
			return nil, err
		}
		out[s.String()] = b
	}
	return out, nil
}

// DecodeJoins decodes the shards' joins a generation of a model learned
// in epochs recorded (snapshot.Snapshot.Joins), by shard: each key is a
// shard's name (shardid.Parse), and one that is not is an error quoting
// it. nil for none.
func DecodeJoins(joins map[string]msgpack.RawMessage) (map[shardid.ID]*JoinState, error) {
	if len(joins) == 0 {
		return nil, nil
	}
	out := make(map[shardid.ID]*JoinState, len(joins))
	for name, b := range joins {
		s, err := shardid.Parse(name)
		if err != nil {
			return nil, fmt.Errorf("joins: %w", err)
		}
		st, err := DecodeJoinState(b)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", s, err)
		}
		out[s] = st
	}
	return out, nil
}

// Joins are the shards' joins the newest mixed model holds, by shard. It
// is only safe to use once Run returned.
func (x *Epochs) Joins() map[shardid.ID]*JoinState { return x.joins }

// JoinCounts are the outcomes of the shards' joins the newest mixed
// model holds, summed. It is only safe to use once Run returned.
func (x *Epochs) JoinCounts() JoinCounts {
	var c JoinCounts
	for _, st := range x.joins {
		n := st.Counts
		c.Labels[LabelJoined] += n.Joined
		c.Labels[LabelLate] += n.Late
		c.Labels[LabelUnknown] += n.Unknown
		c.Labels[LabelDuplicate] += n.Duplicate
		c.Marks += n.Marks
		c.Expired += n.Expired
	}
	return c
}
