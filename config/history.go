package config

import (
	"crypto/sha256"
	"encoding/json"
	"slices"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// history is what decides which model a given epoch log produces
// (docs/scale-out.md, section 2.2): not where epochs are cut, nor who
// learns what, nor where outputs go.
type history struct {
	Model   string             `json:"model"`
	Learner learner.Config     `json:"learner"`
	Scope   string             `json:"scope"`
	Weights learner.MixWeights `json:"weights"`
	// Rule is the mixing rule for the model's algorithm, left out when it
	// is the mean, as every log written before rules were chosen mixed.
	Rule        learner.MixRule `json:"rule,omitempty"`
	Kind        Kind            `json:"kind"`
	Topics      []string        `json:"topics,omitempty"`
	Group       string          `json:"group,omitempty"`
	Stream      string          `json:"stream,omitempty"`
	Partitions  int             `json:"stream_partitions,omitempty"`
	Subject     string          `json:"subject,omitempty"`
	Format      string          `json:"format"`
	MaxBytes    int             `json:"max_bytes"`
	MaxFeatures int             `json:"max_features"`
	// Labels are the settings of the join of labels that come later,
	// which decide what a range learns (docs/labels.md, section 11.2);
	// left out without labels, as every log written before had none.
	Labels *historyLabels `json:"labels,omitempty"`
	// Challengers are the model's challengers, each named with its whole
	// learner configuration: they are mixed with the model, so every
	// worker must learn the same (docs/scale-out.md, section 3.10). Left
	// out without challengers, as every log written before had none.
	Challengers []historyChallenger `json:"challengers,omitempty"`
	// Promote is model.compare.promote when it is auto, which decides
	// the mixed model after each epoch (docs/scale-out.md, section
	// 3.11); left out for manual, as every log written before had it.
	Promote Promote `json:"promote,omitempty"`
}

type historyChallenger struct {
	Name    string         `json:"name"`
	Learner learner.Config `json:"learner"`
	// Rule is the mixing rule for the challenger's algorithm, left out
	// when it is the mean.
	Rule learner.MixRule `json:"rule,omitempty"`
}

type historyLabels struct {
	Kind    Kind     `json:"kind"`
	Topics  []string `json:"topics,omitempty"`
	Stream  string   `json:"stream,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Format  string   `json:"format"`
	Window  string   `json:"window"`
	Default string   `json:"default,omitempty"`
}

// MixRule is the rule the model's epochs mix by: model.mixing.rule for
// the model's algorithm.
func (c Config) MixRule() learner.MixRule {
	return c.Model.Mixing.Rule.For(c.Model.Learner.Algorithm)
}

// LegacyMixing is c mixing by the mean, as every epoch log written before
// model.mixing.rule did: a log whose digest is its HistoryDigest
// continues under the mean.
func (c Config) LegacyMixing() Config {
	c.Model.Mixing.Rule = learner.MixMean
	return c
}

// WrittenMixings are c mixing by each rule an epoch log of c's model may
// have been written with before the rule c mixes by now: the mean
// (LegacyMixing), and under auto the rule auto meant for the algorithm
// before (damped for AROW, before MixAROW; the mean for Pegasos, before
// MixPegasos). A log whose digest is the HistoryDigest of one continues
// under that one. None is c's own rule.
func (c Config) WrittenMixings() []Config {
	var out []Config
	add := func(w Config) {
		if w.MixRule() == c.MixRule() {
			return
		}
		for _, o := range out {
			if o.MixRule() == w.MixRule() {
				return
			}
		}
		out = append(out, w)
	}
	add(c.LegacyMixing())
	if c.Model.Mixing.Rule == learner.MixAuto && c.Model.Learner.Algorithm == learner.AROW {
		damped := c
		damped.Model.Mixing.Rule = learner.MixDamped
		add(damped)
	}
	return out
}

// HistoryDigest is the SHA-256 of the settings that decide which model the
// epochs of a model learned over several partitions produce: the model's
// name and hyperparameters, the mixing weights, the source (its kind,
// topics and consumer group, or stream and its partitions) and what the
// decoder refuses (source.format, max_bytes, max_features). A second
// consumer group would learn every partition again beside the first, so
// the group is part of it: such a worker stops. Workers that write one model's epoch log must
// agree on it; with labels that come later, the labels' input, format,
// window and default are part of it, and so are the challengers, when there
// are any, and model.compare.promote when it is auto. It leaves out what only decides where epochs end
// (model.mixing.epoch_examples, interval, source.start) and everything
// else (assignment, outputs, snapshots, HTTP).
func (c Config) HistoryDigest() [32]byte {
	h := history{
		Model:       c.Model.Name,
		Learner:     c.Model.Learner.Canonical(),
		Scope:       string(c.Model.Scope),
		Weights:     c.Model.Mixing.Weights,
		Kind:        c.Source.Kind,
		Stream:      c.Source.Stream,
		Partitions:  c.Source.StreamPartitions,
		Subject:     c.Source.Subject,
		Format:      string(c.Source.Format),
		MaxBytes:    c.Source.MaxBytes,
		MaxFeatures: c.Source.MaxFeatures,
	}
	if r := c.MixRule(); r != learner.MixMean {
		h.Rule = r
	}
	if h.Learner.Drift == learner.DefaultDrift() {
		// Left out at its defaults (omitzero), as every log written
		// before the detector existed had none.
		h.Learner.Drift = learner.DriftConfig{}
	}
	if c.Source.Kind == KindKafka {
		h.Group = c.KafkaGroup()
	}
	for _, t := range c.Source.Topics {
		if t != "" && !slices.Contains(h.Topics, t) {
			h.Topics = append(h.Topics, t)
		}
	}
	slices.Sort(h.Topics)
	if l := c.Labels; l.Enabled() {
		h.Labels = &historyLabels{Kind: l.Kind, Topics: l.Topics, Stream: l.Stream, Subject: l.Subject,
			Format: string(l.Format), Window: l.Window.String(), Default: l.Default}
	}
	for _, ch := range c.ChallengerConfigs() {
		l := ch.Config.Canonical()
		if l.Drift == learner.DefaultDrift() {
			l.Drift = learner.DriftConfig{}
		}
		hc := historyChallenger{Name: ch.Name, Learner: l}
		if r := c.Model.Mixing.Rule.For(ch.Config.Algorithm); r != learner.MixMean {
			hc.Rule = r
		}
		h.Challengers = append(h.Challengers, hc)
	}
	if c.Model.Compare.Promote == PromoteAuto && len(h.Challengers) > 0 {
		h.Promote = PromoteAuto
	}
	b, err := json.Marshal(h)
	if err != nil {
		panic("config: history digest: " + err.Error()) // plain values: cannot fail
	}
	return sha256.Sum256(b)
}
