package kafka

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/hyperplane-ml/hyperplane/internal/oneof"
)

// Mechanism names a SASL mechanism: the configuration's
// kafka.sasl.mechanism.
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

// SASL is m with the given credentials, for Config.SASL: nil for
// MechanismNone, which authenticates nothing.
func (m Mechanism) SASL(user, password string) (sasl.Mechanism, error) {
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: SASL: %w", err)
	}
	if m == MechanismNone {
		return nil, nil
	}
	if user == "" {
		return nil, fmt.Errorf("kafka: SASL %s needs a user", m)
	}
	if m == MechanismPlain {
		return plain.Mechanism{Username: user, Password: password}, nil
	}
	algo := scram.SHA256
	if m == MechanismSCRAMSHA512 {
		algo = scram.SHA512
	}
	mech, err := scram.Mechanism(algo, user, password)
	if err != nil {
		return nil, fmt.Errorf("kafka: SASL %s: %w", m, err)
	}
	return mech, nil
}

// ParseSASL is Mechanism.SASL for a mechanism named in any case; "" is
// none.
func ParseSASL(mechanism, user, password string) (sasl.Mechanism, error) {
	if mechanism == "" {
		return nil, nil
	}
	return Mechanism(strings.ToLower(mechanism)).SASL(user, password)
}
