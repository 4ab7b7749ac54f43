package wire

import "github.com/hyperplane-ml/hyperplane/internal/oneof"

// The formats and the publish modes, which a configuration holds as
// text: each type lists its values once, below, and reads that list both
// to parse text (UnmarshalText, which a configuration loader calls) and
// to validate a value set in code (Validate). Start has its own file.

// Formats lists the formats of examples.
func Formats() []Format { return []Format{FormatAuto, FormatJSON, FormatMsgpack} }

// Validate reports a format that is not one of Formats.
func (f Format) Validate() error { return oneof.Check("format", f, Formats()...) }

// MarshalText writes f as UnmarshalText reads it.
func (f Format) MarshalText() ([]byte, error) { return []byte(f), nil }

// UnmarshalText reads one of Formats by name; "json" is another name of
// jsonl. On an error f is unchanged.
func (f *Format) UnmarshalText(text []byte) error {
	if string(text) == "json" {
		text = []byte(FormatJSON)
	}
	return oneof.Parse(f, text, "format", Formats()...)
}

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

// Encodings lists the encodings of events.
func Encodings() []Encoding { return []Encoding{EncodingJSON, EncodingMsgpack} }

// Validate reports an encoding that is not one of Encodings.
func (e Encoding) Validate() error { return oneof.Check("format", e, Encodings()...) }

// MarshalText writes e as UnmarshalText reads it.
func (e Encoding) MarshalText() ([]byte, error) { return []byte(e), nil }

// UnmarshalText reads one of Encodings by name. On an error e is
// unchanged.
func (e *Encoding) UnmarshalText(text []byte) error {
	return oneof.Parse(e, text, "format", Encodings()...)
}
