package consumer

import (
	"fmt"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap"
)

// DefaultCompareAlpha is WorkerConfig.CompareAlpha's default.
const DefaultCompareAlpha = 0.05

// rivals are the worker's side of the model's challengers
// (learner.Model.Challengers): each learns the example the model learned,
// predicting it first. A challenger that hashes as the model does reads
// the model's decoded example; any other, the example of its hashing,
// which the message's one decoding fills beside the model's
// (wire.Decoder.DecodeHashings).
type rivals struct {
	live *compare.Live
	// from[i] is where challenger i reads its example: -1 the model's,
	// j the one challenger j decodes with decs[j] into xs[j] (i itself,
	// or the first challenger of its hashing). in is what Learn is given.
	from []int
	decs []*wire.Decoder
	xs   []learner.Example
	in   []*learner.Example
	// others are decs of the challengers with a hashing of their own, in
	// order, and also their xs; of[i] is challenger i's place in them.
	// errs are their refusals of the message decoded last, when decoded
	// says that it was decoded with them (decode).
	others  []*wire.Decoder
	also    []*learner.Example
	of      []int
	errs    []error
	decoded bool
	// names[i] is the event id suffix of challenger i's predictions,
	// versions[i] its model's version before the example; key is the
	// scratch space of their keys.
	names    []string
	versions []uint64
	key      []byte
}

// newRivals returns the challengers of model, compared at level alpha,
// nil when it has none. With labels that come later (labels), every
// challenger must hash as the model does: the join keeps an example as
// the model decoded it, not its message, until its label is decided.
func newRivals(model *learner.Model, alpha float64, opts wire.DecoderOptions, labels bool) (*rivals, error) {
	if alpha == 0 {
		alpha = DefaultCompareAlpha
	}
	live, err := compare.NewLive(model, alpha)
	if err != nil || live == nil {
		return nil, err
	}
	n := live.Len()
	r := &rivals{live: live, from: make([]int, n), decs: make([]*wire.Decoder, n), xs: make([]learner.Example, n), in: make([]*learner.Example, n),
		of: make([]int, n), names: make([]string, n), versions: make([]uint64, n)}
	mc := model.Config()
	for i := range n {
		cc := live.Model(i).Config()
		r.names[i] = "#" + live.Name(i)
		r.from[i] = -1
		if cc.HashBits == mc.HashBits && cc.HashSeed == mc.HashSeed {
			continue
		}
		if labels {
			return nil, fmt.Errorf("model.challengers: %s hashes otherwise than the model (hash_bits %d, hash_seed %d against %d, %d), and with labels that come later the join keeps each example as the model decoded it; give it the model's hashing, or compare it with hyperplane backtest",
				live.Name(i), cc.HashBits, cc.HashSeed, mc.HashBits, mc.HashSeed)
		}
		// Another hashing: the example of an earlier challenger of the
		// same hashing, or its own, which decode fills.
		r.from[i] = i
		for j := range i {
			if pc := live.Model(j).Config(); r.from[j] == j && pc.HashBits == cc.HashBits && pc.HashSeed == cc.HashSeed {
				r.from[i] = j
				break
			}
		}
		if r.from[i] == i {
			r.decs[i] = wire.NewDecoder(cc, opts)
			r.of[i] = len(r.others)
			r.others = append(r.others, r.decs[i])
			r.also = append(r.also, &r.xs[i])
		}
	}
	r.errs = make([]error, len(r.others))
	return r, nil
}

// decode decodes value into x with the worker's decoder and, when the
// challengers have hashings of their own, into their examples in the same
// pass, for learn.
func (r *rivals) decode(w *Worker, value []byte, x *learner.Example) (wire.Meta, error) {
	if len(r.others) == 0 {
		return w.decode(value, x)
	}
	meta, err := w.dec.DecodeHashings(value, w.cfg.Format, x, r.others, r.also, r.errs)
	r.decoded = err == nil
	return meta, err
}

// learn has every challenger learn x, the example of value the model
// learned with outcome o. A challenger whose hashing differs reads the
// example decode made of value with its hashing, or decodes value again
// if decode did not (the decoders of one example are equal but for the
// hashing), its label taken from x.
func (r *rivals) learn(w *Worker, value []byte, x *learner.Example, o *learner.Outcome) {
	decoded := r.decoded
	r.decoded = false
	for i, j := range r.from {
		switch {
		case j < 0:
			r.in[i] = x
		case j < i:
			// Decoded above, for the first challenger of this hashing.
			r.in[i] = r.in[j]
		default:
			cx := &r.xs[i]
			r.in[i] = nil
			err := r.errs[r.of[i]]
			if !decoded {
				_, err = w.decodeWith(r.decs[i], value, cx)
			}
			if err == nil {
				cx.Labeled, cx.Label, cx.Weight = x.Labeled, x.Label, x.Weight
				r.in[i] = cx
			}
		}
	}
	for i := range r.versions {
		r.versions[i] = r.live.Model(i).Version()
	}
	r.live.Learn(o, x.Label, r.in)
}

// challengerPredictions adds the challengers' prediction events of m, as
// ev is the model's, to the challenger predictions' destination, each
// keyed by the model's key and the challenger's name.
func (w *Worker) challengerPredictions(m *Message, key []byte, ev *wire.Prediction, b *outBatch) {
	d := w.cfg.ChallengerPredictions
	r := w.rivals
	for i := range r.live.Len() {
		o := r.live.Outcome(i)
		if o == nil || !(w.cfg.Publish == wire.PublishAll || (w.cfg.Publish == wire.PublishUnlabeled && !o.Labeled)) {
			continue
		}
		ce := *ev
		ce.Outcome, ce.Model, ce.Version = *o, r.live.Name(i), r.versions[i]
		r.key = append(append(r.key[:0], key...), r.names[i]...)
		start := len(b.arena)
		b.arena = w.cfg.Encoding.AppendPrediction(b.arena, &ce, w.labels)
		if err := b.addWithin(d, w.limits.challengerPredictions, "challenger prediction", r.key, start); err != nil {
			// The challenger's event alone is lost: the model's outputs
			// and the dead letters are about the model.
			if n, ok := w.deadLogs.Allow(); ok {
				w.log.Warn("challenger prediction dropped", zap.String("event_id", string(r.key)), zap.Error(err), retry.Suppressed(n))
			}
		}
	}
}

// decodeWith decodes value with d in the worker's format.
func (w *Worker) decodeWith(d *wire.Decoder, value []byte, x *learner.Example) (wire.Meta, error) {
	return d.DecodeMessage(value, w.cfg.Format, x)
}
