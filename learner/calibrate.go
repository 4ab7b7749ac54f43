package learner

import "math"

// The calibrator turns the published scores into probabilities by Platt
// scaling over a scale-free input, corrected for a binary model by a
// histogram of outcomes. Platt scaling gives, for a binary model,
//
//	q = σ(a·z + b),  z = s/m,
//
// s being the score and m a running mean of |s|, and for a multiclass
// model a softmax over a·z_c + b_c, with z_c = s_c/m and m the running
// mean of the scores' magnitudes. Dividing by m makes the input of the
// same order whatever the algorithm and however the weights' norm grows
// (a perceptron's scores grow with the number of its updates; AROW's and
// Pegasos' stay near 1): a and b then need only track how reliable the
// scores are, not their units. A multiclass model publishes the softmax.
//
// The sigmoid's shape fits some streams' scores and not others (on a
// stream of e-mails, where the classes separate well, the scores of a
// perceptron are not logistic in z and Platt scaling alone is off by 0.06
// in calibration error). A binary model therefore corrects q by a
// histogram of outcomes: j being the bin of q among histogramBins
// equal-width bins, n_j the examples whose q fell in it, pos_j the
// positive ones among them and e_j the sum of their q (the positives Platt
// expected), all multiplied by histogramDecay every histogramBlock
// examples. A bin has two corrections:
//
//	flat  = (pos_j + κ·q)/(n_j + κ),
//	odds  = q·r⁺ / (q·r⁺ + (1−q)·r⁻),
//	r⁺ = (pos_j + κ·q)/(e_j + κ·q),  r⁻ = (n_j − pos_j + κ·(1−q))/(n_j − e_j + κ·(1−q)).
//
// Where a bin has seen few examples both are about q. Where it has seen
// many, flat is its frequency of positives, for every q in it; odds
// scales q's odds by the bin's observed against expected positives and
// negatives, so its probabilities average about that frequency and keep
// q's order. Flat fits a bin whose outcomes do not change across it (an
// end bin where Platt's q runs on towards 0 or 1 while label noise holds
// the frequency at 5%); odds fits a bin across which they do (nearly every
// q of a stream whose positives are 1% falls in bin 0, where flat would
// publish one probability for every example and lose the scores'
// ranking). The bin publishes the one that predicted its recent examples
// better:
//
//	P(label = +1) = odds if d_j > 0, else flat,
//
// d_j being the sum of flat's squared error less odds' over the bin's
// examples, decayed as the counts are. (Mixing the two by Bayes' rule
// over their log-losses measured alike on seven streams, at an
// exponential and a logarithm more per example.) Measured on the synthetic
// stream and on 6,046 e-mails in time order, against Platt scaling alone
// (over z or over s), Newton steps instead of AdaGrad, AROW's variance
// x'Σx as an input, and a histogram alone (with or without interpolation),
// Platt's q corrected by the bin's frequency (flat alone) was the one
// whose calibration error was lowest on both for arow, perceptron and
// pa1; the choice keeps that where flat fits, and ranks the rare label's
// examples where it does not (BENCHMARKS.md, "Probabilities").
//
// It learns as everything else does, prequentially: after a labeled
// example's prediction, one step of AdaGrad on the log-loss of q (none
// where a·z + b is beyond ±maxLogit, as logit holds it there), the
// histogram counts the outcome in q's bin, then m moves towards |s|
// (at most outlierMagnitude·m). Each
// AdaGrad step moves a parameter by at most calibrationRate, so a and b
// stay finite whatever the scores. m is the geometric mean of the first
// outlierWarmup magnitudes, then an exponential moving mean with a
// horizon of calibrationHorizon examples (a plain mean before that), which
// lets the calibration follow a model that keeps learning.
//
// Its state is a vector of numbers (see the cal* positions): it is
// snapshotted, restored and mixed as one.
type calibrator struct {
	k int // classes; 1 for a binary model
	// v is the state: [n, m, a, ga, b_0, gb_0, …, b_{k-1}, gb_{k-1}], n
	// being the labeled examples learned and ga and gb_c AdaGrad's sums
	// of squared gradients, followed for a binary model by the
	// histogram: pos_0, …, pos_{B-1}, then n_0, …, n_{B-1}, then
	// e_0, …, e_{B-1}, then d_0, …, d_{B-1}.
	v []float64
}

const (
	// calibrationRate is AdaGrad's step: no step moves a or a b_c by more.
	// Measured against 0.01 to 1 on the synthetic stream (calibration
	// error and log-loss after the first 10,000 examples for arow,
	// perceptron, pa1, averaged and kernel), 0.1 gives the best log-loss
	// with a calibration error below 0.005.
	calibrationRate = 0.1
	// calibrationHorizon is the number of examples the running mean of
	// |s| reaches back, about (500 to 10,000 measure alike).
	calibrationHorizon = 2000
	// maxLogit bounds a·z + b: σ(±maxLogit) is 1 or 0 within 2^-52 of
	// its complement, and the log-loss of such a probability is finite.
	maxLogit = 36
	// maxInput bounds z.
	maxInput = 1e6
	// maxMagnitude bounds the |s| the running mean reads.
	maxMagnitude = 1e300
	// outlierMagnitude bounds the |s| the running mean reads, as a
	// multiple of the mean so far, once outlierWarmup labeled examples
	// have set it. Scores that grow as a model learns raise the mean at
	// once; only a score this far above every recent one is cut, and
	// outliers more often than one in outlierMagnitude examples still
	// move the scale. The first examples are not bounded: a model's first
	// scores may be many orders of magnitude from those it soon gives
	// (AROW's, over features near 1e20, start near 1e-41 and reach 0.1
	// within ten examples), and a bound then would hold the scale back
	// for hundreds of thousands of examples. Their geometric mean sets
	// the scale instead (see learn), which one outlier among them barely
	// moves.
	outlierMagnitude = 10
	outlierWarmup    = 100
	// negligibleMagnitude is the share of the scale so far below which
	// one of the first outlierWarmup magnitudes counts as 0: far below
	// the smallest score an example honestly gets among them, far above
	// the rounding residue of scores that cancel (some 1e-16 of them).
	negligibleMagnitude = 1e-12
	// minProbability bounds the probabilities the log-loss reads from
	// below, as scikit-learn's log_loss does.
	minProbability = 1e-15
	// histogramBins is the number of bins of a binary model's histogram
	// (10 measure worse, on both streams).
	histogramBins = 20
	// histogramDecay is what the histogram keeps of its counts every
	// histogramBlock examples: 0.9999^64, so that it reaches back about
	// 10,000 examples (2,000 measure worse on the synthetic stream), at
	// the cost of one pass over the bins per block.
	histogramDecay = 0.9936201183994622
	histogramBlock = 64
	// histogramPrior is κ, the weight of Platt's q against a bin's
	// counts (20 measures alike).
	histogramPrior = 5
)

// The positions of the calibrator's numbers in its state vector.
const (
	calN  = 0 // labeled examples learned
	calM  = 1 // running mean of |s|
	calA  = 2 // the slope a
	calGA = 3 // AdaGrad's sum for a
	calB  = 4 // b_c at calB + 2c, its AdaGrad sum at calB + 2c + 1
)

// calibratorLength is the length of the calibrator's state for k
// outputs.
func calibratorLength(k int) int {
	if k == 1 {
		return calB + 2 + 4*histogramBins
	}
	return calB + 2*k
}

// calibratorLengthPositives is the length of a binary model's calibrator
// state written before its histogram had two corrections (snapshot format
// 2): pos_j and n_j, without e_j and d_j.
const calibratorLengthPositives = calB + 2 + 2*histogramBins

// upgradeCalibrator is v in the current layout: a binary state without
// the expected positives gets each bin's count times the bin's middle
// (what Platt expected of a bin whose q were spread evenly, where the odds
// correction gives what the flat one does), and d_j = 0, which chooses the
// flat correction, the one format 2 published. Any other v is returned as
// it is.
func upgradeCalibrator(v []float64, k int) []float64 {
	if k != 1 || len(v) != calibratorLengthPositives {
		return v
	}
	u := make([]float64, calibratorLength(1))
	copy(u, v)
	for j := range histogramBins {
		u[calExp+j] = format2Expected(u[calPos+histogramBins+j], j)
	}
	return u
}

// format2Expected is the expected positives of bin j of n examples in a
// calibrator of format 2, which did not keep them: n times the bin's
// middle.
func format2Expected(n float64, j int) float64 {
	return n * (float64(j) + 0.5) / histogramBins
}

// digestedCalibrator is v as a state's digest reads it: a binary state
// that is the upgrade of a format-2 one (upgradeCalibrator: each e_j its
// bin's count times the bin's middle, each d_j 0) is read as that one, so
// that a model restored from a format-2 snapshot keeps the digest the
// snapshot and the epoch log record for it. Any other v is read whole.
func digestedCalibrator(v []float64, k int) []float64 {
	if k != 1 || len(v) != calibratorLength(1) {
		return v
	}
	for j := range histogramBins {
		if v[calBrier+j] != 0 || v[calExp+j] != format2Expected(v[calPos+histogramBins+j], j) {
			return v
		}
	}
	return v[:calibratorLengthPositives]
}

// calPos is the position of a binary model's histogram of positives, its
// counts following, then at calExp its expected positives and at
// calBrier the squared error of its flat correction less its odds one.
const (
	calPos   = calB + 2
	calExp   = calPos + 2*histogramBins
	calBrier = calPos + 3*histogramBins
)

func newCalibrator(k int) calibrator {
	c := calibrator{k: k, v: make([]float64, calibratorLength(k))}
	c.v[calA] = 1
	return c
}

// fresh reports whether the calibrator has learned nothing.
func (c *calibrator) fresh() bool { return c.v[calN] == 0 }

// input sets z from the scores.
func (c *calibrator) input(scores, z []float64) {
	m := c.v[calM]
	for i, s := range scores {
		zi := 0.0
		if m > 0 {
			zi = s / m
		}
		// An input beyond ±maxInput tells no more than that, and the
		// bound keeps a·z finite.
		z[i] = max(-maxInput, min(maxInput, zi))
		if zi != zi {
			z[i] = 0
		}
	}
}

// logit is a·z_i + b_i, within ±maxLogit.
func (c *calibrator) logit(z []float64, i int) float64 {
	l := c.v[calA]*z[i] + c.v[calB+2*i]
	return max(-maxLogit, min(maxLogit, l))
}

// calibratorInputs is the length of the calibrator's inputs z for k
// outputs (see probability).
func calibratorInputs(k int) int { return k + 3 }

// probability sets p from the scores: for a binary model p[0] is
// P(label = +1), for a multiclass one p holds every class's probability.
// It keeps in z, of calibratorInputs(len(scores)), what a following learn
// reads: the inputs and, for a binary model, Platt's q and its bin's two
// corrections.
func (c *calibrator) probability(scores, z, p []float64) {
	c.input(scores, z)
	if c.k == 1 {
		q := sigmoid(c.logit(z, 0))
		j := binOf(q, histogramBins)
		flat, odds := c.corrections(q, j)
		z[1], z[2], z[3] = q, flat, odds
		p[0] = c.chosen(flat, odds, j)
		return
	}
	hi := math.Inf(-1)
	for i := range c.k {
		p[i] = c.logit(z, i)
		hi = max(hi, p[i])
	}
	var sum float64
	for i := range c.k {
		p[i] = math.Exp(p[i] - hi)
		sum += p[i]
	}
	for i := range c.k {
		p[i] /= sum
	}
}

// chosen is bin j's choice of its corrections flat and odds: the one
// whose squared error on the bin's examples was the lower, flat on a tie.
func (c *calibrator) chosen(flat, odds float64, j int) float64 {
	if c.v[calBrier+j] > 0 {
		return odds
	}
	return flat
}

// corrections are the two corrections of q by its bin j: the bin's
// frequency of positives, and q's odds scaled by it (oddsCorrected).
func (c *calibrator) corrections(q float64, j int) (flat, odds float64) {
	pos, n, e := c.v[calPos+j], c.v[calPos+histogramBins+j], c.v[calExp+j]
	return min(1, (pos+histogramPrior*q)/(n+histogramPrior)), oddsCorrected(q, pos, n, e)
}

// oddsCorrected is Platt's q corrected by its bin of the histogram, which
// counted n examples, pos positives among them, and e positives expected
// (the sum of their q): q's odds times the bin's observed against expected
// positives, over its observed against expected negatives, each ratio
// drawn towards 1 by histogramPrior examples at q.
func oddsCorrected(q, pos, n, e float64) float64 {
	rp := ratio(pos, e, histogramPrior*q)
	rn := ratio(n-pos, n-e, histogramPrior*(1-q))
	num := q * rp
	p := num / (num + (1-q)*rn)
	if !(p >= 0) {
		// q·r⁺ and (1−q)·r⁻ both 0: only q of 0 or 1 with a bin that saw
		// nothing else, where q stands.
		return q
	}
	return min(1, p)
}

// ratio is (observed + prior)/(expected + prior), 1 where both are 0.
func ratio(observed, expected, prior float64) float64 {
	d := expected + prior
	if d <= 0 {
		return 1
	}
	return max(0, observed+prior) / d
}

func sigmoid(l float64) float64 {
	if l >= 0 {
		return 1 / (1 + math.Exp(-l))
	}
	e := math.Exp(l)
	return e / (1 + e)
}

// learn takes one step on the log-loss of the probabilities p that
// probability published for scores, with what it kept in z, the label
// being y (±1 for a binary model, the class for a multiclass one), then
// moves the running mean of |s|.
func (c *calibrator) learn(scores, z, p []float64, y int) {
	v := c.v
	if c.k == 1 {
		t := 0.0
		if y > 0 {
			t = 1
		}
		q := z[1] // Platt's, as probability computed it
		c.learnBin(q, t, z[2], z[3])
		if !c.saturated(z, 0) {
			c.step(0, q-t)
			c.stepA(z[0] * (q - t))
		}
	} else {
		var ga float64
		for i := range c.k {
			if c.saturated(z, i) {
				continue
			}
			g := p[i]
			if i == y {
				g--
			}
			ga += g * z[i]
			c.step(i, g)
		}
		c.stepA(ga)
	}
	// The mean magnitude, each within maxMagnitude: the mean stays finite.
	// A NaN score tells nothing of the scale.
	var mag float64
	for _, s := range scores {
		if a := math.Abs(s); a == a {
			mag += min(a, maxMagnitude) / float64(c.k)
		}
	}
	// An outlier's magnitude counts as at most outlierMagnitude times the
	// mean: whole, one score of 1e20 among scores near 1 would set the
	// scale for the next ~90,000 examples and flatten every probability
	// to the prior.
	//
	// A mean still at 0 (every score so far 0: a model without a bias
	// over examples without features) has seen no scale: bounded by it,
	// no magnitude could ever move it, and every probability would stay
	// the prior's. The first magnitude after such a start sets it, as
	// the first of a fresh calibrator does.
	if v[calN] < outlierWarmup || v[calM] == 0 {
		// The first magnitudes set the scale by their geometric mean:
		// it follows a model whose scores grow by orders of magnitude
		// as fast as a plain mean would, but one outlier among them
		// moves it by its 100th root at most, where a plain mean would
		// take its share whole and, decaying over calibrationHorizon
		// examples, flatten every probability for tens of thousands
		// of examples. A score of 0 (a fresh model's) tells no scale,
		// and neither does one below negligibleMagnitude of the scale
		// so far: a rounding residue (a bias moved up and down by the
		// labels cancels to 5.6e-17 among scores near 0.1), whose
		// logarithm alone would shrink the scale a thousandfold and
		// publish the next scores as probabilities of 1e-16.
		v[calN]++
		if mag > 0 {
			if m := v[calM]; m > 0 {
				if mag >= negligibleMagnitude*m {
					v[calM] = math.Exp(math.Log(m) + (math.Log(mag)-math.Log(m))/v[calN])
				}
			} else {
				v[calM] = mag
			}
		}
		return
	}
	mag = min(mag, outlierMagnitude*v[calM])
	v[calN]++
	v[calM] += (mag - v[calM]) / min(v[calN], calibrationHorizon)
}

// learnBin counts the outcome t (1 or 0) of an example whose Platt
// probability was q in q's bin of the histogram, with what the bin's
// corrections predicted for it (flat and odds), decaying the histogram
// first every histogramBlock examples.
func (c *calibrator) learnBin(q, t, flat, odds float64) {
	v := c.v
	j := binOf(q, histogramBins)
	h := v[calPos : calPos+4*histogramBins]
	if uint64(v[calN])%histogramBlock == histogramBlock-1 {
		for i := range h {
			h[i] *= histogramDecay
		}
	}
	h[j] += t
	h[histogramBins+j]++
	h[2*histogramBins+j] += q
	// flat's squared error less odds'.
	if t == 0 {
		flat, odds = 1-flat, 1-odds
	}
	h[3*histogramBins+j] += (1-flat)*(1-flat) - (1-odds)*(1-odds)
}

// saturated reports whether a·z_i + b_i lies beyond ±maxLogit, where
// logit holds it: there the published probability does not change with a
// or b_i, and neither learns from the example. An input far out (an
// outlier's score, up to maxInput) would otherwise add its square to
// AdaGrad's sums and leave a all but frozen from then on.
func (c *calibrator) saturated(z []float64, i int) bool {
	l := c.v[calA]*z[i] + c.v[calB+2*i]
	return !(l >= -maxLogit && l <= maxLogit)
}

// step moves b_i against the gradient g.
func (c *calibrator) step(i int, g float64) {
	v := c.v
	v[calB+2*i+1] += g * g
	if v[calB+2*i+1] > 0 {
		v[calB+2*i] -= calibrationRate * g / math.Sqrt(v[calB+2*i+1])
	}
}

// stepA moves a against the gradient g.
func (c *calibrator) stepA(g float64) {
	v := c.v
	v[calGA] += g * g
	if v[calGA] > 0 {
		v[calA] -= calibrationRate * g / math.Sqrt(v[calGA])
	}
}

// restore copies a state that validCalibrator accepted; an empty one
// leaves the calibrator fresh.
func (c *calibrator) restore(v []float64) {
	if len(v) > 0 {
		copy(c.v, upgradeCalibrator(v, c.k))
	}
}

// export is the calibrator's state, nil while it is fresh.
func (c *calibrator) export() []float64 {
	if c.fresh() {
		return nil
	}
	return clone(c.v)
}

// freeze is a copy that computes the same probabilities.
func (c *calibrator) freeze() calibrator {
	return calibrator{k: c.k, v: clone(c.v)}
}

// validCalibrator checks a calibrator's state for k outputs: empty (a
// fresh calibrator) or the full vector, every number finite, the count
// above 0, the mean at least 0 and the AdaGrad sums too.
func validCalibrator(v []float64, k int) error {
	if len(v) == 0 {
		return nil
	}
	if len(v) != calibratorLength(k) && (k != 1 || len(v) != calibratorLengthPositives) {
		return stateErr("calibration", "has %d values, %d outputs need %d", len(v), k, calibratorLength(k))
	}
	if err := checkFinite("calibration", v); err != nil {
		return err
	}
	// A calibrator that learned no example is written as none (export):
	// restored with its other numbers, it would publish probabilities
	// that the next snapshot of it drops.
	if v[calN] == 0 {
		return stateErr("calibration", "value %d, the examples learned, is 0 in a calibrator that is not empty (a fresh one has no values)", calN)
	}
	for _, i := range []int{calN, calM, calGA} {
		if v[i] < 0 {
			return stateErr("calibration", "value %d is %v, must be at least 0", i, v[i])
		}
	}
	for i := range k {
		if v[calB+2*i+1] < 0 {
			return stateErr("calibration", "value %d is %v, must be at least 0", calB+2*i+1, v[calB+2*i+1])
		}
	}
	if k == 1 {
		// A format-2 state is checked as it is restored: its expected
		// positives, estimated from the counts, must be finite too.
		v = upgradeCalibrator(v, k)
		for j := range histogramBins {
			if pos, n := v[calPos+j], v[calPos+histogramBins+j]; !(pos >= 0 && pos <= n) {
				return stateErr("calibration", "histogram bin %d has %v positives in %v examples", j, pos, n)
			}
			if e, n := v[calExp+j], v[calPos+histogramBins+j]; !(e >= 0 && e <= n) {
				return stateErr("calibration", "histogram bin %d expects %v positives in %v examples", j, e, n)
			}
		}
	}
	return nil
}

// Calibration is the state of a model's probabilities: the calibrator's
// parameters and the prequential measures of what it published. Every
// part is empty for a model that has published no probability of a
// labeled example, and for a state written before calibration existed: a
// model restored from it starts calibrating afresh.
type Calibration struct {
	// Parameters is the calibrator's state: the labeled examples it
	// learned, the running mean of |s|, the slope a and its AdaGrad sum,
	// then per output the offset b_c and its AdaGrad sum (see
	// calibrator). Empty for a fresh calibrator.
	Parameters []float64

	// Count is the number of labeled examples measured; LogLoss and Brier
	// the sums of their log-losses and Brier scores.
	Count          uint64
	LogLoss, Brier float64
	// The 10 equal-width bins of the calibration error over the stream:
	// per bin, the examples whose probability fell in it, how many of them
	// saw the event (label +1 for a binary model, a correct prediction for
	// a multiclass one) and the sum of their probabilities.
	BinCount  []uint64
	BinEvents []uint64
	BinSum    []float64
	// AUCPositive and AUCNegative count a binary model's positive and
	// negative examples in 1,024 equal-width bins of P(label = +1); empty
	// for a multiclass model.
	AUCPositive []uint64
	AUCNegative []uint64
	// The rolling window's slots, aligned with State.Window: probability,
	// event, log-loss and Brier score.
	WindowProbability []float64
	WindowEvent       []bool
	WindowLogLoss     []float64
	WindowBrier       []float64
}

// IsZero reports whether c is empty: nothing calibrated or measured.
func (c *Calibration) IsZero() bool {
	return len(c.Parameters) == 0 && c.Count == 0 && c.LogLoss == 0 && c.Brier == 0 &&
		len(c.BinCount) == 0 && len(c.BinEvents) == 0 && len(c.BinSum) == 0 &&
		len(c.AUCPositive) == 0 && len(c.AUCNegative) == 0 &&
		len(c.WindowProbability) == 0 && len(c.WindowEvent) == 0 && len(c.WindowLogLoss) == 0 && len(c.WindowBrier) == 0
}

// clone is a deep copy of c.
func (c *Calibration) clone() Calibration {
	return Calibration{
		Parameters: clone(c.Parameters),
		Count:      c.Count, LogLoss: c.LogLoss, Brier: c.Brier,
		BinCount: clone(c.BinCount), BinEvents: clone(c.BinEvents), BinSum: clone(c.BinSum),
		AUCPositive: clone(c.AUCPositive), AUCNegative: clone(c.AUCNegative),
		WindowProbability: clone(c.WindowProbability), WindowEvent: clone(c.WindowEvent),
		WindowLogLoss: clone(c.WindowLogLoss), WindowBrier: clone(c.WindowBrier),
	}
}

// exportCalibration is the calibration part of m's state.
func (m *Model) exportCalibration() Calibration {
	q := &m.metrics.prob
	if q.stream.n == 0 && m.cal.fresh() {
		return Calibration{}
	}
	return Calibration{
		Parameters: m.cal.export(),
		Count:      q.stream.n, LogLoss: q.stream.logLoss, Brier: q.stream.brier,
		BinCount: clone(q.stream.count[:]), BinEvents: clone(q.stream.events[:]), BinSum: clone(q.stream.sum[:]),
		AUCPositive: clone(q.aucPositive), AUCNegative: clone(q.aucNegative),
		WindowProbability: clone(q.wProb), WindowEvent: clone(q.wEvent),
		WindowLogLoss: clone(q.wLoss), WindowBrier: clone(q.wBrier),
	}
}

// restoreCalibration copies c, which validate accepted, into m; an empty
// c leaves m's calibration fresh.
func (m *Model) restoreCalibration(c *Calibration) {
	if c.IsZero() {
		return
	}
	m.cal.restore(c.Parameters)
	q := &m.metrics.prob
	q.stream.n, q.stream.logLoss, q.stream.brier = c.Count, c.LogLoss, c.Brier
	copy(q.stream.count[:], c.BinCount)
	copy(q.stream.events[:], c.BinEvents)
	copy(q.stream.sum[:], c.BinSum)
	if len(c.AUCPositive) > 0 {
		q.aucPositive, q.aucNegative = clone(c.AUCPositive), clone(c.AUCNegative)
	}
	copy(q.wProb, c.WindowProbability)
	copy(q.wEvent, c.WindowEvent)
	copy(q.wLoss, c.WindowLogLoss)
	copy(q.wBrier, c.WindowBrier)
}

// validate checks c against st's configuration and counters: empty, or
// every part of the length the configuration gives it, every number
// finite, the probabilities in [0, 1], the sums and counts at least 0,
// and the bins adding up to Count, at most the labeled examples.
func (c *Calibration) validate(st *State) error {
	if c.IsZero() {
		return nil
	}
	cfg := &st.Config
	k := cfg.outputs()
	if err := validCalibrator(c.Parameters, k); err != nil {
		return err
	}
	if c.Count > st.Labeled {
		return stateErr("calibration_count", "%d exceeds the %d labeled examples", c.Count, st.Labeled)
	}
	if !(c.LogLoss >= 0) || math.IsInf(c.LogLoss, 0) {
		return stateErr("log_loss", "must be a finite number >= 0, got %v", c.LogLoss)
	}
	if !(c.Brier >= 0) || math.IsInf(c.Brier, 0) {
		return stateErr("brier", "must be a finite number >= 0, got %v", c.Brier)
	}
	if len(c.BinCount) != calibrationBins || len(c.BinEvents) != calibrationBins || len(c.BinSum) != calibrationBins {
		return stateErr("calibration_bins", "need %d bins of counts, events and sums, got %d, %d, %d", calibrationBins, len(c.BinCount), len(c.BinEvents), len(c.BinSum))
	}
	var n uint64
	for b := range calibrationBins {
		if c.BinEvents[b] > c.BinCount[b] {
			return stateErr("calibration_bins", "bin %d has %d events in %d examples", b, c.BinEvents[b], c.BinCount[b])
		}
		if s := c.BinSum[b]; !(s >= 0 && s <= float64(c.BinCount[b])) {
			return stateErr("calibration_bins", "bin %d sums %v over %d probabilities", b, s, c.BinCount[b])
		}
		n += c.BinCount[b]
	}
	if n != c.Count {
		return stateErr("calibration_bins", "hold %d examples, calibration_count is %d", n, c.Count)
	}
	switch {
	case cfg.Multiclass() && (len(c.AUCPositive) > 0 || len(c.AUCNegative) > 0):
		return stateErr("auc", "a multiclass model has no AUC histogram")
	case !cfg.Multiclass() && c.Count > 0 && (len(c.AUCPositive) != aucBins || len(c.AUCNegative) != aucBins):
		return stateErr("auc", "needs %d bins of positives and negatives, got %d and %d", aucBins, len(c.AUCPositive), len(c.AUCNegative))
	case !cfg.Multiclass() && c.Count == 0 && (len(c.AUCPositive) > 0 || len(c.AUCNegative) > 0):
		return stateErr("auc", "a histogram without a measured example")
	}
	if len(c.AUCPositive) > 0 {
		var a uint64
		for b := range aucBins {
			a += c.AUCPositive[b] + c.AUCNegative[b]
		}
		if a != c.Count {
			return stateErr("auc", "holds %d examples, calibration_count is %d", a, c.Count)
		}
	}
	w := cfg.Window
	if len(c.WindowProbability) != w || len(c.WindowEvent) != w || len(c.WindowLogLoss) != w || len(c.WindowBrier) != w {
		return stateErr("window_probability", "the window's probabilities, events, log-losses and Brier scores need %d slots, got %d, %d, %d, %d",
			w, len(c.WindowProbability), len(c.WindowEvent), len(c.WindowLogLoss), len(c.WindowBrier))
	}
	for i := range w {
		if p := c.WindowProbability[i]; !(p >= 0 && p <= 1) {
			return stateErr("window_probability", "[%d] must be in [0, 1], got %v", i, p)
		}
		if l := c.WindowLogLoss[i]; !(l >= 0) || math.IsInf(l, 0) {
			return stateErr("window_log_loss", "[%d] must be a finite number >= 0, got %v", i, l)
		}
		if b := c.WindowBrier[i]; !(b >= 0 && b <= 2) {
			return stateErr("window_brier", "[%d] must be in [0, 2], got %v", i, b)
		}
	}
	return nil
}

// mixCalibration sets out's calibration from base's and the states' (see
// Mix): the calibrator's parameters are the mean of the parameters of the
// states that learned a labeled example beyond base, each weighted by the
// number it learned, in the order of states (a copy of the one state's
// when one did, base's when none did); the measures are base's plus every
// state's delta, as the counters; the window's slots continue base's ring
// with each state's new outcomes in order, as the window of outcomes.
// When restarted, a state found a drift and the mix restarts the model
// (see restart): the parameters are then those of the states that found
// one, whose calibrators started afresh with their parameters.
func mixCalibration(out, base *State, states []*State, restarted bool) {
	zero := base.Calibration.IsZero()
	for _, st := range states {
		zero = zero && st.Calibration.IsZero()
	}
	if zero {
		out.Calibration = Calibration{}
		return
	}
	k, w := base.Config.outputs(), base.Config.Window
	full := func(c *Calibration) *Calibration {
		if !c.IsZero() {
			return c
		}
		f := &Calibration{
			BinCount: make([]uint64, calibrationBins), BinEvents: make([]uint64, calibrationBins), BinSum: make([]float64, calibrationBins),
			WindowProbability: make([]float64, w), WindowEvent: make([]bool, w), WindowLogLoss: make([]float64, w), WindowBrier: make([]float64, w),
		}
		return f
	}
	b := full(&base.Calibration)
	c := b.clone()

	// The parameters.
	var learners []*State
	var total float64
	for _, st := range states {
		if st.Labeled > base.Labeled && (!restarted || drifted(base, st)) {
			learners = append(learners, st)
			total += float64(st.Labeled - base.Labeled)
		}
	}
	// Where every state's calibrator is one of format 2 (or its upgrade,
	// as a model restored from format 2 holds it), they mix in that
	// layout, as a hyperplane of format 2 mixes them: the mixed model's
	// digest is then the one such a hyperplane records for it.
	parameters := func(st *State) []float64 {
		if len(st.Calibration.Parameters) == 0 {
			return newCalibrator(k).v
		}
		return upgradeCalibrator(st.Calibration.Parameters, k)
	}
	length := calibratorLength(k)
	if k == 1 {
		length = calibratorLengthPositives
		for _, st := range learners {
			if len(digestedCalibrator(parameters(st), k)) != calibratorLengthPositives {
				length = calibratorLength(k)
			}
		}
	}
	params := func(st *State) []float64 { return parameters(st)[:length] }
	switch len(learners) {
	case 0:
	case 1:
		c.Parameters = clone(upgradeCalibrator(learners[0].Calibration.Parameters, k))
	default:
		c.Parameters = make([]float64, length)
		for _, st := range learners {
			mu := float64(st.Labeled-base.Labeled) / total
			for i, v := range params(st) {
				c.Parameters[i] += mu * v
			}
		}
	}

	// The measures over the stream. When one state measured beyond base,
	// its sums are copied: base + (s − base) may round away from s.
	sub := func(a, b uint64) uint64 { return a - min(a, b) }
	binary := !base.Config.Multiclass()
	var movers []*Calibration
	for _, st := range states {
		if s := full(&st.Calibration); s.Count > b.Count {
			movers = append(movers, s)
		}
	}
	for _, s := range movers {
		c.Count += s.Count - b.Count
		for i := range calibrationBins {
			c.BinCount[i] += sub(s.BinCount[i], b.BinCount[i])
			c.BinEvents[i] += sub(s.BinEvents[i], b.BinEvents[i])
		}
		if len(movers) == 1 {
			c.LogLoss, c.Brier = s.LogLoss, s.Brier
			copy(c.BinSum, s.BinSum)
		} else {
			c.LogLoss += s.LogLoss - b.LogLoss
			c.Brier += s.Brier - b.Brier
			for i := range calibrationBins {
				c.BinSum[i] = min(c.BinSum[i]+max(s.BinSum[i]-b.BinSum[i], 0), float64(c.BinCount[i]))
			}
		}
		if binary && len(s.AUCPositive) > 0 {
			if c.AUCPositive == nil {
				c.AUCPositive, c.AUCNegative = make([]uint64, aucBins), make([]uint64, aucBins)
			}
			for i := range aucBins {
				var bp, bn uint64
				if len(b.AUCPositive) > 0 {
					bp, bn = b.AUCPositive[i], b.AUCNegative[i]
				}
				c.AUCPositive[i] += sub(s.AUCPositive[i], bp)
				c.AUCNegative[i] += sub(s.AUCNegative[i], bn)
			}
		}
	}

	// The window, laid out as mixWindow lays out the outcomes.
	uw := uint64(w)
	next := uint64(base.WindowNext)
	for _, st := range states {
		s := full(&st.Calibration)
		d := st.Labeled - base.Labeled
		n := min(d, uw)
		to := (next + (d-n)%uw) % uw
		from := (uint64(st.WindowNext) + uw - n) % uw
		for i := range n {
			t, f := (to+i)%uw, (from+i)%uw
			c.WindowProbability[t], c.WindowEvent[t] = s.WindowProbability[f], s.WindowEvent[f]
			c.WindowLogLoss[t], c.WindowBrier[t] = s.WindowLogLoss[f], s.WindowBrier[f]
		}
		next = (next + d%uw) % uw
	}
	out.Calibration = c
}

// digestCalibration appends the calibration to the digest's encoding,
// only when it is not empty: the digest of a state without calibration is
// what it was before calibration existed.
func (st *State) digestCalibration(e *digestEncoder) {
	c := &st.Calibration
	if c.IsZero() {
		return
	}
	e.str("calibration")
	e.floats(digestedCalibrator(c.Parameters, st.Config.outputs()))
	e.uint(c.Count)
	e.float(c.LogLoss)
	e.float(c.Brier)
	for _, us := range [][]uint64{c.BinCount, c.BinEvents} {
		e.uints(us)
	}
	e.floats(c.BinSum)
	e.uints(c.AUCPositive)
	e.uints(c.AUCNegative)
	e.floats(c.WindowProbability)
	e.uint(uint64(len(c.WindowEvent)))
	for _, ev := range c.WindowEvent {
		e.bool(ev)
	}
	e.floats(c.WindowLogLoss)
	e.floats(c.WindowBrier)
}

func (e *digestEncoder) uints(vs []uint64) {
	e.uint(uint64(len(vs)))
	for _, v := range vs {
		e.uint(v)
	}
}
