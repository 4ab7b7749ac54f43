package snapshot_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/vmihailenco/msgpack/v5"
)

// TestMulticlassRoundTrip: a multiclass model of every algorithm with a
// multiclass form, AROW's bias variances per class included, decodes to
// the state that wrote it and re-encodes to the same bytes; only a
// multiclass AROW snapshot holds the variance_biases key.
func TestMulticlassRoundTrip(t *testing.T) {
	for _, a := range []learner.Algorithm{learner.Margin, learner.PA, learner.PA2, learner.Pegasos, learner.AROW} {
		for _, classes := range [][]string{nil, {"a", "b", "c", "d"}} {
			cfg := learner.DefaultConfig()
			cfg.Algorithm, cfg.HashBits, cfg.Classes = a, 6, classes
			t.Run(string(a)+"/"+strings.Join(classes, ","), func(t *testing.T) {
				want := snap(train(t, cfg, 301).State())
				if a == learner.AROW && cfg.Multiclass() && len(want.State.VarianceBiases) != 4 {
					t.Fatalf("bias variances %v, want one per class", want.State.VarianceBiases)
				}
				data, err := snapshot.Marshal(want)
				if err != nil {
					t.Fatal(err)
				}
				got, err := snapshot.Unmarshal(data)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("round trip changed the snapshot:\n got %+v\nwant %+v", got.State, want.State)
				}
				if again, err := snapshot.Marshal(got); err != nil || !bytes.Equal(again, data) {
					t.Fatalf("encoding is not deterministic (err %v)", err)
				}
				raw, err := snapshot.Unseal(data)
				if err != nil {
					t.Fatal(err)
				}
				var body map[string]any
				if err := msgpack.Unmarshal(raw, &body); err != nil {
					t.Fatal(err)
				}
				_, has := body["variance_biases"]
				if want := a == learner.AROW && cfg.Multiclass(); has != want {
					t.Fatalf("variance_biases key present: %v, want %v", has, want)
				}
			})
		}
	}
}
