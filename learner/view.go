package learner

// View is a read-only copy of a model as it was at one moment: its
// configuration, version and everything predicting reads, sharing no
// memory with the model. Any number of goroutines may predict with one
// View at once, while the model it was taken from goes on learning.
//
// A View predicts exactly as its model did when it was taken, to the
// bit: the same code computes both.
type View struct {
	cfg     Config
	version uint64
	labeled uint64
	eng     scorer
	cal     calibrator // frozen with the weights
}

// scorer is what a View predicts with: a frozen copy of an engine.
type scorer interface {
	score(x *Example, out []float64, labeled uint64, s *Scratch)
}

// Scratch is the working memory of one goroutine's View.Predict calls.
// The zero Scratch is ready to use; reusing one keeps predicting free of
// allocations. A Scratch must not be used by two goroutines at once.
type Scratch struct {
	norm   Example
	raw    []float64
	scores []float64
	calIn  []float64
	probs  []float64
	cur    []feature
}

// View returns a read-only copy of m as it is now. It copies every weight
// predicting reads: taking one costs about as much as State.
func (m *Model) View() *View {
	return &View{
		cfg:     m.Config(),
		version: m.Version(),
		labeled: m.metrics.Labeled,
		eng:     m.eng.freeze(),
		cal:     m.cal.freeze(),
	}
}

// Config is the configuration of the model the view was taken from.
func (v *View) Config() Config {
	c := v.cfg
	c.Classes = append([]string(nil), c.Classes...)
	return c
}

// Labels are the label rules of the view's model.
func (v *View) Labels() Labels { return v.cfg.Labels() }

// Version is the model's version when the view was taken: the number of
// updates it had applied (see Model.Version).
func (v *View) Version() uint64 { return v.version }

// Predict scores x as the model did when the view was taken, with s as
// working memory. A label on x is ignored. The Scores and Probabilities
// of a multiclass prediction live in s until its next use.
//
// Predict panics if an index of x is out of range for the model: decoders
// reject such input with an error before it gets here.
func (v *View) Predict(x *Example, s *Scratch) Prediction {
	x = v.cfg.normalize(x, &s.norm)
	k := v.cfg.outputs()
	if cap(s.scores) < k {
		s.scores = make([]float64, k)
		s.raw = make([]float64, k)
		s.calIn = make([]float64, calibratorInputs(k))
		s.probs = make([]float64, k)
	}
	s.scores, s.raw, s.calIn, s.probs = s.scores[:k], s.raw[:k], s.calIn[:calibratorInputs(k)], s.probs[:k]
	v.eng.score(x, s.scores, v.labeled, s)
	p := v.cfg.prediction(s.scores)
	v.cal.probability(s.scores, s.calIn, s.probs)
	v.cfg.probability(&p, s.probs)
	return p
}

// freeze copies what score reads: the weights, the biases, the averaging
// sums and Pegasos' scale; not the variances or the pending mini-batch,
// which only learning reads.
func (l *linear) freeze() scorer {
	return frozenLinear{&linear{
		cfg:   l.cfg,
		k:     l.k,
		w:     clone(l.w),
		b:     clone(l.b),
		u:     clone(l.u),
		ub:    clone(l.ub),
		scale: l.scale,
	}}
}

type frozenLinear struct{ l *linear }

func (f frozenLinear) score(x *Example, out []float64, labeled uint64, s *Scratch) {
	f.l.score(x, out, s.raw, labeled)
}

// freeze copies the support set and the bias.
func (k *kernelPerceptron) freeze() scorer {
	f := &kernelPerceptron{cfg: k.cfg, dim: k.dim, b: k.b, sv: make([]SupportVector, len(k.sv))}
	for i, sv := range k.sv {
		f.sv[i] = SupportVector{Index: clone(sv.Index), Value: clone(sv.Value), Coef: sv.Coef, Norm2: sv.Norm2}
	}
	return frozenKernel{f}
}

type frozenKernel struct{ k *kernelPerceptron }

func (f frozenKernel) score(x *Example, out []float64, _ uint64, s *Scratch) {
	var n2 float64
	s.cur, n2 = canonical(s.cur, x, f.k.dim)
	out[0] = f.k.score(s.cur, n2)
}
