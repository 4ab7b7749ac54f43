package epochlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

const (
	epochsDir    = "epochs/"
	probeDir     = epochsDir + "probe/"
	shardDir     = "shard/"
	keyExt       = ".msgpack"
	boundaryName = "boundary" + keyExt

	kindBoundary = "boundary"
	kindShard    = "shard"
)

// epochDigits pads epochs in keys, as generations are padded, so that
// their lexical order (the order object stores list in) is their numeric
// order. Twenty digits hold every uint64.
const epochDigits = 20

// ErrNoConditionalCreate marks a store that accepted a second create of
// an existing key: it ignores create-if-absent (an S3-compatible server
// that ignores If-None-Match), so two workers could both believe they cut
// one epoch's boundary. The store cannot hold an epoch log.
var ErrNoConditionalCreate = errors.New("the store ignores create-if-absent")

// Log is the epoch log of the models in a store, kept beside their
// generations, and the store itself: the epochs write and read both
// (consumer.EpochLog). Its Retain retains the log with the generations.
// It is safe for concurrent use.
type Log struct {
	*snapshot.Store
}

// New is the epoch log kept in store. It owns nothing of its own: its
// Close is the store's.
func New(store *snapshot.Store) *Log {
	return &Log{Store: store}
}

// hide hides the credentials of the store's URL from *err: every
// exported method that returns an error defers it, since the keys it
// names may hold a piece of them.
func (l *Log) hide(err *error) {
	*err = l.Store.Hide(*err)
}

func epochDir(prefix, model string, e uint64) string {
	return fmt.Sprintf("%s%s%0*d/", snapshot.ModelDir(prefix, model), epochsDir, epochDigits, e)
}

// BoundaryKey is where the boundary of epoch e of model is kept under
// prefix: "<prefix>/<model>/epochs/<e, zero-padded to 20 digits>/boundary.msgpack".
func BoundaryKey(prefix, model string, e uint64) string {
	return epochDir(prefix, model, e) + boundaryName
}

// ShardKey is where shard's result for epoch e of model is kept under
// prefix: "<prefix>/<model>/epochs/<e, 20 digits>/shard/<segment>.msgpack"
// (shardid.ID.Segment, whose error it returns).
func ShardKey(prefix, model string, e uint64, shard shardid.ID) (string, error) {
	seg, err := shard.Segment()
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
	// Promote is left out without a request, so that such a boundary
	// encodes as before promotions existed.
	Promote *Promote `msgpack:"promote,omitempty"`
	Cut     cutBody  `msgpack:"cut"`
}

type cutBody struct {
	Writer        string `msgpack:"writer"`
	Created       string `msgpack:"created"` // RFC 3339
	Reason        string `msgpack:"reason"`
	EpochExamples int    `msgpack:"epoch_examples"`
	Interval      string `msgpack:"interval"` // as time.Duration writes it: "5s"
}

// shardBody is the wire form of a ShardResult: its shard by name
// (shardid.ID.String), read back with shardid.Parse.
type shardBody struct {
	Kind            string `msgpack:"kind"`
	Model           string `msgpack:"model"`
	Epoch           uint64 `msgpack:"epoch"`
	Shard           string `msgpack:"shard"`
	From            int64  `msgpack:"from"`
	To              int64  `msgpack:"to"`
	BoundarySHA256  []byte `msgpack:"boundary_sha256"`
	ConfigDigest    []byte `msgpack:"config_digest"`
	BaseStateSHA256 []byte `msgpack:"base_state_sha256"`
	Messages        uint64 `msgpack:"messages"`
	DeadLetters     uint64 `msgpack:"dead_letters"`
	Last            int64  `msgpack:"last"`
	// StateForm is formChanges when State leaves the per-weight vectors
	// out and Changes holds them; absent, State is whole (as every
	// result written before the changes form is).
	StateForm string                `msgpack:"state_form,omitempty"`
	State     snapshot.EncodedState `msgpack:"state"`
	Changes   *stateChanges         `msgpack:"changes,omitempty"`
	// ChallengerChanges are Changes for each challenger of State, in
	// order, with StateForm formChanges; absent without challengers.
	ChallengerChanges []*stateChanges `msgpack:"challenger_changes,omitempty"`
	// Labels, Reached and Join are those of a model that joins labels
	// that come later; absent without, so that such a result encodes as
	// it did before labels.
	Labels  *LabelsRange       `msgpack:"labels,omitempty"`
	Reached *int64             `msgpack:"reached,omitempty"`
	Join    msgpack.RawMessage `msgpack:"join,omitempty"`
	Writer  string             `msgpack:"writer"`
	Created string             `msgpack:"created"` // RFC 3339
}

// checkBoundary refuses a boundary that no reader would accept.
func checkBoundary(b *Boundary) error {
	if err := snapshot.CheckModel(b.Model); err != nil {
		return err
	}
	switch {
	case b.Epoch == 0:
		return fmt.Errorf("snapshot: model %s: a boundary of epoch 0 (epochs count from 1)", b.Model)
	case b.ConfigDigest == [32]byte{} || b.BaseStateSHA256 == [32]byte{}:
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s has no config digest or base state digest", b.Epoch, b.Model)
	case b.Promote != nil && (b.Promote.Challenger == "" || b.Promote.Request == ""):
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s records a promotion request without a challenger or an id", b.Epoch, b.Model)
	}
	if err := snapshot.CheckRanges(b.Shards); err != nil {
		return fmt.Errorf("snapshot: the boundary of epoch %d of model %s: %w", b.Epoch, b.Model, err)
	}
	return nil
}

func marshalBoundary(b *Boundary) ([]byte, error) {
	shards := b.Shards
	if shards == nil {
		shards = []Range{}
	}
	data, err := snapshot.Seal(&boundaryBody{
		Kind:            kindBoundary,
		Model:           b.Model,
		Epoch:           b.Epoch,
		Prev:            b.Epoch - 1,
		ConfigDigest:    b.ConfigDigest[:],
		BaseStateSHA256: b.BaseStateSHA256[:],
		Shards:          shards,
		Promote:         b.Promote,
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
	return data, nil
}

// digestArray reads a SHA-256 from a bin value.
func digestArray(name string, b []byte) ([32]byte, error) {
	var d [32]byte
	if len(b) != len(d) {
		return d, fmt.Errorf("%s: %d bytes, a SHA-256 has 32", name, len(b))
	}
	copy(d[:], b)
	return d, nil
}

// damaged is the error for a log object at key that cannot be what its
// key says.
func damaged(key, format string, args ...any) error {
	return fmt.Errorf("epoch log %s: %w: %s", key, ErrDamagedLog, fmt.Sprintf(format, args...))
}

// Kind is what data, a stored object, holds when it is an object of an
// epoch log: "boundary" or "shard" (a shard's result); "" when it is
// not one (a generation, or no object of hyperplane's).
func Kind(data []byte) string {
	_, kind, err := unsealLog(data)
	if err != nil || (kind != kindBoundary && kind != kindShard) {
		return ""
	}
	return kind
}

// openLog returns the body of the log object data stored at key, of the
// kind the key holds: the envelope's format and checksum checked, and the
// kind.
func openLog(key, kind string, data []byte) ([]byte, error) {
	raw, got, err := unsealLog(data)
	if err != nil {
		return nil, damaged(key, "%v", err)
	}
	switch got {
	case kind:
		return raw, nil
	case kindBoundary, kindShard:
		return nil, damaged(key, "a %s where a %s belongs", got, kind)
	}
	return nil, damaged(key, "unknown kind %q (a newer hyperplane wrote it?)", got)
}

// unsealLog is the body of the stored object data, its envelope checked,
// and the kind the body names.
func unsealLog(data []byte) (raw []byte, kind string, err error) {
	if raw, err = snapshot.Unseal(data); err != nil {
		return nil, "", err
	}
	var head struct {
		Kind string `msgpack:"kind"`
	}
	if err := msgpack.Unmarshal(raw, &head); err != nil {
		return nil, "", fmt.Errorf("body: %w", err)
	}
	return raw, head.Kind, nil
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
	b := &Boundary{Model: bb.Model, Epoch: bb.Epoch, Shards: bb.Shards, Promote: bb.Promote}
	if p := b.Promote; p != nil && (p.Challenger == "" || p.Request == "") {
		return nil, damaged(key, "promote: challenger %q, request %q", p.Challenger, p.Request)
	}
	if b.ConfigDigest, err = digestArray("config_digest", bb.ConfigDigest); err != nil {
		return nil, damaged(key, "%v", err)
	}
	if b.BaseStateSHA256, err = digestArray("base_state_sha256", bb.BaseStateSHA256); err != nil {
		return nil, damaged(key, "%v", err)
	}
	if err := snapshot.CheckRanges(b.Shards); err != nil {
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
func (l *Log) CreateBoundary(ctx context.Context, b *Boundary) (stored *Boundary, sha [32]byte, err error) {
	defer l.hide(&err)
	if err := checkBoundary(b); err != nil {
		return nil, sha, err
	}
	key := BoundaryKey(l.Prefix(), b.Model, b.Epoch)
	data, err := marshalBoundary(b)
	if err != nil {
		return nil, sha, err
	}
	switch err := l.CreateIfAbsent(ctx, key, data); {
	case err == nil:
		stored, err := unmarshalBoundary(key, b.Model, b.Epoch, data)
		return stored, sha256.Sum256(data), err
	case !errors.Is(err, snapshot.ErrExists):
		return nil, sha, fmt.Errorf("epoch log %s: %w", key, err)
	}
	if stored, sha, err = l.Boundary(ctx, b.Model, b.Epoch); err != nil {
		return nil, sha, err
	}
	var why []string
	if stored.ConfigDigest != b.ConfigDigest {
		why = append(why, "another history configuration (give the workers of a model the same settings, set explicitly: a key left out takes "+
			"its default, and model.learner.algorithm's was perceptron before it was arow; or give one of the two its own model.name)")
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

// WrittenDigest is the config digest of the history that model's epochs
// continuing from snap (nil for none) were written under: snap's own, for
// a generation of an epoch, else that of the boundary of the epoch after
// snap's generation. ok is false when no boundary says (none is stored,
// or it is damaged): the epochs begin the log, or a new history.
func (l *Log) WrittenDigest(ctx context.Context, model string, snap *snapshot.Snapshot) (digest [32]byte, ok bool, err error) {
	if snap != nil && snap.Epoch > 0 {
		return snap.ConfigDigest, true, nil
	}
	var next uint64 = 1
	if snap != nil {
		next = snap.Generation + 1
	}
	b, _, err := l.Boundary(ctx, model, next)
	switch {
	case errors.Is(err, snapshot.ErrNotFound), errors.Is(err, ErrDamagedLog):
		return [32]byte{}, false, nil
	case err != nil:
		return [32]byte{}, false, err
	}
	return b.ConfigDigest, true, nil
}

// Boundary reads the boundary of epoch e of model, with the SHA-256 of
// its stored bytes. An absent one gives an error wrapping snapshot.ErrNotFound, a
// damaged one an error wrapping ErrDamagedLog.
func (l *Log) Boundary(ctx context.Context, model string, e uint64) (_ *Boundary, _ [32]byte, err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return nil, [32]byte{}, err
	}
	key := BoundaryKey(l.Prefix(), model, e)
	data, err := l.readLog(ctx, key)
	if err != nil {
		return nil, [32]byte{}, err
	}
	b, err := unmarshalBoundary(key, model, e, data)
	if err != nil {
		return nil, [32]byte{}, err
	}
	return b, sha256.Sum256(data), nil
}

func (l *Log) readLog(ctx context.Context, key string) ([]byte, error) {
	data, err := l.ReadObject(ctx, key)
	if errors.Is(err, snapshot.ErrNotFound) {
		return nil, fmt.Errorf("epoch log %s does not exist: %w", key, snapshot.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("epoch log %s: %w", key, err)
	}
	return data, nil
}

// checkShardResult refuses a result that no reader would accept, or
// that was not learned from base, and returns its key.
func (l *Log) checkShardResult(r *ShardResult, base *Base) (string, error) {
	if err := snapshot.CheckModel(r.Model); err != nil {
		return "", err
	}
	key, err := ShardKey(l.Prefix(), r.Model, r.Epoch, r.Shard)
	if err != nil {
		return "", fmt.Errorf("snapshot: model %s: %w", r.Model, err)
	}
	switch {
	case r.Epoch == 0:
		err = errors.New("epoch 0 (epochs count from 1)")
	case r.From < 0 || r.To < r.From || (Range{From: r.From, To: r.To, Labels: r.Labels}).Empty():
		err = fmt.Errorf("range from %d to %d (an empty range has no result)", r.From, r.To)
	case r.Labels != nil && (r.Reached < r.From || r.Reached > r.To || r.Join == nil):
		err = fmt.Errorf("reached %d, outside its range from %d to %d, or no join", r.Reached, r.From, r.To)
	case r.BoundarySHA256 == [32]byte{} || r.ConfigDigest == [32]byte{} || r.BaseStateSHA256 == [32]byte{}:
		err = errors.New("a digest is zero")
	case r.DeadLetters > r.Messages:
		err = fmt.Errorf("%d dead letters among %d messages", r.DeadLetters, r.Messages)
	case r.State == nil:
		err = errors.New("no state")
	case base == nil:
		err = errors.New("no base state")
	case base.digest != r.BaseStateSHA256:
		err = fmt.Errorf("its base_state_sha256 is %x, the base state given has %x", r.BaseStateSHA256, base.digest)
	default:
		return key, nil
	}
	return "", fmt.Errorf("snapshot: the result of shard %s for epoch %d of model %s: %w", r.Shard, r.Epoch, r.Model, err)
}

// marshalShard encodes r: as changes against base when that is the
// smaller form, whole when it is not or base is nil; without its
// provenance when provenance is false. Two results are compared whole and
// without provenance.
func marshalShard(r *ShardResult, base *Base, provenance bool) ([]byte, error) {
	data, release, err := marshalShardTemporary(r, base, provenance)
	if err != nil {
		return nil, err
	}
	defer release()
	return slices.Clone(data), nil
}

// marshalShardTemporary is marshalShard into a buffer that is reused once
// release is called (snapshot.SealTemporary): data must not be kept.
func marshalShardTemporary(r *ShardResult, base *Base, provenance bool) (data []byte, release func(), err error) {
	var (
		form    string
		changes *stateChanges
		st      snapshot.EncodedState
	)
	var cchanges []*stateChanges
	if base != nil {
		var smaller bool
		if changes, smaller = changesOf(r.State, base.state, r.Changed); smaller {
			form = formChanges
			cchanges = challengerChangesOf(r, base.state)
			if len(r.State.Challengers) > 0 && cchanges == nil {
				form = ""
			}
		}
		if form == "" {
			changes = nil
		}
	}
	if form == formChanges {
		for _, c := range append([]*stateChanges{changes}, cchanges...) {
			if err := c.check(); err != nil {
				return nil, nil, fmt.Errorf("snapshot: %w: %w", snapshot.ErrInvalidState, err)
			}
		}
		st, err = snapshot.EncodeStateLean(r.State)
	} else {
		st, err = snapshot.EncodeState(r.State)
	}
	if err != nil {
		return nil, nil, err
	}
	b := shardBody{
		Kind:              kindShard,
		Model:             r.Model,
		Epoch:             r.Epoch,
		Shard:             r.Shard.String(),
		From:              r.From,
		To:                r.To,
		BoundarySHA256:    r.BoundarySHA256[:],
		ConfigDigest:      r.ConfigDigest[:],
		BaseStateSHA256:   r.BaseStateSHA256[:],
		Messages:          r.Messages,
		DeadLetters:       r.DeadLetters,
		Last:              r.Last,
		StateForm:         form,
		State:             st,
		Changes:           changes,
		ChallengerChanges: cchanges,
	}
	if r.Labels != nil {
		reached := r.Reached
		b.Labels, b.Reached, b.Join = r.Labels, &reached, r.Join
	}
	if provenance {
		b.Writer, b.Created = r.Writer, r.Created.UTC().Format(time.RFC3339Nano)
	}
	// A join holds every label read ahead of its examples, and may be
	// far larger than the changes.
	data, release, err = snapshot.SealTemporary(&b, len(r.Join)+resultSlack)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: encode shard result: %w", err)
	}
	return data, release, nil
}

// resultSlack is room, beyond its join, for what a shard result holds:
// most results hold a range's changes, far smaller than the model.
const resultSlack = 64 << 10

// unmarshalShard reads the result stored at key, which must be that of
// shard for epoch e of model, but for its state: the body it returns
// holds that, for resolveState.
func unmarshalShard(key, model string, e uint64, shard shardid.ID, data []byte) (*ShardResult, *shardBody, error) {
	raw, err := openLog(key, kindShard, data)
	if err != nil {
		return nil, nil, err
	}
	var b shardBody
	if err := msgpack.Unmarshal(raw, &b); err != nil {
		return nil, nil, damaged(key, "body: %v", err)
	}
	id, err := shardid.Parse(b.Shard)
	if err != nil {
		return nil, nil, damaged(key, "%v", err)
	}
	if b.Model != model || b.Epoch != e || id != shard {
		return nil, nil, damaged(key, "it holds the result of shard %s for epoch %d of model %s", b.Shard, b.Epoch, b.Model)
	}
	if b.From < 0 || b.To < b.From || (Range{From: b.From, To: b.To, Labels: b.Labels}).Empty() {
		return nil, nil, damaged(key, "range from %d to %d", b.From, b.To)
	}
	r := &ShardResult{
		Model: b.Model, Epoch: b.Epoch, Shard: id, From: b.From, To: b.To,
		Messages: b.Messages, DeadLetters: b.DeadLetters, Last: b.Last, Writer: b.Writer,
	}
	if (b.Labels == nil) != (b.Reached == nil) || (b.Labels == nil) != (b.Join == nil) {
		return nil, nil, damaged(key, "labels, reached and join: all three or none")
	}
	if b.Labels != nil {
		if *b.Reached < b.From || *b.Reached > b.To {
			return nil, nil, damaged(key, "reached %d, outside the range from %d to %d", *b.Reached, b.From, b.To)
		}
		r.Labels, r.Reached, r.Join = b.Labels, *b.Reached, b.Join
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
		if *d.dst, err = digestArray(d.name, d.src); err != nil {
			return nil, nil, damaged(key, "%v", err)
		}
	}
	if r.Created, err = time.Parse(time.RFC3339Nano, b.Created); err != nil {
		return nil, nil, damaged(key, "created: %v", err)
	}
	switch {
	case b.StateForm != "" && b.StateForm != formChanges:
		return nil, nil, damaged(key, "state_form %q (this hyperplane reads %q, or none for a whole state)", b.StateForm, formChanges)
	case b.StateForm == formChanges && b.Changes == nil:
		return nil, nil, damaged(key, "state_form %q without changes", formChanges)
	case b.StateForm == "" && (b.Changes != nil || b.ChallengerChanges != nil):
		return nil, nil, damaged(key, "changes without state_form %q", formChanges)
	}
	for i, c := range b.ChallengerChanges {
		if c == nil {
			return nil, nil, damaged(key, "challenger_changes %d is nil", i)
		}
	}
	return r, &b, nil
}

// resolveState sets r.State to the state of b, the body of r stored at
// key: b's whole state, or its changes applied to base. base must be
// the state r was learned from: another is an error wrapping
// ErrOtherHistory, naming the epoch, the shard and both digests.
func resolveState(key string, r *ShardResult, b *shardBody, base *Base) error {
	if base == nil {
		return fmt.Errorf("epoch log %s: the result of shard %s for epoch %d is read without its base state", key, r.Shard, r.Epoch)
	}
	if base.digest != r.BaseStateSHA256 {
		return fmt.Errorf("epoch log %s: the result of shard %s for epoch %d, written by %s, was learned from the base state %x, the base given has %x: %w",
			key, r.Shard, r.Epoch, r.Writer, r.BaseStateSHA256, base.digest, ErrOtherHistory)
	}
	var err error
	if b.StateForm != formChanges {
		if r.State, err = b.State.State(); err != nil {
			return damaged(key, "state: %v", err)
		}
		return nil
	}
	var vectors [3][]float64
	for i, v := range b.Changes.vectors(&learner.State{}, base.state) {
		if vectors[i], err = (*v.changes).apply(v.base); err != nil {
			return damaged(key, "changes of %s: %v", v.name, err)
		}
	}
	bcs := base.state.Challengers
	if len(b.ChallengerChanges) != len(bcs) {
		return damaged(key, "challenger_changes of %d challengers, against a base of %d", len(b.ChallengerChanges), len(bcs))
	}
	cvectors := make([][3][]float64, len(bcs))
	for i, cc := range b.ChallengerChanges {
		for k, v := range cc.vectors(&learner.State{}, bcs[i].State) {
			if cvectors[i][k], err = (*v.changes).apply(v.base); err != nil {
				return damaged(key, "changes of challenger %s's %s: %v", bcs[i].Name, v.name, err)
			}
		}
	}
	if r.State, err = b.State.StateWith(vectors[0], vectors[1], vectors[2], cvectors...); err != nil {
		return damaged(key, "state: %v", err)
	}
	for i, c := range r.State.Challengers {
		if c.Name != bcs[i].Name {
			return damaged(key, "challenger %d is %s, the base's %s", i, c.Name, bcs[i].Name)
		}
	}
	r.Changed = b.Changes.coords()
	if len(b.ChallengerChanges) > 0 {
		r.ChallengersChanged = make([]*learner.Coords, len(b.ChallengerChanges))
		for i, cc := range b.ChallengerChanges {
			r.ChallengersChanged[i] = cc.coords()
		}
	}
	return nil
}

// WriteShard records r as the result of shard r.Shard for epoch r.Epoch
// of r.Model unless one is recorded already. A recorded one that is the
// same (equal but for its writer and creation time: another worker
// learned the same range from the same model) is success, since two
// honest workers compute the same bytes; one that differs is an error
// wrapping ErrOtherHistory that names the first field that differs. A
// result that no reader would accept (an empty range, a zero digest, a
// state the loader would refuse, which wraps snapshot.ErrInvalidState) is refused
// before the store is touched.
//
// base is W_{e-1}, the state r was learned from: its digest must be
// r.BaseStateSHA256. r is stored as the coordinates whose bits differ
// from it, with the rest of its state whole, or whole when that is
// smaller (docs/scale-out.md, section 2.1).
//
// Only write r once every output of its range is durable: its existence
// says so. On any other error the result may or may not exist: calling
// again settles it.
func (l *Log) WriteShard(ctx context.Context, r *ShardResult, base *Base) (err error) {
	defer l.hide(&err)
	key, err := l.checkShardResult(r, base)
	if err != nil {
		return err
	}
	data, release, err := marshalShardTemporary(r, base, true)
	if err != nil {
		return fmt.Errorf("epoch log %s: %w", key, err)
	}
	// data is written and compared here, and kept nowhere.
	defer release()
	switch err := l.CreateIfAbsent(ctx, key, data); {
	case err == nil:
		return nil
	case !errors.Is(err, snapshot.ErrExists):
		return fmt.Errorf("epoch log %s: %w", key, err)
	}
	stored, err := l.readLog(ctx, key)
	if err != nil {
		return err
	}
	had, body, err := unmarshalShard(key, r.Model, r.Epoch, r.Shard, stored)
	if errors.Is(err, ErrDamagedLog) {
		return l.replaceDamaged(ctx, key, stored, data, err)
	}
	if err != nil {
		return err
	}
	// A result learned from another base differs in base_state_sha256,
	// and its state cannot be read against this one.
	if had.BaseStateSHA256 == r.BaseStateSHA256 {
		if err := resolveState(key, had, body, base); err != nil {
			if errors.Is(err, ErrDamagedLog) {
				return l.replaceDamaged(ctx, key, stored, data, err)
			}
			return err
		}
		theirs, err := marshalShard(had, nil, false)
		if err != nil {
			return damaged(key, "%v", err)
		}
		own, err := marshalShard(r, nil, false)
		if err != nil {
			return fmt.Errorf("epoch log %s: %w", key, err)
		}
		if bytes.Equal(theirs, own) {
			return nil
		}
	}
	return fmt.Errorf("epoch log %s: the result of shard %s for epoch %d, written by %s at %s, differs from this worker's in %s: %w",
		key, r.Shard, r.Epoch, had.Writer, had.Created.Format(time.RFC3339), shardDifference(had, r), ErrOtherHistory)
}

// replaceDamaged writes own, a shard's result, over key, which holds
// damaged, a result that does not read (cause): a range's result is a
// function of its boundary and the source (Store.ReplaceDamaged).
// Anything else is an error to retry.
func (l *Log) replaceDamaged(ctx context.Context, key string, damaged, own []byte, cause error) error {
	replaced, err := l.ReplaceDamaged(ctx, key, damaged, own)
	switch {
	case err != nil:
		return fmt.Errorf("epoch log %s is damaged (%v), and writing it again failed: %w", key, cause, err)
	case !replaced:
		// Not ErrDamagedLog: what was read may be another writer's
		// object half written, and the next read whole.
		return fmt.Errorf("epoch log %s exists, and what was read of it to compare is not a whole result: %v", key, cause)
	}
	return nil
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
	case a.Reached != b.Reached:
		return fmt.Sprintf("reached (%d, this worker's %d)", a.Reached, b.Reached)
	case !bytes.Equal(a.Join, b.Join):
		return "join"
	case a.Messages != b.Messages || a.DeadLetters != b.DeadLetters || a.Last != b.Last:
		return fmt.Sprintf("counts (messages %d, dead letters %d, last %d; this worker's %d, %d, %d)",
			a.Messages, a.DeadLetters, a.Last, b.Messages, b.DeadLetters, b.Last)
	}
	return fmt.Sprintf("state (state_sha256 %s, this worker's %s)", a.State.StateSHA256(), b.State.StateSHA256())
}

// Shard reads the result of shard for epoch e of model, learned from
// base (W_{e-1}): its stored changes are applied to base, and its State
// is W_{e,s} whole. A result learned from another base (its
// BaseStateSHA256 is not base's digest) gives an error wrapping
// ErrOtherHistory that names both digests. An absent one gives an error
// wrapping snapshot.ErrNotFound, a damaged one an error wrapping
// ErrDamagedLog.
func (l *Log) Shard(ctx context.Context, model string, e uint64, shard shardid.ID, base *Base) (_ *ShardResult, err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return nil, err
	}
	key, err := ShardKey(l.Prefix(), model, e, shard)
	if err != nil {
		return nil, fmt.Errorf("snapshot: model %s: %w", model, err)
	}
	data, err := l.readLog(ctx, key)
	if err != nil {
		return nil, err
	}
	r, b, err := unmarshalShard(key, model, e, shard, data)
	if err != nil {
		return nil, err
	}
	if err := resolveState(key, r, b, base); err != nil {
		return nil, err
	}
	return r, nil
}

// ShardExists reports whether the result of shard for epoch e of model
// exists, with one HEAD request and without reading it: the barrier's
// poll.
func (l *Log) ShardExists(ctx context.Context, model string, e uint64, shard shardid.ID) (_ bool, err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return false, err
	}
	key, err := ShardKey(l.Prefix(), model, e, shard)
	if err != nil {
		return false, fmt.Errorf("snapshot: model %s: %w", model, err)
	}
	ok, err := l.ObjectExists(ctx, key)
	if err != nil {
		return false, fmt.Errorf("epoch log %s: %w", key, err)
	}
	return ok, nil
}

// Epochs lists, ascending, the epochs of model that have objects in the
// log: a boundary, shard results, or both. An epoch with results but no
// boundary is for the caller to judge (docs/scale-out.md, section 3.1).
func (l *Log) Epochs(ctx context.Context, model string) (_ []uint64, err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return nil, err
	}
	dir := snapshot.ModelDir(l.Prefix(), model) + epochsDir
	dirs, err := l.ListDirs(ctx, dir)
	if err != nil {
		return nil, err
	}
	var epochs []uint64
	for _, d := range dirs {
		if e, ok := parseEpoch(strings.TrimSuffix(strings.TrimPrefix(d, dir), "/")); ok {
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
// nothing is deleted and the error wraps snapshot.ErrNotFound;
// oldestRetainedGeneration must be the oldest generation retention keeps.
// Retain calls it after deleting generations. An object already gone is
// not an error, and a pass cut short is finished by the next.
func (l *Log) RetainLog(ctx context.Context, model string, newestGeneration, oldestRetainedGeneration uint64) (err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return err
	}
	if oldestRetainedGeneration > newestGeneration {
		return fmt.Errorf("snapshot: retain the epoch log of model %s: the oldest retained generation %d is newer than the newest %d",
			model, oldestRetainedGeneration, newestGeneration)
	}
	key := snapshot.Key(l.Prefix(), model, newestGeneration)
	exists, err := l.ObjectExists(ctx, key)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", key, err)
	}
	if !exists {
		return fmt.Errorf("snapshot: retain the epoch log of model %s below generation %d: %s: %w",
			model, newestGeneration, key, snapshot.ErrNotFound)
	}
	return l.retainLog(ctx, model, newestGeneration, oldestRetainedGeneration)
}

// Retain deletes all but the newest keep generations of model, as
// snapshot.Store.Retain does, then the part of the model's epoch log that
// the generations left make unnecessary (see RetainLog): that of the
// newest and the oldest of them.
func (l *Log) Retain(ctx context.Context, model string, keep int) (err error) {
	defer l.hide(&err)
	if err := l.Store.Retain(ctx, model, keep); err != nil {
		return err
	}
	gens, err := l.Generations(ctx, model)
	if err != nil || len(gens) == 0 {
		return err
	}
	return l.retainLog(ctx, model, gens[len(gens)-1], gens[0])
}

func (l *Log) retainLog(ctx context.Context, model string, newest, oldest uint64) error {
	epochs, err := l.Epochs(ctx, model)
	if err != nil {
		return err
	}
	// The results of the newest generation's own epoch stay until the
	// next generation: workers still at that epoch's barrier read them.
	for _, e := range epochs {
		if e >= newest {
			break
		}
		if err := l.DeleteAll(ctx, epochDir(l.Prefix(), model, e)+shardDir); err != nil {
			return err
		}
	}
	for _, e := range epochs {
		if e > oldest || e >= newest {
			break
		}
		if err := l.DeleteAll(ctx, epochDir(l.Prefix(), model, e)); err != nil {
			return err
		}
	}
	return nil
}

// parseEpoch reads an epoch as keys write it: zero-padded to 20 digits.
func parseEpoch(digits string) (uint64, bool) {
	if len(digits) != epochDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// ProbeConditionalCreate checks that the store honours create-if-absent,
// which the epoch log depends on (docs/scale-out.md, section 3.1): it
// creates "<model>/epochs/probe/<writer>-<random>" twice, expects the
// second create to find the key taken, and deletes it. A store that
// accepts both gives an error wrapping ErrNoConditionalCreate. The probe
// cannot see a race that only concurrent writers lose, such as fileblob's
// stat-then-rename, which a store opened by snapshot.OpenStore avoids.
func (l *Log) ProbeConditionalCreate(ctx context.Context, model, writer string) (err error) {
	defer l.hide(&err)
	if err := snapshot.CheckModel(model); err != nil {
		return err
	}
	var random [8]byte
	rand.Read(random[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, writer)
	key := snapshot.ModelDir(l.Prefix(), model) + probeDir + strings.TrimLeft(name, ".") + "-" + hex.EncodeToString(random[:])
	data := []byte("hyperplane: probe of create-if-absent, deleted at once\n")
	if err := l.CreateIfAbsent(ctx, key, data); err != nil {
		return fmt.Errorf("snapshot: probe %s: %w", key, err)
	}
	second := l.CreateIfAbsent(ctx, key, data)
	deleted := l.Delete(ctx, key)
	switch {
	case second == nil:
		return fmt.Errorf("snapshot: probe %s: a second create of the key succeeded: %w; "+
			"two workers could both cut one epoch (use a store, or an S3 server version, that honours If-None-Match: *)", key, ErrNoConditionalCreate)
	case !errors.Is(second, snapshot.ErrExists):
		return fmt.Errorf("snapshot: probe %s: %w", key, second)
	case deleted != nil:
		return fmt.Errorf("snapshot: probe %s: delete: %w", key, deleted)
	}
	return nil
}
