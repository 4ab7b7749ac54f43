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

// MarshalText is the scope's name.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s), nil }

// UnmarshalText reads a scope's name.
func (s *Scope) UnmarshalText(text []byte) error {
	return oneof.Parse(s, text, "scope", Scopes()...)
}
