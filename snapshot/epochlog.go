package snapshot

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// The epoch log of a model learned in epochs (docs/scale-out.md) lives
// beside its generations:
//
//	<prefix>/<model>/epochs/<e, 20 digits>/boundary.msgpack           B_e
//	<prefix>/<model>/epochs/<e, 20 digits>/shard/<segment>.msgpack    R_{e,s}
//	<prefix>/<model>/epochs/probe/<writer>-<random>                   the start-up probe
//
// Every object is created only if absent and never changed. It has the
// snapshot envelope (format, CRC-32 checksum, body) around a body with a
// kind, "boundary" or "shard".

const (
	epochsDir    = "epochs/"
	probeDir     = epochsDir + "probe/"
	shardDir     = "shard/"
	boundaryName = "boundary" + keyExt

	kindBoundary = "boundary"
	kindShard    = "shard"
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
)

// Range is a shard's part of an epoch: for Kafka the offsets o with
// From <= o < To (positions are next offsets), for JetStream the shard's
// messages with From < sequence <= To (positions are last sequences).
type Range struct {
	Shard string `msgpack:"shard"`
	From  int64  `msgpack:"from"`
	To    int64  `msgpack:"to"`
}

// Boundary is B_e, the decision of where epoch e ends in every shard. It
// is recorded before anyone learns the epoch; whoever creates it first
// wins, and everyone else adopts it.
type Boundary struct {
	Model string
	Epoch uint64
	// ConfigDigest is the SHA-256 of the history configuration.
	ConfigDigest [32]byte
	// BaseStateSHA256 is the digest (learner.State.Digest) of W_{e-1},
	// the model the epoch learns from.
	BaseStateSHA256 [32]byte
	// Shards are every shard of the epoch, empty ranges included, in
	// shard order (CompareShards).
	Shards []Range
	// Cut is provenance: it is never compared.
	Cut Cut
}

// Cut says who cut a boundary, when and why.
type Cut struct {
	Writer  string
	Created time.Time
	// Reason is one of CutExamples, CutInterval, CutStart, CutShards.
	Reason string
	// EpochExamples and Interval are the cut rule's settings.
	EpochExamples int
	Interval      time.Duration
}

// ShardRange is the range of shard in b.
func (b *Boundary) ShardRange(shard string) (Range, bool) {
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
		if r.From != p.To {
			return fail("shard %s starts at %d, where epoch %d ended at %d", p.Shard, r.From, prev.Epoch, p.To)
		}
	}
	return nil
}

// ShardResult is R_{e,s}: what learning shard s's range of epoch e from
// W_{e-1} gave. It holds the whole learned state W_{e,s}, encoded as a
// snapshot's state is, so that a mix reads it exactly. Its existence
// asserts that every output of the range is durable.
type ShardResult struct {
	Model    string
	Epoch    uint64
	Shard    string
	From, To int64
	// BoundarySHA256 is the SHA-256 of the stored boundary of the epoch
	// (as CreateBoundary and Boundary return it); ConfigDigest and
	// BaseStateSHA256 are the boundary's.
	BoundarySHA256, ConfigDigest, BaseStateSHA256 [32]byte
	// Messages counts the range's messages, DeadLetters those of them
	// that were dead-lettered; Last is the position (Resume) of the last.
	Messages, DeadLetters uint64
	Last                  int64
	// State is W_{e,s}.
	State *learner.State
	// Writer and Created are provenance: two results that differ only in
	// them are the same.
	Writer  string
	Created time.Time
}

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

func epochDir(prefix, model string, e uint64) string {
	return fmt.Sprintf("%s%s%0*d/", modelDir(prefix, model), epochsDir, generationDigits, e)
}

// BoundaryKey is where the boundary of epoch e of model is kept under
// prefix: "<prefix>/<model>/epochs/<e, zero-padded to 20 digits>/boundary.msgpack".
func BoundaryKey(prefix, model string, e uint64) string {
	return epochDir(prefix, model, e) + boundaryName
}

// ShardKey is where shard's result for epoch e of model is kept under
// prefix: "<prefix>/<model>/epochs/<e, 20 digits>/shard/<segment>.msgpack",
// the segment being ShardSegment(shard), whose error it returns.
func ShardKey(prefix, model string, e uint64, shard string) (string, error) {
	seg, err := ShardSegment(shard)
	if err != nil {
		return "", err
	}
	return epochDir(prefix, model, e) + shardDir + seg + keyExt, nil
}

// boundaryBody is the wire form of a Boundary.
type boundaryBody struct {
	Kind            string  `msgpack:"kind"`
	Model           string  `msgpack:"model"`
	Epoch           uint64  `msgpack:"epoch"`
	Prev            uint64  `msgpack:"prev"`
	ConfigDigest    []byte  `msgpack:"config_digest"`
	BaseStateSHA256 []byte  `msgpack:"base_state_sha256"`
	Shards          []Range `msgpack:"shards"`
	Cut             cutBody `msgpack:"cut"`
}

type cutBody struct {
	Writer        string `msgpack:"writer"`
	Created       string `msgpack:"created"` // RFC 3339
	Reason        string `msgpack:"reason"`
	EpochExamples int    `msgpack:"epoch_examples"`
	Interval      string `msgpack:"interval"` // as time.Duration writes it: "5s"
}

// shardBody is the wire form of a ShardResult.
type shardBody struct {
	Kind            string    `msgpack:"kind"`
	Model           string    `msgpack:"model"`
	Epoch           uint64    `msgpack:"epoch"`
	Shard           string    `msgpack:"shard"`
	From            int64     `msgpack:"from"`
	To              int64     `msgpack:"to"`
	BoundarySHA256  []byte    `msgpack:"boundary_sha256"`
	ConfigDigest    []byte    `msgpack:"config_digest"`
	BaseStateSHA256 []byte    `msgpack:"base_state_sha256"`
	Messages        uint64    `msgpack:"messages"`
	DeadLetters     uint64    `msgpack:"dead_letters"`
	Last            int64     `msgpack:"last"`
	State           stateBody `msgpack:"state"`
	Writer          string    `msgpack:"writer"`
	Created         string    `msgpack:"created"` // RFC 3339
}

// checkBoundary refuses a boundary that no reader would accept.
func checkBoundary(b *Boundary) error {
	if err := checkModel(b.Model); err != nil {
		return err
	}
	switch {
	case b.Epoch == 0:
		return fmt.Errorf("snapshot: model %s: a boundary of epoch 0 (epochs count from 1)", b.Model)
	case b.ConfigDigest == [32]byte{} || b.BaseStateSHA256 == [32]byte{}:
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s has no config digest or base state digest", b.Epoch, b.Model)
	}
	if err := checkRanges(b.Shards); err != nil {
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s: %w", b.Epoch, b.Model, err)
	}
	return nil
}

func marshalBoundary(b *Boundary) ([]byte, error) {
	shards := b.Shards
	if shards == nil {
		shards = []Range{}
	}
	raw, err := encode(&boundaryBody{
		Kind:            kindBoundary,
		Model:           b.Model,
		Epoch:           b.Epoch,
		Prev:            b.Epoch - 1,
		ConfigDigest:    b.ConfigDigest[:],
		BaseStateSHA256: b.BaseStateSHA256[:],
		Shards:          shards,
		Cut: cutBody{
			Writer:        b.Cut.Writer,
			Created:       b.Cut.Created.UTC().Format(time.RFC3339Nano),
			Reason:        b.Cut.Reason,
			EpochExamples: b.Cut.EpochExamples,
			Interval:      b.Cut.Interval.String(),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: encode boundary: %w", err)
	}
	return seal(raw)
}

// damaged is the error for a log object at key that cannot be what its
// key says.
func damaged(key, format string, args ...any) error {
	return fmt.Errorf("epoch log %s: %w: %s", key, ErrDamagedLog, fmt.Sprintf(format, args...))
}

// openLog returns the body of the log object data stored at key, of the
// kind the key holds: the envelope's format and checksum checked, and the
// kind.
func openLog(key, kind string, data []byte) ([]byte, error) {
	raw, err := unseal(data)
	if err != nil {
		return nil, damaged(key, "%v", err)
	}
	var head struct {
		Kind string `msgpack:"kind"`
	}
	if err := msgpack.Unmarshal(raw, &head); err != nil {
		return nil, damaged(key, "body: %v", err)
	}
	switch head.Kind {
	case kind:
		return raw, nil
	case kindBoundary, kindShard:
		return nil, damaged(key, "a %s where a %s belongs", head.Kind, kind)
	}
	return nil, damaged(key, "unknown kind %q (a newer hyperplane wrote it?)", head.Kind)
}

// unmarshalBoundary reads the boundary stored at key, which must be that
// of epoch e of model.
func unmarshalBoundary(key, model string, e uint64, data []byte) (*Boundary, error) {
	raw, err := openLog(key, kindBoundary, data)
	if err != nil {
		return nil, err
	}
	var bb boundaryBody
	if err := msgpack.Unmarshal(raw, &bb); err != nil {
		return nil, damaged(key, "body: %v", err)
	}
	if bb.Model != model || bb.Epoch != e || bb.Prev != e-1 {
		return nil, damaged(key, "it holds the boundary of epoch %d (after %d) of model %s", bb.Epoch, bb.Prev, bb.Model)
	}
	b := &Boundary{Model: bb.Model, Epoch: bb.Epoch, Shards: bb.Shards}
	if b.ConfigDigest, err = digestArray("config_digest", bb.ConfigDigest, false); err != nil {
		return nil, damaged(key, "%v", err)
	}
	if b.BaseStateSHA256, err = digestArray("base_state_sha256", bb.BaseStateSHA256, false); err != nil {
		return nil, damaged(key, "%v", err)
	}
	if err := checkRanges(b.Shards); err != nil {
		return nil, damaged(key, "shards: %v", err)
	}
	c := bb.Cut
	b.Cut = Cut{Writer: c.Writer, Reason: c.Reason, EpochExamples: c.EpochExamples}
	if b.Cut.Created, err = time.Parse(time.RFC3339Nano, c.Created); err != nil {
		return nil, damaged(key, "cut created: %v", err)
	}
	if b.Cut.Interval, err = time.ParseDuration(c.Interval); err != nil {
		return nil, damaged(key, "cut interval: %v", err)
	}
	return b, nil
}

// CreateBoundary records b as the boundary of epoch b.Epoch of b.Model
// unless one is recorded already, and returns the recorded boundary with
// the SHA-256 of its stored bytes (for ShardResult.BoundarySHA256).
//
// If a boundary exists, whether found first or created by another worker
// in the same instant, it is read and returned instead: the caller adopts
// it, since cuts depend on timing. It must have b's config digest and base
// state digest; one with others was cut under another history, and the
// error wraps ErrOtherHistory and names both digests and its writer. The
// caller checks that the stored boundary follows the previous one
// (Boundary.Follows). A boundary that no reader would accept (epoch 0, a
// zero digest, shards out of order or a range that runs backwards) is
// refused before the store is touched.
//
// On any other error the boundary may or may not exist: calling again
// either creates it or adopts it.
func (s *Store) CreateBoundary(ctx context.Context, b *Boundary) (stored *Boundary, sha [32]byte, err error) {
	defer s.hide(&err)
	if err := checkBoundary(b); err != nil {
		return nil, sha, err
	}
	key := BoundaryKey(s.prefix, b.Model, b.Epoch)
	data, err := marshalBoundary(b)
	if err != nil {
		return nil, sha, err
	}
	exists, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return nil, sha, fmt.Errorf("epoch log %s: %w", key, err)
	}
	if !exists {
		err := s.create(ctx, key, data)
		if err == nil {
			stored, err := unmarshalBoundary(key, b.Model, b.Epoch, data)
			return stored, sha256.Sum256(data), err
		}
		if !errors.Is(err, errTaken) {
			return nil, sha, fmt.Errorf("epoch log %s: %w", key, err)
		}
	}
	if stored, sha, err = s.Boundary(ctx, b.Model, b.Epoch); err != nil {
		return nil, sha, err
	}
	var why []string
	if stored.ConfigDigest != b.ConfigDigest {
		why = append(why, "another history configuration (give one of the two its own model.name)")
	}
	if stored.BaseStateSHA256 != b.BaseStateSHA256 {
		why = append(why, fmt.Sprintf("another W_%d, with other bits (another version or architecture?)", b.Epoch-1))
	}
	if why != nil {
		return nil, [32]byte{}, fmt.Errorf("epoch log %s: the boundary of epoch %d was cut by %s at %s with config digest %x and base state %x, "+
			"this worker has config digest %x and base state %x: %s: %w",
			key, b.Epoch, stored.Cut.Writer, stored.Cut.Created.Format(time.RFC3339), stored.ConfigDigest, stored.BaseStateSHA256,
			b.ConfigDigest, b.BaseStateSHA256, strings.Join(why, " and "), ErrOtherHistory)
	}
	return stored, sha, nil
}

// Boundary reads the boundary of epoch e of model, with the SHA-256 of
// its stored bytes. An absent one gives an error wrapping ErrNotFound, a
// damaged one an error wrapping ErrDamagedLog.
func (s *Store) Boundary(ctx context.Context, model string, e uint64) (_ *Boundary, _ [32]byte, err error) {
	defer s.hide(&err)
	if err := checkModel(model); err != nil {
		return nil, [32]byte{}, err
	}
	key := BoundaryKey(s.prefix, model, e)
	data, err := s.readLog(ctx, key)
	if err != nil {
		return nil, [32]byte{}, err
	}
	b, err := unmarshalBoundary(key, model, e, data)
	if err != nil {
		return nil, [32]byte{}, err
	}
	return b, sha256.Sum256(data), nil
}

func (s *Store) readLog(ctx context.Context, key string) ([]byte, error) {
	data, err := s.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("epoch log %s does not exist: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("epoch log %s: %w", key, err)
	}
	return data, nil
}

// checkShardResult refuses a result that no reader would accept, and
// returns its key.
func (s *Store) checkShardResult(r *ShardResult) (string, error) {
	if err := checkModel(r.Model); err != nil {
		return "", err
	}
	key, err := ShardKey(s.prefix, r.Model, r.Epoch, r.Shard)
	if err != nil {
		return "", fmt.Errorf("snapshot: model %s: %w", r.Model, err)
	}
	switch {
	case r.Epoch == 0:
		err = errors.New("epoch 0 (epochs count from 1)")
	case r.From < 0 || r.To <= r.From:
		err = fmt.Errorf("range from %d to %d (an empty range has no result)", r.From, r.To)
	case r.BoundarySHA256 == [32]byte{} || r.ConfigDigest == [32]byte{} || r.BaseStateSHA256 == [32]byte{}:
		err = errors.New("a digest is zero")
	case r.DeadLetters > r.Messages:
		err = fmt.Errorf("%d dead letters among %d messages", r.DeadLetters, r.Messages)
	case r.State == nil:
		err = errors.New("no state")
	default:
		return key, nil
	}
	return "", fmt.Errorf("snapshot: the result of shard %s for epoch %d of model %s: %w", r.Shard, r.Epoch, r.Model, err)
}

// marshalShard encodes r, without its provenance when provenance is
// false: the form two results are compared in.
func marshalShard(r *ShardResult, provenance bool) ([]byte, error) {
	st, err := encodeState(r.State)
	if err != nil {
		return nil, err
	}
	b := shardBody{
		Kind:            kindShard,
		Model:           r.Model,
		Epoch:           r.Epoch,
		Shard:           r.Shard,
		From:            r.From,
		To:              r.To,
		BoundarySHA256:  r.BoundarySHA256[:],
		ConfigDigest:    r.ConfigDigest[:],
		BaseStateSHA256: r.BaseStateSHA256[:],
		Messages:        r.Messages,
		DeadLetters:     r.DeadLetters,
		Last:            r.Last,
		State:           st,
	}
	if provenance {
		b.Writer, b.Created = r.Writer, r.Created.UTC().Format(time.RFC3339Nano)
	}
	raw, err := encode(&b)
	if err != nil {
		return nil, fmt.Errorf("snapshot: encode shard result: %w", err)
	}
	return seal(raw)
}

// unmarshalShard reads the result stored at key, which must be that of
// shard for epoch e of model.
func unmarshalShard(key, model string, e uint64, shard string, data []byte) (*ShardResult, error) {
	raw, err := openLog(key, kindShard, data)
	if err != nil {
		return nil, err
	}
	var b shardBody
	if err := msgpack.Unmarshal(raw, &b); err != nil {
		return nil, damaged(key, "body: %v", err)
	}
	if b.Model != model || b.Epoch != e || b.Shard != shard {
		return nil, damaged(key, "it holds the result of shard %s for epoch %d of model %s", b.Shard, b.Epoch, b.Model)
	}
	if b.From < 0 || b.To <= b.From {
		return nil, damaged(key, "range from %d to %d", b.From, b.To)
	}
	r := &ShardResult{
		Model: b.Model, Epoch: b.Epoch, Shard: b.Shard, From: b.From, To: b.To,
		Messages: b.Messages, DeadLetters: b.DeadLetters, Last: b.Last, Writer: b.Writer,
	}
	for _, d := range []struct {
		name string
		src  []byte
		dst  *[32]byte
	}{
		{"boundary_sha256", b.BoundarySHA256, &r.BoundarySHA256},
		{"config_digest", b.ConfigDigest, &r.ConfigDigest},
		{"base_state_sha256", b.BaseStateSHA256, &r.BaseStateSHA256},
	} {
		if *d.dst, err = digestArray(d.name, d.src, false); err != nil {
			return nil, damaged(key, "%v", err)
		}
	}
	if r.Created, err = time.Parse(time.RFC3339Nano, b.Created); err != nil {
		return nil, damaged(key, "created: %v", err)
	}
	if r.State, err = b.State.state(); err != nil {
		return nil, damaged(key, "state: %v", err)
	}
	return r, nil
}

// WriteShard records r as the result of shard r.Shard for epoch r.Epoch
// of r.Model unless one is recorded already. A recorded one that is the
// same (equal but for its writer and creation time: another worker
// learned the same range from the same model) is success, since two
// honest workers compute the same bytes; one that differs is an error
// wrapping ErrOtherHistory that names the first field that differs. A
// result that no reader would accept (an empty range, a zero digest, a
// state the loader would refuse, which wraps ErrInvalidState) is refused
// before the store is touched.
//
// Only write r once every output of its range is durable: its existence
// says so. On any other error the result may or may not exist: calling
// again settles it.
func (s *Store) WriteShard(ctx context.Context, r *ShardResult) (err error) {
	defer s.hide(&err)
	key, err := s.checkShardResult(r)
	if err != nil {
		return err
	}
	data, err := marshalShard(r, true)
	if err != nil {
		return fmt.Errorf("epoch log %s: %w", key, err)
	}
	exists, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return fmt.Errorf("epoch log %s: %w", key, err)
	}
	if !exists {
		err := s.create(ctx, key, data)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errTaken) {
			return fmt.Errorf("epoch log %s: %w", key, err)
		}
	}
	had, err := s.Shard(ctx, r.Model, r.Epoch, r.Shard)
	if err != nil {
		return err
	}
	stored, err := marshalShard(had, false)
	if err != nil {
		return damaged(key, "%v", err)
	}
	own, err := marshalShard(r, false)
	if err != nil {
		return fmt.Errorf("epoch log %s: %w", key, err)
	}
	if bytes.Equal(stored, own) {
		return nil
	}
	return fmt.Errorf("epoch log %s: the result of shard %s for epoch %d, written by %s at %s, differs from this worker's in %s: %w",
		key, r.Shard, r.Epoch, had.Writer, had.Created.Format(time.RFC3339), shardDifference(had, r), ErrOtherHistory)
}

// shardDifference names the first field in which a and b differ.
func shardDifference(a, b *ShardResult) string {
	switch {
	case a.From != b.From || a.To != b.To:
		return fmt.Sprintf("range (%d to %d, this worker's %d to %d)", a.From, a.To, b.From, b.To)
	case a.BoundarySHA256 != b.BoundarySHA256:
		return fmt.Sprintf("boundary_sha256 (%x, this worker's %x)", a.BoundarySHA256, b.BoundarySHA256)
	case a.ConfigDigest != b.ConfigDigest:
		return fmt.Sprintf("config_digest (%x, this worker's %x)", a.ConfigDigest, b.ConfigDigest)
	case a.BaseStateSHA256 != b.BaseStateSHA256:
		return fmt.Sprintf("base_state_sha256 (%x, this worker's %x)", a.BaseStateSHA256, b.BaseStateSHA256)
	case a.Messages != b.Messages || a.DeadLetters != b.DeadLetters || a.Last != b.Last:
		return fmt.Sprintf("counts (messages %d, dead letters %d, last %d; this worker's %d, %d, %d)",
			a.Messages, a.DeadLetters, a.Last, b.Messages, b.DeadLetters, b.Last)
	}
	return fmt.Sprintf("state (state_sha256 %s, this worker's %s)", a.State.StateSHA256(), b.State.StateSHA256())
}

// Shard reads the result of shard for epoch e of model. An absent one
// gives an error wrapping ErrNotFound, a damaged one an error wrapping
// ErrDamagedLog.
func (s *Store) Shard(ctx context.Context, model string, e uint64, shard string) (_ *ShardResult, err error) {
	defer s.hide(&err)
	if err := checkModel(model); err != nil {
		return nil, err
	}
	key, err := ShardKey(s.prefix, model, e, shard)
	if err != nil {
		return nil, fmt.Errorf("snapshot: model %s: %w", model, err)
	}
	data, err := s.readLog(ctx, key)
	if err != nil {
		return nil, err
	}
	return unmarshalShard(key, model, e, shard, data)
}

// ShardExists reports whether the result of shard for epoch e of model
// exists, with one HEAD request and without reading it: the barrier's
// poll.
func (s *Store) ShardExists(ctx context.Context, model string, e uint64, shard string) (_ bool, err error) {
	defer s.hide(&err)
	if err := checkModel(model); err != nil {
		return false, err
	}
	key, err := ShardKey(s.prefix, model, e, shard)
	if err != nil {
		return false, fmt.Errorf("snapshot: model %s: %w", model, err)
	}
	ok, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("epoch log %s: %w", key, err)
	}
	return ok, nil
}

// Epochs lists, ascending, the epochs of model that have objects in the
// log: a boundary, shard results, or both. An epoch with results but no
// boundary is for the caller to judge (docs/scale-out.md, section 3.1).
func (s *Store) Epochs(ctx context.Context, model string) (_ []uint64, err error) {
	defer s.hide(&err)
	if err := checkModel(model); err != nil {
		return nil, err
	}
	dir := modelDir(s.prefix, model) + epochsDir
	it := s.bucket.List(&blob.ListOptions{Prefix: dir, Delimiter: "/"})
	var epochs []uint64
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot: list %s: %w", dir, err)
		}
		if e, ok := parseNumber(strings.TrimSuffix(strings.TrimPrefix(obj.Key, dir), "/")); ok && obj.IsDir {
			epochs = append(epochs, e)
		}
	}
	slices.Sort(epochs)
	return epochs, nil
}

// RetainLog deletes the part of model's epoch log that generations make
// unnecessary (invariant I7 of docs/scale-out.md): the shard results of
// the epochs below newestGeneration, which a generation holds (those of
// its own epoch stay until the next one, for the workers still at that
// epoch's barrier), then the boundaries (whole epoch directories) of the
// epochs up to oldestRetainedGeneration and below newestGeneration, which
// no retained generation needs to be followed from. newestGeneration must be in the store, or
// nothing is deleted and the error wraps ErrNotFound;
// oldestRetainedGeneration must be the oldest generation retention keeps.
// Store.Retain calls it after deleting generations. An object already
// gone is not an error, and a pass cut short is finished by the next.
func (s *Store) RetainLog(ctx context.Context, model string, newestGeneration, oldestRetainedGeneration uint64) (err error) {
	defer s.hide(&err)
	if err := checkModel(model); err != nil {
		return err
	}
	if oldestRetainedGeneration > newestGeneration {
		return fmt.Errorf("snapshot: retain the epoch log of model %s: the oldest retained generation %d is newer than the newest %d",
			model, oldestRetainedGeneration, newestGeneration)
	}
	key := Key(s.prefix, model, newestGeneration)
	exists, err := s.bucket.Exists(ctx, key)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", key, err)
	}
	if !exists {
		return fmt.Errorf("snapshot: retain the epoch log of model %s below generation %d: %s: %w",
			model, newestGeneration, key, ErrNotFound)
	}
	return s.retainLog(ctx, model, newestGeneration, oldestRetainedGeneration)
}

func (s *Store) retainLog(ctx context.Context, model string, newest, oldest uint64) error {
	epochs, err := s.Epochs(ctx, model)
	if err != nil {
		return err
	}
	// The results of the newest generation's own epoch stay until the
	// next generation: workers still at that epoch's barrier read them.
	for _, e := range epochs {
		if e >= newest {
			break
		}
		dir := epochDir(s.prefix, model, e) + shardDir
		if err := s.deleteAll(ctx, dir); err != nil {
			return err
		}
		s.removeDir(dir)
	}
	for _, e := range epochs {
		if e > oldest || e >= newest {
			break
		}
		dir := epochDir(s.prefix, model, e)
		if err := s.deleteAll(ctx, dir); err != nil {
			return err
		}
		s.removeDir(dir + shardDir)
		s.removeDir(dir)
	}
	return nil
}

// deleteAll deletes every object under prefix.
func (s *Store) deleteAll(ctx context.Context, prefix string) error {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot: list %s: %w", prefix, err)
		}
		if err := s.bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("epoch log %s: delete: %w", obj.Key, err)
		}
	}
}

// removeDir removes the directory of a file:// store that holds the keys
// under prefix, if it is empty: fileblob leaves emptied directories
// behind, one per epoch. Anything else is left as it is.
func (s *Store) removeDir(prefix string) {
	if s.dir == "" {
		return
	}
	if path, err := s.filePath(strings.TrimSuffix(prefix, "/")); err == nil {
		os.Remove(path)
	}
}
