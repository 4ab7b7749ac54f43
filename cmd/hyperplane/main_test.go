package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// runCmd runs the program with args and returns its output.
func runCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, stderr, err := runCmd(t, stdin, args...)
	if err != nil {
		t.Fatalf("hyperplane %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// listening finds the address in a run's "http listening" line, in
// either log format.
var listening = regexp.MustCompile(`http listening.*"addr": ?"([^"]+)"`)

// listenedAddr is the address a run with --http.addr 127.0.0.1:0 listens
// on, once its log says, or "" before. The system chooses the port as the
// run listens: a port chosen by the test and freed for the run could be
// taken by another process in between.
func listenedAddr(log fmt.Stringer) string {
	if m := listening.FindStringSubmatch(log.String()); m != nil {
		return m[1]
	}
	return ""
}

// waitRunning waits for cond as wait.For does while a run goes on: it
// fails the test if the run stops first (stopped yields its error), and
// shows the run's log if the wait fails.
func waitRunning(t *testing.T, timeout time.Duration, what string, stopped <-chan error, log fmt.Stringer, cond func() bool) {
	t.Helper()
	waited := false
	defer func() {
		if !waited {
			t.Logf("the run's log:\n%s", log)
		}
	}()
	wait.For(t, timeout, 50*time.Millisecond, what, func() bool {
		if cond() {
			return true
		}
		select {
		case err := <-stopped:
			t.Fatalf("run stopped: %v", err)
		default:
		}
		return false
	})
	waited = true
}

func genFile(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(mustRun(t, "", append([]string{"gen"}, args...)...)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTrainPrintsOneJSONLine(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "3000", "-seed", "4", "-unlabeled", "0.1", "-vocab", "300")
	out := mustRun(t, "", "train", "-input", data, "-hash-bits", "14")
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want exactly one line, got %q", out)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(out), &line); err != nil {
		t.Fatal(err)
	}
	// Every key a number but drifts, the examples where a change of
	// concept was found: none in this stream.
	got := map[string]float64{}
	var keys []string
	for k, v := range line {
		keys = append(keys, k)
		if n, ok := v.(float64); ok {
			got[k] = n
		}
	}
	for _, k := range []string{"examples", "invalid", "labeled", "mistakes", "accuracy", "updates", "seconds", "examples_per_second", "log_loss", "brier", "calibration_error", "auc"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no number %q in %s", k, out)
		}
	}
	if d, ok := line["drifts"].([]any); !ok || len(d) != 0 {
		t.Errorf("drifts %v, want an empty list: %s", line["drifts"], out)
	}
	if len(line) != 13 {
		t.Errorf("keys %v, want exactly the thirteen documented", keys)
	}
	if got["examples"] != 3000 || got["labeled"] < 2500 || got["labeled"] > 2900 {
		t.Errorf("counts wrong: %s", out)
	}
	if acc := 1 - got["mistakes"]/got["labeled"]; acc != got["accuracy"] || acc < 0.6 {
		t.Errorf("accuracy %v (mistakes/labeled gives %v): %s", got["accuracy"], acc, out)
	}
	if got["updates"] < got["mistakes"] {
		t.Errorf("fewer updates than mistakes for the perceptron: %s", out)
	}
}

// TestTrainMatchesTheLearner checks that train, which decodes in
// parallel, feeds the model exactly the stream in order: its model file
// equals a model trained one example at a time here.
func TestTrainMatchesTheLearner(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"jsonl", "msgpack"} {
		data := genFile(t, dir, "ex."+format, "-examples", "5000", "-seed", "8", "-format", format, "-classes", "3")
		modelPath := filepath.Join(dir, format+".model")
		mustRun(t, "", "train", "-input", data, "-hash-bits", "12", "-algorithm", "averaged", "-classes", "3", "-passes", "2", "-out", modelPath, "-workers", "2")
		s := readModel(t, modelPath)

		cfg := learner.DefaultConfig()
		cfg.HashBits, cfg.Algorithm, cfg.Classes = 12, learner.Averaged, []string{"0", "1", "2"}
		m, err := learner.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			f, err := os.Open(data)
			if err != nil {
				t.Fatal(err)
			}
			decodeAll(t, f, format, cfg, m)
			f.Close()
		}
		if !reflect.DeepEqual(s.State, m.State()) {
			t.Fatalf("%s: train's model differs from a sequential run", format)
		}
		if m.Metrics().Labeled != 10000 {
			t.Fatalf("%s: %d labeled examples learned, want 10000", format, m.Metrics().Labeled)
		}
	}
}

func readModel(t *testing.T, path string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPredict(t *testing.T) {
	dir := t.TempDir()
	train := genFile(t, dir, "train.jsonl", "-examples", "4000", "-seed", "1")
	test := genFile(t, dir, "test.jsonl", "-examples", "500", "-seed", "1", "-unlabeled", "0.5")
	modelPath := filepath.Join(dir, "m.model")
	mustRun(t, "", "train", "-input", train, "-out", modelPath, "-name", "clicks")
	out := mustRun(t, "", "predict", "-model", modelPath, "-input", test)
	sc := bufio.NewScanner(strings.NewReader(out))
	n, labeled := 0, 0
	for sc.Scan() {
		n++
		var ev struct {
			EventID   string  `json:"event_id"`
			ID        string  `json:"id"`
			Predicted int     `json:"predicted"`
			Score     float64 `json:"score"`
			Label     *int    `json:"label"`
			Correct   *bool   `json:"correct"`
			Model     struct {
				Name    string
				Version uint64
			}
			Position struct {
				Source string
				Offset int64
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		if ev.Position.Offset != int64(n) || ev.EventID != "file:"+test+"/"+ev.ID || ev.ID != strings.TrimLeft(ev.EventID[strings.LastIndex(ev.EventID, "/")+1:], "0") {
			t.Fatalf("line %d: ids and positions disagree: %s", n, sc.Text())
		}
		if (ev.Score >= 0) != (ev.Predicted == 1) || ev.Model.Name != "clicks" || ev.Model.Version == 0 {
			t.Fatalf("line %d: %s", n, sc.Text())
		}
		if (ev.Label == nil) != (ev.Correct == nil) {
			t.Fatalf("line %d: label and correct must come together: %s", n, sc.Text())
		}
		if ev.Label != nil {
			labeled++
			if *ev.Correct != (*ev.Label == ev.Predicted) {
				t.Fatalf("line %d: correct is wrong: %s", n, sc.Text())
			}
		}
	}
	if n != 500 || labeled < 200 || labeled > 300 {
		t.Fatalf("%d predictions, %d labeled; want 500, about 250", n, labeled)
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "1000")
	modelPath := filepath.Join(dir, "m.model")
	mustRun(t, "", "train", "-input", data, "-out", modelPath, "-hash-bits", "10")
	var sum snapshot.Summary
	if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", modelPath)), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Format != snapshot.Format || sum.Config.HashBits != 10 || sum.Metrics.Examples != 1000 || sum.Weights == nil || sum.Weights.Count != 1024 || len(sum.Largest) != 20 {
		t.Fatalf("summary %+v", sum)
	}
}

func TestTrainFromStdin(t *testing.T) {
	data := mustRun(t, "", "gen", "-examples", "200", "-format", "msgpack")
	out := mustRun(t, data, "train", "-input", "-")
	if !strings.Contains(out, `"examples":200`) {
		t.Fatalf("got %s", out)
	}
}

func TestBadInputIsSkippedAndNamed(t *testing.T) {
	input := `{"label":1,"features":{"a":1}}
{"label":1,"features":{"a":"x","b":[1]}}
not json
{"label":7,"features":{"a":1}}
{"label":-1,"features":{"a":2}}
`
	out, stderr, err := runCmd(t, input, "train", "-input", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"examples":2,`) {
		t.Errorf("want the two good examples learned, got %s", out)
	}
	for _, want := range []string{"record 2: features.b", "record 3:", "record 4: label"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	data := genFile(t, dir, "ex.jsonl", "-examples", "10")
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"fly"}, `unknown command "fly"`},
		{[]string{"train"}, "-input: required"},
		{[]string{"train", "-input", data, "-eta", "abc"}, "-eta"},
		{[]string{"train", "-input", data, "-eta", "-1"}, "-eta: must be a positive number"},
		{[]string{"train", "-input", data, "-hash-bits", "40"}, "-hash-bits: must be between 1 and 30"},
		{[]string{"train", "-input", data, "-algorithm", "svm"}, `-algorithm: unknown algorithm "svm"`},
		{[]string{"train", "-input", data, "-format", "xml"}, "-format: unknown format"},
		{[]string{"train", "-input", data, "-passes", "0"}, "-passes: must be at least 1"},
		{[]string{"train", "-input", "-", "-passes", "2"}, "-passes: 2 passes need a file"},
		{[]string{"train", "-input", data, "-classes", "a"}, "-classes: one class"},
		{[]string{"train", "-input", data, "-nope"}, "unknown flag -nope"},
		{[]string{"train", "-input", data, "-out", filepath.Join(dir, "none", "m.msgpack")}, "-out " + filepath.Join(dir, "none", "m.msgpack") + ": directory"},
		{[]string{"train", "-input", data, "-curve", filepath.Join(data, "c.csv")}, "-curve " + filepath.Join(data, "c.csv") + ": " + data + " is not a directory"},
		{[]string{"predict", "-input", data}, "-model: required"},
		{[]string{"inspect"}, "want one model file"},
		{[]string{"inspect", data, "-top", "2"}, "inspect: -top after the model is not read as a flag: flags go before it (hyperplane inspect -top 2 " + data + ")"},
		{[]string{"gen", "-noise", "2"}, "-noise: must be a probability"},
		{[]string{"gen", "-format", "csv"}, "-format: unknown format"},
		{[]string{"gen", "-examples", "-3"}, "-examples: must be 0 or more"},
		{[]string{"run"}, "config: source.kind"},
		{[]string{"run", "--source.kind", "carrier-pigeon"}, "source.kind"},
		{[]string{"run", "--source.kind", "kafka", "--source.topics", "t"}, "kafka.brokers"},
		{[]string{"run", "--model.learner.eta", "-1"}, "model.learner.eta"},
		{[]string{"run", "--config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"run", "--colour", "red"}, "colour"},
		{[]string{"demo", "-examples", "0"}, "-examples: must be at least 1"},
		{[]string{"demo", "-examples", "10", "-http", "", "-data", data}, "-data " + data + ": "},
		{[]string{"demo", "-examples", "10", "-http", "", "-data", dir, "-noise", "2"}, "-noise: must be a probability"},
		{[]string{"demo", "-examples", "10", "-http", "", "-data", dir, "-noise", "-0.5"}, "-noise: must be a probability"},
		{[]string{"demo", "-examples", "10", "-http", "nonsense", "-data", dir}, `-http: "nonsense" is not host:port`},
		{[]string{"demo", "-examples", "10", "-http", ":99999", "-data", dir}, "-http: \":99999\": port"},
		{[]string{"demo", "-examples", "10", "-http", "", "-data", dir, "-label-delay", "50us"}, "-label-delay: must be 0s or at least 100µs"},
	}
	for _, c := range cases {
		_, _, err := runCmd(t, "", c.args...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("hyperplane %s: got %v, want a one-line usage error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestDemoBadFlagKeepsPreviousDemo: a bad -http stops the demo before it
// replaces the previous demo's snapshots.
func TestDemoBadFlagKeepsPreviousDemo(t *testing.T) {
	data := t.TempDir()
	previous := filepath.Join(data, "demo", "00000000000000000001.msgpack")
	if err := os.MkdirAll(filepath.Dir(previous), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(previous, []byte("the previous demo's"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCmd(t, "", "demo", "-examples", "10", "-http", "nonsense", "-data", data)
	var u *usageError
	if !errors.As(err, &u) || !strings.HasPrefix(err.Error(), "-http: ") {
		t.Fatalf("demo -http nonsense: got %v, want a usage error naming -http", err)
	}
	if out != "" {
		t.Errorf("demo -http nonsense started:\n%s", out)
	}
	if _, err := os.Stat(previous); err != nil {
		t.Errorf("the previous demo's snapshot: %v", err)
	}
}

// TestNoConfigFileSaysHowToGiveOne: a command that needs a configuration,
// run without --config or HYPERPLANE_CONFIG, says how to give a file
// beside the key it lacks; with a file, the error is the key's alone.
func TestNoConfigFileSaysHowToGiveOne(t *testing.T) {
	const hint = "no config file given: pass --config FILE"
	for _, args := range [][]string{{"run"}, {"setup"}, {"replay"}, {"compare"}, {"promote", "-challenger", "x"}, {"config"}, {"backtest", "-input", "-"}, {"run", "--source.kind", "kafka"}} {
		_, _, err := runCmd(t, "", args...)
		var u *usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), hint) {
			t.Errorf("hyperplane %s: got %v, want a usage error saying %q", strings.Join(args, " "), err, hint)
		}
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("model:\n  name: m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "--config", file}, {"setup", "-config=" + file}, {"backtest", "--config", file, "-input", "-"}} {
		_, _, err := runCmd(t, "", args...)
		if err == nil || strings.Contains(err.Error(), hint) {
			t.Errorf("hyperplane %s: got %v, want an error without %q", strings.Join(args, " "), err, hint)
		}
	}
}

func TestMissingAndCorruptModelFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.model")
	if err := os.WriteFile(bad, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCmd(t, "", "inspect", bad); !errors.Is(err, snapshot.ErrCorrupt) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("corrupt model: got %v", err)
	}
	if _, _, err := runCmd(t, "", "inspect", filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing model: got %v", err)
	}
}

func TestHelpAndVersion(t *testing.T) {
	if out := mustRun(t, "", "train", "-h"); !strings.Contains(out, "-hash-bits") || !strings.Contains(out, "-algorithm") {
		t.Errorf("train -h does not document the flags:\n%s", out)
	}
	if out := mustRun(t, "", "help"); !strings.Contains(out, "train") || !strings.Contains(out, "gen") {
		t.Errorf("help: %s", out)
	}
	// Unstamped, as go test builds it: what the toolchain recorded.
	info, _ := debug.ReadBuildInfo()
	if out, want := mustRun(t, "", "version"), "hyperplane "+buildVersion(info)+" go"; !strings.HasPrefix(out, want) {
		t.Errorf("version: %s, want %s...", out, want)
	}
}

// TestDemo runs the main job on its embedded default: everything it
// streams must come out as events.
func TestDemo(t *testing.T) {
	data := t.TempDir()
	out, stderr, err := runCmd(t, "", "demo", "-examples", "3000", "-garbage", "0.01", "-http", "", "-data", data)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr)
	}
	for _, want := range []string{"done: 2970 examples", "2970     prediction events", "30       dead-letter events", "misclassification events", "snapshots of the model in " + filepath.Join(data, "demo"), "at position 3000"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	// The snapshot the demo wrote is the model it trained, and inspect
	// reads it from its URL.
	var sum snapshot.Summary
	if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "file://"+data+"/demo")), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Metrics.Examples != 2970 || sum.Positions["jetstream:EXAMPLES"] != 3000 || sum.Model != "demo" {
		t.Fatalf("the demo's snapshot: %+v", sum)
	}
}

func TestGenIsReproducible(t *testing.T) {
	a := mustRun(t, "", "gen", "-examples", "50", "-seed", "3")
	b := mustRun(t, "", "gen", "-examples", "50", "-seed", "3")
	c := mustRun(t, "", "gen", "-examples", "50", "-seed", "4")
	if a != b || a == c || strings.Count(a, "\n") != 50 {
		t.Fatal("gen is not a reproducible function of its seed")
	}
}

// TestInterruptedCommandsSaySo interrupts commands before their end: each
// fails (exit status 1) saying that it was interrupted, not with the bare
// "context canceled" of the work it stopped.
func TestInterruptedCommandsSaySo(t *testing.T) {
	dir := t.TempDir()
	data, model := trainedOn(t, dir, 300)
	for _, args := range [][]string{
		{"train", "-input", data, "-out", filepath.Join(dir, "i.msgpack")},
		{"predict", "-model", model, "-input", data},
		{"gen", "-examples", "1000"},
		{"backtest", "--input", data, "--model.challengers", "p:algorithm=perceptron"},
	} {
		t.Run(args[0], func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // Ctrl-C as the command starts
			var out, errOut bytes.Buffer
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
			var u *usageError
			if err == nil || errors.As(err, &u) {
				t.Fatalf("%s: interrupted, returned %v; want an error of exit status 1", strings.Join(args, " "), err)
			}
			if want := args[0] + ": interrupted"; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "context canceled") {
				t.Errorf("%s: %q, want %q", strings.Join(args, " "), err, want+"...")
			}
		})
	}
}
