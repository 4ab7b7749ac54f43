package wire

import (
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/vmihailenco/msgpack/v5"
)

func labelDecoder(t testing.TB, classes ...string) *Decoder {
	t.Helper()
	cfg := learner.DefaultConfig()
	cfg.Classes = classes
	return NewDecoder(cfg, DecoderOptions{})
}

func TestDecodeLabel(t *testing.T) {
	mp := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	d := labelDecoder(t)
	var x learner.Example
	for _, tc := range []struct {
		name   string
		data   []byte
		format Format
		want   LabelRecord
		field  string // of the error, "" for none
	}{
		{"json", []byte(`{"id":"a1","label":1}`), FormatJSON, LabelRecord{ID: []byte("a1"), Label: 1}, ""},
		{"json, 0 is -1", []byte(`{"label":0,"id":"a1"}`), FormatAuto, LabelRecord{ID: []byte("a1"), Label: -1}, ""},
		{"an integer id", []byte(`{"id":42,"label":true}`), FormatAuto, LabelRecord{ID: []byte("42"), Label: 1}, ""},
		{"msgpack", mp(map[string]any{"id": "b", "label": -1}), FormatMsgpack, LabelRecord{ID: []byte("b"), Label: -1}, ""},
		{"msgpack, detected", mp(map[string]any{"id": "b", "label": 1}), FormatAuto, LabelRecord{ID: []byte("b"), Label: 1}, ""},
		{"a mark", AppendMark(nil, FormatJSON, "w-1"), FormatAuto, LabelRecord{Mark: true}, ""},
		{"a mark in msgpack", AppendMark(nil, FormatMsgpack, "w-1"), FormatMsgpack, LabelRecord{Mark: true}, ""},
		{"no id", []byte(`{"label":1}`), FormatAuto, LabelRecord{}, "id"},
		{"no label", []byte(`{"id":"a"}`), FormatAuto, LabelRecord{}, "label"},
		{"a null label", []byte(`{"id":"a","label":null}`), FormatAuto, LabelRecord{}, "label"},
		{"features", []byte(`{"id":"a","label":1,"features":{"f":1}}`), FormatAuto, LabelRecord{}, "features"},
		{"a label that is none", []byte(`{"id":"a","label":3}`), FormatAuto, LabelRecord{}, "label"},
		{"not JSON", []byte(`{"id":`), FormatJSON, LabelRecord{}, "id"},
		{"bytes after msgpack", append(mp(map[string]any{"id": "b", "label": 1}), 0xc0), FormatMsgpack, LabelRecord{}, "label record"},
		{"empty", []byte(" "), FormatAuto, LabelRecord{}, "label record: empty payload"},
		{"not an object", []byte(`[1]`), FormatAuto, LabelRecord{}, "label record: not a JSON object"},
		{"JSON over the limit read as msgpack", []byte(`{"id":"` + strings.Repeat("a", DefaultMaxBytes) + `","label":1}`), FormatMsgpack, LabelRecord{}, "payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.DecodeLabel(tc.data, tc.format, &x)
			if tc.field != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
					t.Fatalf("got %+v, %v; want an error of field %s", got, err, tc.field)
				}
				return
			}
			if err != nil || string(got.ID) != string(tc.want.ID) || got.Label != tc.want.Label || got.Mark != tc.want.Mark {
				t.Fatalf("got %+v (%q), %v; want %+v", got, got.ID, err, tc.want)
			}
		})
	}
}

// TestDecodeLabelWithFeaturesNamesEitherInput: the hint of a label record
// with features names the key of either kind of labels' input, where it
// named labels.topics to a worker whose labels are a JetStream stream.
func TestDecodeLabelWithFeaturesNamesEitherInput(t *testing.T) {
	var x learner.Example
	_, err := labelDecoder(t).DecodeLabel([]byte(`{"id":"a","label":1,"features":{"f":1}}`), FormatAuto, &x)
	if err == nil || !strings.Contains(err.Error(), "labels.topics") || !strings.Contains(err.Error(), "labels.stream") {
		t.Fatalf("got %v, want an error naming labels.topics and labels.stream", err)
	}
}

// FuzzDecodeLabel: a label record of any bytes decodes or is refused with
// a DecodeError, and never panics.
func FuzzDecodeLabel(f *testing.F) {
	for _, s := range []string{`{"id":"a1","label":1}`, `{"mark":"w"}`, `{"id":1,"label":"x"}`, "\x82\xa2id\xa1a\xa5label\x01"} {
		f.Add([]byte(s))
	}
	d := labelDecoder(f, "no", "yes")
	var x learner.Example
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := d.DecodeLabel(data, FormatAuto, &x)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("an error that is no DecodeError: %T %v", err, err)
			}
			return
		}
		if !rec.Mark && (rec.Label != 1 && rec.Label != -1) {
			t.Fatalf("label %d of a binary model", rec.Label)
		}
	})
}

// TestAppendLabel: a label record written in either format decodes to its
// id and label.
func TestAppendLabel(t *testing.T) {
	d := NewDecoder(learner.DefaultConfig(), DecoderOptions{})
	var x learner.Example
	for _, format := range []Format{FormatJSON, FormatMsgpack} {
		for _, c := range []struct {
			id    string
			label int
		}{{"ex-1", 1}, {"ex \"2\"", -1}, {"ü", 1}} {
			data := AppendLabel(nil, format, c.id, c.label)
			r, err := d.DecodeLabel(data, format, &x)
			if err != nil || string(r.ID) != c.id || r.Label != c.label || r.Mark {
				t.Errorf("%s %q: decoded %+v, %v; want id %q, label %d", format, data, r, err, c.id, c.label)
			}
		}
	}
	if got := string(AppendLabel(nil, FormatJSON, "7", -1)); got != `{"id":"7","label":-1}` {
		t.Errorf("JSON label record %s", got)
	}
}

// TestDecodeLabelNamedByANumber checks that with classes named by
// numbers (ratings 1 to 5), an example's or a label record's label means
// the same class whether it is written as a number or as a string, in
// JSON and in msgpack.
func TestDecodeLabelNamedByANumber(t *testing.T) {
	d := labelDecoder(t, "1", "2", "3", "4", "5")
	for stars := 1; stars <= 5; stars++ {
		want := stars - 1 // the class named stars
		for _, data := range [][]byte{
			[]byte(`{"features":{"f":1},"label":` + strconv.Itoa(stars) + `}`),
			[]byte(`{"features":{"f":1},"label":"` + strconv.Itoa(stars) + `"}`),
			mustMsgpack(t, map[string]any{"features": map[string]float64{"f": 1}, "label": stars}),
			mustMsgpack(t, map[string]any{"features": map[string]float64{"f": 1}, "label": strconv.Itoa(stars)}),
		} {
			var x learner.Example
			if _, err := d.Decode(data, &x); err != nil {
				t.Fatalf("%q: %v", data, err)
			}
			if !x.Labeled || x.Label != want {
				t.Errorf("%q: label %d (labeled %v), want %d, the class named %d", data, x.Label, x.Labeled, want, stars)
			}
		}
		for _, data := range [][]byte{
			[]byte(`{"id":"a","label":` + strconv.Itoa(stars) + `}`),
			[]byte(`{"id":"a","label":"` + strconv.Itoa(stars) + `"}`),
			mustMsgpack(t, map[string]any{"id": "a", "label": stars}),
		} {
			var x learner.Example
			rec, err := d.DecodeLabel(data, FormatAuto, &x)
			if err != nil || rec.Label != want {
				t.Errorf("label record %q: label %d, %v; want %d, the class named %d", data, rec.Label, err, want, stars)
			}
		}
	}
	var x learner.Example
	_, err := d.Decode([]byte(`{"features":{"f":1},"label":0}`), &x)
	if err == nil || !strings.Contains(err.Error(), "read by name, not by index") {
		t.Errorf("label 0 with classes 1 to 5: %v, want it refused as no class", err)
	}
}

func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
