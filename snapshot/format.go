// Package snapshot holds hyperplane's model file: a versioned, checksummed
// msgpack document with the complete state of a model and the source
// positions it includes. docs/snapshot-format.md documents it for readers
// in other languages.
package snapshot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/msgpackscan"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Format is the version of the snapshot layout this package writes. It
// reads this version and every earlier one (oldestFormat on): a later one
// was written by a newer hyperplane. Version 2 adds the calibration key
// (docs/snapshot-format.md); a version-1 snapshot has none and loads with
// calibration starting afresh. Version 3 adds a binary model's expected
// positives per bin of its calibrator's histogram; the learner reads a
// version-2 calibrator without them (learner.State's Calibration).
const Format = 3

// oldestFormat is the oldest version this package reads.
const oldestFormat = 1

// Snapshot is a model's state with where it came from.
type Snapshot struct {
	// Model is the name of the model.
	Model string
	// Generation counts the snapshots of the model, from 1.
	Generation uint64
	Created    time.Time
	// Writer identifies the worker that wrote the snapshot.
	Writer string
	// Positions are the source positions the state includes: for a Kafka
	// partition (key "kafka:<topic>/<partition>") the next offset to
	// read; for a JetStream stream (key "jetstream:<stream>") the last
	// stream sequence learned.
	Positions map[string]int64
	State     *learner.State

	// The keys below are those of a model learned in epochs
	// (docs/scale-out.md, section 2.1). A snapshot written before
	// scale-out has none of them and loads with zero values: epoch 0, a
	// model with no epoch log below it.

	// Epoch is the epoch whose mixed model this is, equal to Generation;
	// 0 for a snapshot outside the epoch log.
	Epoch uint64
	// ConfigDigest is the SHA-256 of the history configuration the model
	// was learned under.
	ConfigDigest [32]byte
	// Boundary is the shards of the epoch's boundary with their ranges, in
	// shard order: it makes the snapshot consistent on its own once the log
	// below it is deleted.
	Boundary []Range
	// BoundarySHA256 is the SHA-256 of the stored boundary object; zero on
	// the one-shard path, which writes no boundary.
	BoundarySHA256 [32]byte
	// BaseDigest is the base digest of the state (docs/scale-out.md,
	// section 2.2), which the next epoch's boundary records: zero on the
	// one-shard path and on a generation written before base digests were
	// chained, whose base digest is the state's learner.State.Digest.
	BaseDigest [32]byte
	// Scope is "global" or "partition"; Shard names the shard of a
	// partition-scope model.
	Scope string
	Shard string

	// Join is the state of the join of labels that come later
	// (docs/labels.md, section 6), encoded by the worker that joins, as a
	// msgpack value; nil without labels.
	Join msgpack.RawMessage
	// Joins are the joins of the shards of a model learned in epochs
	// with labels that come later (docs/labels.md, section 11.2), by
	// shard, each encoded as Join is; nil without labels.
	Joins map[string]msgpack.RawMessage

	// Format is the earlier layout version the snapshot was read in, for
	// a file an older hyperplane wrote, which loads upgraded (Unmarshal).
	// 0 when it was read in this package's Format, or not read from
	// bytes. Marshal writes Format whatever it holds.
	Format int
}

// ErrCorrupt marks a snapshot that cannot be read: truncated, damaged or
// not a snapshot at all. A store skips such a generation.
var ErrCorrupt = errors.New("corrupt snapshot")

// ErrInvalidState marks a snapshot refused before it is written because
// its model state is one the loader would refuse (see
// learner.State.Validate): a length that does not fit the configuration,
// a counter out of range, a number that is NaN or infinite. The state will
// not become valid by trying again; nothing was written, so the store
// still holds the generations before it.
var ErrInvalidState = errors.New("invalid model state")

// ErrNewerFormat marks a snapshot written in a format newer than this
// hyperplane reads: no retry reads it, an upgrade does.
var ErrNewerFormat = errors.New("snapshot of a newer format")

// envelope is the outer document: the body is kept as bytes so that the
// checksum covers exactly what was written.
type envelope struct {
	Format   int    `msgpack:"format"`
	Checksum uint32 `msgpack:"checksum"` // CRC-32 (IEEE) of Body
	Body     []byte `msgpack:"body"`
}

// body is the wire form of a Snapshot. Vectors of numbers are msgpack bin
// values of little-endian float64 (or uint32 for indices), which every
// language reads in one call and which keep every bit of the weights.
type body struct {
	Model      string    `msgpack:"model"`
	Generation uint64    `msgpack:"generation"`
	Created    string    `msgpack:"created"`
	Writer     string    `msgpack:"writer"`
	Positions  positions `msgpack:"positions"`
	stateBody  `msgpack:",inline"`

	// Epoch keys, omitted when zero: a snapshot outside the epoch log
	// encodes as it did before they existed.
	Epoch          uint64         `msgpack:"epoch,omitempty"`
	ConfigDigest   []byte         `msgpack:"config_digest,omitempty"`
	Boundary       records[Range] `msgpack:"boundary,omitempty"`
	BoundarySHA256 []byte         `msgpack:"boundary_sha256,omitempty"`
	BaseSHA256     []byte         `msgpack:"base_sha256,omitempty"`
	Scope          string         `msgpack:"scope,omitempty"`
	Shard          string         `msgpack:"shard,omitempty"`

	Join  msgpack.RawMessage            `msgpack:"join,omitempty"`
	Joins map[string]msgpack.RawMessage `msgpack:"joins,omitempty"`
}

// stateBody is the wire form of a learner.State: the keys a snapshot body
// holds beside its model, generation and positions, and the value of an
// EncodedState.
type stateBody struct {
	Config learner.Config `msgpack:"config"`

	Examples       uint64  `msgpack:"examples"`
	Labeled        uint64  `msgpack:"labeled"`
	Mistakes       uint64  `msgpack:"mistakes"`
	Updates        uint64  `msgpack:"updates"`
	R2             float64 `msgpack:"r2"`
	TruePositives  uint64  `msgpack:"true_positives"`
	FalsePositives uint64  `msgpack:"false_positives"`
	TrueNegatives  uint64  `msgpack:"true_negatives"`
	FalseNegatives uint64  `msgpack:"false_negatives"`
	Window         []byte  `msgpack:"window"` // one byte per slot: 1 correct, 0 not
	WindowNext     int     `msgpack:"window_next"`

	Weights      []byte                 `msgpack:"weights"`
	Bias         []byte                 `msgpack:"bias"`
	Scale        float64                `msgpack:"scale,omitempty"`
	VNorm2       float64                `msgpack:"vnorm2,omitempty"`
	SumWeights   []byte                 `msgpack:"sum_weights,omitempty"`
	SumBias      []byte                 `msgpack:"sum_bias,omitempty"`
	Variance     []byte                 `msgpack:"variance,omitempty"`
	VarianceBias float64                `msgpack:"variance_bias,omitempty"`
	PendingIndex []byte                 `msgpack:"pending_index,omitempty"`
	PendingValue []byte                 `msgpack:"pending_value,omitempty"`
	PendingBias  []byte                 `msgpack:"pending_bias,omitempty"`
	Support      records[supportVector] `msgpack:"support,omitempty"`
	SupportNext  int                    `msgpack:"support_next,omitempty"`
	KernelR2     float64                `msgpack:"kernel_r2,omitempty"`
	// Detector is the change detector's state, omitted when fresh.
	Detector *detectorBody `msgpack:"detector,omitempty"`

	// Calibration is the probabilities' calibrator and measures (format
	// 2), omitted when empty: a format-1 snapshot has none and loads with
	// calibration starting afresh.
	Calibration *calibrationBody `msgpack:"calibration,omitempty"`

	// VarianceBiases is omitted but for a multiclass AROW model, so that
	// every other model encodes as it did before the key existed.
	VarianceBiases []byte `msgpack:"variance_biases,omitempty"`

	// Challengers are the model's challengers, omitted when it has
	// none, so that such a model encodes as it did before they existed.
	Challengers records[challengerBody] `msgpack:"challengers,omitempty"`

	// Promotions are the model's history of promotions, omitted when it
	// was never promoted, so that such a model encodes as it did before
	// they existed.
	Promotions records[promotionBody] `msgpack:"promotions,omitempty"`
}

// promotionBody is the wire form of a learner.Promotion.
type promotionBody struct {
	Challenger string `msgpack:"challenger"`
	Replaced   string `msgpack:"replaced"`
	Auto       bool   `msgpack:"auto,omitempty"`
	Request    string `msgpack:"request,omitempty"`
	Examples   uint64 `msgpack:"examples"`
	Source     string `msgpack:"source"`
	Offset     int64  `msgpack:"offset"`
	Epoch      uint64 `msgpack:"epoch,omitempty"`
}

// challengerBody is the wire form of a learner.ChallengerState: its name,
// its state in the form of the model's (without challengers of its own)
// and its comparison with the model.
type challengerBody struct {
	Name       string         `msgpack:"name"`
	State      stateBody      `msgpack:"state"`
	Comparison comparisonBody `msgpack:"comparison"`
}

// comparisonBody is the wire form of a learner.ComparisonState.
type comparisonBody struct {
	LogLoss           sequenceBody `msgpack:"log_loss"`
	Errors            sequenceBody `msgpack:"errors"`
	ModelLogLoss      float64      `msgpack:"model_log_loss"`
	ModelErrors       float64      `msgpack:"model_errors"`
	ChallengerLogLoss float64      `msgpack:"challenger_log_loss"`
	ChallengerErrors  float64      `msgpack:"challenger_errors"`
}

// sequenceBody is the wire form of a learner.SequenceState.
type sequenceBody struct {
	Count     uint64  `msgpack:"count"`
	Sum       float64 `msgpack:"sum"`
	SumScaled float64 `msgpack:"sum_scaled"`
	V         float64 `msgpack:"v"`
}

// detectorBody is the wire form of a learner.Detector: the stateBody's
// key detector, omitted when the detector is fresh. A snapshot written
// before detectors existed has neither it nor the config's drift key, and
// loads with a fresh detector under the default settings (see
// withDriftDefaults).
type detectorBody struct {
	N       uint64  `msgpack:"n"`
	LowN    uint64  `msgpack:"low_n"`
	Mean    float64 `msgpack:"mean"`
	LowMean float64 `msgpack:"low_mean"`
	Sum     float64 `msgpack:"sum"`
	Low     float64 `msgpack:"low"`
	Drifts  uint64  `msgpack:"drifts"`
	// Restarted is absent until the first drift.
	Restarted uint64 `msgpack:"restarted,omitempty"`
}

// withDriftDefaults is a stateBody to decode into: the config's drift
// key, which a snapshot written before detectors existed lacks, keeps the
// default settings unless the body holds it.
func withDriftDefaults() stateBody {
	var b stateBody
	b.Config.Drift = learner.DefaultDrift()
	return b
}

type supportVector struct {
	Index []byte  `msgpack:"index"`
	Value []byte  `msgpack:"value"`
	Coef  float64 `msgpack:"coef"`
	Norm2 float64 `msgpack:"norm2"`
}

// positions encodes its keys in order: the encoder's own key sorting does
// not reach maps of int64.
type positions map[string]int64

func (p positions) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(len(p)); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if err := enc.EncodeString(k); err != nil {
			return err
		}
		if err := enc.EncodeInt(p[k]); err != nil {
			return err
		}
	}
	return nil
}

// Marshal encodes s. The encoding is deterministic: the same snapshot
// always gives the same bytes. It first runs the check Unmarshal runs on
// the state, and refuses a state that fails it with an error wrapping
// ErrInvalidState and naming the field: what Marshal writes, Unmarshal
// reads.
func Marshal(s *Snapshot) ([]byte, error) {
	data, release, err := marshalTemporary(s)
	if err != nil {
		return nil, err
	}
	defer release()
	return slices.Clone(data), nil
}

// marshalTemporary is Marshal into a buffer that is reused once release
// is called (SealTemporary): a store that writes the bytes and lets them
// go spares Marshal's copy.
func marshalTemporary(s *Snapshot) (data []byte, release func(), err error) {
	if s.State == nil {
		return nil, nil, errors.New("snapshot: no state")
	}
	st, err := encodeState(s.State)
	if err != nil {
		return nil, nil, err
	}
	if s.Epoch != 0 && s.Epoch != s.Generation {
		return nil, nil, fmt.Errorf("snapshot: epoch %d in generation %d (the mixed model of epoch e is generation e)", s.Epoch, s.Generation)
	}
	if err := CheckRanges(s.Boundary); err != nil {
		return nil, nil, fmt.Errorf("snapshot: boundary: %w", err)
	}
	if err := checkPositions(s.Positions); err != nil {
		return nil, nil, fmt.Errorf("snapshot: %w", err)
	}
	b := body{
		Model:          s.Model,
		Generation:     s.Generation,
		Created:        s.Created.UTC().Format(time.RFC3339Nano),
		Writer:         s.Writer,
		Positions:      s.Positions,
		stateBody:      st,
		Epoch:          s.Epoch,
		ConfigDigest:   digestBytes(s.ConfigDigest),
		Boundary:       s.Boundary,
		BoundarySHA256: digestBytes(s.BoundarySHA256),
		BaseSHA256:     digestBytes(s.BaseDigest),
		Scope:          s.Scope,
		Shard:          s.Shard,
		Join:           s.Join,
		Joins:          s.Joins,
	}
	data, release, err = sealPooled(&b, b.stateBody.size()+joinsSize(s)+bodySlack)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot: encode body: %w", err)
	}
	return data, release, nil
}

// joinsSize is the bytes s's joins take: a join holds every example and
// label waiting, and may be larger than the model.
func joinsSize(s *Snapshot) int {
	n := len(s.Join)
	for _, j := range s.Joins {
		n += len(j)
	}
	return n
}

// bodySlack is room, beyond its state's vectors, for everything else a
// snapshot's body holds (keys, counters, positions, the boundary), so
// that the buffer Marshal encodes into is allocated once.
const bodySlack = 64 << 10

// size is the bytes b's vectors take: most of what b encodes to.
func (b *stateBody) size() int {
	n := len(b.Window) + len(b.Weights) + len(b.Bias) + len(b.SumWeights) + len(b.SumBias) +
		len(b.Variance) + len(b.VarianceBiases) + len(b.PendingIndex) + len(b.PendingValue) + len(b.PendingBias)
	for _, sv := range b.Support {
		n += len(sv.Index) + len(sv.Value) + 32
	}
	if c := b.Calibration; c != nil {
		n += len(c.Parameters) + len(c.BinCount) + len(c.BinEvents) + len(c.BinSum) + len(c.AUCPositive) + len(c.AUCNegative) +
			len(c.WindowProbability) + len(c.WindowEvent) + len(c.WindowLogLoss) + len(c.WindowBrier)
	}
	for i := range b.Challengers {
		n += b.Challengers[i].State.size() + bodySlack
	}
	return n
}

// Seal encodes body as a snapshot's body is encoded (deterministically:
// the same value always gives the same bytes) and wraps it in the
// snapshot envelope, with the format and the CRC-32 checksum of the
// encoded body (docs/snapshot-format.md): the form of every object a
// store keeps, the epoch log's included. An error encoding body is the
// encoder's.
func Seal(body any) ([]byte, error) {
	data, release, err := sealPooled(body, 0)
	if err != nil {
		return nil, err
	}
	defer release()
	return slices.Clone(data), nil
}

// bodyBuffers holds the buffers that bodies are sealed in: a worker seals
// a shard result per range and a generation per snapshot, and reusing
// the buffer spares allocating (and growing) one of the body's size each
// time.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }} //nolint:gochecknoglobals // a pool of scratch buffers

// maxPooledBody is the largest buffer bodyBuffers keeps: a larger one is
// left to the collector once released. A shard result that holds what a
// range changed is far smaller than a whole model's state (a generation,
// a full shard result: 4 MiB over 2^18 weights under AROW). Pooled, a
// state's buffer stays live for as long as the small results, sealed
// every epoch, keep reusing it: a model's size of heap held between
// snapshots, and twice that added to the collector's goal. Released, it
// costs one allocation per write, of its final size (sealPooled's size).
const maxPooledBody = 1 << 20

// SealTemporary is Seal into a buffer that is reused once release is
// called: data is valid until then, and must not be kept. A writer that
// stores the bytes and lets them go (a shard's result) spares the copy
// Seal makes. size is about the bytes body encodes to, if known (0 if
// not): the buffer is grown to it first rather than as it fills.
func SealTemporary(body any, size int) (data []byte, release func(), err error) {
	return sealPooled(body, size)
}

// sealPooled encodes body into a buffer of bodyBuffers, grown to size
// bytes (and the envelope's room) first when it is smaller, after room
// for the envelope's head, and writes the head there once the body's
// length and checksum are known: the body is never copied. The bytes are
// those of the envelope encoded whole, the body in it. release gives the
// buffer back.
func sealPooled(body any, size int) (data []byte, release func(), err error) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	released := false
	release = func() {
		if !released && buf.Cap() <= maxPooledBody {
			bodyBuffers.Put(buf)
		}
		released = true
	}
	buf.Reset()
	buf.Grow(envelopeHead + size)
	var room [envelopeHead]byte
	buf.Write(room[:])
	if err := encodeInto(buf, body); err != nil {
		release()
		return nil, nil, err
	}
	all := buf.Bytes()
	raw := all[envelopeHead:]
	head, err := envelopeHeadOf(crc32.ChecksumIEEE(raw), len(raw))
	if err != nil {
		release()
		return nil, nil, err
	}
	start := envelopeHead - len(head)
	copy(all[start:], head)
	return all[start:], release, nil
}

// envelopeHeadOf is the bytes an envelope of a body of n bytes with
// checksum takes before the body: the envelope encoded with an empty
// body, whose length (a bin 8 of 0, two bytes) is replaced by n's.
func envelopeHeadOf(checksum uint32, n int) ([]byte, error) {
	var b bytes.Buffer
	if err := encodeInto(&b, &envelope{Format: Format, Checksum: checksum, Body: []byte{}}); err != nil {
		return nil, fmt.Errorf("snapshot: encode: %w", err)
	}
	head := b.Bytes()
	if len(head) < 2 || head[len(head)-2] != msgpcode.Bin8 || head[len(head)-1] != 0 {
		return nil, fmt.Errorf("snapshot: encode: an empty body's envelope ends in %x", head)
	}
	b.Truncate(len(head) - 2)
	if err := msgpack.NewEncoder(&b).EncodeBytesLen(n); err != nil {
		return nil, fmt.Errorf("snapshot: encode: %w", err)
	}
	if b.Len() > envelopeHead {
		return nil, fmt.Errorf("snapshot: encode: an envelope's head of %d bytes", b.Len())
	}
	return b.Bytes(), nil
}

// EncodedState is a learner.State in the wire form a snapshot body holds
// it in, as a value of its own: a field of this type in a body given to
// Seal encodes as a map with the keys of a snapshot's state, every bit of
// the weights kept, and decodes from one with msgpack. The epoch log's
// shard results hold their learned state this way, so that a mix reads
// exactly what a generation would hold.
type EncodedState struct{ b stateBody }

// EncodeState is st in its wire form, after the check the loader runs: a
// state that fails it gives an error wrapping ErrInvalidState.
func EncodeState(st *learner.State) (EncodedState, error) {
	b, err := encodeState(st)
	return EncodedState{b}, err
}

// State decodes the state and checks it as learner.Restore does. The
// error names the field that is wrong.
func (e *EncodedState) State() (*learner.State, error) { return e.b.state() }

// EncodeStateLean is EncodeState with the vectors of one value per
// weight (weights, sum_weights, variance) left out of the wire form, for
// a reader that gets them elsewhere and gives them to StateWith: the
// epoch log's shard results send only their changed coordinates. Each
// challenger's state leaves them out too. What is encoded is checked
// (learner.State.ValidateLean), at a cost that does not grow with the
// model; the vectors are the caller's to check, and StateWith checks
// the whole state again.
func EncodeStateLean(st *learner.State) (EncodedState, error) {
	lean := *st
	lean.Weights, lean.SumWeights, lean.Variance = nil, nil, nil
	if len(st.Challengers) > 0 {
		lean.Challengers = slices.Clone(st.Challengers)
		for i := range lean.Challengers {
			c := *lean.Challengers[i].State
			c.Weights, c.SumWeights, c.Variance = nil, nil, nil
			lean.Challengers[i].State = &c
		}
	}
	if err := lean.ValidateLean(); err != nil {
		return EncodedState{}, fmt.Errorf("snapshot: %w: %w", ErrInvalidState, err)
	}
	return EncodedState{stateBodyOf(&lean)}, nil
}

// StateWith decodes a state that EncodeStateLean encoded, with its
// weights, sum_weights and variance given (nil for a vector the state
// has not), and challengers[i] those of its challenger i, and checks it
// as State does. A wire form that holds one of those vectors is refused.
func (e *EncodedState) StateWith(weights, sumWeights, variance []float64, challengers ...[3][]float64) (*learner.State, error) {
	lean := func(b *stateBody) bool { return b.Weights == nil && b.SumWeights == nil && b.Variance == nil }
	if !lean(&e.b) {
		return nil, errors.New("the state holds weights, sum_weights or variance, which a lean state leaves out")
	}
	for i := range e.b.Challengers {
		if !lean(&e.b.Challengers[i].State) {
			return nil, fmt.Errorf("challenger %s holds weights, sum_weights or variance, which a lean state leaves out", e.b.Challengers[i].Name)
		}
	}
	if len(challengers) != len(e.b.Challengers) {
		return nil, fmt.Errorf("the vectors of %d challengers are given for a state of %d", len(challengers), len(e.b.Challengers))
	}
	st, err := e.b.decode()
	if err != nil {
		return nil, err
	}
	st.Weights, st.SumWeights, st.Variance = weights, sumWeights, variance
	for i, v := range challengers {
		c := st.Challengers[i].State
		c.Weights, c.SumWeights, c.Variance = v[0], v[1], v[2]
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (e EncodedState) EncodeMsgpack(enc *msgpack.Encoder) error { return enc.Encode(&e.b) }

// DecodeMsgpack implements msgpack.CustomDecoder. It only decodes: State
// checks.
func (e *EncodedState) DecodeMsgpack(dec *msgpack.Decoder) error {
	e.b = withDriftDefaults()
	return dec.Decode(&e.b)
}

// encodeState is the wire form of st, after the check the loader runs:
// a state that fails it gives an error wrapping ErrInvalidState.
func encodeState(st *learner.State) (stateBody, error) {
	if err := st.Validate(); err != nil {
		return stateBody{}, fmt.Errorf("snapshot: %w: %w", ErrInvalidState, err)
	}
	return stateBodyOf(st), nil
}

// stateBodyOf is the wire form of st, which the caller has checked.
func stateBodyOf(st *learner.State) stateBody {
	b := stateBody{
		Config:         st.Config,
		Examples:       st.Examples,
		Labeled:        st.Labeled,
		Mistakes:       st.Mistakes,
		Updates:        st.Updates,
		R2:             st.R2,
		TruePositives:  st.TruePositives,
		FalsePositives: st.FalsePositives,
		TrueNegatives:  st.TrueNegatives,
		FalseNegatives: st.FalseNegatives,
		Window:         make([]byte, len(st.Window)),
		WindowNext:     st.WindowNext,
		Weights:        f64bytes(st.Weights),
		Bias:           f64bytes(st.Bias),
		Scale:          st.Scale,
		VNorm2:         st.VNorm2,
		SumWeights:     f64bytes(st.SumWeights),
		SumBias:        f64bytes(st.SumBias),
		Variance:       f64bytes(st.Variance),
		VarianceBias:   st.VarianceBias,
		VarianceBiases: f64bytes(st.VarianceBiases),
		PendingIndex:   u32bytes(st.PendingIndex),
		PendingValue:   f64bytes(st.PendingValue),
		PendingBias:    f64bytes(st.PendingBias),
		SupportNext:    st.SupportNext,
		KernelR2:       st.KernelR2,
	}
	if d := st.Detector; d != (learner.Detector{}) {
		b.Detector = &detectorBody{N: d.N, LowN: d.LowN, Mean: d.Mean, LowMean: d.LowMean, Sum: d.Sum, Low: d.Low, Drifts: d.Drifts, Restarted: d.Restarted}
	}
	b.Calibration = encodeCalibration(&st.Calibration)
	for i, ok := range st.Window {
		if ok {
			b.Window[i] = 1
		}
	}
	for _, sv := range st.Support {
		b.Support = append(b.Support, supportVector{Index: u32bytes(sv.Index), Value: f64bytes(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2})
	}
	for _, c := range st.Challengers {
		cs := &c.Comparison
		b.Challengers = append(b.Challengers, challengerBody{
			Name:  c.Name,
			State: stateBodyOf(c.State),
			Comparison: comparisonBody{
				LogLoss:           sequenceBody(cs.LogLoss),
				Errors:            sequenceBody(cs.Errors),
				ModelLogLoss:      cs.ModelLogLoss,
				ModelErrors:       cs.ModelErrors,
				ChallengerLogLoss: cs.ChallengerLogLoss,
				ChallengerErrors:  cs.ChallengerErrors,
			},
		})
	}
	for _, p := range st.Promotions {
		b.Promotions = append(b.Promotions, promotionBody(p))
	}
	return b
}

// envelopeHead is more than the bytes an envelope takes besides its
// body: its keys, format, checksum and the body's length.
const envelopeHead = 64

// encodeInto encodes v into buf as every object a store keeps is
// encoded: deterministically, map keys sorted, integers compact.
func encodeInto(buf *bytes.Buffer, v any) error {
	enc := msgpack.NewEncoder(buf)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	return enc.Encode(v)
}

// Unmarshal decodes a snapshot and checks that its state fits its
// configuration. A damaged or truncated snapshot gives an error wrapping
// ErrCorrupt that says what is wrong with it.
func Unmarshal(data []byte) (*Snapshot, error) {
	raw, format, err := unseal(data)
	if err != nil {
		return nil, err
	}
	b := body{stateBody: withDriftDefaults()}
	if err := msgpack.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrCorrupt, err)
	}
	created, err := time.Parse(time.RFC3339Nano, b.Created)
	if err != nil {
		return nil, fmt.Errorf("%w: created: %v", ErrCorrupt, err)
	}
	st, err := b.state()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	s := &Snapshot{
		Model:      b.Model,
		Generation: b.Generation,
		Created:    created,
		Writer:     b.Writer,
		Positions:  map[string]int64(b.Positions),
		State:      st,
		Epoch:      b.Epoch,
		Boundary:   b.Boundary,
		Scope:      b.Scope,
		Shard:      b.Shard,
		Join:       b.Join,
		Joins:      b.Joins,
	}
	if format < Format {
		s.Format = format
	}
	if s.ConfigDigest, err = digestArray("config_digest", b.ConfigDigest, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if s.BoundarySHA256, err = digestArray("boundary_sha256", b.BoundarySHA256, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if s.BaseDigest, err = digestArray("base_sha256", b.BaseSHA256, true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if s.Epoch != 0 && s.Epoch != s.Generation {
		return nil, fmt.Errorf("%w: epoch %d in generation %d", ErrCorrupt, s.Epoch, s.Generation)
	}
	if err := CheckRanges(s.Boundary); err != nil {
		return nil, fmt.Errorf("%w: boundary: %v", ErrCorrupt, err)
	}
	if err := checkPositions(s.Positions); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return s, nil
}

// checkPositions refuses a negative position: offsets and sequences
// count from 0, and a worker would resume from one.
func checkPositions(p map[string]int64) error {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if p[k] < 0 {
			return fmt.Errorf("positions: %s at %d (want 0 or more)", k, p[k])
		}
	}
	return nil
}

// Unseal returns the encoded body of an envelope (see Seal) after
// checking its format and checksum. Damage gives an error wrapping
// ErrCorrupt; a newer format one wrapping ErrNewerFormat.
func Unseal(data []byte) ([]byte, error) {
	body, _, err := unseal(data)
	return body, err
}

// unseal is Unseal, which also returns the envelope's format.
func unseal(data []byte) ([]byte, int, error) {
	if err := checkShape("the envelope", data); err != nil {
		return nil, 0, err
	}
	var env envelope
	if err := msgpack.Unmarshal(data, &env); err != nil {
		return nil, 0, fmt.Errorf("%w: not a snapshot document: %v", ErrCorrupt, err)
	}
	if env.Format == 0 || env.Body == nil {
		return nil, 0, fmt.Errorf("%w: no format or body: not a hyperplane snapshot", ErrCorrupt)
	}
	if env.Format > Format {
		return nil, 0, fmt.Errorf("%w: format %d, this hyperplane reads formats %d to %d (upgrade hyperplane to read it)", ErrNewerFormat, env.Format, oldestFormat, Format)
	}
	if env.Format < oldestFormat {
		return nil, 0, fmt.Errorf("%w: format %d: not a hyperplane snapshot", ErrCorrupt, env.Format)
	}
	if sum := crc32.ChecksumIEEE(env.Body); sum != env.Checksum {
		return nil, 0, fmt.Errorf("%w: checksum mismatch: body has crc32 %08x, the snapshot records %08x", ErrCorrupt, sum, env.Checksum)
	}
	if err := checkShape("the body", env.Body); err != nil {
		return nil, 0, err
	}
	return env.Body, env.Format, nil
}

// maxDepth bounds the arrays and maps open at once in a stored object's
// envelope, and in its body. The formats nest a few; the decoder recurses
// into each, so an object crafted to nest millions would exhaust its
// stack, which no recover catches.
const maxDepth = 64

// checkShape refuses data, what of a stored object, if its first value
// nests deeper than maxDepth, is followed by more bytes, or is not
// whole: a length or count that runs past the end of data, or a byte
// that is no msgpack type. The decoder allocates an array's elements as
// its count says before it reads them, so a count of billions in a few
// bytes would exhaust memory, which no recover catches either; within
// data, every element takes at least a byte. Other damage is left to the decoder, which then recurses
// no deeper than maxDepth.
func checkShape(what string, data []byte) error {
	s := msgpackscan.Skipper{MaxDepth: maxDepth}
	switch i, st := s.Skip(data, 0); st {
	case msgpackscan.TooDeep:
		return fmt.Errorf("%w: %s nests more than %d arrays and maps at byte %d", ErrCorrupt, what, maxDepth, i)
	case msgpackscan.Truncated:
		return fmt.Errorf("%w: %s is truncated: it ends inside a value, or a length or count runs past its end (%d bytes)", ErrCorrupt, what, len(data))
	case msgpackscan.Invalid:
		return fmt.Errorf("%w: %s has a byte that is no msgpack type at byte %d", ErrCorrupt, what, i)
	case msgpackscan.OK:
		// A writer writes one value and nothing after it: bytes that
		// follow it (two objects written into one, or a copy gone wrong)
		// are damage, which the checksum of the body alone does not see.
		if i != len(data) {
			return fmt.Errorf("%w: %d bytes follow %s, which ends at byte %d of %d", ErrCorrupt, len(data)-i, what, i, len(data))
		}
	}
	return nil
}

// records is an array of the body's structs (record names its key). The
// decoder makes a whole struct for each element before anything checks
// it, hundreds of bytes for a challenger, so that an array of one-byte
// elements (nil, or an empty map) would have a stored object of a few
// megabytes take gigabytes of memory, which no recover catches. An
// element stored in fewer bytes than 1/recordGrowth of its struct, less
// than a writer ever stores one in, is refused as soon as it is read:
// decoded, the elements take at most recordGrowth times their bytes.
type records[T record] []T

// record is an element of records: its key names it in errors.
type record interface{ recordKey() string }

func (supportVector) recordKey() string  { return "support" }
func (challengerBody) recordKey() string { return "challengers" }
func (promotionBody) recordKey() string  { return "promotions" }
func (Range) recordKey() string          { return "boundary" }

// recordGrowth bounds the memory a decoded element of records takes, in
// multiples of the bytes it is stored in.
const recordGrowth = 8

// DecodeMsgpack decodes the array element by element. It measures what
// each takes when dec reads from memory, as msgpack.Unmarshal's does,
// which is how every stored object is decoded.
func (r *records[T]) DecodeMsgpack(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 0 {
		*r = nil
		return err
	}
	var zero T
	least := max(1, int(reflect.TypeFor[T]().Size())/recordGrowth)
	stored, measured := dec.Buffered().(interface{ Len() int })
	var out []T
	if measured {
		// At most half as many as the bytes left can hold, each at least
		// least (the bound the check below keeps): a crafted count takes
		// no more than half the memory the check allows before the
		// elements refute it, and a real array, whose elements take
		// several times least, its count.
		out = make([]T, 0, min(n, stored.Len()/(2*least)))
	}
	for i := range n {
		var before int
		if measured {
			before = stored.Len()
		}
		// Decoded in place: no copy of the element, which escapes.
		out = append(out, zero)
		if err := dec.Decode(&out[i]); err != nil {
			return fmt.Errorf("%s: element %d: %w", zero.recordKey(), i, err)
		}
		if measured && before-stored.Len() < least {
			return fmt.Errorf("%s: element %d is stored in %d bytes, and every one takes at least %d", zero.recordKey(), i, before-stored.Len(), least)
		}
	}
	*r = out
	return nil
}

// state decodes b and checks it as Restore does. The error names the
// field that is wrong.
func (b *stateBody) state() (*learner.State, error) {
	st, err := b.decode()
	if err != nil {
		return nil, err
	}
	// The check Restore runs, and Marshal: every length and range against
	// the configuration, every number finite.
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// decode decodes b without checking the state.
func (b *stateBody) decode() (*learner.State, error) {
	st := &learner.State{
		Config:         b.Config,
		Examples:       b.Examples,
		Labeled:        b.Labeled,
		Mistakes:       b.Mistakes,
		Updates:        b.Updates,
		R2:             b.R2,
		TruePositives:  b.TruePositives,
		FalsePositives: b.FalsePositives,
		TrueNegatives:  b.TrueNegatives,
		FalseNegatives: b.FalseNegatives,
		Window:         make([]bool, len(b.Window)),
		WindowNext:     b.WindowNext,
		Scale:          b.Scale,
		VNorm2:         b.VNorm2,
		VarianceBias:   b.VarianceBias,
		SupportNext:    b.SupportNext,
		KernelR2:       b.KernelR2,
	}
	for i, v := range b.Window {
		st.Window[i] = v != 0
	}
	if d := b.Detector; d != nil {
		st.Detector = learner.Detector{N: d.N, LowN: d.LowN, Mean: d.Mean, LowMean: d.LowMean, Sum: d.Sum, Low: d.Low, Drifts: d.Drifts, Restarted: d.Restarted}
	}
	vectors := []struct {
		name string
		src  []byte
		dst  *[]float64
	}{
		{"weights", b.Weights, &st.Weights},
		{"bias", b.Bias, &st.Bias},
		{"sum_weights", b.SumWeights, &st.SumWeights},
		{"sum_bias", b.SumBias, &st.SumBias},
		{"variance", b.Variance, &st.Variance},
		{"variance_biases", b.VarianceBiases, &st.VarianceBiases},
		{"pending_value", b.PendingValue, &st.PendingValue},
		{"pending_bias", b.PendingBias, &st.PendingBias},
	}
	var err error
	for _, v := range vectors {
		if *v.dst, err = bytesF64(v.src); err != nil {
			return nil, fmt.Errorf("%s: %v", v.name, err)
		}
	}
	if st.PendingIndex, err = bytesU32(b.PendingIndex); err != nil {
		return nil, fmt.Errorf("pending_index: %v", err)
	}
	if b.Calibration != nil {
		if st.Calibration, err = b.Calibration.calibration(); err != nil {
			return nil, err
		}
	}
	for i, sv := range b.Support {
		var v learner.SupportVector
		if v.Index, err = bytesU32(sv.Index); err != nil {
			return nil, fmt.Errorf("support %d index: %v", i, err)
		}
		if v.Value, err = bytesF64(sv.Value); err != nil {
			return nil, fmt.Errorf("support %d value: %v", i, err)
		}
		v.Coef, v.Norm2 = sv.Coef, sv.Norm2
		st.Support = append(st.Support, v)
	}
	for i := range b.Challengers {
		c := &b.Challengers[i]
		cst, err := c.State.decode()
		if err != nil {
			return nil, fmt.Errorf("challenger %s: %w", c.Name, err)
		}
		cb := &c.Comparison
		st.Challengers = append(st.Challengers, learner.ChallengerState{
			Name:  c.Name,
			State: cst,
			Comparison: learner.ComparisonState{
				LogLoss:           learner.SequenceState(cb.LogLoss),
				Errors:            learner.SequenceState(cb.Errors),
				ModelLogLoss:      cb.ModelLogLoss,
				ModelErrors:       cb.ModelErrors,
				ChallengerLogLoss: cb.ChallengerLogLoss,
				ChallengerErrors:  cb.ChallengerErrors,
			},
		})
	}
	for _, p := range b.Promotions {
		st.Promotions = append(st.Promotions, learner.Promotion(p))
	}
	return st, nil
}

// digestBytes is d as a bin value, nil (an omitted key) when d is zero.
func digestBytes(d [32]byte) []byte {
	if d == ([32]byte{}) {
		return nil
	}
	return d[:]
}

// digestArray reads a SHA-256 from a bin value. An absent one is the
// zero digest when optional.
func digestArray(name string, b []byte, optional bool) ([32]byte, error) {
	var d [32]byte
	if len(b) == 0 && optional {
		return d, nil
	}
	if len(b) != len(d) {
		return d, fmt.Errorf("%s: %d bytes, a SHA-256 has 32", name, len(b))
	}
	copy(d[:], b)
	return d, nil
}

// IncompatibleError says that a snapshot was trained under a configuration
// other than the one it is loaded with.
type IncompatibleError struct {
	Field     string // configuration key, under model.learner (drift.*: under model)
	Snapshot  string // its value in the snapshot
	Requested string // its value in the configuration
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("snapshot is incompatible with the configuration: %s is %s in the snapshot but %s in the configuration", e.Field, e.Snapshot, e.Requested)
}

// Compatible reports, as an *IncompatibleError naming the first field that
// differs, whether s was trained with cfg. Every learner setting the
// model's algorithm reads counts (learner.Config.Canonical): continuing a
// model under other settings would not give the model an uninterrupted
// run gives.
func (s *Snapshot) Compatible(cfg learner.Config) error {
	have, want := reflect.ValueOf(s.State.Config.Canonical()), reflect.ValueOf(cfg.Canonical())
	t := have.Type()
	for i := range t.NumField() {
		a, b := have.Field(i).Interface(), want.Field(i).Interface()
		if equalSetting(a, b) {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if st := t.Field(i).Type; st.Kind() == reflect.Struct {
			// A group of keys (drift): name the one that differs, with
			// values a configuration can take, not the group's Go form.
			for j := range st.NumField() {
				x, y := have.Field(i).Field(j).Interface(), want.Field(i).Field(j).Interface()
				if x != y {
					key, _, _ := strings.Cut(st.Field(j).Tag.Get("json"), ",")
					return &IncompatibleError{Field: name + "." + key, Snapshot: fmt.Sprint(x), Requested: fmt.Sprint(y)}
				}
			}
		}
		return &IncompatibleError{Field: name, Snapshot: fmt.Sprint(a), Requested: fmt.Sprint(b)}
	}
	return nil
}

func equalSetting(a, b any) bool {
	if sa, ok := a.([]string); ok {
		return slices.Equal(sa, b.([]string))
	}
	return a == b
}

func f64bytes(v []float64) []byte {
	if v == nil {
		return nil
	}
	out := make([]byte, 8*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(f))
	}
	return out
}

func bytesF64(b []byte) ([]float64, error) {
	if b == nil {
		return nil, nil
	}
	if len(b)%8 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of float64", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out, nil
}

func u32bytes(v []uint32) []byte {
	if v == nil {
		return nil
	}
	out := make([]byte, 4*len(v))
	for i, u := range v {
		binary.LittleEndian.PutUint32(out[4*i:], u)
	}
	return out
}

func bytesU32(b []byte) ([]uint32, error) {
	if b == nil {
		return nil, nil
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of uint32", len(b))
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}
