package consumer

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// JoinConfig configures the join of labels that come later
// (docs/labels.md).
type JoinConfig struct {
	// Window is how long, on the records' own times, an example waits for
	// its label. It must be positive.
	Window time.Duration
	// Default, if HasDefault, is the label an example is learned with
	// when its window closed without one; without it such an example is
	// predicted and never learned.
	Default    int
	HasDefault bool
	// MaxPending bounds the examples waiting for their labels: past it
	// the worker stops reading examples until the tail learns some.
	MaxPending int
}

// DefaultMaxPending is JoinConfig.MaxPending's default: about 160 MB of
// waiting examples with ids of 20 bytes.
const DefaultMaxPending = 2_000_000

// LabelOutcome is what became of a label record (docs/labels.md,
// section 2).
type LabelOutcome uint8

const (
	// LabelJoined: the label is its example's.
	LabelJoined LabelOutcome = iota
	// LabelLate: the label came after its example's window closed.
	LabelLate
	// LabelUnknown: the label is related to no example.
	LabelUnknown
	// LabelDuplicate: the label's example had joined an earlier label.
	LabelDuplicate
	labelOutcomes
)

func (o LabelOutcome) String() string {
	switch o {
	case LabelJoined:
		return "joined"
	case LabelLate:
		return "late"
	case LabelUnknown:
		return "unknown"
	case LabelDuplicate:
		return "duplicate"
	}
	return fmt.Sprintf("LabelOutcome(%d)", uint8(o))
}

// Served is the prediction that was published for a delayed example: what
// the model of that moment said, scored when its label joins.
type Served struct {
	Version     uint64
	Probability float32 // P(+1) for a binary model, the predicted class's for a multiclass one
	Predicted   int32
}

// Decided is a label record whose outcome is known: at once when it
// joins or meets its example, later when it was held (a label before its
// example, or one for an id not seen yet).
type Decided struct {
	Outcome LabelOutcome
	// ID is the label's id, valid until the join's next Example, Label
	// or Skip: Score, which takes the Decided, leaves it.
	ID    []byte
	Label int
	// LabelOffset and LabelTime are the label record's position in its
	// log and its time (Unix milliseconds).
	LabelOffset int64
	LabelTime   int64
	// For a label that met its example (joined, late, duplicate): the
	// example's offset and time, and what was served for it.
	ExampleOffset int64
	ExampleTime   int64
	Served        Served
}

// JoinCounts are the join's outcomes so far.
type JoinCounts struct {
	Labels  [labelOutcomes]uint64
	Marks   uint64
	Expired uint64 // examples whose window closed without a label
	// Served predictions scored when their labels joined: how many, how
	// many were right, and the sum of their log-losses.
	Served        uint64
	ServedCorrect uint64
	ServedLogLoss float64
}

// Join decides which label each delayed example is learned with, as a
// function of the two logs alone (docs/labels.md, section 2): records are
// given to it as they are read, examples in their log's order and labels
// in theirs, in any interleaving of the two, and every interleaving
// decides the same labels and the same outcomes.
//
// It holds no features: the examples are re-read from their log, and Join
// says at each one whether it is decided (see Next). It is not safe for
// concurrent use.
type Join struct {
	cfg    JoinConfig
	window int64 // ω in milliseconds

	// wE and wL are the examples' and labels' watermarks (Unix ms),
	// math.MinInt64 before the first record.
	wE, wL int64

	// exs are the delayed examples read at the head, in their log's
	// order: the pending ones from learn on, the decided ones before it
	// kept until no label can meet them.
	exs   fifo[joinExample]
	learn int64 // sequence in exs of the next example to learn

	held fifo[heldLabel]
	// unresolved counts the held labels that no example has resolved:
	// held keeps a resolved label until those before it go.
	unresolved int

	counts JoinCounts
	// reused counts the delayed examples read while an example with the
	// same id was still held: not part of the state, since a restart
	// reads again some of those it counted.
	reused uint64
	// outs collects the outcomes of the call in progress.
	outs []Decided
	// ids holds the ids of outs, copied: what they were copied from may
	// go before the caller reads them.
	ids []byte
}

type joinExample struct {
	offset int64
	t, a   int64 // its time, and the examples' watermark at it
	served Served
	label  int32
	// delay is the joined label's time minus the example's, in ms,
	// clamped to an int32 (±24 days): it is reported, never decides.
	// It is notJoined while no label has joined the example. Whether the
	// example is learned is its sequence against Join.learn. Both keep
	// what waits at 48 bytes.
	delay int32
}

// notJoined is joinExample.delay before a label joins.
const notJoined = math.MinInt32

func (e *joinExample) joined() bool { return e.delay != notJoined }

type heldLabel struct {
	offset   int64
	t, b     int64 // its time, and the labels' watermark at it
	label    int32
	resolved bool
}

// NewJoin returns an empty join.
func NewJoin(cfg JoinConfig) *Join {
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	return &Join{
		cfg:    cfg,
		window: cfg.Window.Milliseconds(),
		wE:     math.MinInt64,
		wL:     math.MinInt64,
		exs:    newFIFO[joinExample](),
		held:   newFIFO[heldLabel](),
	}
}

// Millis is a record time as the join counts it: whole milliseconds since
// the Unix epoch.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Counts returns the outcomes so far.
func (j *Join) Counts() JoinCounts { return j.counts }

// Pending is the number of examples waiting to be learned.
func (j *Join) Pending() int { return int(j.exs.end() - j.learn) }

// Held is the number of labels held: read before their examples, or for
// ids no example read has, until the examples' watermark passes their
// time plus the window.
func (j *Join) Held() int { return j.unresolved }

// Reused is how many delayed examples this Join was given while an
// example with the same id was still held (pending, or decided within
// the last two windows): a label is decided against the oldest example
// held with its id, so such an example is joined by none of the labels
// after it (docs/labels.md, section 2).
func (j *Join) Reused() uint64 { return j.reused }

// Full reports whether MaxPending examples wait: the head must stop
// reading until the tail learns some.
func (j *Join) Full() bool { return j.Pending() >= j.cfg.MaxPending }

// LabelsAhead reports whether MaxPending labels are held and the labels'
// watermark is more than a window past the examples': labels read now
// could only be held too, so their reader waits for the examples. Below
// that bound labels are read whatever the examples do, so that a quiet
// examples' input does not hold up the labels of the examples read.
// Before the first example the examples' watermark is below every
// label's: MaxPending labels held then are as far ahead as any.
func (j *Join) LabelsAhead() bool {
	return j.unresolved >= j.cfg.MaxPending && j.wL > j.wE+j.window
}

// Example records an example read at the head, at offset in its log with
// time t (ms). Every example advances the examples' watermark; a delayed
// one (delayed: it has an id and no label) also waits for its label,
// served being what was published for it; id is copied. It returns the
// outcomes of held labels that this decided; the slice is valid until the
// next call.
func (j *Join) Example(offset, t int64, delayed bool, id []byte, served Served) []Decided {
	j.outs, j.ids = j.outs[:0], j.ids[:0]
	j.wE = max(j.wE, t)
	j.evictHeld()
	if !delayed {
		return j.outs
	}
	e := joinExample{offset: offset, t: t, a: j.wE, served: served, delay: notJoined}
	seq, shared := j.exs.push(id, e)
	if shared {
		j.reused++
	}
	ep := j.exs.at(seq)
	if j.held.len() == 0 {
		return j.outs
	}
	// The held labels with this id, in their log's order.
	for _, s := range j.held.chain(id) {
		l := j.held.at(s)
		if l.resolved {
			continue
		}
		out, ok := j.relate(ep, l.b, l.label, l.t)
		if !ok {
			continue
		}
		l.resolved = true
		j.unresolved--
		j.decide(out, id, l.label, l.offset, l.t, ep)
	}
	return j.outs
}

// Label records a label record read at offset in its log with time t
// (ms): a label for id (which is copied), or a mark (which only advances
// the watermark). It returns the outcomes it decided: its own, unless it is held, and those
// of held labels it made unknown. The slice is valid until the next call.
func (j *Join) Label(offset, t int64, mark bool, id []byte, label int) []Decided {
	j.outs, j.ids = j.outs[:0], j.ids[:0]
	j.wL = max(j.wL, t)
	b := j.wL
	j.forget()
	if mark {
		j.counts.Marks++
		return j.outs
	}
	for _, s := range j.exs.chain(id) {
		e := j.exs.at(s)
		out, ok := j.relate(e, b, int32(label), t)
		if !ok {
			continue
		}
		j.decide(out, id, int32(label), offset, t, e)
		return j.outs
	}
	j.held.push(id, heldLabel{offset: offset, t: t, b: b, label: int32(label)})
	j.unresolved++
	j.evictHeld()
	return j.outs
}

// Skip records a record of the labels' log that is no label (one that
// does not decode): its time counts all the same.
func (j *Join) Skip(t int64) []Decided {
	j.outs, j.ids = j.outs[:0], j.ids[:0]
	j.wL = max(j.wL, t)
	j.forget()
	return j.outs
}

// relate applies the rule of docs/labels.md section 2 to example e and a
// label whose watermark is b: ok is false when they are not related or the
// label is too late to be counted against e.
func (j *Join) relate(e *joinExample, b int64, label int32, tl int64) (LabelOutcome, bool) {
	w := j.window
	switch {
	case e.a > b+w:
		return 0, false
	case b <= e.t+w:
		if e.joined() {
			return LabelDuplicate, true
		}
		e.label, e.delay = label, clampDelay(tl-e.t)
		return LabelJoined, true
	case b <= e.t+2*w:
		return LabelLate, true
	}
	return 0, false
}

func (j *Join) decide(out LabelOutcome, id []byte, label int32, offset, t int64, e *joinExample) {
	j.counts.Labels[out]++
	n := len(j.ids)
	j.ids = append(j.ids, id...)
	d := Decided{Outcome: out, ID: j.ids[n:len(j.ids):len(j.ids)], Label: int(label), LabelOffset: offset, LabelTime: t}
	if e != nil {
		d.ExampleOffset, d.ExampleTime, d.Served = e.offset, e.t, e.served
	}
	j.outs = append(j.outs, d)
}

// evictHeld drops the held labels that no example read from now on can
// meet (W_E > b + ω) as unknown, and the resolved ones at the front.
func (j *Join) evictHeld() {
	for j.held.len() > 0 {
		s := j.held.first()
		l := j.held.at(s)
		if !l.resolved {
			if j.wE <= l.b+j.window {
				return
			}
			j.decide(LabelUnknown, j.held.idBytes(s), l.label, l.offset, l.t, nil)
			j.unresolved--
		}
		j.held.pop()
	}
}

// forget drops the learned examples at the front that no label read from
// now on can meet (W_L > t + 2ω).
func (j *Join) forget() {
	for j.exs.len() > 0 {
		s := j.exs.first()
		if s >= j.learn {
			return
		}
		if e := j.exs.at(s); j.wL <= e.t+2*j.window {
			return
		}
		j.exs.pop()
	}
}

// Next says what the tail does with the delayed example it must learn
// next: its offset, whether it waits for one (ok), and whether its join
// is decided. Every example of the log before that offset that is not
// delayed is learned as it is.
func (j *Join) Next() (offset int64, decided, ok bool) {
	if j.learn >= j.exs.end() {
		return 0, false, false
	}
	e := j.exs.at(j.learn)
	return e.offset, e.joined() || j.wL > e.t+j.window, true
}

// Decides reports whether a delayed example with id read now at time t
// (ms) would be decided at once: a held label with its id is in time for
// it, or the labels' watermark has passed its window. It is Example
// followed by Next, without changing the join: the range of an epoch
// learns up to the first example it does not decide (docs/labels.md,
// section 11.1).
func (j *Join) Decides(t int64, id []byte) bool {
	if j.wL > t+j.window {
		return true
	}
	a := max(j.wE, t)
	if j.held.len() == 0 {
		return false
	}
	for _, s := range j.held.chain(id) {
		l := j.held.at(s)
		// Example would evict a label with a > b + ω as unknown before
		// relating it: not related either way.
		if !l.resolved && a <= l.b+j.window && l.b <= t+j.window {
			return true
		}
	}
	return false
}

// Learned marks the next delayed example, which Next said is decided, as
// learned, and returns its label: labeled is false when its window closed
// without one and there is no default. delay is the joined label's time
// minus the example's (ms), 0 without a join.
func (j *Join) Learned() (label int, labeled bool, delay int64) {
	e := *j.exs.at(j.learn) // forget may move it
	j.learn++
	j.forget()
	switch {
	case e.joined():
		return int(e.label), true, int64(e.delay)
	case j.cfg.HasDefault:
		j.counts.Expired++
		return j.cfg.Default, true, 0
	}
	j.counts.Expired++
	return 0, false, 0
}

// clampDelay is d as an int32, above notJoined.
func clampDelay(d int64) int32 { return int32(max(notJoined+1, min(math.MaxInt32, d))) }

// Due is the record time (ms) at which the oldest pending example's window
// closes, if one waits and the labels' watermark has not passed it: the
// moment after which a mark may close it (docs/labels.md, section 5).
func (j *Join) Due() (int64, bool) {
	if j.learn >= j.exs.end() {
		return 0, false
	}
	e := j.exs.at(j.learn)
	if e.joined() || j.wL > e.t+j.window {
		return 0, false
	}
	return e.t + j.window, true
}

// Score records the served prediction of a label that joined: whether it
// was right, and its log-loss (the probability it gave the label, floored
// so that a confident mistake costs a finite loss). binary says how
// Served.Probability reads.
func (j *Join) Score(d *Decided, binary bool) (correct bool, logLoss float64) {
	p := float64(d.Served.Probability)
	correct = int(d.Served.Predicted) == d.Label
	var q float64
	switch {
	case !binary && correct:
		q = p
	case !binary:
		// The multiclass probability of the true class is not kept: the
		// rest of the mass, shared out, bounds it.
		q = 1 - p
	case d.Label == 1:
		q = p
	default:
		q = 1 - p
	}
	logLoss = -math.Log(max(q, minProbability))
	j.counts.Served++
	if correct {
		j.counts.ServedCorrect++
	}
	j.counts.ServedLogLoss += logLoss
	return correct, logLoss
}

// minProbability floors the probability a served prediction gave its
// label in the log-loss: 1e-15, as scikit-learn's log_loss clips.
const minProbability = 1e-15

// JoinState is a Join as a snapshot records it (docs/snapshot-format.md,
// "join"), with the head: where the worker reads the examples on from.
type JoinState struct {
	// Head is the Resume of the last example read at the head.
	Head int64 `msgpack:"head"`
	// Source and LabelsSource are the examples' and the labels' source
	// keys.
	Source       string `msgpack:"source"`
	LabelsSource string `msgpack:"labels_source"`
	WE           int64  `msgpack:"examples_watermark"`
	WL           int64  `msgpack:"labels_watermark"`
	// Window (in milliseconds) and Default are the join's settings
	// (JoinConfig), which decide the labels of the examples it holds and
	// of every later one: a join restored under others would not be the
	// one the logs replay. A Window of 0 is a state recorded before they
	// were (none is checked then).
	Window     int64            `msgpack:"window_ms,omitempty"`
	Default    int32            `msgpack:"default,omitempty"`
	HasDefault bool             `msgpack:"has_default,omitempty"`
	Examples   []JoinedExample  `msgpack:"examples"`
	Labels     []HeldLabelState `msgpack:"labels"`
	Counts     JoinCountsState  `msgpack:"counts"`
}

// JoinedExample is a delayed example in a JoinState.
type JoinedExample struct {
	//lint:ignore U1000 msgpack reads the tag: the example is an array, not a map with its keys
	_msgpack    struct{} `msgpack:",as_array"`
	ID          string
	Offset      int64
	T, A        int64
	Version     uint64
	Probability float32
	Predicted   int32
	Label       int32
	Joined      bool
	Learned     bool
	LabelDelay  int32
}

// HeldLabelState is a held label in a JoinState.
type HeldLabelState struct {
	//lint:ignore U1000 msgpack reads the tag: the label is an array, not a map with its keys
	_msgpack struct{} `msgpack:",as_array"`
	ID       string
	Offset   int64
	T, B     int64
	Label    int32
}

// JoinCountsState are JoinCounts in a JoinState.
type JoinCountsState struct {
	Joined        uint64  `msgpack:"joined"`
	Late          uint64  `msgpack:"late"`
	Unknown       uint64  `msgpack:"unknown"`
	Duplicate     uint64  `msgpack:"duplicate"`
	Marks         uint64  `msgpack:"marks"`
	Expired       uint64  `msgpack:"expired"`
	Served        uint64  `msgpack:"served"`
	ServedCorrect uint64  `msgpack:"served_correct"`
	ServedLogLoss float64 `msgpack:"served_log_loss"`
}

// encode is st as a msgpack value; nil for a nil st.
func (st *JoinState) encode() ([]byte, error) {
	if st == nil {
		return nil, nil
	}
	// The buffer is sized for the held examples and labels at once: a
	// join that holds many (the labels a range reads ahead of their
	// examples) would otherwise be copied at every doubling.
	var buf bytes.Buffer
	buf.Grow(st.sizeHint())
	if err := msgpack.NewEncoder(&buf).Encode(st); err != nil {
		return nil, fmt.Errorf("encode the join's state: %w", err)
	}
	return buf.Bytes(), nil
}

// sizeHint is at least the size of st encoded: every field of an
// example or a held label has a fixed size (9 bytes a 64-bit integer, 5 a
// 32-bit one or a float32, 1 a bool or an array's header), 59 bytes an
// example and 33 a label beside its id and the id's header (5 at most).
func (st *JoinState) sizeHint() int {
	n := 512 + len(st.Source) + len(st.LabelsSource)
	for i := range st.Examples {
		n += 59 + 5 + len(st.Examples[i].ID)
	}
	for i := range st.Labels {
		n += 33 + 5 + len(st.Labels[i].ID)
	}
	return n
}

// DecodeJoinState decodes the join's state a snapshot recorded
// (snapshot.Snapshot.Join).
func DecodeJoinState(b []byte) (*JoinState, error) {
	var st JoinState
	if err := msgpack.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("the join's state in the snapshot: %w", err)
	}
	// The worker reads the examples again from the head: before the
	// log's start, it would take the offset for messages deleted.
	if st.Head < 0 {
		return nil, fmt.Errorf("the join's state in the snapshot: its head is at offset %d, before the log's start", st.Head)
	}
	return &st, nil
}

// State returns a copy of j's state.
func (j *Join) State(head int64) *JoinState {
	c := j.counts
	st := &JoinState{
		Head: head, WE: j.wE, WL: j.wL,
		Window: j.window, HasDefault: j.cfg.HasDefault,
		Counts: JoinCountsState{
			Joined: c.Labels[LabelJoined], Late: c.Labels[LabelLate], Unknown: c.Labels[LabelUnknown],
			Duplicate: c.Labels[LabelDuplicate], Marks: c.Marks, Expired: c.Expired,
			Served: c.Served, ServedCorrect: c.ServedCorrect, ServedLogLoss: c.ServedLogLoss,
		},
	}
	if j.cfg.HasDefault {
		st.Default = int32(j.cfg.Default)
	}
	st.Examples = make([]JoinedExample, 0, j.exs.len())
	for s := j.exs.first(); s < j.exs.end(); s++ {
		e := j.exs.at(s)
		x := JoinedExample{
			ID: j.exs.key(s), Offset: e.offset, T: e.t, A: e.a,
			Version: e.served.Version, Probability: e.served.Probability, Predicted: e.served.Predicted,
			Label: e.label, Learned: s < j.learn,
		}
		if e.joined() {
			x.Joined, x.LabelDelay = true, e.delay
		}
		st.Examples = append(st.Examples, x)
	}
	for s := j.held.first(); s < j.held.end(); s++ {
		if l := j.held.at(s); !l.resolved {
			st.Labels = append(st.Labels, HeldLabelState{ID: j.held.key(s), Offset: l.offset, T: l.t, B: l.b, Label: l.label})
		}
	}
	return st
}

// RestoreJoin returns the join st recorded, under cfg, for a model of
// mcfg. A label st holds that is no label of such a model (a damaged or
// foreign generation) is an error naming it: learned, it would stop the
// worker with a panic.
func RestoreJoin(cfg JoinConfig, st *JoinState, mcfg learner.Config) (*Join, error) {
	if err := st.checkSettings(cfg, mcfg); err != nil {
		return nil, err
	}
	if err := st.check(mcfg); err != nil {
		return nil, err
	}
	j := NewJoin(cfg)
	j.wE, j.wL = st.WE, st.WL
	c := st.Counts
	j.counts = JoinCounts{
		Labels: [labelOutcomes]uint64{LabelJoined: c.Joined, LabelLate: c.Late, LabelUnknown: c.Unknown, LabelDuplicate: c.Duplicate},
		Marks:  c.Marks, Expired: c.Expired, Served: c.Served, ServedCorrect: c.ServedCorrect, ServedLogLoss: c.ServedLogLoss,
	}
	for _, e := range st.Examples {
		x := joinExample{
			offset: e.Offset, t: e.T, a: e.A,
			served: Served{Version: e.Version, Probability: e.Probability, Predicted: e.Predicted},
			label:  e.Label, delay: notJoined,
		}
		if e.Joined {
			x.delay = max(e.LabelDelay, notJoined+1)
		}
		seq, _ := j.exs.push([]byte(e.ID), x)
		if e.Learned {
			j.learn = seq + 1
		}
	}
	for _, l := range st.Labels {
		j.held.push([]byte(l.ID), heldLabel{offset: l.Offset, t: l.T, b: l.B, label: l.Label})
	}
	j.unresolved = len(st.Labels)
	return j, nil
}

// check refuses a state that no join of a model of mcfg records (a
// damaged or foreign generation or shard result), whatever the join's
// settings: a label or served number no such model gives (checkLabels,
// checkServed), or examples out of the log's order.
func (st *JoinState) check(mcfg learner.Config) error {
	if err := st.checkLabels(mcfg); err != nil {
		return err
	}
	if err := st.checkServed(); err != nil {
		return err
	}
	learning := false
	for i, e := range st.Examples {
		// The head is where the join read up to, a resume position:
		// every example it holds was read by then. (A Kafka offset's
		// resume is the next offset; a JetStream sequence's is itself.)
		if e.Offset < 0 || e.Offset > st.Head {
			return fmt.Errorf("join: example %d at offset %d, beyond its head at %d, where the join stopped reading", i, e.Offset, st.Head)
		}
		if i > 0 && e.Offset <= st.Examples[i-1].Offset {
			return fmt.Errorf("join: example %d at offset %d follows offset %d: not in the log's order", i, e.Offset, st.Examples[i-1].Offset)
		}
		if e.Learned && learning {
			return fmt.Errorf("join: example %d at offset %d is learned after one that is not", i, e.Offset)
		}
		learning = learning || !e.Learned
	}
	return nil
}

// checkSettings refuses to restore st under a window or default other
// than those it was recorded under (docs/labels.md, section 2): the
// labels of the examples it holds, and of later ones, would be decided
// otherwise than the logs decide them, and no replay would rebuild the
// model.
func (st *JoinState) checkSettings(cfg JoinConfig, mcfg learner.Config) error {
	if st.Window == 0 {
		return nil
	}
	if w := time.Duration(st.Window) * time.Millisecond; w != cfg.Window.Truncate(time.Millisecond) {
		return fmt.Errorf("labels.window: the model's join was recorded under a window of %v, and this worker's is %v: "+
			"the labels of the examples it holds, and of every later one, would be decided otherwise than its logs decide them, "+
			"and no replay would rebuild the model; set labels.window back, or give the model a new model.name", w, cfg.Window)
	}
	recorded, this := "none", "none"
	if st.HasDefault {
		recorded = defaultText(mcfg, int(st.Default))
	}
	if cfg.HasDefault {
		this = defaultText(mcfg, cfg.Default)
	}
	if recorded != this {
		return fmt.Errorf("labels.default: the model's join was recorded with the default label %s, and this worker's is %s: "+
			"the examples whose windows close without a label would be learned otherwise than its logs decide, "+
			"and no replay would rebuild the model; set labels.default back, or give the model a new model.name", recorded, this)
	}
	return nil
}

// defaultText is the default label as labels.default names it: the
// quoted class name for a model with class names, else the number (also
// for a label that is no class of the model, from a damaged generation,
// which checkLabels refuses).
func defaultText(mcfg learner.Config, label int) string {
	labels := mcfg.Labels()
	multi := labels.Multiclass() && label >= 0 && label < len(mcfg.Classes)
	binary := !labels.Multiclass() && len(mcfg.Classes) == 2 && (label == 1 || label == -1)
	if multi || binary {
		if name, ok := labels.Class(label); ok {
			return strconv.Quote(name)
		}
	}
	return strconv.Itoa(label)
}

// checkServed refuses served numbers that no served prediction gives (a
// damaged or foreign generation): a probability outside [0, 1], not a
// number among them, or a served log-loss that is not a finite sum of
// log-losses. Restored, they would make the served log-loss and its
// gauges NaN or infinite for as long as the model lives.
func (st *JoinState) checkServed() error {
	if l := st.Counts.ServedLogLoss; !(l >= 0) || math.IsInf(l, 1) {
		return fmt.Errorf("join: the served log-loss is %v, which no sum of log-losses is", l)
	}
	for i, e := range st.Examples {
		if p := e.Probability; !(p >= 0 && p <= 1) {
			return fmt.Errorf("join: example %d at offset %d was served probability %v, outside [0, 1]", i, e.Offset, p)
		}
	}
	return nil
}

// checkLabels refuses a label of a joined example or a held label that a
// model of cfg does not learn: ±1 for a binary model, a class index for a
// multiclass one; and, for a multiclass model, a served class that is no
// class index.
func (st *JoinState) checkLabels(cfg learner.Config) error {
	ok := func(y int32) bool {
		if cfg.Multiclass() {
			return y >= 0 && int(y) < len(cfg.Classes)
		}
		return y == 1 || y == -1
	}
	for i, e := range st.Examples {
		if e.Joined && !ok(e.Label) {
			return fmt.Errorf("join: example %d at offset %d joined label %d, which the model has no class for", i, e.Offset, e.Label)
		}
		// The served class names the prediction of a misclassification
		// when a label joins: a multiclass model looks its name up.
		if cfg.Multiclass() && !ok(e.Predicted) {
			return fmt.Errorf("join: example %d at offset %d was served class %d, which the model has no class for", i, e.Offset, e.Predicted)
		}
	}
	for i, l := range st.Labels {
		if !ok(l.Label) {
			return fmt.Errorf("join: held label %d at offset %d is label %d, which the model has no class for", i, l.Offset, l.Label)
		}
	}
	return nil
}
