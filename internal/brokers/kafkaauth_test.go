package brokers_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/provision"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// certificate is a self-signed certificate for 127.0.0.1 and the path of
// a PEM file holding it, for kafka.tls.ca_file.
func certificate(t *testing.T, name string) (tls.Certificate, string) {
	t.Helper()
	cert, pemBytes := testbroker.Certificate(t, name)
	file := filepath.Join(t.TempDir(), name+".pem")
	if err := os.WriteFile(file, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, file
}

// TestKafkaAuthErrorsNameTheKeys: a cluster that wants TLS and SASL,
// reached with one setting wrong, is refused at once with an error naming
// the kafka.tls or kafka.sasl key to check, for the source, the shards
// and the outputs alike; the password is in none of them.
func TestKafkaAuthErrorsNameTheKeys(t *testing.T) {
	cert, caFile := certificate(t, "broker")
	_, otherCA := certificate(t, "other")
	c := testbroker.Kafka(t,
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL(),
		kfake.Superuser("PLAIN", "alice", "right-password"),
		kfake.SeedTopics(1, "examples", "predictions"),
	)
	good := config.Default()
	good.Kafka.Brokers = c.ListenAddrs()
	good.Kafka.TLS = config.TLS{Enabled: true, CAFile: caFile}
	good.Kafka.SASL = config.SASL{Mechanism: config.MechanismPlain, Username: "alice", Password: "right-password"}
	good.Source = config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
	good.Outputs.Predictions = config.Destination{Kind: config.KindKafka, Topic: "predictions"}

	for _, tc := range []struct {
		name   string
		change func(*config.Kafka)
		want   []string // each named in the error
	}{
		{"wrong password", func(k *config.Kafka) { k.SASL.Password = "wrong-password" }, []string{"kafka.sasl.password", "kafka.sasl.mechanism"}},
		{"wrong mechanism", func(k *config.Kafka) { k.SASL.Mechanism = config.MechanismSCRAMSHA256 }, []string{"kafka.sasl.mechanism"}},
		{"no SASL", func(k *config.Kafka) { k.SASL = config.SASL{Mechanism: config.MechanismNone} }, []string{"kafka.sasl.mechanism"}},
		{"untrusted certificate", func(k *config.Kafka) { k.TLS.CAFile = otherCA }, []string{"kafka.tls.ca_file"}},
		{"no TLS", func(k *config.Kafka) { k.TLS = config.TLS{} }, []string{"kafka.tls.enabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg.Kafka)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s succeeded", what)
				}
				if ctx.Err() != nil {
					t.Fatalf("%s: not refused at once: %v", what, err)
				}
				for _, key := range tc.want {
					if !strings.Contains(err.Error(), key) {
						t.Errorf("%s: %v\nwant it to name %s", what, err, key)
					}
				}
				if strings.Contains(err.Error(), "password\"") || strings.Contains(err.Error(), "-password") {
					t.Errorf("%s: %v\nshows the password", what, err)
				}
			}
			b := brokers.New(cfg, "test", zaptest.NewLogger(t))
			defer b.Close()
			src, err := b.Source(ctx, cfg.Source, "g", nil)
			if src != nil {
				defer src.Close()
			}
			check("Source", err)
			_, err = b.KafkaPartitions(ctx, cfg.Source)
			check("KafkaPartitions", err)
			check("CheckOutputs", b.CheckOutputs(ctx, cfg))
		})
	}

	b := brokers.New(good, "test", zaptest.NewLogger(t))
	defer b.Close()
	if n, err := b.KafkaPartitions(context.Background(), good.Source); err != nil || n != 1 {
		t.Fatalf("with the right settings: %d partitions, %v; want 1", n, err)
	}
}

// TestSetupAuthErrorsNameTheKeys: setup, which creates the topics, names
// the kafka.sasl keys as run does when the brokers refuse its password.
func TestSetupAuthErrorsNameTheKeys(t *testing.T) {
	c := testbroker.Kafka(t, kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right-password"))
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.SASL = config.SASL{Mechanism: config.MechanismPlain, Username: "alice", Password: "wrong-password"}
	cfg.Source = config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := provision.Provision(ctx, cfg, provision.Brokers{Kafka: b.KafkaConfig, NATS: b.NATSConn}, provision.Options{Topics: kafkaio.TopicOptions{Partitions: 1, ReplicationFactor: 1}})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "kafka.sasl.password") {
		t.Fatalf("Provision with a wrong password: %v; want it refused at once, naming kafka.sasl.password", err)
	}
}

// TestPlainWithoutTLSWarns: SASL PLAIN over a connection without TLS
// sends the password in clear text; the clients say so once, naming the
// keys, and not with TLS.
func TestPlainWithoutTLSWarns(t *testing.T) {
	cert, caFile := certificate(t, "broker")
	for _, withTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plaintext", true: "tls"}[withTLS], func(t *testing.T) {
			opts := []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("PLAIN", "alice", "right-password"), kfake.SeedTopics(1, "examples")}
			if withTLS {
				opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
			}
			c := testbroker.Kafka(t, opts...)
			cfg := config.Default()
			cfg.Kafka.Brokers = c.ListenAddrs()
			cfg.Kafka.SASL = config.SASL{Mechanism: config.MechanismPlain, Username: "alice", Password: "right-password"}
			if withTLS {
				cfg.Kafka.TLS = config.TLS{Enabled: true, CAFile: caFile}
			}
			cfg.Source = config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
			core, logs := observer.New(zap.WarnLevel)
			b := brokers.New(cfg, "test", zap.New(core))
			defer b.Close()
			for range 2 {
				if n, err := b.KafkaPartitions(context.Background(), cfg.Source); err != nil || n != 1 {
					t.Fatalf("KafkaPartitions: %d, %v; want 1 partition", n, err)
				}
			}
			warned := logs.FilterMessageSnippet("clear text").All()
			switch {
			case withTLS && len(warned) != 0:
				t.Errorf("with TLS, warned %q", warned[0].Message)
			case !withTLS && len(warned) != 1:
				t.Fatalf("without TLS, %d warnings of the clear-text password, want 1", len(warned))
			case !withTLS:
				for _, key := range []string{"kafka.sasl.mechanism", "kafka.tls.enabled"} {
					if !strings.Contains(warned[0].Message, key) {
						t.Errorf("warning %q does not name %s", warned[0].Message, key)
					}
				}
				if strings.Contains(fmt.Sprint(warned[0].Context), "right-password") {
					t.Errorf("warning shows the password: %v", warned[0].Context)
				}
			}
		})
	}
}

// TestTLSToAPlaintextListenerNamesTLS: TLS to a listener without it is
// not refused (the broker takes the handshake for the start of a request
// and waits for the rest) but times out; the error names
// kafka.tls.enabled among what to check.
func TestTLSToAPlaintextListenerNamesTLS(t *testing.T) {
	c := testbroker.Kafka(t, kfake.SeedTopics(1, "examples"))
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.TLS = config.TLS{Enabled: true, InsecureSkipVerify: true}
	cfg.Source = config.Source{Kind: config.KindKafka, Topics: []string{"examples"}}
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	defer b.Close()
	_, err := b.KafkaPartitions(context.Background(), cfg.Source)
	if err == nil || !strings.Contains(err.Error(), "kafka.tls.enabled") {
		t.Fatalf("TLS to a plaintext listener: %v; want an error naming kafka.tls.enabled", err)
	}
}
