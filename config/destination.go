package config

import (
	"fmt"
	"strings"

	"github.com/hyperplane-ml/hyperplane/internal/oneof"
)

// Kind is a broker and how it is used: the kind of the source
// (source.kind) and of each output (the part of a Destination before the
// colon).
type Kind string

// The kinds.
const (
	KindKafka     Kind = "kafka"     // Kafka topics
	KindJetStream Kind = "jetstream" // NATS JetStream: streams, and subjects they store
	KindNATS      Kind = "nats"      // core NATS subjects: at-most-once, no replay
)

// Kinds lists the kinds.
func Kinds() []Kind { return []Kind{KindKafka, KindJetStream, KindNATS} }

// Validate reports a kind that is not one of Kinds; the empty kind, no
// source, is one too.
func (k Kind) Validate() error { return oneof.Check("kind", k, Kinds()...) }

// MarshalText writes k as UnmarshalText reads it.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k), nil }

// UnmarshalText reads one of Kinds by name, or "": no kind yet, which
// Validate reports. On an error k is unchanged.
func (k *Kind) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*k = ""
		return nil
	}
	return oneof.Parse(k, text, "kind", Kinds()...)
}

// Destination is where one kind of event goes: a Kafka topic, or a NATS
// subject published to with JetStream or core NATS. Its text is
// "kafka:<topic>", "jetstream:<subject>" or "nats:<subject>", and "" for
// the zero Destination, which is none.
type Destination struct {
	Kind  Kind
	Topic string // the topic or subject
}

// IsZero reports whether d is none.
func (d Destination) IsZero() bool { return d == Destination{} }

// String is the text of d.
func (d Destination) String() string {
	if d.IsZero() {
		return ""
	}
	return string(d.Kind) + ":" + d.Topic
}

// MarshalText writes d as UnmarshalText reads it.
func (d Destination) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a destination from its text (see Destination). On
// an error, which quotes text, d is unchanged. A destination it reads is
// valid.
func (d *Destination) UnmarshalText(text []byte) error {
	s := string(text)
	if s == "" {
		*d = Destination{}
		return nil
	}
	kind, topic, ok := strings.Cut(s, ":")
	if !ok {
		return notADestination(s)
	}
	v := Destination{Kind: Kind(kind), Topic: topic}
	if err := v.Validate(); err != nil {
		return err
	}
	*d = v
	return nil
}

// Validate reports what makes d, unless it is none, no destination: no
// kind, an unknown kind, or a name that is no Kafka topic name (kafka), or
// no NATS subject to publish to, without wildcards (jetstream, nats).
// The error quotes d's text.
func (d Destination) Validate() error {
	var err error
	switch d.Kind {
	case "":
		if d.IsZero() {
			return nil
		}
		return notADestination(d.Topic)
	case KindKafka:
		err = checkTopic(d.Topic)
	case KindJetStream, KindNATS:
		err = checkSubject(d.Topic, false)
	default:
		err = d.Kind.Validate()
	}
	if err != nil {
		return fmt.Errorf("%q: %w", d.String(), err)
	}
	return nil
}

func notADestination(s string) error {
	return fmt.Errorf("%q is not a destination (want kafka:<topic>, jetstream:<subject> or nats:<subject>)", s)
}

// OutputDestination is one key of outputs with its destination.
type OutputDestination struct {
	Key  string // outputs.predictions
	Dest Destination
}

// Destinations lists the outputs' keys and destinations, none included,
// in declaration order.
func (o Outputs) Destinations() []OutputDestination {
	return []OutputDestination{
		{"outputs.predictions", o.Predictions},
		{"outputs.misclassifications", o.Misclassifications},
		{"outputs.dead_letter", o.DeadLetter},
		{"outputs.drift", o.Drift},
		{"outputs.late_labels", o.LateLabels},
		{"outputs.challenger_predictions", o.ChallengerPredictions},
		{"outputs.promotions", o.Promotions},
	}
}
