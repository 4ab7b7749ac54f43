package learner_test

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// labelsConfigs are a model of each kind of labels.
func labelsConfigs() (binary, named, multi learner.Config) {
	binary = perceptronConfig()
	named, multi = binary, binary
	named.Classes = []string{"neg", "pos"}
	multi.Classes = []string{"cat", "dog", "bird"}
	return binary, named, multi
}

func TestLabelsParse(t *testing.T) {
	binary, named, multi := labelsConfigs()
	const refused = math.MinInt
	tests := []struct {
		name  string
		cfg   learner.Config
		parse func(learner.Labels) (int, bool)
		want  int // refused if the value is no label
	}{
		{"binary 1", binary, num(1), 1},
		{"binary -1", binary, num(-1), -1},
		{"binary 0", binary, num(0), -1},
		{"binary -0", binary, num(math.Copysign(0, -1)), -1},
		{"binary 2", binary, num(2), refused},
		{"binary 0.5", binary, num(0.5), refused},
		{"binary NaN", binary, num(math.NaN()), refused},
		{"binary true", binary, boolean(true), 1},
		{"binary false", binary, boolean(false), -1},
		{"binary name", binary, name("1"), refused},
		{"binary empty name", binary, name(""), refused},
		{"named 1", named, num(1), 1},
		{"named 0", named, num(0), -1},
		{"named 3", named, num(3), refused},
		{"named true", named, boolean(true), 1},
		{"named false", named, boolean(false), -1},
		{"named negative", named, name("neg"), -1},
		{"named positive", named, name("pos"), 1},
		{"named prefix", named, name("po"), refused},
		{"named longer", named, name("post"), refused},
		{"multi 0", multi, num(0), 0},
		{"multi 2", multi, num(2), 2},
		{"multi 2.0", multi, num(2.0), 2},
		{"multi 3", multi, num(3), refused},
		{"multi -1", multi, num(-1), refused},
		{"multi 1.5", multi, num(1.5), refused},
		{"multi NaN", multi, num(math.NaN()), refused},
		{"multi +Inf", multi, num(math.Inf(1)), refused},
		{"multi 2^64", multi, num(1 << 64), refused},
		{"multi true", multi, boolean(true), refused},
		{"multi false", multi, boolean(false), refused},
		{"multi cat", multi, name("cat"), 0},
		{"multi bird", multi, name("bird"), 2},
		{"multi fish", multi, name("fish"), refused},
		{"stars 1", classes("1", "2", "3"), num(1), 0},
		{"stars 3", classes("1", "2", "3"), num(3), 2},
		{"stars name 3", classes("1", "2", "3"), name("3"), 2},
		{"stars 0 is no index", classes("1", "2", "3"), num(0), refused},
		{"stars 3.5", classes("1", "2", "3"), num(3.5), refused},
		{"stars 1e300", classes("1", "2", "3"), num(1e300), refused},
		{"indexes 1", classes("0", "1", "2"), num(1), 1},
		{"negative -1", classes("-1", "0", "1"), num(-1), 0},
		{"a zero-padded name is not a number", classes("01", "02", "03"), num(1), 1},
		{"mixed 1", classes("cat", "1", "dog"), num(1), 1},
		{"mixed 0 is no index", classes("cat", "1", "dog"), num(0), refused},
		{"binary 1 named first", classes("1", "0"), num(1), -1},
		{"binary 0 named second", classes("1", "0"), num(0), 1},
		{"binary -1 by convention", classes("1", "0"), num(-1), -1},
		{"binary in order", classes("0", "1"), num(1), 1},
		{"binary true named first", classes("true", "false"), boolean(true), -1},
		{"binary false named second", classes("true", "false"), boolean(false), 1},
		{"multi named true", classes("false", "true", "unsure"), boolean(true), 1},
		{"multi named false", classes("false", "true", "unsure"), boolean(false), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			got, ok := tt.parse(tt.cfg.Labels())
			switch {
			case tt.want == refused && ok:
				t.Errorf("label %d, want the value refused", got)
			case tt.want != refused && (!ok || got != tt.want):
				t.Errorf("label %d (ok %v), want %d", got, ok, tt.want)
			}
		})
	}
}

func num(v float64) func(learner.Labels) (int, bool) {
	return func(l learner.Labels) (int, bool) { return l.ParseNumber(v) }
}

func boolean(v bool) func(learner.Labels) (int, bool) {
	return func(l learner.Labels) (int, bool) { return l.ParseBool(v) }
}

func name(s string) func(learner.Labels) (int, bool) {
	return func(l learner.Labels) (int, bool) { return l.ParseName([]byte(s)) }
}

func TestLabelsProblems(t *testing.T) {
	binary, named, multi := labelsConfigs()
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"binary number", binary.Labels().NumberProblem(2, "2"), "2 is not a binary label (want 1/-1, 0/1 or true/false; more classes are named in model.learner.classes, train's -classes)"},
		{"binary name", binary.Labels().NameProblem(`"1"`), `"1" is not a binary label (want 1/-1, 0/1 or true/false; more classes are named in model.learner.classes, train's -classes)`},
		{"binary type", binary.Labels().TypeProblem("array"), "value is not a number, boolean or class name (got array)"},
		{"named number", named.Labels().NumberProblem(3, "3"), `3 is not a binary label (want 1/-1, 0/1, true/false or "neg"/"pos")`},
		{"named name", named.Labels().NameProblem(`"maybe"`), `"maybe" is not a binary label (want 1/-1, 0/1, true/false or "neg"/"pos")`},
		{"named type", named.Labels().TypeProblem("map"), "value is not a number, boolean or class name (got map)"},
		{"multi fraction", multi.Labels().NumberProblem(1.5, "1.5"), `1.5 is not a class (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi out of range", multi.Labels().NumberProblem(3, "3e0"), `class 3e0 is out of range (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi negative", multi.Labels().NumberProblem(-1, "-1"), `class -1 is out of range (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi true", multi.Labels().BoolProblem(true), `true is not a class (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi false", multi.Labels().BoolProblem(false), `false is not a class (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi name", multi.Labels().NameProblem(`"fish"`), `unknown class "fish" (want a class name ("cat", "dog", "bird") or an integer from 0 to 2)`},
		{"multi type", multi.Labels().TypeProblem("object"), "value is not a class name or index (got object)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestLabelsClass(t *testing.T) {
	binary, named, multi := labelsConfigs()
	tests := []struct {
		cfg   learner.Config
		label int
		name  string // "" for none
	}{
		{binary, 1, ""},
		{binary, -1, ""},
		{named, 1, "pos"},
		{named, -1, "neg"},
		{multi, 0, "cat"},
		{multi, 2, "bird"},
	}
	for _, tt := range tests {
		l := tt.cfg.Labels()
		got, ok := l.Class(tt.label)
		if got != tt.name || ok != (tt.name != "") {
			t.Errorf("classes %v, label %d: %q (ok %v), want %q", tt.cfg.Classes, tt.label, got, ok, tt.name)
		}
		if l.Multiclass() != tt.cfg.Multiclass() {
			t.Errorf("classes %v: Multiclass %v, the config says %v", tt.cfg.Classes, l.Multiclass(), tt.cfg.Multiclass())
		}
	}
}

// TestLabelsRoundTrip: every label of a model parses back from its class
// name and from its number.
func TestLabelsRoundTrip(t *testing.T) {
	_, named, multi := labelsConfigs()
	for _, cfg := range []learner.Config{named, multi} {
		l := cfg.Labels()
		labels := []int{-1, 1}
		if l.Multiclass() {
			labels = []int{0, 1, 2}
		}
		for _, label := range labels {
			name, _ := l.Class(label)
			if got, ok := l.ParseName([]byte(name)); !ok || got != label {
				t.Errorf("classes %v: %q parses to %d (ok %v), want %d", cfg.Classes, name, got, ok, label)
			}
			if got, ok := l.ParseNumber(float64(label)); !ok || got != label {
				t.Errorf("classes %v: %d parses to %d (ok %v)", cfg.Classes, label, got, ok)
			}
		}
	}
}

func TestZeroLabelsAreBinaryWithoutNames(t *testing.T) {
	var zero learner.Labels
	binary, _, _ := labelsConfigs()
	want := binary.Labels()
	for _, v := range []float64{1, -1, 0, 2} {
		y, ok := zero.ParseNumber(v)
		wy, wok := want.ParseNumber(v)
		if y != wy || ok != wok {
			t.Errorf("%v: %d, %v; want %d, %v", v, y, ok, wy, wok)
		}
	}
	if _, ok := zero.Class(1); ok || zero.Multiclass() {
		t.Error("the zero Labels have class names or are multiclass")
	}
}

// TestLabelsKeepTheirClasses: changing the config's classes afterwards
// does not change the labels.
func TestLabelsKeepTheirClasses(t *testing.T) {
	_, named, multi := labelsConfigs()
	for _, cfg := range []learner.Config{named, multi} {
		cfg.Classes = append([]string(nil), cfg.Classes...)
		l := cfg.Labels()
		first := cfg.Classes[0]
		cfg.Classes[0] = "changed"
		label := -1 // the first class of a binary model
		if l.Multiclass() {
			label = 0
		}
		if got, _ := l.Class(label); got != first {
			t.Errorf("class of the first label %q after the config changed, want %q", got, first)
		}
	}
}

func TestLabelsParseDoesNotAllocate(t *testing.T) {
	// A name longer than the 32 bytes that a conversion to string may
	// keep on the stack.
	long := []byte("a class name longer than thirty-two bytes")
	named, multi := perceptronConfig(), perceptronConfig()
	named.Classes = []string{"neg", string(long)}
	multi.Classes = []string{"cat", "dog", string(long)}
	numbered := perceptronConfig()
	numbered.Classes = []string{"1", "true", string(long)}
	for _, cfg := range []learner.Config{named, multi, numbered} {
		l := cfg.Labels()
		allocs := testing.AllocsPerRun(100, func() {
			if _, ok := l.ParseName(long); !ok {
				t.Fatal("refused the long name")
			}
			l.ParseName([]byte("nope"))
			l.ParseNumber(1)
			l.ParseBool(true)
		})
		if allocs != 0 {
			t.Errorf("classes %v: %v allocations, want 0", cfg.Classes, allocs)
		}
	}
}

func ExampleConfig_Labels() {
	cfg := perceptronConfig()
	cfg.Classes = []string{"ham", "spam"}
	labels := cfg.Labels()

	y, _ := labels.ParseName([]byte("spam"))
	fmt.Println(y)
	y, _ = labels.ParseNumber(0)
	fmt.Println(y)
	name, _ := labels.Class(-1)
	fmt.Println(name)
	if _, ok := labels.ParseName([]byte("eggs")); !ok {
		fmt.Println(labels.NameProblem(`"eggs"`))
	}
	// Output:
	// 1
	// -1
	// ham
	// "eggs" is not a binary label (want 1/-1, 0/1, true/false or "ham"/"spam")
}

// TestLabelsNamedByNumbers checks that a class named by an integer or a
// boolean is the same label as a name and as a number (TestLabelsParse
// has the cases of each kind).
func TestLabelsNamedByNumbers(t *testing.T) {
	for _, names := range [][]string{{"1", "2", "3"}, {"1", "0"}, {"0", "1"}, {"3", "1", "2", "0"}, {"-1", "1"}} {
		c := classes(names...)
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		l := c.Labels()
		for _, name := range names {
			byName, ok1 := l.ParseName([]byte(name))
			v, _ := strconv.ParseFloat(name, 64)
			byNumber, ok2 := l.ParseNumber(v)
			if !ok1 || !ok2 || byName != byNumber {
				t.Errorf("classes %v: %q is label %d (%v) as a name, %d (%v) as a number", names, name, byName, ok1, byNumber, ok2)
			}
		}
	}
	if got, want := classes("1", "2", "3").Labels().NumberProblem(0, "0"), `0 is not a class (want a class name ("1", "2", "3"): the classes named by numbers are read by name, not by index)`; got != want {
		t.Errorf("problem %q, want %q", got, want)
	}
}

// A multiclass model with classes named by numbers reads no integer as an
// index: a refusal of a fraction, a boolean or a value of the wrong type
// does not offer the indexes as labels it would take.
func TestLabelsProblemsNumberedOfferNoIndex(t *testing.T) {
	l := classes("1", "2", "3", "4", "5").Labels()
	const want = `want a class name ("1", "2", "3", "4", "5"): the classes named by numbers are read by name, not by index`
	for _, got := range []string{l.NumberProblem(3.5, "3.5"), l.BoolProblem(true), l.BoolProblem(false)} {
		if !strings.Contains(got, want) || strings.Contains(got, "from 0 to") {
			t.Errorf("problem %q, want it to say %q", got, want)
		}
	}
	if got, want := l.TypeProblem("array"), "value is not a class name (got array)"; got != want {
		t.Errorf("type problem %q, want %q", got, want)
	}
	mixed := classes("red", "2", "blue").Labels()
	if got := mixed.NumberProblem(0.5, "0.5"); strings.Contains(got, "from 0 to") {
		t.Errorf("problem %q offers indexes a model with a class named by a number does not take", got)
	}
}

// classes is a model of the classes names.
func classes(names ...string) learner.Config {
	c := perceptronConfig()
	c.Classes = names
	return c
}

// TestLabelsProblemsListTheClasses: a label that is no class is refused
// with the model's classes listed, the first ten of a longer list and
// how many more there are.
func TestLabelsProblemsListTheClasses(t *testing.T) {
	names := make([]string, 12)
	for i := range names {
		names[i] = fmt.Sprintf("c%d", i)
	}
	got := classes(names...).Labels().NameProblem(`"x"`)
	const want = `unknown class "x" (want a class name ("c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9" and 2 more) or an integer from 0 to 11)`
	if got != want {
		t.Errorf("problem %q, want %q", got, want)
	}
}
