package config

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// leafPaths walks t the simple way, independently of keys(), and returns
// the dotted YAML path of every leaf field and whether it is secret.
func leafPaths(t reflect.Type, prefix string) map[string]bool {
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "-" {
			continue // not a key (learner.Config's Drift is model.drift)
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		if f.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.Type).Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			for k, v := range leafPaths(f.Type, name) {
				out[k] = v
			}
			continue
		}
		out[name] = f.Tag.Get("secret") == "true"
	}
	return out
}

func TestUsageListsEveryKey(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	lines := strings.Split(b.String(), "\n")
	paths := leafPaths(reflect.TypeFor[Config](), "")
	if len(paths) < 50 {
		t.Fatalf("only %d keys found; the walk is broken", len(paths))
	}
	for path := range paths {
		t.Run(path, func(t *testing.T) {
			env := "HYPERPLANE_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
			var line string
			for _, l := range lines {
				if f := strings.Fields(l); len(f) > 0 && f[0] == "--"+path {
					line = l
				}
			}
			if line == "" {
				t.Fatalf("no line for --%s in\n%s", path, b.String())
			}
			if !strings.Contains(line, " "+env+" ") {
				t.Errorf("line does not name %s: %q", env, line)
			}
			if fields := strings.Fields(line); len(fields) < 4 {
				t.Errorf("line has no type or help: %q", line)
			}
		})
	}
	for _, want := range []string{"--config", "HYPERPLANE_CONFIG", "(default 1)", `(default "arow")`, "(default 1048576)", `(default ":8080")`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestUsageShowsNoSecret(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	paths := leafPaths(reflect.TypeFor[Config](), "")
	secrets := 0
	for path, secret := range paths {
		if !secret {
			continue
		}
		secrets++
		for _, l := range strings.Split(b.String(), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == "--"+path {
				if strings.Contains(l, "default") {
					t.Errorf("secret %s shows a default: %q", path, l)
				}
				if !strings.Contains(l, "(secret)") {
					t.Errorf("secret %s is not marked: %q", path, l)
				}
			}
		}
	}
	if secrets == 0 {
		t.Fatal("no secret key found: the test proves nothing")
	}
}

func TestRedacted(t *testing.T) {
	const pw = "hunter2-s3cret"
	c := validKafka()
	c.Kafka.SASL = SASL{Mechanism: "plain", Username: "alice", Password: pw}

	r := c.Redacted()
	if r.Kafka.SASL.Password != "[redacted]" {
		t.Errorf("Redacted password = %q", r.Kafka.SASL.Password)
	}
	if r.Kafka.SASL.Username != "alice" || r.Model.Name != c.Model.Name {
		t.Errorf("Redacted changed more than the secret: %+v", r.Kafka.SASL)
	}
	if c.Kafka.SASL.Password != pw {
		t.Errorf("Redacted changed its receiver")
	}
	r.Kafka.Brokers[0] = "changed:1"
	if c.Kafka.Brokers[0] == "changed:1" {
		t.Errorf("Redacted shares a slice with its receiver")
	}
	if (Config{}).Redacted().Kafka.SASL.Password != "" {
		t.Errorf("an empty secret is shown as set")
	}

	shown := map[string]string{
		"String":    c.String(),
		"%v":        fmt.Sprintf("%v", c),
		"%+v":       fmt.Sprintf("%+v", c),
		"Sprint":    fmt.Sprint(c),
		"kafka %+v": fmt.Sprintf("%+v", c.Kafka),
		"sasl %v":   fmt.Sprintf("%v", c.Kafka.SASL),
	}
	for how, s := range shown {
		if strings.Contains(s, pw) {
			t.Errorf("%s shows the password: %s", how, s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%s does not mark the password redacted: %s", how, s)
		}
	}
	for _, want := range []string{"model.name=clicks", "kafka.brokers=k1:9092,k2:9092", "kafka.sasl.username=alice", "source.kind=kafka", `source.group=""`} {
		if !strings.Contains(c.String(), want) {
			t.Errorf("String lacks %q: %s", want, c.String())
		}
	}
}
