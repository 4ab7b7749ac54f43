package config

import "github.com/hyperplane-ml/hyperplane/internal/oneof"

// Mechanism names a SASL mechanism: kafka.sasl.mechanism. It is config's
// own value, so that config imports no broker adapter; cmd turns it into
// the Kafka adapter's (kafka.Mechanism, whose names are the same).
type Mechanism string

// The mechanisms.
const (
	MechanismNone        Mechanism = "none" // no authentication
	MechanismPlain       Mechanism = "plain"
	MechanismSCRAMSHA256 Mechanism = "scram-sha-256"
	MechanismSCRAMSHA512 Mechanism = "scram-sha-512"
)

// Mechanisms lists the mechanisms, none first.
func Mechanisms() []Mechanism {
	return []Mechanism{MechanismNone, MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512}
}

// Validate reports a mechanism that is not one of Mechanisms.
func (m Mechanism) Validate() error { return oneof.Check("mechanism", m, Mechanisms()...) }

// MarshalText writes m as UnmarshalText reads it.
func (m Mechanism) MarshalText() ([]byte, error) { return []byte(m), nil }

// UnmarshalText reads one of Mechanisms by name, in lower case. On an
// error m is unchanged.
func (m *Mechanism) UnmarshalText(text []byte) error {
	return oneof.Parse(m, text, "mechanism", Mechanisms()...)
}
