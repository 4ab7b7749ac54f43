package config

import (
	"strings"
	"testing"
)

// TestUnknownEnv: every HYPERPLANE_* variable with a value that Load does
// not read is named, with the variable probably meant; the ones it reads,
// the test suites' and empty ones are not.
func TestUnknownEnv(t *testing.T) {
	env := map[string]string{
		"HYPERPLANE_SNAPSHOT_UR":           "file:///x",
		"HYPERPLANE_NATS_URLS":             "nats://n:4222",
		"hyperplane_model_name":            "clicks",
		"HYPERPLANE_SASL_PASSWORD":         "pw",
		"HYPERPLANE_URL":                   "x",
		"HYPERPLANE_CONFG":                 "c.yaml",
		"HYPERPLANE_SERVICE_HOST":          "10.0.0.1",
		"HYPERPLANE_KAFKA_BROKERS":         "k:9092",
		"HYPERPLANE_CONFIG":                "c.yaml",
		"HYPERPLANE_TEST_S3_ENDPOINT":      "http://127.0.0.1:9000",
		"HYPERPLANE_E2E_NATS_URL":          "nats://n:4222",
		"HYPERPLANE_SOURCE_KNID":           "", // empty: unset, as Load reads it
		"HOME":                             "/root",
		"XHYPERPLANE_SOURCE_KIND":          "kafka",
		"HYPERPLANE_MODEL_LEARNER_HASHBIT": "18",
	}
	var environ []string
	for _, name := range []string{ // os.Environ's form, in a fixed order
		"HYPERPLANE_SNAPSHOT_UR", "HYPERPLANE_NATS_URLS", "hyperplane_model_name", "HYPERPLANE_SASL_PASSWORD",
		"HYPERPLANE_URL", "HYPERPLANE_CONFG", "HYPERPLANE_SERVICE_HOST", "HYPERPLANE_KAFKA_BROKERS",
		"HYPERPLANE_CONFIG", "HYPERPLANE_TEST_S3_ENDPOINT", "HYPERPLANE_E2E_NATS_URL", "HYPERPLANE_SOURCE_KNID",
		"HOME", "XHYPERPLANE_SOURCE_KIND", "HYPERPLANE_MODEL_LEARNER_HASHBIT",
	} {
		environ = append(environ, name+"="+env[name])
	}
	want := []string{
		"HYPERPLANE_SNAPSHOT_UR is not a setting and is ignored: did you mean HYPERPLANE_SNAPSHOT_URL?",
		"HYPERPLANE_NATS_URLS is not a setting and is ignored: did you mean HYPERPLANE_NATS_URL?",
		"hyperplane_model_name is not a setting and is ignored: variable names are upper case, did you mean HYPERPLANE_MODEL_NAME?",
		"HYPERPLANE_SASL_PASSWORD is not a setting and is ignored: did you mean HYPERPLANE_KAFKA_SASL_PASSWORD?",
		"HYPERPLANE_URL is not a setting and is ignored: did you mean HYPERPLANE_NATS_URL or HYPERPLANE_SNAPSHOT_URL?",
		"HYPERPLANE_CONFG is not a setting and is ignored: did you mean HYPERPLANE_CONFIG?",
		"HYPERPLANE_SERVICE_HOST is not a setting and is ignored (hyperplane config --defaults lists every variable)",
		"HYPERPLANE_MODEL_LEARNER_HASHBIT is not a setting and is ignored: did you mean HYPERPLANE_MODEL_LEARNER_HASH_BITS?",
	}
	got := UnknownEnv(environ, envOf(env))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range got {
		if strings.Contains(w, "pw") || strings.Contains(w, "file:///x") {
			t.Errorf("a warning shows a value: %s", w)
		}
	}
	// Every key's variable is known.
	var all []string
	for _, k := range keys() {
		all = append(all, k.env)
	}
	if w := UnknownEnv(all, func(string) string { return "x" }); len(w) != 0 {
		t.Errorf("keys' variables taken for unknown: %v", w)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"URL", "URLS", 1}, {"ab", "ba", 2},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
