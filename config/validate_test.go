package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// dest is the destination of text, its kind and topic as they are, valid
// or not: for the configurations Validate is to check.
func dest(text string) Destination {
	kind, topic, _ := strings.Cut(text, ":")
	return Destination{Kind: Kind(kind), Topic: topic}
}

// validKafka is a valid configuration reading from Kafka.
func validKafka() Config {
	c := Default()
	c.Model.Name = "clicks"
	c.Kafka.Brokers = []string{"k1:9092", "k2:9092"}
	c.Source.Kind = "kafka"
	c.Source.Topics = []string{"examples"}
	c.Outputs.Predictions = dest("kafka:predictions")
	c.Outputs.Misclassifications = dest("kafka:misclassifications")
	c.Outputs.DeadLetter = dest("kafka:dead-letter")
	return c
}

// validJetStream is a valid configuration reading from JetStream.
func validJetStream() Config {
	c := Default()
	c.Model.Name = "sensors"
	c.NATS.URL = "nats://localhost:4222"
	c.Source.Kind = "jetstream"
	c.Source.Stream = "EXAMPLES"
	c.Outputs.Predictions = dest("jetstream:predictions")
	return c
}

// validNATS is a valid configuration reading from core NATS.
func validNATS() Config {
	c := Default()
	c.Model.Name = "sensors"
	c.NATS.URL = "localhost:4222"
	c.Source.Kind = "nats"
	c.Source.Subject = "examples.>"
	c.Outputs.Predictions = dest("nats:predictions")
	return c
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.pem")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")

	cases := []struct {
		name    string
		base    func() Config
		mutate  func(*Config)
		field   string // "" for valid
		problem string // a substring of the problem, when set
	}{
		{name: "kafka valid", base: validKafka, mutate: func(*Config) {}},
		{name: "jetstream valid", base: validJetStream, mutate: func(*Config) {}},
		{name: "nats valid", base: validNATS, mutate: func(*Config) {}},
		{name: "jetstream start offset 0", base: validJetStream, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset} }, field: "source.start", problem: "stream sequences start at 1"},
		{name: "jetstream start offset 1", base: validJetStream, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset, Offset: 1} }},
		{name: "kafka start offset 0", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset} }},
		{name: "nats start latest", base: validNATS, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartLatest} }},
		{name: "nats start offset", base: validNATS, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset, Offset: 5} }, field: "source.start", problem: "core NATS has no replay"},
		{name: "nats start time", base: validNATS, mutate: func(c *Config) {
			c.Source.Start = wire.Start{Kind: wire.StartTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
		}, field: "source.start"},
		{name: "default has no source", base: Default, mutate: func(*Config) {}, field: "source.kind"},

		// snapshot
		{name: "snapshot url", base: validKafka, mutate: func(c *Config) { c.Snapshot.URL = "s3://bucket/prefix?region=eu-west-1" }},
		{name: "snapshot url not a url", base: validKafka, mutate: func(c *Config) { c.Snapshot.URL = "/var/lib/x" }, field: "snapshot.url", problem: "not a URL"},
		{name: "snapshot url scheme", base: validKafka, mutate: func(c *Config) { c.Snapshot.URL = "ftp://x" }, field: "snapshot.url", problem: "unknown scheme"},
		{name: "snapshot every negative", base: validKafka, mutate: func(c *Config) { c.Snapshot.Every = -1 }, field: "snapshot.every"},
		{name: "snapshot interval", base: validKafka, mutate: func(c *Config) { c.Snapshot.Interval = -time.Second }, field: "snapshot.interval"},
		{name: "snapshot never", base: validKafka, mutate: func(c *Config) { c.Snapshot.URL, c.Snapshot.Every, c.Snapshot.Interval = "mem://", 0, 0 }, field: "snapshot.every", problem: "no snapshot"},
		{name: "snapshot keep", base: validKafka, mutate: func(c *Config) { c.Snapshot.Keep = 0 }, field: "snapshot.keep"},
		{name: "kafka session timeout", base: validKafka, mutate: func(c *Config) { c.Kafka.SessionTimeout = time.Millisecond }, field: "kafka.session_timeout"},
		{name: "kafka group instance", base: validKafka, mutate: func(c *Config) { c.Kafka.GroupInstance = "pod 0" }, field: "kafka.group_instance"},
		{name: "scope", base: validKafka, mutate: func(c *Config) { c.Model.Scope = "everything" }, field: "model.scope"},
		{name: "partition scope of an unpartitioned stream", base: validJetStream, mutate: func(c *Config) { c.Model.Scope = ScopePartition }, field: "model.scope"},
		{name: "mixing epoch examples", base: validKafka, mutate: func(c *Config) { c.Model.Mixing.EpochExamples = 0 }, field: "model.mixing.epoch_examples"},
		{name: "mixing interval", base: validKafka, mutate: func(c *Config) { c.Model.Mixing.Interval = 0 }, field: "model.mixing.interval"},
		{name: "serve nats without a server", base: validKafka, mutate: func(c *Config) { c.Serve.NATS = true }, field: "serve.nats"},
		{name: "serve subject wildcard", base: validJetStream, mutate: func(c *Config) { c.Serve.NATS, c.Serve.Subject = true, "hyperplane.*.predict" }, field: "serve.subject"},
		{name: "serve subject empty token", base: validJetStream, mutate: func(c *Config) { c.Serve.NATS, c.Serve.Subject = true, "hyperplane..predict" }, field: "serve.subject"},
		{name: "serve subject without serve.nats", base: validJetStream, mutate: func(c *Config) { c.Serve.Subject = "hyperplane.clicks.predict" }, field: "serve.nats", problem: "serve.subject is set"},
		{name: "serve subject with serve.nats", base: validJetStream, mutate: func(c *Config) { c.Serve.NATS, c.Serve.Subject = true, "hyperplane.clicks.predict" }},
		{name: "serve default subject from a model name ending in a dot", base: validJetStream, mutate: func(c *Config) { c.Serve.NATS, c.Model.Name = true, "a.b." }, field: "serve.subject"},
		{name: "serve queue group", base: validJetStream, mutate: func(c *Config) { c.Serve.QueueGroup = "two words" }, field: "serve.queue_group"},
		{name: "serve max bytes", base: validKafka, mutate: func(c *Config) { c.Serve.MaxBytes = 0 }, field: "serve.max_bytes"},
		{name: "serve max in flight", base: validKafka, mutate: func(c *Config) { c.Serve.MaxInFlight = -1 }, field: "serve.max_in_flight"},
		{name: "serve timeout", base: validKafka, mutate: func(c *Config) { c.Serve.Timeout = 0 }, field: "serve.timeout"},
		{name: "serve refresh", base: validKafka, mutate: func(c *Config) { c.Serve.Refresh = -time.Second }, field: "serve.refresh"},
		{name: "serve generations", base: validKafka, mutate: func(c *Config) { c.Serve.Generations = 0 }, field: "serve.generations"},

		// model
		{name: "model.name empty", base: validKafka, mutate: func(c *Config) { c.Model.Name = "" }, field: "model.name"},
		{name: "model.name slash", base: validKafka, mutate: func(c *Config) { c.Model.Name = "a/b" }, field: "model.name"},
		{name: "model.name space", base: validKafka, mutate: func(c *Config) { c.Model.Name = "a b" }, field: "model.name"},
		{name: "model.name dotdot", base: validKafka, mutate: func(c *Config) { c.Model.Name = ".." }, field: "model.name"},
		{name: "model.name too long", base: validKafka, mutate: func(c *Config) { c.Model.Name = strings.Repeat("a", 201) }, field: "model.name"},
		{name: "model.name safe", base: validKafka, mutate: func(c *Config) { c.Model.Name = "Clicks-v1.2_b" }},
		{name: "learner hash_bits", base: validKafka, mutate: func(c *Config) { c.Model.Learner.HashBits = 0 }, field: "model.learner.hash_bits", problem: "between 1 and 30"},
		{name: "learner algorithm", base: validKafka, mutate: func(c *Config) { c.Model.Learner.Algorithm = "svm" }, field: "model.learner.algorithm"},
		{name: "pegasos rule of arow", base: validKafka, mutate: func(c *Config) { c.Model.Mixing.Rule = learner.MixPegasos }, field: "model.mixing.rule"},
		{name: "learner eta", base: validKafka, mutate: func(c *Config) { c.Model.Learner.Eta = -1 }, field: "model.learner.eta"},
		{name: "learner classes", base: validKafka, mutate: func(c *Config) { c.Model.Learner.Classes = []string{"only"} }, field: "model.learner.classes"},

		// source
		{name: "source.kind unknown", base: validKafka, mutate: func(c *Config) { c.Source.Kind = "redis" }, field: "source.kind", problem: `"redis"`},
		{name: "kafka source without brokers", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = nil }, field: "kafka.brokers"},
		{name: "kafka source without topics", base: validKafka, mutate: func(c *Config) { c.Source.Topics = nil }, field: "source.topics"},
		{name: "kafka source bad topic", base: validKafka, mutate: func(c *Config) { c.Source.Topics = []string{"ok", "not ok"} }, field: "source.topics", problem: `"not ok"`},
		{name: "kafka source empty topic", base: validKafka, mutate: func(c *Config) { c.Source.Topics = []string{""} }, field: "source.topics"},
		{name: "kafka source topic twice", base: validKafka, mutate: func(c *Config) { c.Source.Topics = []string{"examples", "more", "examples"} }, field: "source.topics", problem: `"examples" is named twice`},
		{name: "jetstream without url", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "" }, field: "nats.url"},
		{name: "jetstream without stream", base: validJetStream, mutate: func(c *Config) { c.Source.Stream = "" }, field: "source.stream"},
		{name: "jetstream bad stream", base: validJetStream, mutate: func(c *Config) { c.Source.Stream = "a.b" }, field: "source.stream"},
		{name: "jetstream subject filter", base: validJetStream, mutate: func(c *Config) { c.Source.Subject = "examples.*.x" }},
		{name: "jetstream bad subject filter", base: validJetStream, mutate: func(c *Config) { c.Source.Subject = "a..b" }, field: "source.subject"},
		{name: "nats without url", base: validNATS, mutate: func(c *Config) { c.NATS.URL = "" }, field: "nats.url"},
		{name: "nats without subject", base: validNATS, mutate: func(c *Config) { c.Source.Subject = "" }, field: "source.subject"},
		{name: "nats subject > not last", base: validNATS, mutate: func(c *Config) { c.Source.Subject = "a.>.b" }, field: "source.subject"},
		{name: "start latest", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartLatest} }},
		{name: "start offset", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset} }},
		{name: "start time", base: validKafka, mutate: func(c *Config) {
			c.Source.Start = wire.Start{Kind: wire.StartTime, Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("", 2*3600))}
		}},
		{name: "start unknown", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: "yesterday"} }, field: "source.start"},
		{name: "start negative offset", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartOffset, Offset: -1} }, field: "source.start"},
		{name: "start time without a time", base: validKafka, mutate: func(c *Config) { c.Source.Start = wire.Start{Kind: wire.StartTime} }, field: "source.start"},
		{name: "format jsonl", base: validKafka, mutate: func(c *Config) { c.Source.Format = "jsonl" }},
		{name: "format msgpack", base: validKafka, mutate: func(c *Config) { c.Source.Format = "msgpack" }},
		{name: "format unknown", base: validKafka, mutate: func(c *Config) { c.Source.Format = "xml" }, field: "source.format"},
		{name: "max_bytes 0", base: validKafka, mutate: func(c *Config) { c.Source.MaxBytes = 0 }, field: "source.max_bytes"},
		{name: "max_features 0", base: validKafka, mutate: func(c *Config) { c.Source.MaxFeatures = 0 }, field: "source.max_features"},
		{name: "batch 0", base: validKafka, mutate: func(c *Config) { c.Source.Batch = 0 }, field: "source.batch"},
		{name: "batch 100001", base: validKafka, mutate: func(c *Config) { c.Source.Batch = 100001 }, field: "source.batch"},
		{name: "batch 100000", base: validKafka, mutate: func(c *Config) { c.Source.Batch = 100000 }},
		{name: "batch 1", base: validKafka, mutate: func(c *Config) { c.Source.Batch = 1 }},
		{name: "kafka source with partitions", base: validKafka, mutate: func(c *Config) { c.Source.Partitions = []string{"0"} }, field: "source.partitions", problem: "a kafka source does not read it"},
		{name: "kafka source with stream_partitions", base: validKafka, mutate: func(c *Config) { c.Source.StreamPartitions = 4 }, field: "source.stream_partitions"},
		{name: "kafka source with stream", base: validKafka, mutate: func(c *Config) { c.Source.Stream = "EXAMPLES" }, field: "source.stream"},
		{name: "kafka source with subject", base: validKafka, mutate: func(c *Config) { c.Source.Subject = "examples" }, field: "source.subject", problem: "only jetstream or nats"},
		{name: "kafka source with group", base: validKafka, mutate: func(c *Config) { c.Source.Group = "audit" }},
		{name: "jetstream source with topics", base: validJetStream, mutate: func(c *Config) { c.Source.Topics = []string{"examples"} }, field: "source.topics", problem: "only kafka"},
		{name: "jetstream source with group", base: validJetStream, mutate: func(c *Config) { c.Source.Group = "audit" }, field: "source.group"},
		{name: "nats source with stream", base: validNATS, mutate: func(c *Config) { c.Source.Stream = "EXAMPLES" }, field: "source.stream"},
		{name: "nats source with partitions", base: validNATS, mutate: func(c *Config) { c.Source.Partitions = []string{"replicas:2"} }, field: "source.partitions"},
		{name: "nats source with stream_partitions", base: validNATS, mutate: func(c *Config) { c.Source.StreamPartitions = -1 }, field: "source.stream_partitions"},

		// outputs
		{name: "no outputs", base: validKafka, mutate: func(c *Config) { c.Outputs = Default().Outputs }},
		{name: "predictions without kind", base: validKafka, mutate: func(c *Config) { c.Outputs.Predictions = dest("predictions") }, field: "outputs.predictions"},
		{name: "predictions unknown kind", base: validKafka, mutate: func(c *Config) { c.Outputs.Predictions = dest("redis:p") }, field: "outputs.predictions"},
		{name: "predictions empty topic", base: validKafka, mutate: func(c *Config) { c.Outputs.Predictions = dest("kafka:") }, field: "outputs.predictions"},
		{name: "misclassifications bad topic", base: validKafka, mutate: func(c *Config) { c.Outputs.Misclassifications = dest("kafka:a/b") }, field: "outputs.misclassifications"},
		{name: "misclassifications wildcard subject", base: validJetStream, mutate: func(c *Config) { c.Outputs.Misclassifications = dest("jetstream:m.*") }, field: "outputs.misclassifications"},
		{name: "dead_letter empty subject", base: validNATS, mutate: func(c *Config) { c.Outputs.DeadLetter = dest("nats:") }, field: "outputs.dead_letter"},
		{name: "kafka output without brokers", base: validJetStream, mutate: func(c *Config) { c.Outputs.DeadLetter = dest("kafka:dlq") }, field: "kafka.brokers", problem: "outputs.dead_letter"},
		{name: "jetstream output without url", base: validKafka, mutate: func(c *Config) { c.Outputs.Predictions = dest("jetstream:p") }, field: "nats.url", problem: "outputs.predictions"},
		{name: "nats output without url", base: validKafka, mutate: func(c *Config) { c.Outputs.Misclassifications = dest("nats:m") }, field: "nats.url", problem: "outputs.misclassifications"},
		{name: "kafka source, jetstream output", base: validKafka, mutate: func(c *Config) {
			c.NATS.URL = "nats://n:4222"
			c.Outputs.Predictions = dest("jetstream:p")
		}},
		{name: "publish unlabeled", base: validKafka, mutate: func(c *Config) { c.Outputs.Publish = "unlabeled" }},
		{name: "publish none", base: validKafka, mutate: func(c *Config) { c.Outputs.Publish = "none" }},
		{name: "publish unknown", base: validKafka, mutate: func(c *Config) { c.Outputs.Publish = "some" }, field: "outputs.publish"},
		{name: "outputs.format msgpack", base: validKafka, mutate: func(c *Config) { c.Outputs.Format = "msgpack" }},
		{name: "outputs.format unknown", base: validKafka, mutate: func(c *Config) { c.Outputs.Format = "avro" }, field: "outputs.format"},

		// kafka
		{name: "broker without port", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = []string{"k1"} }, field: "kafka.brokers", problem: `"k1"`},
		{name: "broker without host", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = []string{":9092"} }, field: "kafka.brokers"},
		{name: "broker bad port", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = []string{"k:99999"} }, field: "kafka.brokers"},
		{name: "broker port 0", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = []string{"k:0"} }, field: "kafka.brokers"},
		{name: "broker ipv6", base: validKafka, mutate: func(c *Config) { c.Kafka.Brokers = []string{"[::1]:9092"} }},
		{name: "unused brokers still checked", base: validNATS, mutate: func(c *Config) { c.Kafka.Brokers = []string{"nope"} }, field: "kafka.brokers"},
		{name: "sasl unknown", base: validKafka, mutate: func(c *Config) { c.Kafka.SASL.Mechanism = "gssapi" }, field: "kafka.sasl.mechanism"},
		{name: "sasl empty", base: validKafka, mutate: func(c *Config) { c.Kafka.SASL.Mechanism = "" }, field: "kafka.sasl.mechanism"},
		{name: "sasl plain without username", base: validKafka, mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "plain", Password: "p"}
		}, field: "kafka.sasl.username"},
		{name: "sasl scram without password", base: validKafka, mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "scram-sha-256", Username: "u"}
		}, field: "kafka.sasl.password"},
		{name: "sasl scram-sha-512", base: validKafka, mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "scram-sha-512", Username: "u", Password: "p"}
		}},
		{name: "sasl none with a username", base: validKafka, mutate: func(c *Config) {
			c.Kafka.SASL = SASL{Mechanism: "none", Username: "u"}
		}, field: "kafka.sasl.mechanism"},
		{name: "kafka tls cert without key", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CertFile: file}
		}, field: "kafka.tls.key_file"},
		{name: "kafka tls key without cert", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, KeyFile: file}
		}, field: "kafka.tls.cert_file"},
		{name: "kafka tls files", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CAFile: file, CertFile: file, KeyFile: file}
		}},
		{name: "kafka tls missing ca_file", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CAFile: missing}
		}, field: "kafka.tls.ca_file", problem: missing + ": no such file or directory"},
		{name: "kafka tls missing cert_file", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CertFile: missing, KeyFile: file}
		}, field: "kafka.tls.cert_file", problem: missing},
		{name: "kafka tls missing key_file", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CertFile: file, KeyFile: missing}
		}, field: "kafka.tls.key_file", problem: missing},
		{name: "kafka tls ca_file is a directory", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{Enabled: true, CAFile: dir}
		}, field: "kafka.tls.ca_file", problem: "directory"},
		{name: "kafka tls files while disabled", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{CAFile: file}
		}, field: "kafka.tls.enabled", problem: "kafka.tls.ca_file"},
		{name: "kafka tls insecure while disabled", base: validKafka, mutate: func(c *Config) {
			c.Kafka.TLS = TLS{InsecureSkipVerify: true}
		}, field: "kafka.tls.enabled"},

		// nats
		{name: "nats url list", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "tls://a:4222, nats://b:4222,c" }},
		{name: "nats url websocket", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "wss://a" }},
		{name: "nats url bad scheme", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "http://a:4222" }, field: "nats.url"},
		{name: "nats url no host", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "nats://" }, field: "nats.url"},
		{name: "nats url empty element", base: validJetStream, mutate: func(c *Config) { c.NATS.URL = "a:4222,,b:4222" }, field: "nats.url"},
		{name: "nats credentials file", base: validJetStream, mutate: func(c *Config) { c.NATS.CredentialsFile = file }},
		{name: "nats nkey file", base: validJetStream, mutate: func(c *Config) { c.NATS.NKeyFile = file }},
		{name: "nats missing credentials file", base: validJetStream, mutate: func(c *Config) { c.NATS.CredentialsFile = missing }, field: "nats.credentials_file", problem: missing},
		{name: "nats missing nkey file", base: validJetStream, mutate: func(c *Config) { c.NATS.NKeyFile = missing }, field: "nats.nkey_file", problem: missing},
		{name: "nats credentials and nkey", base: validJetStream, mutate: func(c *Config) {
			c.NATS.CredentialsFile, c.NATS.NKeyFile = file, file
		}, field: "nats.nkey_file"},
		{name: "nats tls missing ca_file", base: validJetStream, mutate: func(c *Config) {
			c.NATS.TLS = TLS{Enabled: true, CAFile: missing}
		}, field: "nats.tls.ca_file", problem: missing},
		{name: "nats tls cert without key", base: validJetStream, mutate: func(c *Config) {
			c.NATS.TLS = TLS{Enabled: true, CertFile: file}
		}, field: "nats.tls.key_file"},
		{name: "nats tls key file while disabled", base: validJetStream, mutate: func(c *Config) {
			c.NATS.TLS = TLS{KeyFile: file}
		}, field: "nats.tls.enabled", problem: "nats.tls.key_file"},

		// http
		{name: "http off", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = "" }},
		{name: "http any port", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = "127.0.0.1:0" }},
		{name: "http ipv6", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = "[::1]:9090" }},
		{name: "http without port", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = "localhost" }, field: "http.addr", problem: "missing port"},
		{name: "http bad port", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = ":http-alt" }, field: "http.addr"},
		{name: "http port too big", base: validKafka, mutate: func(c *Config) { c.HTTP.Addr = ":65536" }, field: "http.addr"},

		// log
		{name: "log debug", base: validKafka, mutate: func(c *Config) { c.Log.Level = "debug" }},
		{name: "log warn console", base: validKafka, mutate: func(c *Config) { c.Log.Level, c.Log.Format = "warn", "console" }},
		{name: "log error json", base: validKafka, mutate: func(c *Config) { c.Log.Level, c.Log.Format = "error", "json" }},
		{name: "log level unknown", base: validKafka, mutate: func(c *Config) { c.Log.Level = "trace" }, field: "log.level"},
		{name: "log format unknown", base: validKafka, mutate: func(c *Config) { c.Log.Format = "text" }, field: "log.format"},

		// order: the first problem wins
		{name: "model before log", base: validKafka, mutate: func(c *Config) {
			c.Model.Name = ""
			c.Log.Level = "trace"
		}, field: "model.name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.base()
			tc.mutate(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid config: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want a *FieldError for %s", err, err, tc.field)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q, want %q (%v)", fe.Field, tc.field, err)
			}
			if !strings.Contains(fe.Problem, tc.problem) {
				t.Errorf("problem %q does not contain %q", fe.Problem, tc.problem)
			}
			if err.Error() != fe.Field+": "+fe.Problem {
				t.Errorf("Error() = %q, want field: problem", err.Error())
			}
		})
	}
}

func TestKafkaGroup(t *testing.T) {
	c := validKafka()
	if got := c.KafkaGroup(); got != "hyperplane-clicks" {
		t.Errorf("default group = %q, want hyperplane-clicks", got)
	}
	c.Source.Group = "audit"
	if got := c.KafkaGroup(); got != "audit" {
		t.Errorf("group = %q, want audit", got)
	}
}

// TestDestinationUnmarshalText: an output's text, read once when the
// configuration is loaded, and written back as it was read.
func TestDestinationUnmarshalText(t *testing.T) {
	cases := []struct {
		in         string
		kind, name string
		err        string // a substring of the error; "" for none
	}{
		{in: "kafka:predictions", kind: "kafka", name: "predictions"},
		{in: "kafka:a.b_c-d", kind: "kafka", name: "a.b_c-d"},
		{in: "jetstream:events.predictions", kind: "jetstream", name: "events.predictions"},
		{in: "nats:p", kind: "nats", name: "p"},
		{in: ""}, // none
		{in: "predictions", err: "not a destination"},
		{in: "kafka:", err: "empty topic"},
		{in: "kafka:a b", err: "not a Kafka topic name"},
		{in: "kafka:" + strings.Repeat("t", 250), err: "not a Kafka topic name"},
		{in: "jetstream:", err: "empty subject"},
		{in: "nats:a.>", err: "wildcard"},
		{in: "nats:a..b", err: "empty token"},
		{in: "s3:bucket", err: `unknown kind "s3"`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			before := Destination{Kind: KindNATS, Topic: "before"}
			d := before
			err := d.UnmarshalText([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				if d != before {
					t.Errorf("a failed UnmarshalText changed the destination to %+v", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(d.Kind) != tc.kind || d.Topic != tc.name {
				t.Errorf("got %q, %q; want %q, %q", d.Kind, d.Topic, tc.kind, tc.name)
			}
			if text, _ := d.MarshalText(); string(text) != tc.in {
				t.Errorf("written back as %q", text)
			}
		})
	}
}

// TestValidateReadBack: an output the worker would read back as input,
// its events learned or joined and giving more events, stops start-up
// naming the output's key; an output beside the input does not.
func TestValidateReadBack(t *testing.T) {
	testOutputCases(t, "read its own events", []outputCase{
		{"a source topic", validKafka, func(c *Config) { c.Outputs.Predictions = dest("kafka:examples") }, "outputs.predictions", "source.topics"},
		{"a second source topic", validKafka, func(c *Config) {
			c.Source.Topics = []string{"examples", "more"}
			c.Outputs.DeadLetter = dest("kafka:more")
		}, "outputs.dead_letter", "as examples"},
		{"the labels' topic", func() Config { return kafkaLabels() }, func(c *Config) { c.Outputs.LateLabels = dest("kafka:clicks") }, "outputs.late_labels", "labels.topics"},
		{"another topic", validKafka, func(c *Config) { c.Outputs.Predictions = dest("kafka:examples-predictions") }, "", ""},
		{"a source subject's wildcard", validJetStream, func(c *Config) {
			c.Source.Subject = "loop.>"
			c.Outputs.Predictions = dest("jetstream:loop.predictions")
		}, "outputs.predictions", "source.subject loop.>"},
		{"a source subject's token wildcard", validJetStream, func(c *Config) {
			c.Source.Subject = "loop.*.in"
			c.Outputs.Misclassifications = dest("nats:loop.x.in")
		}, "outputs.misclassifications", "source.subject"},
		{"outside a source subject", validJetStream, func(c *Config) {
			c.Source.Subject = "loop.*.in"
			c.Outputs.Predictions = dest("jetstream:loop.x.out")
			c.Outputs.DeadLetter = dest("jetstream:loop")
		}, "", ""},
		{"a core NATS source", validNATS, func(c *Config) { c.Outputs.Predictions = dest("jetstream:examples.predictions") }, "outputs.predictions", "as examples"},
		{"the labels' subject", validJetStream, func(c *Config) {
			c.Labels = Labels{Kind: KindJetStream, Stream: "CLICKS", Subject: "clicks", Format: "auto", Window: time.Minute, MaxPending: 1}
			c.Outputs.LateLabels = dest("jetstream:clicks")
		}, "outputs.late_labels", "labels.subject clicks"},
	})
}

// outputCase is a configuration of outputs: valid when field is "", else
// refused on field with an error that says says.
type outputCase struct {
	name   string
	base   func() Config
	mutate func(*Config)
	field  string
	says   string
}

// testOutputCases validates each case, a refusal saying also besides its
// own says.
func testOutputCases(t *testing.T, also string, cases []outputCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.base()
			tc.mutate(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), also) {
				t.Fatalf("got %v, want an error on %s saying %q and %q", err, tc.field, tc.says, also)
			}
		})
	}
}

// TestValidateSharedIDs: two outputs whose events carry the example's
// event_id on one Kafka topic or one NATS subject are refused, naming
// both keys; the late labels, whose events carry the label's position,
// may share a topic with them.
func TestValidateSharedIDs(t *testing.T) {
	testOutputCases(t, "event_id", []outputCase{
		{"kafka predictions and misclassifications", validKafka, func(c *Config) {
			c.Outputs.Predictions = dest("kafka:events")
			c.Outputs.Misclassifications = dest("kafka:events")
		}, "outputs.misclassifications", "also outputs.predictions"},
		{"kafka dead letters and drift", validKafka, func(c *Config) {
			c.Outputs.DeadLetter = dest("kafka:events")
			c.Outputs.Drift = dest("kafka:events")
		}, "outputs.drift", "also outputs.dead_letter"},
		{"a jetstream and a core NATS subject", validJetStream, func(c *Config) {
			c.Outputs.Predictions = dest("jetstream:out.events")
			c.Outputs.Misclassifications = dest("nats:out.events")
		}, "outputs.misclassifications", "also outputs.predictions"},
		{"a kafka topic and a subject of one name", validKafka, func(c *Config) {
			c.NATS.URL = "nats://127.0.0.1:4222"
			c.Outputs.Predictions = dest("kafka:events")
			c.Outputs.Misclassifications = dest("nats:events")
		}, "", ""},
		{"late labels beside predictions", func() Config { return kafkaLabels() }, func(c *Config) {
			c.Outputs.Predictions = dest("kafka:events")
			c.Outputs.LateLabels = dest("kafka:events")
		}, "", ""},
	})
}
