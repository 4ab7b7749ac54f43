package consumer

import "github.com/hyperplane-ml/hyperplane/internal/oneof"

// The settings of a worker that a configuration holds as text: each type
// lists its values once, below, and reads that list both to parse text
// (UnmarshalText, which a configuration loader calls) and to validate a
// value set in code (Validate). Start has its own file; the formats of
// examples and events are wire's.

// Publishes lists the publish modes.
func Publishes() []Publish { return []Publish{PublishAll, PublishUnlabeled, PublishNone} }

// Validate reports a mode that is not one of Publishes.
func (p Publish) Validate() error { return oneof.Check("value", p, Publishes()...) }

// MarshalText writes p as UnmarshalText reads it.
func (p Publish) MarshalText() ([]byte, error) { return []byte(p), nil }

// UnmarshalText reads one of Publishes by name. On an error p is
// unchanged.
func (p *Publish) UnmarshalText(text []byte) error {
	return oneof.Parse(p, text, "value", Publishes()...)
}
