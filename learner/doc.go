// Package learner holds hyperplane's on-line linear and kernel classifiers,
// the feature hasher, the example type, the label rules (Labels), the
// prequential metrics and the measures behind them (ScoreProbability,
// ProbabilitySums, ExactAUC), and the learning curve (Curve).
//
// Everything here is pure and deterministic: no I/O, no clocks, no global
// state, no goroutines. Feeding the same examples in the same order to two
// models built from the same Config gives bit-identical state on any
// platform, which is what lets a snapshot taken mid-stream and restored
// elsewhere continue exactly as an uninterrupted run would.
//
// A Model is used predict-then-learn (prequential evaluation): Learn first
// scores the example with the current model, records whether that
// prediction was right, and only then updates the model with the label.
// The prediction returned for an example has therefore never seen that
// example's label.
//
// Conventions, from the perceptron notes the package is built on: the
// score is f(x) = w·x + b; the positive class is predicted when f(x) >= 0;
// a labeled example is a mistake when y·f(x) <= 0. Weights start at zero.
//
// A Model is not safe for concurrent use.
package learner
