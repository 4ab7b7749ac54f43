package compare

import (
	"fmt"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// MinProbability is the least probability a loss is measured with: the
// log-loss of one example is at most MaxLogLoss, so that a pair of them
// differs by a bounded amount, which the confidence sequence needs. A
// calibrated model gives a label a probability below it about once in a
// million examples, so the clipped mean is the mean the model reports
// but for those.
const MinProbability = 1e-6

// MaxLogLoss is −ln(MinProbability), the largest log-loss of one example.
const MaxLogLoss = 13.815510557964274

// Loss is what one prediction of a labeled example cost.
type Loss struct {
	// LogLoss is −ln of the probability given to the label (for a binary
	// model P(+1) or 1 − P(+1); for a multiclass one the label's), the
	// probability clamped to at least MinProbability.
	LogLoss float64
	// Error is the 0/1 loss: 1 for a wrong label, 0 for a right one.
	Error float64
}

// LossOf is the loss of o, Learn's outcome of an example labeled y (±1
// for a binary model, the class for a multiclass one).
func LossOf(o *learner.Outcome, y int) Loss {
	l := Loss{LogLoss: min(learner.ScoreProbability(&o.Prediction, y).LogLoss, MaxLogLoss)}
	if !o.Correct {
		l.Error = 1
	}
	return l
}

// Comparison measures a challenger against the model on the examples both
// predicted before learning them: per example, the model's loss minus the
// challenger's, for the log-loss and for the 0/1 loss, each with its
// confidence sequence. A positive difference favours the challenger.
type Comparison struct {
	logLoss, errors *Sequence
	// st holds the sums; the sequences' states are its LogLoss and
	// Errors. It is the comparison's own, or a model's challenger's
	// (Attach).
	st *learner.ComparisonState
}

// NewComparison returns an empty comparison whose sequences are at level
// alpha, in (0, 1): each excludes the true difference, at any example,
// with probability at most alpha.
func NewComparison(alpha float64) (*Comparison, error) {
	return comparisonOf(alpha, new(learner.ComparisonState))
}

// Attach is the comparison of challenger c with its model, at level
// alpha, kept in c.Comparison: what Add adds is in the model's State, so
// that the comparison resumes, and is replayed, with the model.
func Attach(c *learner.Challenger, alpha float64) (*Comparison, error) {
	return comparisonOf(alpha, &c.Comparison)
}

// comparisonOf is the comparison at level alpha whose state st holds.
func comparisonOf(alpha float64, st *learner.ComparisonState) (*Comparison, error) {
	ll, err := sequenceOf(alpha, MaxLogLoss, &st.LogLoss)
	if err != nil {
		return nil, err
	}
	e, err := sequenceOf(alpha, 1, &st.Errors)
	if err != nil {
		return nil, err
	}
	return &Comparison{logLoss: ll, errors: e, st: st}, nil
}

// Add adds one example's pair of losses: the model's and the
// challenger's.
func (c *Comparison) Add(model, challenger Loss) {
	c.logLoss.Add(model.LogLoss - challenger.LogLoss)
	c.errors.Add(model.Error - challenger.Error)
	c.st.ModelLogLoss += model.LogLoss
	c.st.ModelErrors += model.Error
	c.st.ChallengerLogLoss += challenger.LogLoss
	c.st.ChallengerErrors += challenger.Error
}

// Result is a comparison as it stands.
type Result struct {
	// Examples are the labeled examples compared.
	Examples int
	// The mean log-loss (clipped, see MinProbability) and the accuracy
	// of each.
	ModelLogLoss, ChallengerLogLoss   float64
	ModelAccuracy, ChallengerAccuracy float64
	// LogLossDiff is ModelLogLoss − ChallengerLogLoss, positive when the
	// challenger is better; LogLossLow and LogLossHigh are its confidence
	// sequence's band.
	LogLossDiff, LogLossLow, LogLossHigh float64
	// AccuracyDiff is ChallengerAccuracy − ModelAccuracy (the model's 0/1
	// loss minus the challenger's), positive when the challenger is
	// better, with its band.
	AccuracyDiff, AccuracyLow, AccuracyHigh float64
}

// Result returns the comparison's measures and bands now.
func (c *Comparison) Result() Result {
	r := Result{Examples: c.logLoss.Count()}
	r.LogLossLow, r.LogLossHigh = c.logLoss.Bounds()
	r.AccuracyLow, r.AccuracyHigh = c.errors.Bounds()
	if r.Examples == 0 {
		return r
	}
	n := float64(r.Examples)
	r.ModelLogLoss, r.ChallengerLogLoss = c.st.ModelLogLoss/n, c.st.ChallengerLogLoss/n
	r.ModelAccuracy, r.ChallengerAccuracy = 1-c.st.ModelErrors/n, 1-c.st.ChallengerErrors/n
	r.LogLossDiff, r.AccuracyDiff = c.logLoss.Mean(), c.errors.Mean()
	return r
}

// ChallengerBetter reports whether the log-loss band lies above zero now:
// the verdict "challenger better" (Result.Verdict), found without
// computing the rest of the Result.
func (c *Comparison) ChallengerBetter() bool {
	low, _ := c.logLoss.Bounds()
	return low > 0
}

// Verdict is what a comparison's log-loss band says.
type Verdict string

// The verdicts.
const (
	// Undecided: the band holds zero; the data do not yet tell the two
	// apart (and may never, if they are equally good).
	Undecided Verdict = "undecided"
	// ChallengerBetter: the band is above zero.
	ChallengerBetter Verdict = "challenger better"
	// ModelBetter: the band is below zero.
	ModelBetter Verdict = "model better"
)

// Verdict is the verdict on the log-loss: a band wholly on one side of
// zero names the better one.
func (r Result) Verdict() Verdict {
	switch {
	case r.LogLossLow > 0:
		return ChallengerBetter
	case r.LogLossHigh < 0:
		return ModelBetter
	}
	return Undecided
}

// String is the result in one line, for logs and tests.
func (r Result) String() string {
	return fmt.Sprintf("%d examples, log-loss %+.4f [%+.4f, %+.4f], accuracy %+.4f [%+.4f, %+.4f]: %s",
		r.Examples, r.LogLossDiff, r.LogLossLow, r.LogLossHigh, r.AccuracyDiff, r.AccuracyLow, r.AccuracyHigh, r.Verdict())
}
