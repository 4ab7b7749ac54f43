package learner

// MaxValue bounds the magnitude of every number of an Example: each sparse
// and dense feature value is in [-MaxValue, MaxValue] and the importance
// Weight in (0, MaxValue]. The decoders turn a number beyond it into a dead
// letter naming the field; a program that builds Examples itself should
// check it too. It also bounds the configuration: Eta <= MaxValue and
// Lambda >= 1/MaxValue. Within these bounds no state, norm, score or margin
// of any model can overflow or become NaN, however long the stream; the
// argument follows.
//
// Let N be the number of entries of an example (sparse and dense, repeats
// included) and T the number of labeled examples. N < 2^45: 2^45 entries
// of 8 bytes or more take 2^48 bytes, all the memory a 64-bit Go program
// can address, whatever max_features says. T < 2^64, as the counters are
// uint64. The learner itself (Model.Learn) does not learn an example with
// ‖x‖² > MaxNorm2 = 1e74 > 2^45·MaxValue², which no decoded example
// reaches; so ‖x‖ <= R = 2^122.9 and Σ|x_j| <= √N·R < 2^145.4. The
// bounds below are exact-arithmetic ones; rounding changes each by a
// factor of at most 1 + N·2^-53, far within the slack left.
//
//   - Perceptron, averaged, margin (binary, multiclass, mini-batch): a step
//     is η_t·importance <= MaxValue² = 2^199.3, so one update moves a weight
//     by at most 2^344.7 and a bias by 2^199.3·max(1, R²) = 2^445.1; after T
//     updates |w| <= 2^408.7, |b| <= 2^509.1 and a score w·x + b is below
//     2^555. The averaged perceptron's sums add t·Δ for t <= T:
//     |u| <= 2^472.7, |ub| <= 2^573.1, and its score is below 2^619.
//   - Passive-aggressive (pa, pa1, pa2, any C, bias or not) and AROW (any
//     r): the step's length is bounded by maxStep = 1e100 = 2^332.2. A step
//     whose τ²·(‖x‖² + bias) or α²·(xᵀΣx + Σ_b) exceeds maxStep² (an
//     example of tiny norm, or a model pushed far astray by an adversary:
//     with repeated indices, or an importance above 2, these rules
//     overshoot and could otherwise grow without bound) is not taken. A
//     weight then moves by at most √N·maxStep = 2^354.7 per update (AROW's
//     variances stay in [0, 1]), so |w| <= 2^418.7, |b| <= 2^396.2 and a
//     score is below 2^565.
//   - Pegasos: Lambda >= 1/MaxValue and the scale stays in [5e-10, 1]
//     within a step, so a step adds at most
//     importance/(λ·t·scale)·Σ|x_j| <= 2^375.6 to a weight of v; even with
//     no projection |v| <= 2^439.6, ‖v‖² (and its incremental sum, over
//     at most 2^31 weights of every class) stays below 2^911, and a score
//     below 2^586.
//   - Kernel: a coefficient is η_t·importance <= 2^199.3. The model does not
//     learn an example with K(x,x) > maxKernel = 1e200 = 2^664.4 (only the
//     poly kernel gets there, with large γ, coef0, degree or values), so
//     every support vector has K(x_i,x_i) <= maxKernel, R² of the r2 bias
//     rule too, and |b| <= 2^927.7. A kernel of two such examples is at
//     most maxKernel (Cauchy–Schwarz), and at most 2^42 support vectors fit
//     in memory, so a score is below 2^928 for any example with
//     K(x,x) <= maxKernel. An example beyond it (poly kernel) is not
//     learned, and scores with each kernel value clamped to ±maxKernel,
//     so that its score is below 2^928 too.
//
// Every quantity stays below 2^928, far from the largest float64
// (2^1024). No NaN can arise: every division is by a positive number or
// gives a step that the bound on its length refuses, and no infinity is
// left to subtract from another.
const MaxValue = 1e30

// MaxNorm2 bounds ‖x‖² of an example the learner learns from (after
// normalisation, when the model normalises). An example beyond it, NaN or
// infinite is scored but not learned: Learn treats it as unlabeled. No
// example of fewer than 2^45 entries within MaxValue reaches it, so
// decoded examples never do.
const MaxNorm2 = 1e74

// maxStep2 is the square of the longest step, in weight space, that the
// passive-aggressive rules and AROW take (see MaxValue).
const maxStep2 = 1e200

// maxKernel bounds K(x,x) of an example the kernel model learns from (see
// MaxValue). The linear and RBF kernels never reach it.
const maxKernel = 1e200

// learnable reports whether Learn may learn from an example of squared
// norm n2 and importance imp: both are within their bounds, and neither is
// NaN.
func learnable(n2, imp float64) bool {
	return n2 <= MaxNorm2 && imp > 0 && imp <= MaxValue
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return v-v == 0 }
