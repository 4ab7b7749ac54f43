package config

import "github.com/hyperplane-ml/hyperplane/internal/oneof"

// Scope is what one model covers of a source of several partitions.
type Scope string

// The scopes.
const (
	// ScopeGlobal learns one model over every partition, mixed in
	// recorded epochs (docs/scale-out.md).
	ScopeGlobal Scope = "global"
	// ScopePartition learns one independent model per partition.
	ScopePartition Scope = "partition"
)

// Scopes lists the scopes.
func Scopes() []Scope { return []Scope{ScopeGlobal, ScopePartition} }

// Validate is nil for a known scope.
func (s Scope) Validate() error { return oneof.Check("scope", s, Scopes()...) }

// Promote is when a challenger becomes the model (model.compare.promote):
// only when asked (hyperplane promote), or also automatically.
type Promote string

// The ways of promoting.
const (
	// PromoteManual promotes a challenger when hyperplane promote asks.
	PromoteManual Promote = "manual"
	// PromoteAuto also promotes a challenger as soon as its log-loss
	// band lies above zero (docs/compare.md, "Promotion").
	PromoteAuto Promote = "auto"
)

// Promotes lists the ways of promoting.
func Promotes() []Promote { return []Promote{PromoteManual, PromoteAuto} }

// Validate is nil for a known way of promoting.
func (p Promote) Validate() error { return oneof.Check("promote", p, Promotes()...) }

// MarshalText is the way's name.
func (p Promote) MarshalText() ([]byte, error) { return []byte(p), nil }

// UnmarshalText reads a way's name.
func (p *Promote) UnmarshalText(text []byte) error {
	return oneof.Parse(p, text, "promote", Promotes()...)
}

// MarshalText is the scope's name.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s), nil }

// UnmarshalText reads a scope's name.
func (s *Scope) UnmarshalText(text []byte) error {
	return oneof.Parse(s, text, "scope", Scopes()...)
}
