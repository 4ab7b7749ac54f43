package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// FuzzDecodeHashings: DecodeHashings decodes every input as the decoders
// of each hashing decode it alone, examples and errors, in every format.
func FuzzDecodeHashings(f *testing.F) {
	for _, e := range typicalExamples(f, 2) {
		f.Add(e.msgpack)
		f.Add(e.json)
	}
	f.Add([]byte(`{"id":"a1","label":1,"features":{"f1":0.5,"color":"red"},"x":[1,2.5],"weight":2}`))
	f.Add([]byte(` {"label":-1 , "features" : { "caf\u00e9" : "\ud83d\ude00" , "a\"b":-1e-7 , "long name, long enough" : "long value \\ escaped" } }` + "\n"))
	f.Add([]byte(`{"label":1,"x":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`))
	f.Add([]byte(`{"label":1,"features":{"a":1},"features":{}}`))
	f.Add(encodeMsgpack(f, mpMap{"id", 7, "label", 1, "features", mpMap{"a", float32(1), mpBin("b"), mpBin("c"), "d", "e"}, "x", []any{uint8(1), -2}, "weight", 0.5}))
	f.Add(append(encodeMsgpack(f, mpMap{"label", 1, "features", mpMap{"a", 1}}), ' ', 'x'))
	f.Fuzz(func(t *testing.T, data []byte) {
		base := binaryConfig()
		base.HashBits = 8
		seeded, tiny, wide := base, base, base
		seeded.HashSeed = 7
		tiny.HashBits = 4
		wide.HashBits, wide.HashSeed = 20, 3
		others := []learner.Config{seeded, tiny, wide}
		d := NewDecoder(base, fuzzOptions())
		ds := make([]*Decoder, len(others))
		also := make([]*learner.Example, len(others))
		errs := make([]error, len(others))
		for k, c := range others {
			ds[k] = NewDecoder(c, fuzzOptions())
			also[k] = &learner.Example{Index: []uint32{9}, Label: 3}
		}
		for _, format := range []Format{FormatAuto, FormatJSON, FormatMsgpack} {
			var x learner.Example
			meta, err := d.DecodeHashings(data, format, &x, ds, also, errs)
			id := bytes.Clone(meta.ID)
			var want learner.Example
			alone := NewDecoder(base, fuzzOptions())
			decode := alone.Decode
			switch format {
			case FormatJSON:
				decode = alone.DecodeJSON
			case FormatMsgpack:
				decode = alone.decodeWholeMsgpack
			}
			wantMeta, wantErr := decode(data, &want)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(id, wantMeta.ID) || meta.HasID != wantMeta.HasID {
				t.Fatalf("%s: %q %v, alone %q %v", format, id, err, wantMeta.ID, wantErr)
			}
			if diff := diffExample(x, want); err == nil && diff != "" {
				t.Fatalf("%s: the model's example differs:\n%s", format, diff)
			}
			if err != nil {
				continue
			}
			for k, c := range others {
				var want learner.Example
				_, wantErr := NewDecoder(c, fuzzOptions()).Decode(data, &want)
				if fmt.Sprint(errs[k]) != fmt.Sprint(wantErr) {
					t.Fatalf("%s, hashing %d: %v, alone %v", format, k, errs[k], wantErr)
				}
				if diff := diffExample(*also[k], want); wantErr == nil && diff != "" {
					t.Fatalf("%s, hashing %d: the example differs:\n%s", format, k, diff)
				}
			}
		}
	})
}
