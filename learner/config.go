package learner

import (
	"fmt"
	"math"
	"strings"
)

// Algorithm names an update rule.
type Algorithm string

// The algorithms. See Config for the hyperparameters each one reads.
const (
	// Perceptron: w += η·y·x when y·f(x) <= 0.
	Perceptron Algorithm = "perceptron"
	// Averaged is the Freund–Schapire averaged perceptron: it trains like
	// Perceptron and predicts with the average of every weight vector it
	// has held, kept lazily in O(nnz) per update.
	Averaged Algorithm = "averaged"
	// Margin is the perceptron that also updates on correct predictions
	// with too small a margin: when y·f(x) <= Tau.
	Margin Algorithm = "margin"
	// PA, PA1 and PA2 are the passive-aggressive learners of Crammer et
	// al. (2006): the smallest change that gives the example a hinge loss
	// of zero, unbounded (PA), capped by C (PA1), or softened by C (PA2).
	PA  Algorithm = "pa"
	PA1 Algorithm = "pa1"
	PA2 Algorithm = "pa2"
	// Pegasos is stochastic sub-gradient descent on the hinge loss with L2
	// regularisation Lambda, step 1/(Lambda·t), and projection onto the
	// ball of radius 1/sqrt(Lambda).
	Pegasos Algorithm = "pegasos"
	// AROW is the diagonal form of adaptive regularisation of weights
	// (Crammer, Kulesza, Dredze 2009): a per-weight confidence makes rare
	// features learn faster than frequent ones.
	AROW Algorithm = "arow"
	// Kernel is the dual perceptron over a bounded support set.
	Kernel Algorithm = "kernel"
)

// Algorithms lists every algorithm, in the order the documentation gives.
var algorithms = []Algorithm{Perceptron, Averaged, Margin, PA, PA1, PA2, Pegasos, AROW, Kernel}

// BiasRule is how the bias b moves on an update: the perceptron family's
// rule (standard or r2), or none, which keeps b at zero for every
// algorithm. The passive-aggressive learners, Pegasos and AROW learn b as
// a constant feature of 1 under standard.
type BiasRule string

// The bias rules.
const (
	// BiasStandard: b += η·y (the plain rule of the worked example).
	BiasStandard BiasRule = "standard"
	// BiasR2: b += η·y·R², R the running maximum of ‖x‖ over labeled
	// examples (for the kernel: of sqrt(K(x,x))). This is the rule under
	// which the Novikoff bound (2R/γ)² is proved.
	BiasR2 BiasRule = "r2"
	// BiasNone keeps b at zero: a hyperplane through the origin.
	BiasNone BiasRule = "none"
)

// Schedule is the learning-rate schedule η_t, t the 1-based count of
// labeled examples.
type Schedule string

// The schedules.
const (
	Constant    Schedule = "constant"     // η_t = η
	Inverse     Schedule = "inverse"      // η_t = η/t
	InverseSqrt Schedule = "inverse_sqrt" // η_t = η/sqrt(t)
)

// KernelFunc names the kernel of the Kernel algorithm.
type KernelFunc string

// The kernels.
const (
	LinearKernel     KernelFunc = "linear" // x·z
	PolynomialKernel KernelFunc = "poly"   // (Gamma·x·z + Coef0)^Degree
	RBFKernel        KernelFunc = "rbf"    // exp(-Gamma·‖x-z‖²)
)

// MaxHashBits bounds HashBits: 2^30 weights are 8 GiB per class.
const MaxHashBits = 30

// MaxWindow bounds the Window of a configuration a user writes
// (ValidateNew). The model keeps about 50 bytes for each example of the
// window (the rolling accuracy, log-loss, Brier score and calibration),
// allocated at once: 500 MB at the bound.
const MaxWindow = 10_000_000

// Config is everything that defines a model. Start from DefaultConfig: the
// zero value is not valid.
type Config struct {
	Algorithm Algorithm `json:"algorithm" yaml:"algorithm" msgpack:"algorithm" help:"learning rule: perceptron, averaged, margin, pa, pa1, pa2, pegasos, arow or kernel"`
	Bias      BiasRule  `json:"bias" yaml:"bias" msgpack:"bias" help:"bias rule: standard (the perceptron family moves it by b += η·y, the others learn it as a constant feature of 1), r2 (b += η·y·R², the perceptron family and kernel only) or none (no bias, every algorithm)"`
	// Eta is the learning rate η of the perceptron family and the kernel
	// perceptron, at most MaxValue. Passive-aggressive, Pegasos and AROW
	// choose their own step and ignore it, and Schedule with it.
	Eta      float64  `json:"eta" yaml:"eta" msgpack:"eta" help:"learning rate η of the perceptron family and the kernel perceptron"`
	Schedule Schedule `json:"schedule" yaml:"schedule" msgpack:"schedule" help:"learning-rate schedule: constant, inverse (η/t) or inverse_sqrt (η/√t)"`
	// HashBits sets the dimension: 2^HashBits weights per class.
	HashBits int    `json:"hash_bits" yaml:"hash_bits" msgpack:"hash_bits" help:"feature hashing into 2^N weights per class"`
	HashSeed uint64 `json:"hash_seed" yaml:"hash_seed" msgpack:"hash_seed" help:"seed of the feature hash"`
	// Classes names the classes. Empty: a binary model with numeric
	// labels. Two names: a binary model, the first name the negative class
	// (-1), the second the positive (+1). Three or more: a multiclass model,
	// one weight vector and bias per class, for every algorithm but Kernel.
	// Each learns from the label's score against the best other class's,
	// moving those two classes' vectors (Crammer–Singer); AROW keeps a
	// variance per feature and class and one per class's bias.
	Classes []string `json:"classes" yaml:"classes" msgpack:"classes" help:"class names, comma-separated; none: binary labels 1/-1, two: binary (negative, positive), three or more: multiclass"`
	// Normalize scales every x to unit L2 norm before it is used.
	Normalize bool `json:"normalize" yaml:"normalize" msgpack:"normalize" help:"scale every example to unit L2 norm"`
	// Batch is the mini-batch size in labeled examples: 1 is on-line
	// learning; above 1 the model stays fixed for Batch labeled examples
	// and then applies the sum of their updates at once (Perceptron,
	// Averaged and Margin only).
	Batch int `json:"batch" yaml:"batch" msgpack:"batch" help:"mini-batch size in labeled examples; 1 is on-line learning"`
	// Tau is the margin below which Margin updates.
	Tau float64 `json:"tau" yaml:"tau" msgpack:"tau" help:"margin below which the margin perceptron updates"`
	// C is the aggressiveness of PA1 and PA2.
	C float64 `json:"c" yaml:"c" msgpack:"c" help:"aggressiveness C of pa1 and pa2"`
	// Lambda is Pegasos's L2 regularisation, at least 1/MaxValue: its
	// first step is 1/Lambda times the example.
	Lambda float64 `json:"lambda" yaml:"lambda" msgpack:"lambda" help:"L2 regularisation λ of pegasos"`
	// AROWR is AROW's regularisation r: larger is more conservative.
	AROWR float64 `json:"arow_r" yaml:"arow_r" msgpack:"arow_r" help:"regularisation r of arow"`
	// Kernel, Degree, Gamma and Coef0 define the kernel; Budget bounds the
	// support set. When the set is full the oldest support vector is
	// removed to make room for the new one.
	Kernel KernelFunc `json:"kernel" yaml:"kernel" msgpack:"kernel" help:"kernel of the kernel algorithm: linear, poly or rbf"`
	Degree int        `json:"degree" yaml:"degree" msgpack:"degree" help:"degree of the poly kernel"`
	Gamma  float64    `json:"gamma" yaml:"gamma" msgpack:"gamma" help:"scale γ of the poly and rbf kernels"`
	Coef0  float64    `json:"coef0" yaml:"coef0" msgpack:"coef0" help:"constant term of the poly kernel"`
	Budget int        `json:"budget" yaml:"budget" msgpack:"budget" help:"most support vectors the kernel model keeps (the oldest goes first)"`
	// Window is the number of labeled examples behind the rolling accuracy.
	Window int `json:"window" yaml:"window" msgpack:"window" help:"labeled examples behind the rolling accuracy (at most 10,000,000)"`
	// Drift is the change detector. The configuration surface exposes
	// it as model.drift, beside model.learner, hence no YAML key here;
	// the history digest leaves it out at its defaults (omitzero there).
	Drift DriftConfig `json:"drift,omitzero" yaml:"-" msgpack:"drift"`
}

// DefaultConfig is AROW with r = 10, binary, over 2^18 weights with the
// standard bias rule; the other algorithms' settings are at theirs (η = 1,
// τ = 1, C = 1, λ = 1e-4, a linear kernel of budget 1000). Measured on
// sparse synthetic, text and dense streams, binary and multiclass, AROW
// had the best prequential accuracy of the algorithms at their defaults
// or came near it, where the perceptron was last or near last; r = 10
// did better than r = 1 on all but text in page order (BENCHMARKS.md,
// "The default learner"). A setting the algorithm does not read does not
// count (Canonical): a snapshot or epoch log of another algorithm written
// when r's default was 1 continues.
func DefaultConfig() Config {
	return Config{
		Algorithm: AROW,
		Bias:      BiasStandard,
		Eta:       1,
		Schedule:  Constant,
		HashBits:  18,
		Batch:     1,
		Tau:       1,
		C:         1,
		Lambda:    1e-4,
		AROWR:     10,
		Kernel:    LinearKernel,
		Degree:    2,
		Gamma:     1,
		Coef0:     1,
		Budget:    1000,
		Window:    1000,
		Drift:     DefaultDrift(),
	}
}

// Canonical is c with every setting its algorithm does not read set to
// the value it had by default when hyperplane's default learner was the
// perceptron (AROW's r 1, ...): two configurations with the same
// canonical form learn the same model. A snapshot continues under a
// configuration of the same canonical form (snapshot.Compatible), and the
// history of a model learned in epochs digests it, so that a setting the
// model never reads, or a change of its default, neither stops a model
// nor changes the digest of a log written before.
func (c Config) Canonical() Config {
	c.Classes = append([]string(nil), c.Classes...)
	a := c.Algorithm
	if !a.perceptronFamily() && a != Kernel {
		c.Eta, c.Schedule = 1, Constant
	}
	if !a.perceptronFamily() {
		c.Batch = 1
	}
	if a != Margin {
		c.Tau = 1
	}
	if a != PA1 && a != PA2 {
		c.C = 1
	}
	if a != Pegasos {
		c.Lambda = 1e-4
	}
	if a != AROW {
		c.AROWR = 1
	}
	if a != Kernel {
		c.Kernel, c.Degree, c.Gamma, c.Coef0, c.Budget = LinearKernel, 2, 1, 1, 1000
	}
	return c
}

// FieldError says which configuration field is wrong and why. Field is
// the configuration key (hash_bits, not HashBits).
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Dimension is the number of weights per class, 2^HashBits.
func (c Config) Dimension() int { return 1 << uint(c.HashBits) }

// Multiclass reports whether the model has one weight vector per class.
func (c Config) Multiclass() bool { return len(c.Classes) > 2 }

// outputs is the number of weight vectors: 1 for a binary model.
func (c Config) outputs() int {
	if c.Multiclass() {
		return len(c.Classes)
	}
	return 1
}

func (a Algorithm) known() bool {
	for _, k := range algorithms {
		if a == k {
			return true
		}
	}
	return false
}

func (a Algorithm) perceptronFamily() bool {
	return a == Perceptron || a == Averaged || a == Margin
}

// ValidateNew is Validate for a configuration a user writes: it also
// bounds Window at MaxWindow, so that a mistyped one cannot take all of
// memory. A stored model's configuration is checked by Validate alone: a
// window it was learned with is never refused.
func (c Config) ValidateNew() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.Window > MaxWindow {
		return fieldErr("window", "must be at most %d, got %d", MaxWindow, c.Window)
	}
	return nil
}

// Validate reports the first field that is wrong, as a *FieldError.
func (c Config) Validate() error {
	if !c.Algorithm.known() {
		names := make([]string, len(algorithms))
		for i, a := range algorithms {
			names[i] = string(a)
		}
		return fieldErr("algorithm", "unknown algorithm %q (want one of %s)", c.Algorithm, strings.Join(names, ", "))
	}
	switch c.Bias {
	case BiasStandard, BiasNone:
	case BiasR2:
		if !c.Algorithm.perceptronFamily() && c.Algorithm != Kernel {
			return fieldErr("bias", "r2 applies to perceptron, averaged, margin and kernel, not %s (use standard or none)", c.Algorithm)
		}
	default:
		return fieldErr("bias", "unknown bias rule %q (want standard, r2 or none)", c.Bias)
	}
	if !(c.Eta > 0 && c.Eta <= MaxValue) {
		return fieldErr("eta", "must be a positive number up to %g, got %v", MaxValue, c.Eta)
	}
	switch c.Schedule {
	case Constant, Inverse, InverseSqrt:
	default:
		return fieldErr("schedule", "unknown schedule %q (want constant, inverse or inverse_sqrt)", c.Schedule)
	}
	if c.HashBits < 1 || c.HashBits > MaxHashBits {
		return fieldErr("hash_bits", "must be between 1 and %d, got %d", MaxHashBits, c.HashBits)
	}
	if err := c.validateClasses(); err != nil {
		return err
	}
	if c.Batch < 1 {
		return fieldErr("batch", "must be at least 1, got %d", c.Batch)
	}
	if c.Batch > 1 && !c.Algorithm.perceptronFamily() {
		return fieldErr("batch", "mini-batch mode applies to perceptron, averaged and margin, not %s", c.Algorithm)
	}
	if !(c.Tau >= 0) || math.IsInf(c.Tau, 0) {
		return fieldErr("tau", "must be a finite number >= 0, got %v", c.Tau)
	}
	if !positive(c.C) {
		return fieldErr("c", "must be a positive number, got %v", c.C)
	}
	if !(c.Lambda >= 1/MaxValue) || math.IsInf(c.Lambda, 0) {
		return fieldErr("lambda", "must be a finite number of at least %g, got %v", 1/MaxValue, c.Lambda)
	}
	if !positive(c.AROWR) {
		return fieldErr("arow_r", "must be a positive number, got %v", c.AROWR)
	}
	switch c.Kernel {
	case LinearKernel, PolynomialKernel, RBFKernel:
	default:
		return fieldErr("kernel", "unknown kernel %q (want linear, poly or rbf)", c.Kernel)
	}
	if c.Degree < 1 || c.Degree > 16 {
		return fieldErr("degree", "must be between 1 and 16, got %d", c.Degree)
	}
	if !positive(c.Gamma) {
		return fieldErr("gamma", "must be a positive number, got %v", c.Gamma)
	}
	if !(c.Coef0 >= 0) || math.IsInf(c.Coef0, 0) {
		return fieldErr("coef0", "must be a finite number >= 0, got %v", c.Coef0)
	}
	if c.Budget < 1 {
		return fieldErr("budget", "must be at least 1, got %d", c.Budget)
	}
	if c.Window < 1 {
		return fieldErr("window", "must be at least 1, got %d", c.Window)
	}
	if err := c.Drift.validate(); err != nil {
		return err
	}
	return nil
}

func (c Config) validateClasses() error {
	switch n := len(c.Classes); {
	case n == 1:
		return fieldErr("classes", "one class is not a classifier: give none (numeric binary labels), two (negative, positive) or three or more")
	case n > 2:
		if c.Algorithm == Kernel {
			return fieldErr("classes", "the kernel algorithm is binary only: multiclass needs algorithm %s", multiclassAlgorithms())
		}
		if n > 1<<16 {
			return fieldErr("classes", "at most %d classes, got %d", 1<<16, n)
		}
		if uint64(n)<<uint(c.HashBits) > 1<<31 {
			return fieldErr("classes", "%d classes of 2^%d weights exceed 2^31 weights; lower hash_bits", n, c.HashBits)
		}
	}
	seen := make(map[string]bool, len(c.Classes))
	for i, name := range c.Classes {
		if name == "" {
			return fieldErr("classes", "class %d has an empty name", i)
		}
		if seen[name] {
			return fieldErr("classes", "class %q is named twice", name)
		}
		seen[name] = true
	}
	return nil
}

// multiclassAlgorithms lists the algorithms that learn three or more
// classes, for an error message.
func multiclassAlgorithms() string {
	var names []string
	for _, a := range algorithms {
		if a != Kernel {
			names = append(names, string(a))
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// ClassIndex is the index of the named class, or -1.
func (c Config) ClassIndex(name string) int {
	for i, n := range c.Classes {
		if n == name {
			return i
		}
	}
	return -1
}
