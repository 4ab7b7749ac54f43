package learner

import "math"

// linear is every primal rule: one weight vector and bias per output.
//
// Weights are laid out feature-major: the weight of feature i for output c
// is w[i*k+c], so scoring a multiclass example reads each feature's
// weights from one cache line.
type linear struct {
	cfg Config
	k   int
	w   []float64
	b   []float64
	raw []float64 // raw scores of the last predicted example

	// Averaged: u accumulates t·Δw for the update made at labeled example
	// t, so that after T labeled examples the average of the T+1 weight
	// vectors w_0..w_T is w - u/(T+1).
	u, ub []float64

	// Pegasos: w = scale·v, with v held in w and b; the bias is a
	// constant feature, regularised and projected with the weights.
	// vnorm2 is ‖v‖² including the bias.
	scale, vnorm2 float64

	// AROW: the diagonal of the weights' covariance, one variance per
	// weight in the layout of w, and one per bias. For the last predicted
	// example of a binary model, sg is the variance of each stored
	// feature, sparse then dense, as predict read them beside the
	// weights, so that the two loads from memory go out together and the
	// update reads the variances from sg, in one pass over the features.
	sigma, sigmaB []float64
	sg            []float64

	// Mini-batch: the pending sum of updates, by flat weight index.
	pw, pb  []float64
	touched []uint32
}

func newLinear(cfg Config) *linear {
	l := &linear{cfg: cfg}
	l.reset()
	return l
}

// reset gives l a new model's parameters for l.cfg: in l's own vectors
// where they have the length the configuration gives them, in new ones
// otherwise (newLinear's, whose zeros are left as the allocator gives
// them rather than written).
func (l *linear) reset() {
	cfg := l.cfg
	k, d := cfg.outputs(), cfg.Dimension()
	fill := func(v []float64, n int, x float64) []float64 {
		if len(v) != n {
			v = make([]float64, n)
		} else {
			clear(v)
		}
		if x != 0 {
			for i := range v {
				v[i] = x
			}
		}
		return v
	}
	u, ub, sigma, sigmaB, pw, pb := l.u, l.ub, l.sigma, l.sigmaB, l.pw, l.pb
	l.k = k
	l.w, l.b, l.raw = fill(l.w, d*k, 0), fill(l.b, k, 0), fill(l.raw, k, 0)
	l.u, l.ub, l.sigma, l.sigmaB, l.pw, l.pb = nil, nil, nil, nil, nil, nil
	l.scale, l.vnorm2 = 0, 0
	l.touched = l.touched[:0]
	switch cfg.Algorithm {
	case Averaged:
		l.u, l.ub = fill(u, d*k, 0), fill(ub, k, 0)
	case Pegasos:
		l.scale = 1
	case AROW:
		l.sigma, l.sigmaB = fill(sigma, d*k, 1), fill(sigmaB, k, 1)
	}
	if cfg.Batch > 1 {
		l.pw, l.pb = fill(pw, d*k, 0), fill(pb, k, 0)
	}
}

// dot is w·x for a binary layout. The explicit float64 conversions keep
// the compiler from fusing multiply and add, which would round
// differently on platforms with FMA and break bit-identical results.
func dot(w []float64, x *Example) float64 {
	var s float64
	for j, i := range x.Index {
		s += float64(w[i] * x.Value[j])
	}
	for i, v := range x.Dense {
		s += float64(w[i] * v)
	}
	return s
}

// dotK adds w_c·x to out[c] for every output c of a k-output layout.
func dotK(w []float64, k int, x *Example, out []float64) {
	for j, i := range x.Index {
		v := x.Value[j]
		row := w[int(i)*k : int(i)*k+k]
		for c, wc := range row {
			out[c] += float64(wc * v)
		}
	}
	for i, v := range x.Dense {
		row := w[i*k : i*k+k]
		for c, wc := range row {
			out[c] += float64(wc * v)
		}
	}
}

// axpy adds a·x to output c of a k-output layout.
func axpy(w []float64, k, c int, a float64, x *Example) {
	for j, i := range x.Index {
		w[int(i)*k+c] += float64(a * x.Value[j])
	}
	for i, v := range x.Dense {
		w[i*k+c] += float64(a * v)
	}
}

// arowScore is w·x, summed in the order dot sums it; it keeps each
// feature's variance in l.sg. It does not sum xᵀΣx: only an update needs
// it, and its chain of additions would lengthen every prediction.
func (l *linear) arowScore(x *Example) (s float64) {
	n := x.NNZ()
	if cap(l.sg) < n {
		l.sg = make([]float64, n)
	}
	l.sg = l.sg[:n]
	w, sigma := l.w, l.sigma
	prior, value := l.sg[:len(x.Index)], x.Value[:len(x.Index)]
	for j, i := range x.Index {
		v, g := value[j], sigma[i]
		prior[j] = g
		s += float64(w[i] * v)
	}
	prior = l.sg[len(x.Index):]
	for i, v := range x.Dense {
		g := sigma[i]
		prior[i] = g
		s += float64(w[i] * v)
	}
	return s
}

func (l *linear) predict(x *Example, out []float64, labeled uint64) {
	if l.k == 1 && l.cfg.Algorithm == AROW {
		f := l.arowScore(x) + l.b[0]
		l.raw[0], out[0] = f, f
		return
	}
	l.score(x, out, l.raw, labeled)
}

// score writes the published scores of x to out and the raw ones, w·x+b
// before averaging, to raw; both have one element per output. It reads l
// and nothing else, so a copy of l scores concurrently (see View).
func (l *linear) score(x *Example, out, raw []float64, labeled uint64) {
	if l.k == 1 {
		f := dot(l.w, x)
		if l.cfg.Algorithm == Pegasos {
			f = l.scale * (f + l.b[0])
		} else {
			f += l.b[0]
		}
		raw[0] = f
		if l.cfg.Algorithm == Averaged {
			f -= (dot(l.u, x) + l.ub[0]) / float64(labeled+1)
		}
		out[0] = f
		return
	}
	copy(raw, l.b)
	dotK(l.w, l.k, x, raw)
	if l.cfg.Algorithm == Pegasos {
		for c, f := range raw {
			raw[c] = l.scale * f
		}
	}
	if l.cfg.Algorithm != Averaged {
		copy(out, raw)
		return
	}
	// out = raw - (u·x + ub)/(labeled+1), accumulated in out itself.
	clear(out)
	dotK(l.u, l.k, x, out)
	n := float64(labeled + 1)
	for c := range out {
		out[c] = raw[c] - (out[c]+l.ub[c])/n
	}
}

func (l *linear) update(x *Example, y int, s step) bool {
	var updated bool
	switch l.cfg.Algorithm {
	case Perceptron, Averaged:
		updated = l.perceptron(x, y, s, 0)
	case Margin:
		updated = l.perceptron(x, y, s, l.cfg.Tau)
	case PA, PA1, PA2:
		updated = l.passiveAggressive(x, y, s)
	case Pegasos:
		return l.pegasos(x, y, s)
	case AROW:
		return l.arow(x, y, s)
	}
	if l.pw != nil && s.t%uint64(l.cfg.Batch) == 0 {
		l.flush(s.t)
	}
	return updated
}

// perceptron updates when the raw margin is at most threshold.
func (l *linear) perceptron(x *Example, y int, s step, threshold float64) bool {
	var db float64
	switch l.cfg.Bias {
	case BiasStandard:
		db = s.eta
	case BiasR2:
		db = s.eta * s.r2
	}
	if l.k == 1 {
		fy := float64(y)
		if fy*l.raw[0] > threshold {
			return false
		}
		l.add(x, 0, fy*s.eta, fy*db, s.t)
		return true
	}
	other := argmaxOther(l.raw, y)
	if l.raw[y]-l.raw[other] > threshold {
		return false
	}
	l.add(x, y, s.eta, db, s.t)
	l.add(x, other, -s.eta, -db, s.t)
	return true
}

func (l *linear) passiveAggressive(x *Example, y int, s step) bool {
	var bias float64
	if l.cfg.Bias != BiasNone {
		bias = 1 // the bias is a constant feature of value 1
	}
	n2 := s.norm2 + bias
	if n2 == 0 {
		return false
	}
	var loss float64
	other := -1
	if l.k == 1 {
		loss = 1 - float64(y)*l.raw[0]
	} else {
		other = argmaxOther(l.raw, y)
		loss = 1 - (l.raw[y] - l.raw[other])
		n2 *= 2 // the update moves two weight vectors
	}
	if loss <= 0 {
		return false
	}
	var tau float64
	switch l.cfg.Algorithm {
	case PA:
		// PA goes to the margin: an importance below 1 goes part of the
		// way, one above it no further.
		tau = min(s.importance, 1) * loss / n2
	case PA1:
		tau = min(l.cfg.C*s.importance, loss/n2)
	case PA2:
		tau = loss / (n2 + 1/(2*l.cfg.C*s.importance))
	}
	if !(tau*n2*tau <= maxStep2) {
		// A step longer than maxStep (see MaxValue), or NaN: refused.
		return false
	}
	if l.k == 1 {
		a := tau * float64(y)
		l.add(x, 0, a, a*bias, s.t)
		return true
	}
	l.add(x, y, tau, tau*bias, s.t)
	l.add(x, other, -tau, -tau*bias, s.t)
	return true
}

// add adds a·x to the weights and db to the bias of output c, or to the
// pending batch. t is the labeled example causing it.
func (l *linear) add(x *Example, c int, a, db float64, t uint64) {
	if l.pw != nil {
		for j, i := range x.Index {
			l.pend(int(i)*l.k+c, float64(a*x.Value[j]))
		}
		for i, v := range x.Dense {
			l.pend(i*l.k+c, float64(a*v))
		}
		l.pb[c] += db
		return
	}
	axpy(l.w, l.k, c, a, x)
	l.b[c] += db
	if l.u != nil {
		ct := float64(t)
		axpy(l.u, l.k, c, float64(ct*a), x)
		l.ub[c] += float64(ct * db)
	}
}

func (l *linear) pend(j int, d float64) {
	if l.pw[j] == 0 {
		l.touched = append(l.touched, uint32(j))
	}
	l.pw[j] += d
}

// flush applies the pending batch at labeled example t.
func (l *linear) flush(t uint64) {
	ct := float64(t)
	for _, j := range l.touched {
		d := l.pw[j]
		l.pw[j] = 0
		l.w[j] += d
		if l.u != nil {
			l.u[j] += float64(ct * d)
		}
	}
	l.touched = l.touched[:0]
	for c, d := range l.pb {
		l.pb[c] = 0
		l.b[c] += d
		if l.ub != nil {
			l.ub[c] += float64(ct * d)
		}
	}
}

// pegasos is one step of Pegasos: shrink by 1 - 1/t, add
// y·x/(λt) if the hinge loss is positive, project onto the ball of
// radius 1/sqrt(λ). A multiclass model takes the hinge loss of the
// label's score against the best other class's, 1 - (f_y - f_r), and
// adds x/(λt) to class y and subtracts it from class r (Crammer–Singer).
func (l *linear) pegasos(x *Example, y int, s step) bool {
	fy := float64(y)
	other := -1
	var active bool
	if l.k == 1 {
		active = fy*l.raw[0] < 1
	} else {
		fy = 1
		other = argmaxOther(l.raw, y)
		active = l.raw[y]-l.raw[other] < 1
	}
	if s.t == 1 {
		// 1 - 1/t is zero: the weights restart from nothing.
		clear(l.w)
		clear(l.b)
		l.vnorm2 = 0
		l.scale = 1
	} else {
		l.scale *= 1 - 1/float64(s.t)
	}
	if active {
		a := fy * s.importance / (l.cfg.Lambda * float64(s.t)) / l.scale
		if l.k == 1 {
			l.pegasosAdd(x, 0, a)
		} else {
			l.pegasosAdd(x, y, a)
			l.pegasosAdd(x, other, -a)
		}
	}
	if wn2 := l.scale * l.scale * l.vnorm2; wn2 > 1/l.cfg.Lambda {
		l.scale *= math.Sqrt(1 / (l.cfg.Lambda * wn2))
	}
	if l.scale < 1e-9 {
		// Fold the scale into v before it underflows.
		for i := range l.w {
			l.w[i] *= l.scale
		}
		for c := range l.b {
			l.b[c] *= l.scale
		}
		l.vnorm2 *= l.scale * l.scale
		l.scale = 1
	}
	return active
}

// pegasosAdd adds a·x to v's output c, and a to its bias unless the model
// has none, keeping vnorm2 = ‖v‖².
func (l *linear) pegasosAdd(x *Example, c int, a float64) {
	k := l.k
	for j, i := range x.Index {
		p := int(i)*k + c
		d := float64(a * x.Value[j])
		l.vnorm2 += float64(d * (2*l.w[p] + d))
		l.w[p] += d
	}
	for i, v := range x.Dense {
		p := i*k + c
		d := float64(a * v)
		l.vnorm2 += float64(d * (2*l.w[p] + d))
		l.w[p] += d
	}
	if l.cfg.Bias != BiasNone {
		l.vnorm2 += float64(a * (2*l.b[c] + a))
		l.b[c] += a
	}
}

func (l *linear) arow(x *Example, y int, s step) bool {
	if l.k > 1 {
		return l.arowMulticlass(x, y, s)
	}
	fy := float64(y)
	m := l.raw[0]
	if fy*m >= 1 {
		return false
	}
	// xᵀΣx from the variances predict kept, in the order of the features.
	var conf float64
	sparse, dense := l.sg[:len(x.Index)], l.sg[len(x.Index):]
	for j, g := range sparse {
		v := x.Value[j]
		conf += float64(float64(v*v) * g)
	}
	for i, g := range dense {
		v := x.Dense[i]
		conf += float64(float64(v*v) * g)
	}
	bias := l.cfg.Bias != BiasNone
	if bias {
		conf += l.sigmaB[0]
	}
	// An example of importance h counts as h of its kind against the
	// regulariser: r/h. Its step still goes at most to the margin, which
	// h times the step would overshoot (an importance of 100 took the
	// default learner from 73% to 56% on a stream it learns unweighted).
	beta := 1 / (conf + l.cfg.AROWR/s.importance)
	alpha := (1 - fy*m) * beta
	if !(conf >= 0) || !(alpha*conf*alpha <= maxStep2) {
		// A step longer than maxStep (see MaxValue), or NaN: refused.
		// (As the variances are at most 1, α²·conf bounds the step's
		// squared length.)
		return false
	}
	// Every weight moves by its variance before the update, the one
	// predict kept, and every variance shrinks from its current value: a
	// repeated index shrinks twice but moves its weight by the first.
	ay := alpha * fy
	w, sigma := l.w, l.sigma
	prior, value := l.sg[:len(x.Index)], x.Value[:len(x.Index)]
	for j, i := range x.Index {
		v := value[j]
		w[i] += float64(float64(ay*prior[j]) * v)
		g := sigma[i]
		sigma[i] = shrink(g, float64(beta*float64(g*g)*float64(v*v)))
	}
	prior = l.sg[len(x.Index):]
	for i, v := range x.Dense {
		w[i] += float64(float64(ay*prior[i]) * v)
		g := sigma[i]
		sigma[i] = shrink(g, float64(beta*float64(g*g)*float64(v*v)))
	}
	if bias {
		sg := l.sigmaB[0]
		l.b[0] += float64(ay * sg)
		l.sigmaB[0] = shrink(sg, float64(beta*float64(sg*sg)))
	}
	return true
}

// arowMulticlass is AROW on the difference Φ(x,y) − Φ(x,r) between the
// label's features and those of r, the best other class (the multiclass
// confidence-weighted learners of Crammer, Dredze & Kulesza 2009): the
// margin is f_y − f_r, the confidence xᵀΣ_y x + xᵀΣ_r x with a variance
// per (feature, class), and only the weights, biases and variances of
// classes y and r move, y's towards x and r's away from it.
func (l *linear) arowMulticlass(x *Example, y int, s step) bool {
	k := l.k
	r := argmaxOther(l.raw, y)
	m := l.raw[y] - l.raw[r]
	if m >= 1 {
		return false
	}
	classes := [2]int{y, r}
	var conf float64
	for _, c := range classes {
		for j, i := range x.Index {
			v := x.Value[j]
			conf += float64(float64(v*v) * l.sigma[int(i)*k+c])
		}
		for i, v := range x.Dense {
			conf += float64(float64(v*v) * l.sigma[i*k+c])
		}
	}
	bias := l.cfg.Bias != BiasNone
	if bias {
		conf += l.sigmaB[y]
		conf += l.sigmaB[r]
	}
	beta := 1 / (conf + l.cfg.AROWR/s.importance) // as in the binary rule
	alpha := (1 - m) * beta
	if !(conf >= 0) || !(alpha*conf*alpha <= maxStep2) {
		// A step longer than maxStep (see MaxValue), or NaN: refused,
		// as in the binary rule.
		return false
	}
	signed := [2]float64{alpha, -alpha}
	for n, c := range classes {
		a := signed[n]
		for j, i := range x.Index {
			p := int(i)*k + c
			l.w[p] += float64(float64(a*l.sigma[p]) * x.Value[j])
		}
		for i, v := range x.Dense {
			p := i*k + c
			l.w[p] += float64(float64(a*l.sigma[p]) * v)
		}
	}
	for _, c := range classes {
		for j, i := range x.Index {
			p := int(i)*k + c
			v, sg := x.Value[j], l.sigma[p]
			l.sigma[p] = shrink(sg, float64(beta*float64(sg*sg)*float64(v*v)))
		}
		for i, v := range x.Dense {
			p := i*k + c
			sg := l.sigma[p]
			l.sigma[p] = shrink(sg, float64(beta*float64(sg*sg)*float64(v*v)))
		}
	}
	if bias {
		for n, c := range classes {
			sg := l.sigmaB[c]
			l.b[c] += float64(signed[n] * sg)
			l.sigmaB[c] = shrink(sg, float64(beta*float64(sg*sg)))
		}
	}
	return true
}

// shrink is the variance sg - d of AROW's update, kept at 0 or above. In
// exact arithmetic d < sg; rounding can make it exceed sg by an ulp when
// a feature's x²·σ dwarfs r, and a negative variance would make the
// confidence xᵀΣx negative and the next step unbounded.
func shrink(sg, d float64) float64 {
	if v := sg - d; v > 0 {
		return v
	}
	return 0
}
