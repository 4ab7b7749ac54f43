package snapshot

import (
	"cmp"
	"encoding/hex"
	"math"
	"slices"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// Summary is a snapshot in a form people read: what inspect prints.
type Summary struct {
	Format     int              `json:"format"`
	Model      string           `json:"model"`
	Generation uint64           `json:"generation"`
	Created    time.Time        `json:"created"`
	Writer     string           `json:"writer"`
	Positions  map[string]int64 `json:"positions"`
	Config     learner.Config   `json:"config"`
	// StateSHA256 is the learner state's digest (learner.State.Digest in
	// hex): equal for the same learned state in any store, name or
	// generation.
	StateSHA256 string          `json:"state_sha256"`
	Metrics     learner.Metrics `json:"metrics"`
	// Weights describes the weights the model predicts with (averaged for
	// the averaged perceptron, scaled for Pegasos).
	Weights        *WeightStats `json:"weights,omitempty"`
	Bias           []float64    `json:"bias"`
	Largest        []Weight     `json:"largest,omitempty"`
	SupportVectors int          `json:"support_vectors,omitempty"`
	// Challengers are the model's challengers, learned beside it.
	Challengers []ChallengerSummary `json:"challengers,omitempty"`
	// Promotions are the model's history of promotions, oldest first
	// (docs/compare.md, "Promotion").
	Promotions []PromotionSummary `json:"promotions,omitempty"`

	// The keys of a generation in an epoch log (docs/scale-out.md,
	// section 2), omitted for a model learned by one worker alone.
	Epoch uint64 `json:"epoch,omitempty"`
	// Scope and Shard are the generation's own (Snapshot.Scope, Shard).
	Scope string `json:"scope,omitempty"`
	Shard string `json:"shard,omitempty"`
	// Boundary is the ranges of the shards the epoch learned.
	Boundary       []RangeSummary `json:"boundary,omitempty"`
	BoundarySHA256 string         `json:"boundary_sha256,omitempty"`
	BaseSHA256     string         `json:"base_sha256,omitempty"`
	ConfigSHA256   string         `json:"config_sha256,omitempty"`
}

// RangeSummary is a shard's range of an epoch (Range): offsets From <= o <
// To of a Kafka partition, sequences From < s <= To of a JetStream shard,
// and the range of its labels' partition with labels that come later.
type RangeSummary struct {
	Shard  string       `json:"shard"`
	From   int64        `json:"from"`
	To     int64        `json:"to"`
	Labels *LabelsRange `json:"labels,omitempty"`
}

// PromotionSummary is one promotion of the model's history
// (learner.Promotion).
type PromotionSummary struct {
	Challenger string `json:"challenger"`
	Replaced   string `json:"replaced"`
	Auto       bool   `json:"auto,omitempty"`
	Request    string `json:"request,omitempty"`
	Examples   uint64 `json:"examples"`
	Source     string `json:"source"`
	Offset     int64  `json:"offset"`
	Epoch      uint64 `json:"epoch,omitempty"`
}

// ChallengerSummary is a challenger of the model: its name, its
// configuration, its own state's digest and its measures.
type ChallengerSummary struct {
	Name        string          `json:"name"`
	Config      learner.Config  `json:"config"`
	StateSHA256 string          `json:"state_sha256"`
	Metrics     learner.Metrics `json:"metrics"`
}

// WeightStats are statistics over every weight of a linear model.
type WeightStats struct {
	Count   int     `json:"count"`
	NonZero int     `json:"non_zero"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	MeanAbs float64 `json:"mean_abs"`
	L2      float64 `json:"l2_norm"`
}

// Weight is one weight: its hashed feature index, its class for a
// multiclass model, and its value.
type Weight struct {
	Index  uint32  `json:"index"`
	Class  string  `json:"class,omitempty"`
	Weight float64 `json:"weight"`
}

// Summarize describes s, listing its top weights of largest magnitude.
func Summarize(s *Snapshot, top int) Summary {
	st := s.State
	sum := Summary{
		Format:         cmp.Or(s.Format, Format),
		Model:          s.Model,
		Generation:     s.Generation,
		Created:        s.Created,
		Writer:         s.Writer,
		Positions:      s.Positions,
		Config:         st.Config,
		StateSHA256:    st.StateSHA256(),
		SupportVectors: len(st.Support),
	}
	for _, p := range st.Promotions {
		sum.Promotions = append(sum.Promotions, PromotionSummary(p))
	}
	sum.summarizeEpoch(s)
	if m, err := learner.Restore(st); err == nil {
		sum.Metrics = m.Metrics()
		for _, c := range m.Challengers() {
			sum.Challengers = append(sum.Challengers, ChallengerSummary{Name: c.Name, Config: c.Model.Config(),
				StateSHA256: c.Model.State().StateSHA256(), Metrics: c.Model.Metrics()})
		}
	}
	weights, bias := st.Effective()
	sum.Bias = bias
	if weights == nil {
		return sum
	}
	ws := &WeightStats{Count: len(weights), Min: math.Inf(1), Max: math.Inf(-1)}
	var abs, sq float64
	for _, w := range weights {
		if w != 0 {
			ws.NonZero++
		}
		ws.Min = min(ws.Min, w)
		ws.Max = max(ws.Max, w)
		abs += math.Abs(w)
		sq += w * w
	}
	ws.MeanAbs = abs / float64(len(weights))
	ws.L2 = math.Sqrt(sq)
	sum.Weights = ws

	outputs := len(weights) / st.Config.Dimension()
	var order []int
	for i, w := range weights {
		if w != 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(math.Abs(weights[b]), math.Abs(weights[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	for _, i := range order[:min(top, len(order))] {
		w := Weight{Index: uint32(i / outputs), Weight: weights[i]}
		if outputs > 1 {
			w.Class = st.Config.Classes[i%outputs]
		}
		sum.Largest = append(sum.Largest, w)
	}
	return sum
}

// summarizeEpoch sets the keys of sum that s has as a generation of an
// epoch log; a zero digest is left out, as it is not stored.
func (sum *Summary) summarizeEpoch(s *Snapshot) {
	sum.Epoch, sum.Scope, sum.Shard = s.Epoch, s.Scope, s.Shard
	for _, r := range s.Boundary {
		sum.Boundary = append(sum.Boundary, RangeSummary{Shard: r.Shard.String(), From: r.From, To: r.To, Labels: r.Labels})
	}
	hexOf := func(d [32]byte) string {
		if d == ([32]byte{}) {
			return ""
		}
		return hex.EncodeToString(d[:])
	}
	sum.BoundarySHA256, sum.BaseSHA256, sum.ConfigSHA256 = hexOf(s.BoundarySHA256), hexOf(s.BaseDigest), hexOf(s.ConfigDigest)
}
