package curve_test

import (
	"bytes"
	"encoding/xml"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/curve"
)

// TestWriteComparisonSVG draws a contest of two challengers: a
// well-formed SVG that names both, the same bytes for the same contest.
func TestWriteComparisonSVG(t *testing.T) {
	draw := func() []byte {
		cfg := learner.DefaultConfig()
		cfg.HashBits = 8
		perceptron := cfg
		perceptron.Algorithm = learner.Perceptron
		seed := cfg
		seed.HashSeed = 3
		c, err := compare.NewContest(compare.Entrant{Name: "model", Config: cfg},
			[]compare.Entrant{{Name: "perceptron-challenger", Config: perceptron}, {Name: "seed-challenger", Config: seed}}, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 1))
		x := &learner.Example{Labeled: true}
		xs := make([]*learner.Example, len(c.Hashings()))
		for i := range xs {
			xs[i] = x
		}
		for range 3000 {
			x.Index, x.Value = x.Index[:0], x.Value[:0]
			var score float64
			for range 5 {
				i := uint32(r.IntN(256))
				v := r.Float64()
				x.Index, x.Value = append(x.Index, i), append(x.Value, v)
				score += v * (float64(i%7) - 3)
			}
			x.Label = 1
			if score < 0 {
				x.Label = -1
			}
			c.Learn(xs)
		}
		var b bytes.Buffer
		if err := curve.WriteComparisonSVG(&b, 0.05, []string{"perceptron-challenger", "seed-challenger"}, c.Traces()); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	svg := draw()
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Fatalf("not well-formed XML: %v", err)
	}
	for _, want := range []string{"<svg", "perceptron-challenger", "seed-challenger", "95% confidence sequence"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("the chart lacks %q", want)
		}
	}
	if !bytes.Equal(svg, draw()) {
		t.Error("two charts of the same contest differ")
	}
}
