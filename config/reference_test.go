package config

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestWriteYAMLReadsBack: the reference that WriteYAML writes is a config
// file that loads to the configuration it was written from, for the
// defaults and for values that YAML could misread (strings that look like
// numbers or booleans, lists, text that needs quoting).
func TestWriteYAMLReadsBack(t *testing.T) {
	odd := Default()
	odd.Model.Name = "007"
	odd.Model.Learner.Classes = []string{"true", "no", "a b", "x:y"}
	odd.Model.Learner.Eta = 0.125
	odd.Model.Learner.HashSeed = 1 << 40
	odd.Source.Kind = "kafka"
	odd.Source.Topics = []string{"clicks", "views"}
	odd.Kafka.Brokers = []string{"b1:9092", "b2:9092"}
	odd.Kafka.SASL.Username = "# not a comment"
	odd.Outputs.Predictions = Destination{Kind: KindKafka, Topic: "predictions"}
	odd.Snapshot.Interval = 90 * time.Second
	odd.HTTP.Addr = ""
	for name, want := range map[string]Config{"defaults": Default(), "odd values": odd} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteYAML(&buf, want); err != nil {
				t.Fatal(err)
			}
			got, err := Load([]string{"--config", writeConfig(t, buf.String())}, envOf(nil))
			if err != nil {
				t.Fatalf("%v\n%s", err, buf.String())
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back\n%+v\nwant\n%+v\nfrom\n%s", got, want, buf.String())
			}
		})
	}
}

// TestWriteYAMLDocumentsEveryKey: every key is in the reference with its
// help, its variable and its flag above it.
func TestWriteYAMLDocumentsEveryKey(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteYAML(&buf, Default()); err != nil {
		t.Fatal(err)
	}
	ref := buf.String()
	for _, k := range keys() {
		if k.help == "" {
			t.Errorf("%s has no help", k.path)
		}
		depth := strings.Count(k.path, ".")
		indent := strings.Repeat("  ", depth)
		want := indent + "# " + k.help + "\n" +
			indent + "# " + k.env + ", --" + k.path + "\n" +
			indent + k.path[strings.LastIndexByte(k.path, '.')+1:] + ":"
		if !strings.Contains(ref, want) {
			t.Errorf("%s: no\n%s\nin the reference", k.path, want)
		}
	}
}

// TestWriteYAMLRedactsSecrets: a secret that is set is never written,
// not even as a placeholder that would read back as the secret.
func TestWriteYAMLRedactsSecrets(t *testing.T) {
	c := Default()
	c.Kafka.SASL.Password = "hunter2"
	var buf bytes.Buffer
	if err := WriteYAML(&buf, c); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Fatal("the password is in the output")
	}
	if !strings.Contains(buf.String(), `password: "" # set, not shown`) {
		t.Fatalf("the password is not shown as set and hidden:\n%s", buf.String())
	}
}
