package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestConfigCommand: config --defaults is a config file that run accepts
// as it is, and config prints the configuration run would use, with the
// flags applied and secrets redacted.
func TestConfigCommand(t *testing.T) {
	defaults := mustRun(t, "", "config", "--defaults")
	if !strings.Contains(defaults, "# HYPERPLANE_SOURCE_KIND, --source.kind\n  kind: \"\"") {
		t.Fatalf("the defaults do not document source.kind:\n%s", defaults)
	}
	out := mustRun(t, "", "config", "--source.kind", "jetstream", "--source.stream", "EX", "--nats.url", "nats://n:4222",
		"--kafka.sasl.mechanism", "plain", "--kafka.sasl.username", "u", "--kafka.sasl.password", "hunter2")
	for _, want := range []string{"kind: jetstream", "stream: EX", "url: nats://n:4222", `password: "" # set, not shown`} {
		if !strings.Contains(out, want) {
			t.Errorf("config output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") {
		t.Error("config printed the password")
	}
	if _, _, err := runCmd(t, "", "config", "--defaults", "--source.kind", "kafka"); err == nil {
		t.Error("config --defaults with other arguments succeeded")
	}
}

// runEnv runs the program with args and the environment env.
func runEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestConfigDefaultsAsAnyFlag: --defaults is a flag as every command's
// are: -defaults and --defaults=true print the defaults too, and a typo
// of it names it, not "hyperplane config --defaults" as the list of keys.
func TestConfigDefaultsAsAnyFlag(t *testing.T) {
	want := mustRun(t, "", "config", "--defaults")
	for _, args := range [][]string{{"-defaults"}, {"--defaults=true"}, {"-defaults", "true"}} {
		if got := mustRun(t, "", append([]string{"config"}, args...)...); got != want {
			t.Errorf("config %q printed another configuration than config --defaults", args)
		}
	}
	_, _, err := runCmd(t, "", "config", "--defualts")
	if err == nil || !strings.Contains(err.Error(), "unknown flag --defualts; did you mean --defaults?") {
		t.Errorf("config --defualts: got %v", err)
	}
	if _, _, err := runCmd(t, "", "config", "-defaults", "--source.kind", "kafka"); err == nil {
		t.Error("config -defaults with other arguments succeeded")
	}
}

// TestConfigNeverShowsSecrets gives every secret-bearing key, as "run -h"
// lists them from the keys table (marked "(secret)", or "(credentials in
// it are never shown)" for URLs), values carrying a secret, from a flag,
// a variable and the config file, and looks for the secret in everything
// "hyperplane config" prints: the YAML on stdout, stderr and the error,
// with the configuration valid or not, and in "config --defaults".
func TestConfigNeverShowsSecrets(t *testing.T) {
	const leak = "L3AKED-s3cret"
	type secretKey struct{ path, env string }
	var values, urls []secretKey
	for _, line := range strings.Split(mustRun(t, "", "run", "-h"), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "--") {
			continue
		}
		k := secretKey{strings.TrimPrefix(f[0], "--"), f[2]}
		switch {
		case strings.HasSuffix(line, "(secret)"):
			values = append(values, k)
		case strings.HasSuffix(line, "(credentials in it are never shown)"):
			urls = append(urls, k)
		}
	}
	if len(values) == 0 || len(urls) == 0 {
		t.Fatalf("run -h marks %d secret keys and %d URL keys: the test proves nothing", len(values), len(urls))
	}
	var urlSamples []string
	for _, scheme := range []string{"nats://", "s3://", "mem://", ""} {
		urlSamples = append(urlSamples,
			scheme+"alice:"+leak+"@host:4222",
			scheme+leak+"@host:4222/p",
			scheme+"host:1,"+scheme+"bob:"+leak+"@host:2",
			scheme+"host:4222/p?region=eu&token="+leak,
			scheme+"host:4222?endpoint=http://alice:"+leak+"@minio:9000",
			scheme+"alice:pa/"+leak+"@host",
			scheme+"alice:pa,"+leak+"@host",
			scheme+"alice:"+leak+"@host:port",
		)
	}
	// A valid configuration to which the key under test is added.
	base := map[string]string{
		"HYPERPLANE_SOURCE_KIND":          "jetstream",
		"HYPERPLANE_SOURCE_STREAM":        "EX",
		"HYPERPLANE_NATS_URL":             "nats://n:4222",
		"HYPERPLANE_KAFKA_SASL_MECHANISM": "plain",
		"HYPERPLANE_KAFKA_SASL_USERNAME":  "u",
		"HYPERPLANE_KAFKA_SASL_PASSWORD":  "pw",
	}
	printed, refused := 0, 0
	check := func(k secretKey, samples []string) {
		for i, sample := range samples {
			env := maps.Clone(base)
			delete(env, k.env)
			segs := strings.Split(k.path, ".")
			var y strings.Builder
			for d, s := range segs[:len(segs)-1] {
				y.WriteString(strings.Repeat("  ", d) + s + ":\n")
			}
			y.WriteString(strings.Repeat("  ", len(segs)-1) + segs[len(segs)-1] + ": " + strconv.Quote(sample) + "\n")
			file := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(file, []byte(y.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			withKey := maps.Clone(env)
			withKey[k.env] = sample
			for _, source := range []struct {
				name string
				args []string
				env  map[string]string
			}{
				{"flag", []string{"--" + k.path, sample}, env},
				{"variable", nil, withKey},
				{"file", []string{"--config", file}, env},
				{"defaults", []string{"--defaults"}, map[string]string{k.env: sample}},
			} {
				out, stderr, err := runEnv(t, source.env, append([]string{"config"}, source.args...)...)
				if err == nil {
					printed++
				} else {
					refused++
				}
				for what, s := range map[string]string{"stdout": out, "stderr": stderr, "error": fmt.Sprint(err)} {
					if strings.Contains(s, leak) {
						t.Errorf("%s #%d (%s) from the %s: config shows the secret on %s:\n%s", k.path, i, sample, source.name, what, s)
					}
				}
			}
		}
	}
	for _, k := range values {
		check(k, []string{leak, "x " + leak})
	}
	for _, k := range urls {
		check(k, urlSamples)
	}
	if printed == 0 || refused == 0 {
		t.Errorf("%d configurations printed, %d refused: want both forms of output checked", printed, refused)
	}
}

// TestConfigWarnsAboutUnknownVariables: a misspelled HYPERPLANE_*
// variable, which Load ignores, is named on stderr with the variable
// meant, by config and run alike; a known one, the test suites' and an
// empty one are not, and neither is anything with -h.
func TestConfigWarnsAboutUnknownVariables(t *testing.T) {
	t.Setenv("HYPERPLANE_SNAPSHOT_UR", "file:///var/lib/hyperplane")
	t.Setenv("HYPERPLANE_SOURCE_KIND", "jetstream")
	t.Setenv("HYPERPLANE_TEST_S3_BUCKET", "b")
	t.Setenv("HYPERPLANE_LOG_LEVL", "")
	const want = "hyperplane: warning: HYPERPLANE_SNAPSHOT_UR is not a setting and is ignored: did you mean HYPERPLANE_SNAPSHOT_URL?\n"
	runOS := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, os.Getenv, strings.NewReader(""), &out, &errOut)
		return out.String(), errOut.String(), err
	}
	out, stderr, err := runOS("config", "--source.stream", "EX", "--nats.url", "nats://n:4222")
	if err != nil || stderr != want || !strings.Contains(out, "kind: jetstream") {
		t.Errorf("config: %v\nstderr %q\nwant %q", err, stderr, want)
	}
	if _, stderr, _ := runOS("run", "--source.kind", "carrier-pigeon"); !strings.HasPrefix(stderr, want) {
		t.Errorf("run: stderr %q, want it to begin with %q", stderr, want)
	}
	if _, stderr, _ := runOS("config", "-h"); stderr != "" {
		t.Errorf("config -h warns: %q", stderr)
	}
	// The names come from the process, but only what getenv gives counts:
	// with a getenv of its own, a test sees no warning about its process.
	if _, stderr, err := runCmd(t, "", "config", "--source.kind", "jetstream", "--source.stream", "EX", "--nats.url", "nats://n:4222"); err != nil || stderr != "" {
		t.Errorf("config with an empty getenv: %v, warns %q", err, stderr)
	}
}

// TestConfigRefusesStartTimesNoRecordHas: a source.start time before 1970
// or past 2262 reached Kafka as a negative timestamp (an "Unsupported
// Version" error blaming the brokers) and JetStream as a time before
// every message (the whole stream read for a time in the future). It
// stops start-up, naming the key and the start that reads what was meant.
func TestConfigRefusesStartTimesNoRecordHas(t *testing.T) {
	for start, want := range map[string]string{
		"time:1900-01-01T00:00:00Z": "earliest reads from the first message",
		"time:2999-01-01T00:00:00Z": "latest reads only the messages that arrive",
	} {
		_, _, err := runCmd(t, "", "config", "--source.kind", "jetstream", "--source.stream", "EX", "--nats.url", "nats://n:4222", "--source.start", start)
		if err == nil || !strings.Contains(err.Error(), "source.start") || !strings.Contains(err.Error(), want) {
			t.Errorf("--source.start %s: got %v, want an error naming source.start and %q", start, err, want)
		}
	}
}

// TestConfigSaysADurationIsTooLong: a duration in the form of one but
// beyond what a duration holds (about 292 years) is named as too long,
// not as a text that is no duration.
func TestConfigSaysADurationIsTooLong(t *testing.T) {
	_, _, err := runCmd(t, "", "config", "--source.kind", "kafka", "--kafka.brokers", "b:9092", "--source.topics", "t", "--snapshot.interval", "10000000h")
	if err == nil || !strings.Contains(err.Error(), `"10000000h" is longer than a duration can be (2562047h47m16.854775807s)`) {
		t.Errorf("--snapshot.interval 10000000h: got %v", err)
	}
	_, _, err = runCmd(t, "", "config", "--source.kind", "kafka", "--kafka.brokers", "b:9092", "--source.topics", "t", "--snapshot.interval", "5d")
	if err == nil || !strings.Contains(err.Error(), `"5d" is not a duration such as 30s or 5m`) {
		t.Errorf("--snapshot.interval 5d: got %v", err)
	}
}
