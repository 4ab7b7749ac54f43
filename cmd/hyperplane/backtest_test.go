package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestBacktest runs the command on a generated file: one JSON line per
// challenger, the perceptron found worse than AROW, the chart written,
// and the table's rows.
func TestBacktest(t *testing.T) {
	dir := t.TempDir()
	data := mustRun(t, "", "gen", "-examples", "20000", "-seed", "5")
	in := filepath.Join(dir, "in.jsonl")
	cfg := filepath.Join(dir, "c.yaml")
	svg := filepath.Join(dir, "c.svg")
	if err := os.WriteFile(in, []byte(data+"not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	yaml := "model:\n  name: arow\n  challengers:\n    - name: perceptron\n      algorithm: perceptron\n    - name: seed\n      hash_seed: 9\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCmd(t, "", "backtest", "--config", cfg, "--input", in, "--json", "--curve", svg)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "record 20001") {
		t.Errorf("the invalid record is not reported: %q", stderr)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["name"] != "perceptron" || lines[1]["name"] != "seed" {
		t.Fatalf("lines %v: want perceptron's and seed's", lines)
	}
	if lines[0]["high"].(float64) >= 0 || lines[0]["examples"].(float64) != 20000 {
		t.Errorf("perceptron against AROW over 20,000 examples: %v; want a band below zero", lines[0])
	}
	chart, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(chart), "<svg") || !strings.Contains(string(chart), "perceptron") {
		t.Errorf("chart: %v, %.200q", err, chart)
	}

	out, _, err = runCmd(t, "", "backtest", "--config", cfg, "--input", in, "--model.compare.alpha", "0.01")
	if err != nil || !strings.Contains(out, "99% confidence sequence") || !strings.Contains(out, "model better") {
		t.Errorf("table at alpha 0.01 (%v):\n%s", err, out)
	}
}

// TestBacktestFromTheLog reads the examples from a JetStream stream, as
// replay does: the whole log, and a range that leaves offset 201 and
// after out.
func TestBacktestFromTheLog(t *testing.T) {
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	mustRun(t, "", "gen", "-examples", "500", "-seed", "2", "-to", "jetstream:examples", "-nats-url", srv.URL())
	args := []string{"backtest", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--json",
		"--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=3"}
	for _, c := range []struct {
		to       []string
		examples float64
	}{{nil, 500}, {[]string{"--to", "offset:201"}, 200}} {
		out, stderr, err := runCmd(t, "", append(args, c.to...)...)
		if err != nil {
			t.Fatalf("backtest %q: %v\n%s", c.to, err, stderr)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, l := range lines {
			var m struct{ Examples float64 }
			if err := json.Unmarshal([]byte(l), &m); err != nil || m.Examples != c.examples {
				t.Errorf("backtest %q: line %s (%v), want %v examples", c.to, l, err, c.examples)
			}
		}
		if len(lines) != 2 {
			t.Errorf("backtest %q: %d lines, want one per challenger", c.to, len(lines))
		}
	}
}

// TestBacktestFromKafka reads the examples from a topic of one
// partition, and refuses a topic of two, whose partitions would be read
// merged in an order that changes from run to run, before reading it.
func TestBacktestFromKafka(t *testing.T) {
	c := testbroker.Kafka(t)
	brokers := strings.Join(c.ListenAddrs(), ",")
	args := []string{"backtest", "--kafka.brokers", brokers, "--source.kind", "kafka", "--json", "--model.challengers", "perceptron:algorithm=perceptron"}
	for _, topic := range []struct {
		name       string
		partitions int
	}{{"one", 1}, {"two", 2}} {
		c.CreateTopic(t, topic.name, topic.partitions)
		mustRun(t, "", "gen", "-examples", "300", "-seed", "2", "-to", "kafka:"+topic.name, "-kafka-brokers", brokers)
	}
	// The live model's store is not the backtest's: nothing is stored,
	// and nothing warns that it is not.
	store := "file://" + t.TempDir()
	out, stderr, err := runCmd(t, "", append(args, "--source.topics", "one", "--snapshot.url", store)...)
	var m struct{ Examples float64 }
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m.Examples != 300 {
		t.Errorf("backtest of topic one: %s (%v), want 300 examples\n%s", out, err, stderr)
	}
	if strings.Contains(stderr, "snapshot.url") {
		t.Errorf("backtest of topic one warned about the store it does not use:\n%s", stderr)
	}
	_, _, err = runCmd(t, "", append(args, "--source.topics", "two")...)
	var u *usageError
	if !errors.As(err, &u) || !strings.Contains(err.Error(), "source.topics: two: 2 partitions") {
		t.Errorf("backtest of topic two: error %v, want a usage error naming source.topics and its 2 partitions", err)
	}
	// The configuration of a worker that promotes by itself is backtested
	// as it is, as over a file: its challengers are there to compare.
	auto := append(args, "--model.compare.promote", "auto", "--source.topics", "one")
	out, stderr, err = runCmd(t, "", auto...)
	if err != nil || json.Unmarshal([]byte(out), &m) != nil || m.Examples != 300 {
		t.Errorf("backtest of topic one with model.compare.promote auto: %s (%v), want 300 examples\n%s", out, err, stderr)
	}
}

// TestBacktestNothingLabeled: a file without a labeled example (every
// record invalid, or none with a label) compares nothing, and the
// command fails, as train does, instead of printing verdicts over no
// example.
func TestBacktestNothingLabeled(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, data, want string
	}{
		{"every record invalid", `{"label":"c1","features":{"a":1}}` + "\n" + `{"label":"c2","features":{"a":2}}` + "\n",
			"holds no labeled example (2 records are not valid examples, see the errors above)"},
		{"no label", `{"features":{"a":1}}` + "\n", "holds no labeled example"},
		{"empty", "", "holds no labeled example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
			if err := os.WriteFile(in, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _, err := runCmd(t, "", "backtest", "--input", in, "--model.challengers", "p:algorithm=perceptron")
			if err == nil || !strings.Contains(err.Error(), "backtest: nothing compared: "+in+" "+c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if out != "" {
				t.Errorf("a table was printed: %q", out)
			}
		})
	}
}

func TestBacktestRefusals(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"label":1,"features":{"a":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no challengers", []string{"--input", in}, "model.challengers: none to compare"},
		{"no input", []string{"--model.challengers", "s:hash_seed=2"}, "-input: required, or a source"},
		{"a range of a file", []string{"--input", in, "--model.challengers", "s:hash_seed=2", "--from", "offset:3"}, "with -input the whole file is read"},
		{"bad challenger", []string{"--input", in, "--model.challengers", "s:hash_bits=40"}, "model.challengers[0].hash_bits"},
		{"bad alpha", []string{"--input", in, "--model.challengers", "s:hash_seed=2", "--model.compare.alpha", "2"}, "model.compare.alpha"},
		{"a partitioned stream", []string{"--model.challengers", "s:hash_seed=2", "--nats.url", "nats://127.0.0.1:1", "--source.kind", "jetstream",
			"--source.stream", "EXAMPLES", "--source.subject", "examples.*", "--source.stream_partitions", "2"}, "source.stream_partitions: 2: backtest reads"},
		{"a curve in no directory", []string{"--input", in, "--model.challengers", "s:hash_seed=2", "--curve", filepath.Join(dir, "none", "c.svg")},
			"-curve " + filepath.Join(dir, "none", "c.svg") + ": directory " + filepath.Join(dir, "none")},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCmd(t, "", append([]string{"backtest"}, c.args...)...)
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a usage error saying %q", err, c.want)
			}
		})
	}
}

// TestBacktestAsCompareSays runs the backtest docs/compare.md shows, its
// configuration over `hyperplane gen -examples 200000`, and finds the
// table the page prints, row for row.
func TestBacktestAsCompareSays(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/compare.md")
	if err != nil {
		t.Fatal(err)
	}
	block := func(after, fence string) string {
		t.Helper()
		_, rest, ok := strings.Cut(string(page), after)
		if !ok {
			t.Fatalf("docs/compare.md has no %q", after)
		}
		_, rest, ok = strings.Cut(rest, fence+"\n")
		if !ok {
			t.Fatalf("docs/compare.md has no %s block after %q", fence, after)
		}
		body, _, _ := strings.Cut(rest, "```\n")
		return body
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "model.yaml")
	if err := os.WriteFile(cfg, []byte(block("## Challengers", "```yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	want := block("The\ntable, for the configuration above over `hyperplane gen -examples 200000`:", "```")
	in := genFile(t, dir, "examples.jsonl", "-examples", "200000")
	out, stderr, err := runCmd(t, "", "backtest", "--config", cfg, "--input", in)
	if err != nil {
		t.Fatalf("backtest: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, want) {
		t.Errorf("backtest prints\n%s\ndocs/compare.md shows\n%s", out, want)
	}
}

// TestBacktestFileTakesTheSourceLimits: a file is read with the
// configuration's source.max_features and source.max_bytes, as the worker
// reads the same records from its source, unless -max-features or
// -max-bytes say otherwise.
func TestBacktestFileTakesTheSourceLimits(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	data := `{"label":1,"features":{"a":1}}` + "\n" +
		`{"label":-1,"features":{"a":1,"b":2,"c":3}}` + "\n" +
		`{"label":1,"features":{"a":1},"note":"` + strings.Repeat("x", 200) + `"}` + "\n"
	if err := os.WriteFile(in, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		args     []string
		examples float64
		refused  []string
	}{
		{"config", []string{"--source.max_features", "2", "--source.max_bytes", "100"}, 1,
			[]string{"record 2: features: more than 2 features", "record 3: payload: "}},
		{"flags over config", []string{"--source.max_features", "2", "--source.max_bytes", "100", "-max-features", "3", "-max-bytes", "1000"}, 3, nil},
		{"defaults", nil, 3, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"backtest", "--input", in, "--model.challengers", "p:algorithm=perceptron", "--json"}, c.args...)
			out, stderr, err := runCmd(t, "", args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var line map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &line); err != nil {
				t.Fatalf("%v: %q", err, out)
			}
			if line["examples"] != c.examples {
				t.Errorf("%v examples compared, want %v\n%s", line["examples"], c.examples, stderr)
			}
			for _, r := range c.refused {
				if !strings.Contains(stderr, r) {
					t.Errorf("stderr does not say %q:\n%s", r, stderr)
				}
			}
		})
	}
}

// TestBacktestFileRefusesASourceLimitByItsKey: a source.max_features or
// source.max_bytes below 1, which backtest --input takes when its own
// flags are not given, is refused naming the key, not the flag the user
// did not give.
func TestBacktestFileRefusesASourceLimitByItsKey(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"label":1,"features":{"a":1}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"source.max_features", "source.max_bytes"} {
		t.Run(key, func(t *testing.T) {
			_, stderr, err := runCmd(t, "", "backtest", "--input", in, "--model.challengers", "p:algorithm=perceptron", "--"+key, "0")
			var u *usageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), key+": must be at least 1, got 0") {
				t.Fatalf("backtest --%s 0: %v, want a usage error naming %s\n%s", key, err, key, stderr)
			}
		})
	}
}
