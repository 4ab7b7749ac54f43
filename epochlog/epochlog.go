// Package epochlog is the epoch protocol's record (docs/scale-out.md):
// the artefacts that workers learning one model over many shards agree
// on, their encodings and their checks, kept in a snapshot.Store beside
// the model's generations. A boundary (B_e) decides where epoch e ends
// in every shard, before anyone learns it; a shard result (R_{e,s}) is
// what learning shard s's range of it gave; the mixed model of an epoch
// is a generation (package snapshot). The loop that cuts, learns, waits
// at the barrier and mixes is consumer.Epochs.
//
// The log of a model lives beside its generations:
//
//	<prefix>/<model>/epochs/<e, 20 digits>/boundary.msgpack           B_e
//	<prefix>/<model>/epochs/<e, 20 digits>/shard/<segment>.msgpack    R_{e,s}
//	<prefix>/<model>/epochs/probe/<writer>-<random>                   the start-up probe
//
// Every object is created only if absent and never changed. It has the
// snapshot envelope (format, CRC-32 checksum, body: snapshot.Seal)
// around a body with a kind, "boundary" or "shard".
package epochlog

import (
	"errors"
	"fmt"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// ErrDamagedLog marks an epoch log object that cannot be read: a bad
// checksum, an unknown format or kind, a body that does not decode, or
// fields that contradict its key. Unlike a corrupt generation, a damaged
// log object is never skipped, since skipping it would change the
// model's history: the worker stops and names the key.
var ErrDamagedLog = errors.New("damaged epoch log")

// ErrOtherHistory marks an epoch log object that exists with other
// content than this worker computed: a boundary cut under another history
// configuration or from a model with other bits, or a shard result that
// differs from this worker's. A second writer with another configuration
// shares the model, or the workers' arithmetic diverged; no retry mends
// it.
var ErrOtherHistory = errors.New("another history of the model")

// Reasons a boundary was cut (Cut.Reason; docs/scale-out.md, section
// 3.4).
const (
	// CutExamples: a shard had epoch_examples new positions.
	CutExamples = "examples"
	// CutInterval: the interval passed with new data.
	CutInterval = "interval"
	// CutStart: the first epoch of a new model, which fixes every shard's
	// start.
	CutStart = "start"
	// CutShards: the set of shards grew.
	CutShards = "shards"
	// CutSnapshot: a shard had as many new positions as a snapshot due by
	// snapshot.every allowed, fewer than epoch_examples.
	CutSnapshot = "snapshot"
	// CutBacklog: a shard whose range in the previous boundary held as
	// many positions as its cut allowed has new data: what a full epoch
	// left waiting is learned at once, not after the interval.
	CutBacklog = "backlog"
)

// Range is a shard's part of an epoch: for Kafka the offsets o with
// From <= o < To (positions are next offsets), for JetStream the shard's
// messages with From < sequence <= To (positions are last sequences). It
// is snapshot's, since a generation of the mixed model lists its epoch's
// ranges too (snapshot.Snapshot.Boundary).
type Range = snapshot.Range

// LabelsRange is the part of a labels' partition a Range reads.
type LabelsRange = snapshot.LabelsRange

// Boundary is B_e, the decision of where epoch e ends in every shard. It
// is recorded before anyone learns the epoch; whoever creates it first
// wins, and everyone else adopts it.
type Boundary struct {
	Model string
	Epoch uint64
	// ConfigDigest is the SHA-256 of the history configuration.
	ConfigDigest [32]byte
	// BaseStateSHA256 is the base digest of W_{e-1}, the model the
	// epoch learns from (docs/scale-out.md, section 2.2): its
	// learner.State.Digest where the chain of base digests begins, a
	// step digest from the base before it after a mix.
	BaseStateSHA256 [32]byte
	// Shards are every shard of the epoch, empty ranges included, in
	// shard order (shardid.Compare).
	Shards []Range
	// Promote, if set, is the promotion request the cutter read: every
	// worker applies it to the epoch's mixed model unless an automatic
	// promotion comes first (docs/scale-out.md, section 3.11).
	Promote *Promote
	// Cut is provenance: it is never compared.
	Cut Cut
}

// Cut says who cut a boundary, when and why.
type Cut struct {
	Writer  string
	Created time.Time
	// Reason is one of CutExamples, CutSnapshot, CutInterval, CutBacklog,
	// CutStart, CutShards.
	Reason string
	// EpochExamples and Interval are the cut rule's settings.
	EpochExamples int
	Interval      time.Duration
}

// Promote is a promotion request recorded in a boundary: the challenger
// to promote and the request's id (snapshot.PromotionRequest).
type Promote struct {
	Challenger string `msgpack:"challenger"`
	Request    string `msgpack:"request"`
}

// ShardRange is the range of shard in b.
func (b *Boundary) ShardRange(shard shardid.ID) (Range, bool) {
	for _, r := range b.Shards {
		if r.Shard == shard {
			return r, true
		}
	}
	return Range{}, false
}

// Follows is nil when b is the boundary after prev in one history: the
// same model and configuration digest, the next epoch, and every shard of
// prev still in b, starting where it ended in prev (a shard never leaves;
// a new one may join). Otherwise the log is damaged, and the error wraps
// ErrDamagedLog.
func (b *Boundary) Follows(prev *Boundary) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s does not follow epoch %d's: %s: %w",
			b.Epoch, b.Model, prev.Epoch, fmt.Sprintf(format, args...), ErrDamagedLog)
	}
	switch {
	case b.Model != prev.Model:
		return fail("that one is of model %s", prev.Model)
	case b.Epoch != prev.Epoch+1:
		return fail("epoch %d is not the next", b.Epoch)
	case b.ConfigDigest != prev.ConfigDigest:
		return fail("config digest %x, epoch %d's is %x", b.ConfigDigest, prev.Epoch, prev.ConfigDigest)
	}
	for _, p := range prev.Shards {
		r, ok := b.ShardRange(p.Shard)
		if !ok {
			return fail("shard %s left it", p.Shard)
		}
		if (r.Labels == nil) != (p.Labels == nil) {
			return fail("shard %s joins labels in one epoch and not in the other", p.Shard)
		}
		if r.Labels == nil {
			if r.From != p.To {
				return fail("shard %s starts at %d, where epoch %d ended at %d", p.Shard, r.From, prev.Epoch, p.To)
			}
			continue
		}
		// With labels an epoch ends a shard where its range reached
		// (ShardResult.Reached), which only the results record: the
		// boundary can only be within the range before it.
		if r.Labels.From != p.Labels.To {
			return fail("shard %s reads its labels from %d, where epoch %d ended them at %d", p.Shard, r.Labels.From, prev.Epoch, p.Labels.To)
		}
		if r.From < p.From || r.From > p.To {
			return fail("shard %s starts at %d, outside epoch %d's range from %d to %d", p.Shard, r.From, prev.Epoch, p.From, p.To)
		}
	}
	return nil
}

// ShardResult is R_{e,s}: what learning shard s's range of epoch e from
// W_{e-1} gave. It holds the learned state W_{e,s}: stored as the
// coordinates of its weights, sums and variances whose bits differ from
// W_{e-1} and the rest of the state whole (or the whole state, when that
// is smaller), it is written and read against W_{e-1} (a Base), and read
// bit for bit. Its existence asserts that every output of the range is
// durable.
type ShardResult struct {
	Model    string
	Epoch    uint64
	Shard    shardid.ID
	From, To int64
	// BoundarySHA256 is the SHA-256 of the stored boundary of the epoch
	// (as CreateBoundary and Boundary return it); ConfigDigest and
	// BaseStateSHA256 are the boundary's.
	BoundarySHA256, ConfigDigest, BaseStateSHA256 [32]byte
	// Messages counts the range's messages, DeadLetters those of them
	// that were dead-lettered; Last is the position (Resume) of the last.
	Messages, DeadLetters uint64
	Last                  int64
	// Labels is the boundary's range of the labels' partition, for a
	// model that joins labels that come later (docs/labels.md, section
	// 11); nil without. Reached is then where the range's learning
	// stopped (the position before its first example whose join was not
	// decided, or To), and Join the shard's join there, a msgpack value
	// (consumer.JoinState).
	Labels  *LabelsRange
	Reached int64
	Join    []byte
	// State is W_{e,s}, whole: Log.Shard applies the stored changes to
	// its base.
	State *learner.State
	// Changed, when not nil, holds every coordinate at which State's
	// per-weight vectors may differ from the base's (learner.Coords): a
	// range's Model.Changed when written, so that WriteShard looks for
	// the changes there alone; the coordinates of the stored changes when
	// read. It is not stored, and nil means any may differ.
	Changed *learner.Coords
	// ChallengersChanged are Changed for each of State's challengers, in
	// order (docs/scale-out.md, section 3.10); nil, or a nil element, for
	// any. Not stored either.
	ChallengersChanged []*learner.Coords
	// Writer and Created are provenance: two results that differ only in
	// them are the same.
	Writer  string
	Created time.Time
}

// Base is W_{e-1}, the state every result of epoch e was learned from,
// with its base digest (docs/scale-out.md, section 2.2). A shard result
// is written as changes against it and read by applying them to it, so
// neither is done without it; its digest must be the result's
// BaseStateSHA256. Its state must not change while it is in use, and it
// is only read: one Base serves any number of results and goroutines.
type Base struct {
	state  *learner.State
	digest [32]byte
}

// NewBase is st as the base of an epoch's results where a chain of base
// digests begins: the state is kept, not copied, and its digest is its
// learner.State.Digest, computed here.
func NewBase(st *learner.State) *Base {
	return &Base{state: st, digest: st.Digest()}
}

// BaseOf is st as a base whose digest is known: a mix's step digest
// (learner.State.DigestSince from the base before it), or the one a
// generation records. The state is kept, not copied.
func BaseOf(st *learner.State, digest [32]byte) *Base {
	return &Base{state: st, digest: digest}
}

// State is the base's state, shared: the caller only reads it (a model
// restored from it, a mix over it).
func (b *Base) State() *learner.State { return b.state }

// Digest is the base digest: the BaseStateSHA256 of the results learned
// from it.
func (b *Base) Digest() [32]byte { return b.digest }

// Verify is nil when r was learned from boundary b, whose stored bytes
// have the SHA-256 boundarySHA256: the same model and epoch, b's range of
// the shard, and b's digests. Otherwise r belongs to another history, and
// the error wraps ErrOtherHistory.
func (r *ShardResult) Verify(b *Boundary, boundarySHA256 [32]byte) error {
	rg, ok := b.ShardRange(r.Shard)
	var what string
	switch {
	case r.Model != b.Model || r.Epoch != b.Epoch:
		what = fmt.Sprintf("the boundary is of epoch %d of model %s", b.Epoch, b.Model)
	case !ok:
		what = "the boundary has no such shard"
	case r.From != rg.From || r.To != rg.To:
		what = fmt.Sprintf("its range is %d to %d, the boundary's %d to %d", r.From, r.To, rg.From, rg.To)
	case !sameLabels(r.Labels, rg.Labels):
		what = fmt.Sprintf("its labels' range is %v, the boundary's %v", r.Labels, rg.Labels)
	case r.Labels != nil && (r.Reached < r.From || r.Reached > r.To):
		what = fmt.Sprintf("it reached %d, outside its range from %d to %d", r.Reached, r.From, r.To)
	case r.BoundarySHA256 != boundarySHA256:
		what = fmt.Sprintf("it was learned from the boundary with SHA-256 %x, the stored one has %x", r.BoundarySHA256, boundarySHA256)
	case r.ConfigDigest != b.ConfigDigest:
		what = fmt.Sprintf("config digest %x, the boundary's is %x", r.ConfigDigest, b.ConfigDigest)
	case r.BaseStateSHA256 != b.BaseStateSHA256:
		what = fmt.Sprintf("base state %x, the boundary's is %x", r.BaseStateSHA256, b.BaseStateSHA256)
	default:
		return nil
	}
	return fmt.Errorf("snapshot: the result of shard %s for epoch %d of model %s, written by %s: %s: %w",
		r.Shard, r.Epoch, r.Model, r.Writer, what, ErrOtherHistory)
}

// sameLabels reports whether a and b are the same labels' range, or both
// none.
func sameLabels(a, b *LabelsRange) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Fatal reports whether err, from the epoch log or the store it is kept
// in, is one that no retry mends, so that the writer must stop: those of
// snapshot.Fatal, a log object written under another history
// (ErrOtherHistory), a damaged log object (ErrDamagedLog), or a store
// that ignores create-if-absent (ErrNoConditionalCreate).
func Fatal(err error) bool {
	if snapshot.Fatal(err) {
		return true
	}
	for _, target := range []error{ErrOtherHistory, ErrDamagedLog, ErrNoConditionalCreate} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// SortRanges sorts rs in shard order (shardid.Compare), the order a
// boundary lists its shards in.
func SortRanges(rs []Range) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && shardid.Compare(rs[j-1].Shard, rs[j].Shard) > 0; j-- {
			rs[j-1], rs[j] = rs[j], rs[j-1]
		}
	}
}
