package config

import (
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
	for _, ok := range []string{"file:///var/lib/hyperplane", "file://localhost/var/lib/hyperplane", "file://./data", "file:///tmp/x?create_dir=1"} {
		cfg := validJetStream()
		cfg.Snapshot.URL = ok
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
