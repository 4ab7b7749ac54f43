package wire_test

import (
	"encoding"
	"testing"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// TestSettingValues: each setting reads exactly its listed values (and
// json for jsonl), names them when it refuses one, and writes what it
// read.
func TestSettingValues(t *testing.T) {
	type setting interface {
		encoding.TextUnmarshaler
		encoding.TextMarshaler
	}
	for _, tc := range []struct {
		name  string
		value func() setting
		good  map[string]string // text: as written back
		bad   string
		want  string // the error
	}{
		{"format", func() setting { return new(wire.Format) },
			map[string]string{"auto": "auto", "jsonl": "jsonl", "json": "jsonl", "msgpack": "msgpack"},
			"xml", `unknown format "xml" (want auto, jsonl or msgpack)`},
		{"publish", func() setting { return new(wire.Publish) },
			map[string]string{"all": "all", "unlabeled": "unlabeled", "none": "none"},
			"some", `unknown value "some" (want all, unlabeled or none)`},
		{"encoding", func() setting { return new(wire.Encoding) },
			map[string]string{"json": "json", "msgpack": "msgpack"},
			"avro", `unknown format "avro" (want json or msgpack)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for text, want := range tc.good {
				v := tc.value()
				if err := v.UnmarshalText([]byte(text)); err != nil {
					t.Fatalf("%q: %v", text, err)
				}
				if got, _ := v.MarshalText(); string(got) != want {
					t.Errorf("%q written back as %q, want %q", text, got, want)
				}
			}
			for _, bad := range []string{tc.bad, ""} {
				if err := tc.value().UnmarshalText([]byte(bad)); err == nil || bad == tc.bad && err.Error() != tc.want {
					t.Errorf("%q: error %v, want %s", bad, err, tc.want)
				}
			}
		})
	}
}
