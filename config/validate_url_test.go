package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestValidateURLs: a file URL whose "directory" is a host is refused with
// the URL that means it; a broker with user info is refused with where
// Kafka credentials go; and neither message, nor one about a URL that does
// not parse, quotes the credentials.
func TestValidateURLs(t *testing.T) {
	cases := []struct {
		name, field string
		set         func(*Config)
		want        []string
	}{
		{"relative file URL", "snapshot.url", func(c *Config) { c.Snapshot.URL = "file://hyperplane-data" },
			[]string{`names the host "hyperplane-data"`, "file:///absolute/path/hyperplane-data", "file://./hyperplane-data"}},
		{"broker with user info", "kafka.brokers", func(c *Config) { c.Kafka.Brokers = []string{"alice:hunter2@k:9092"} },
			[]string{`"alice:[redacted]@k:9092" has user info`, "kafka.sasl.password"}},
		{"NATS URL with a bad port", "nats.url", func(c *Config) { c.NATS.URL = "nats://alice:hunter2@n:port" },
			[]string{`"nats://alice:[redacted]@n:port" is not a URL`}},
		{"NATS URL split in its password", "nats.url", func(c *Config) { c.NATS.URL = "nats://alice:hun/ter2@n" },
			[]string{`"nats://[redacted]/[redacted]" is not a URL`}},
		{"NATS URL without credentials", "nats.url", func(c *Config) { c.NATS.URL = "nats://n:port" },
			[]string{`"nats://n:port" is not a URL: invalid port ":port" after host`}},
		{"NATS URL with a port out of range", "nats.url", func(c *Config) { c.NATS.URL = "nats://n:4222,nats://alice:hunter2@n:99999" },
			[]string{`"nats://alice:[redacted]@n:99999": port "99999" is not a number from 1 to 65535`}},
		{"NATS URL with port 0", "nats.url", func(c *Config) { c.NATS.URL = "n:0" },
			[]string{`port "0" is not a number from 1 to 65535`}},
		{"NATS URL of colons", "nats.url", func(c *Config) { c.NATS.URL = "::::" },
			[]string{`"::::" is not a URL`, "nats://[::1]:4222"}},
		{"NATS URL of colons among others", "nats.url", func(c *Config) { c.NATS.URL = "nats://n:4222, nats://alice:hunter2@::::" },
			[]string{`"nats://alice:[redacted]@::::" is not a URL: its host holds a colon`}},
		{"S3 URL without a bucket", "snapshot.url", func(c *Config) { c.Snapshot.URL = "s3://" },
			[]string{`"s3://" names no bucket: want s3://bucket/prefix`}},
		{"GCS URL without a bucket", "snapshot.url", func(c *Config) { c.Snapshot.URL = "gs:///prefix?x=1" },
			[]string{`names no bucket: want gs://bucket/prefix`}},
		{"Azure URL without a container", "snapshot.url", func(c *Config) { c.Snapshot.URL = "azblob://" },
			[]string{`"azblob://" names no container: want azblob://container/prefix`}},
		{"S3 URL split in its password", "snapshot.url", func(c *Config) { c.Snapshot.URL = "s3://alice:hun/ter2@bucket" },
			[]string{`is not a URL`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := validJetStream()
			c.set(&cfg)
			err := cfg.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want an error about %s", err, c.field)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter2") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
	for _, ok := range []string{"file:///var/lib/hyperplane", "file://localhost/var/lib/hyperplane", "file://./data", "file:///tmp/x?create_dir=1",
		"s3://bucket", "s3://bucket/prefix?region=eu-west-1", "gs://bucket/prefix", "azblob://container", "mem://"} {
		cfg := validJetStream()
		cfg.Snapshot.URL = ok
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, ok := range []string{"nats://[::1]:4222", "[::1]:4222", "localhost", "nats://a:4222,tls://b:4443", "nats://alice:hunter2@n:4222"} {
		cfg := validJetStream()
		cfg.NATS.URL = ok
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestValidateRefusesHiddenText: a configuration copied from the output of
// hyperplane config, or from a log, holds [redacted] where credentials
// were; it is refused naming the key, not read as if it were them.
func TestValidateRefusesHiddenText(t *testing.T) {
	c := validJetStream()
	c.Snapshot.URL = "s3://models/prod?region=eu-west-1&token=hunter2"
	var printed bytes.Buffer
	if err := WriteYAML(&printed, c); err != nil {
		t.Fatal(err)
	}
	read, err := Load([]string{"--config", writeConfig(t, printed.String())}, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	var fe *FieldError
	if err := read.Validate(); !errors.As(err, &fe) || fe.Field != "snapshot.url" || !strings.Contains(fe.Problem, "give the credentials themselves") {
		t.Errorf("the printed configuration read back: got %v, want snapshot.url refused", err)
	}

	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"nats.url", func(c *Config) { c.NATS.URL = "nats://alice:[redacted]@n1:4222" }},
		{"kafka.brokers", func(c *Config) { c.Kafka.Brokers = []string{"k0:9092", "alice:[redacted]@k1:9092"} }},
		{"kafka.sasl.password", func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "plain", Username: "alice", Password: "[redacted]"}
		}},
	} {
		c := validJetStream()
		tc.set(&c)
		if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s holding [redacted]: got %v, want an error about it", tc.field, err)
		}
	}
}
