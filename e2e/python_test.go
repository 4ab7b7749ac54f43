package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// pythonEnv, when set, makes TestPythonExample fail rather than skip
// without a Python that has msgpack; .ci/run sets it after installing
// Debian's python3-msgpack.
const pythonEnv = "HYPERPLANE_E2E_REQUIRE_PYTHON"

// pythonWithMsgpack is a Python 3 interpreter that can import msgpack:
// the one on PATH, or the system's.
func pythonWithMsgpack(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import msgpack").Run() == nil {
			return py
		}
	}
	if os.Getenv(pythonEnv) != "" {
		t.Fatal("no python3 with the msgpack package (Debian: apt-get install python3-msgpack)")
	}
	t.Skipf("no python3 with the msgpack package: install Debian's python3-msgpack to run the documentation's Python example (%s=1 makes this an error)", pythonEnv)
	return ""
}

// docExample is the Python example of docs/snapshot-format.md.
func docExample(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "snapshot-format.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- begin: predict.py -->\n```python\n", "```\n<!-- end: predict.py -->"
	_, rest, ok := strings.Cut(string(doc), begin)
	if !ok {
		t.Fatal("docs/snapshot-format.md has no Python example")
	}
	code, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatal("the Python example in docs/snapshot-format.md does not end")
	}
	path := filepath.Join(t.TempDir(), "predict.py")
	if err := os.WriteFile(path, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// scored is a prediction, from the worker or the Python example. Score is
// a number, or an object of class name to number for a multiclass model;
// a binary model's Probability is P(+1), a multiclass one's
// Probabilities an object of class name to probability.
type scored struct {
	ID            string          `json:"id"`
	Predicted     json.RawMessage `json:"predicted"`
	Score         json.RawMessage `json:"score"`
	Probability   json.RawMessage `json:"probability"`
	Probabilities json.RawMessage `json:"probabilities"`
}

// same reports whether the Python example's prediction p is w's: the
// label, the scores within rounding (it adds in another order than the
// learner), and the calibrated probabilities within what that rounding
// moves them.
func (p scored) same(w scored) bool {
	if string(p.Predicted) != string(w.Predicted) || !sameScores(p.Score, w.Score) {
		return false
	}
	if w.Probabilities != nil {
		return sameNumbers(p.Probabilities, w.Probabilities, 1e-7)
	}
	return sameNumbers(p.Probability, w.Probability, 1e-7)
}

// sameScores reports whether two scores agree within rounding: the Python
// example adds in another order than the learner.
func sameScores(a, b json.RawMessage) bool { return sameNumbers(a, b, 1e-9) }

// sameNumbers reports whether a and b, each a number or an object of names
// to numbers, agree within tol, relative to numbers above 1.
func sameNumbers(a, b json.RawMessage, tol float64) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	near := func(p, q float64) bool { return math.Abs(p-q) <= tol*math.Max(1, math.Abs(q)) }
	switch x := x.(type) {
	case float64:
		y, ok := y.(float64)
		return ok && near(x, y)
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			p, ok1 := v.(float64)
			q, ok2 := y[k].(float64)
			if !ok1 || !ok2 || !near(p, q) {
				return false
			}
		}
		return true
	}
	return false
}

// runPython runs the example script on the snapshot file with examples on
// its standard input, and returns its predictions by example id.
func runPython(t *testing.T, py, script, file string, examples [][]byte) map[string]scored {
	t.Helper()
	var stdin bytes.Buffer
	for _, u := range examples {
		stdin.Write(u)
		stdin.WriteByte('\n')
	}
	cmd := exec.Command(py, script, file)
	cmd.Stdin = &stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s %s: %v\n%s", py, script, file, err, stderr.String())
	}
	return decodeScored(t, out)
}

func decodeScored(t *testing.T, out []byte) map[string]scored {
	t.Helper()
	byID := map[string]scored{}
	for line := range strings.Lines(string(out)) {
		var sc scored
		if err := json.Unmarshal([]byte(line), &sc); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		byID[sc.ID] = sc
	}
	return byID
}

// TestPythonExample runs the documentation's Python example on a snapshot
// the worker wrote, over examples without labels, and checks its scores
// and predictions against the ones the worker published for the same
// examples after resuming from that snapshot (unlabeled examples do not
// change the model).
func TestPythonExample(t *testing.T) {
	py := pythonWithMsgpack(t)
	script := docExample(t)
	ctx := testContext(t)
	t.Setenv("HYPERPLANE_E2E_NATS_URL", "")
	ns := startNATS(t)
	prefix := uniquePrefix("PY")
	js, _ := ns.streams(ctx, prefix)
	in := makeInput(3000, 21, 0)
	dir := t.TempDir()
	cfg := snapshotConfig(t, ns, prefix, "file://"+dir)
	// The averaged perceptron with normalised examples: the example's
	// every step matters.
	flags := []string{"run", "--config", cfg, "--model.learner.algorithm", "averaged", "--model.learner.normalize=true"}

	publishAll(t, ctx, js, prefix+".IN", in.messages)
	p := start(t, flags...)
	wait.For(t, time.Minute, 50*time.Millisecond, "every prediction", func() bool { return count(t, ctx, js, prefix+"_PRED") >= in.valid() })
	p.stop()

	latest := latestSnapshot(t, "file://"+dir)
	file := filepath.Join(dir, filepath.FromSlash(snapshot.Key("", "e2e", latest.Generation)))

	// Unlabeled examples: generated ones, and categorical and dense
	// features.
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled, o.Vocab = 22, 1, 500
	gen := synth.New(o)
	var unlabeled [][]byte
	for range 200 {
		b := synth.AppendJSON(nil, gen.Next())
		unlabeled = append(unlabeled, b[:len(b)-1])
	}
	unlabeled = append(unlabeled,
		[]byte(`{"id": "categorical", "features": {"color": "red", "f3": 0.5, "f7": -2}}`),
		[]byte(`{"id": "dense", "x": [0.25, 1, -3], "features": {"f1": 1}}`),
	)
	python := runPython(t, py, script, file, unlabeled)
	if len(python) != len(unlabeled) {
		t.Fatalf("python scored %d examples, want %d", len(python), len(unlabeled))
	}

	publishAll(t, ctx, js, prefix+".IN", unlabeled)
	p = start(t, flags...)
	want := in.valid() + len(unlabeled)
	wait.For(t, time.Minute, 50*time.Millisecond, "the predictions of the unlabeled examples", func() bool { return count(t, ctx, js, prefix+"_PRED") >= want })
	p.stop()
	events := readAll(t, ctx, js, prefix+"_PRED")
	compared := 0
	for _, v := range events[in.valid():] {
		var w scored
		if err := json.Unmarshal(v, &w); err != nil {
			t.Fatal(err)
		}
		py, ok := python[w.ID]
		if !ok {
			t.Fatalf("the worker predicted %q, which python did not", w.ID)
		}
		if !py.same(w) {
			t.Errorf("%s: python predicts %s with score %s and probability %s, the worker %s with %s and %s", w.ID,
				py.Predicted, py.Score, py.Probability, w.Predicted, w.Score, w.Probability)
		}
		compared++
	}
	if compared != len(unlabeled) {
		t.Fatalf("compared %d predictions, want %d", compared, len(unlabeled))
	}
	t.Logf("python and the worker agree on %d examples (generation %d, %d labeled)", compared, latest.Generation, latest.State.Labeled)
}

// TestPythonExampleModels runs the documentation's Python example on
// models of the other shapes it covers, trained by hyperplane train:
// multiclass with class names, binary with class names, the scaled
// weights of pegasos, mini-batch mode, a hash seed, and the default
// learner (arow) with no flag. Its predictions must
// be those of hyperplane predict.
func TestPythonExampleModels(t *testing.T) {
	py := pythonWithMsgpack(t)
	script := docExample(t)
	dir := t.TempDir()
	cases := []struct {
		name  string
		gen   []string
		train []string
	}{
		{"multiclass averaged", []string{"-classes", "3"}, []string{"-algorithm", "averaged", "-classes", "red,green,blue"}},
		{"multiclass pa1 normalized", []string{"-classes", "4"}, []string{"-algorithm", "pa1", "-classes", "4", "-normalize"}},
		{"binary names pegasos", nil, []string{"-algorithm", "pegasos", "-classes", "neg,pos"}},
		{"perceptron r2 batch seed", nil, []string{"-algorithm", "perceptron", "-bias", "r2", "-batch", "8", "-hash-seed", "42"}},
		{"the default", nil, nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			train := filepath.Join(dir, fmt.Sprintf("train%d.jsonl", i))
			test := filepath.Join(dir, fmt.Sprintf("test%d.jsonl", i))
			model := filepath.Join(dir, fmt.Sprintf("model%d.msgpack", i))
			writeOutput(t, train, append([]string{"gen", "-examples", "3000", "-seed", fmt.Sprint(30 + i)}, c.gen...)...)
			writeOutput(t, test, append([]string{"gen", "-examples", "100", "-unlabeled", "1", "-seed", fmt.Sprint(40 + i)}, c.gen...)...)
			if out, err := exec.Command(hyperplane.path, append([]string{"train", "-input", train, "-out", model, "-hash-bits", "14"}, c.train...)...).CombinedOutput(); err != nil {
				t.Fatalf("train: %v\n%s", err, out)
			}
			want, err := exec.Command(hyperplane.path, "predict", "-model", model, "-input", test).Output()
			if err != nil {
				t.Fatalf("predict: %v", err)
			}
			examples, err := os.ReadFile(test)
			if err != nil {
				t.Fatal(err)
			}
			got := runPython(t, py, script, model, bytes.Split(bytes.TrimSpace(examples), []byte("\n")))
			workers := decodeScored(t, want)
			if len(got) != len(workers) || len(got) != 100 {
				t.Fatalf("python scored %d examples, hyperplane predict %d, want 100", len(got), len(workers))
			}
			for id, w := range workers {
				if p := got[id]; !p.same(w) {
					t.Errorf("%s: python predicts %s with %s (probability %s%s), hyperplane %s with %s (%s%s)", id,
						p.Predicted, p.Score, p.Probability, p.Probabilities, w.Predicted, w.Score, w.Probability, w.Probabilities)
				}
			}
		})
	}
}

// writeOutput writes what hyperplane prints for args to path.
func writeOutput(t *testing.T, path string, args ...string) {
	t.Helper()
	out, err := exec.Command(hyperplane.path, args...).Output()
	if err != nil {
		t.Fatalf("hyperplane %v: %v", args, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPythonExampleRepeatedNames: a feature named twice in one example is
// two features to the worker, whose values add; the documentation's
// Python example must read it so, not keep the last as a dict does.
func TestPythonExampleRepeatedNames(t *testing.T) {
	py := pythonWithMsgpack(t)
	script := docExample(t)
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	model := filepath.Join(dir, "model.msgpack")
	test := filepath.Join(dir, "test.jsonl")
	writeOutput(t, train, "gen", "-examples", "3000", "-seed", "50")
	if out, err := exec.Command(hyperplane.path, "train", "-input", train, "-out", model, "-hash-bits", "14").CombinedOutput(); err != nil {
		t.Fatalf("train: %v\n%s", err, out)
	}
	examples := [][]byte{
		[]byte(`{"id": "twice", "features": {"f1": 1, "f1": 1, "f2": -1}}`),
		[]byte(`{"id": "twice categorical", "features": {"f3": "a", "f3": "b", "f3": 0.5}}`),
		[]byte(`{"id": "once", "features": {"f1": 2, "f2": -1}}`),
	}
	if err := os.WriteFile(test, append(bytes.Join(examples, []byte("\n")), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command(hyperplane.path, "predict", "-model", model, "-input", test).Output()
	if err != nil {
		t.Fatalf("predict: %v", err)
	}
	got := runPython(t, py, script, model, examples)
	workers := decodeScored(t, want)
	if len(got) != len(examples) || len(workers) != len(examples) {
		t.Fatalf("python scored %d examples, hyperplane predict %d, want %d", len(got), len(workers), len(examples))
	}
	for id, w := range workers {
		if p := got[id]; !p.same(w) {
			t.Errorf("%s: python predicts %s with %s (probability %s), hyperplane %s with %s (%s)", id,
				p.Predicted, p.Score, p.Probability, w.Predicted, w.Score, w.Probability)
		}
	}
	if string(workers["twice"].Score) != string(workers["once"].Score) {
		t.Errorf("f1 twice scores %s, f1 at 2 scores %s", workers["twice"].Score, workers["once"].Score)
	}
}
