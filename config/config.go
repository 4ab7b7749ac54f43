// Package config is hyperplane's one configuration surface: a Config
// struct loaded from a YAML file, then HYPERPLANE_* environment
// variables, then command-line flags (flag > env > file > default), and
// validated with errors that name the field.
package config

import (
	"os"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Config is everything the worker needs. Every leaf field is a key: a YAML
// key (its yaml tag, nested with dots: kafka.sasl.username), an
// environment variable (HYPERPLANE_KAFKA_SASL_USERNAME) and a flag
// (--kafka.sasl.username). A field tagged secret:"true" is never shown
// by Usage, String, Redacted or WriteYAML; one tagged secret:"url" holds
// URLs or addresses, shown with their credentials (user info, query
// values) hidden. A key whose type reads text (encoding.TextUnmarshaler:
// wire.Start, Destination, ...) or is a time.Duration is parsed once,
// when it is loaded: the rest of the program takes the typed value. Start
// from Default, or Load.
type Config struct {
	// Model names the model and holds its hyperparameters.
	Model Model `yaml:"model"`
	// Kafka and NATS are the broker connections the source and the
	// outputs use.
	Kafka Kafka `yaml:"kafka"`
	NATS  NATS  `yaml:"nats"`
	// Source is where examples come from.
	Source Source `yaml:"source"`
	// Labels, when its kind is set, is where the labels of examples that
	// come without one arrive, later (docs/labels.md).
	Labels Labels `yaml:"labels"`
	// Outputs are where events go.
	Outputs Outputs `yaml:"outputs"`
	// Snapshot is where and how often the model is made durable.
	Snapshot Snapshot `yaml:"snapshot"`
	// Shutdown bounds how long the worker takes to stop.
	Shutdown Shutdown `yaml:"shutdown"`
	HTTP     HTTP     `yaml:"http"`
	// Serve answers prediction requests from the live model.
	Serve Serve `yaml:"serve"`
	Log   Log   `yaml:"log"`
}

// Snapshot configures the model's snapshots in object storage. Without a
// URL there are none: a restarted worker begins again at source.start.
type Snapshot struct {
	URL string `yaml:"url" secret:"url" help:"object storage for snapshots: file:///dir, s3://bucket/prefix?endpoint=...&region=...&use_path_style=true, gs://, azblob://, mem://; empty: no snapshots"`
	// Every is the number of labeled examples between snapshots.
	Every int `yaml:"every" help:"take a snapshot after this many labeled examples; 0: only by interval"`
	// Interval is the most time between snapshots.
	Interval time.Duration `yaml:"interval" help:"take a snapshot at least this often (a duration: 30s, 5m); 0s: only by count"`
	Keep     int           `yaml:"keep" help:"how many of the newest snapshots to keep"`
	// Reset starts a new model when the newest snapshot was trained under
	// other settings, instead of refusing to start.
	Reset bool `yaml:"reset" help:"start a new model if the stored one is incompatible with model.learner (over one partition; over several, give the new model its own model.name)"`
	// Writer identifies this worker in the snapshots it writes.
	Writer string `yaml:"writer" help:"this worker's name in its snapshots (default: the host name)"`
}

// Model is the model's identity and hyperparameters.
type Model struct {
	Name string `yaml:"name" help:"name of the model, used in events and snapshot keys"`
	// Scope is global (one model over every partition) or partition (one
	// independent model per partition).
	Scope Scope `yaml:"scope" help:"global: one model over every partition, mixed in epochs; partition: one independent model per partition"`
	// Challengers are learner configurations compared with the model on
	// the same examples (docs/compare.md). Only backtest learns them for
	// now; run refuses to start with any.
	Challengers Challengers `yaml:"challengers" help:"learner configurations to compare with the model, each a name and the model.learner keys it changes (in a variable or flag: name:key=value,key=value;name2:...); run learns them beside the model (in epochs, mixed with it), backtest over a file or the log"`
	// Mixing is how one model is learned over several partitions.
	Mixing  Mixing         `yaml:"mixing"`
	Learner learner.Config `yaml:"learner"`
	// Drift is the model's change detector. It is a learner setting,
	// kept in Learner.Drift, which Load sets from it: the key is
	// model.drift.
	Drift   learner.DriftConfig `yaml:"drift"`
	Compare Compare             `yaml:"compare"`
}

// Compare is how a challenger is judged against the model.
type Compare struct {
	// Alpha is the level of the confidence sequences: the chance that a
	// sequence ever excludes the true difference, however often one
	// looks, is at most Alpha.
	Alpha float64 `yaml:"alpha" help:"level of the confidence sequences that compare a challenger with the model: the chance that one ever excludes the true difference, however often it is looked at"`
	// Promote is when a challenger becomes the model: manual (when
	// hyperplane promote asks) or auto (also as soon as its log-loss
	// band lies above zero).
	Promote Promote `yaml:"promote" help:"when a challenger becomes the model: manual (hyperplane promote asks) or auto (also as soon as its log-loss band lies above zero, looked at after every example)"`
}

// Mixing is how a model is learned over a source of several partitions
// (docs/scale-out.md): every partition's next range is learned from the
// mixed model of the last epoch, and the results are mixed again. A
// source of one partition is learned as it comes, whatever these say.
type Mixing struct {
	// EpochExamples bounds an epoch: the most positions of a partition
	// it takes.
	EpochExamples int `yaml:"epoch_examples" help:"most examples of a partition in one epoch of a model learned over several partitions"`
	// Interval cuts an epoch at least this often while there is new data.
	Interval time.Duration `yaml:"interval" help:"end an epoch at least this often when there is new data (a duration: 5s)"`
	// Weights is how much each partition's model weighs in the mix.
	Weights learner.MixWeights `yaml:"weights" help:"how each partition's model weighs in the mix: uniform, examples (its labeled examples) or mistakes"`
	// Rule is how the partitions' models are combined.
	Rule learner.MixRule `yaml:"rule" help:"how the partitions' models are combined: auto (the rule measured best for the algorithm), mean, touched (each weight the mean over the partitions that changed it), damped, pegasos (Pegasos only) or arow (AROW only)"`
	// Growth makes epochs grow with the model (see Growth).
	Growth Growth `yaml:"growth" help:"an epoch holds 1/growth of what a partition learned before it (since a drift restarted the model), from 1,000 examples when the model and its challengers learn by AROW (250 otherwise) up to epoch_examples; 0: every epoch holds epoch_examples; auto: 8 when the model and its challengers learn by AROW, else 16"`
}

// Kafka is how to reach the Kafka cluster.
type Kafka struct {
	Brokers  []string `yaml:"brokers" secret:"url" help:"bootstrap brokers, host:port, comma-separated"`
	ClientID string   `yaml:"client_id" help:"client id sent to the brokers"`
	// SessionTimeout is how long the consumer group waits for a worker
	// that stopped answering before its partitions go to the others.
	SessionTimeout time.Duration `yaml:"session_timeout" help:"how long the consumer group waits for a worker that stopped answering before it gives its partitions to the others (a topic of several partitions; the brokers allow 6s to 30m by default)"`
	// GroupInstance is this worker's static membership of the consumer
	// group (Kafka's group.instance.id, KIP-345); see KafkaGroupInstance.
	GroupInstance string `yaml:"group_instance" help:"this worker's group.instance.id in the consumer group: a worker restarted after a crash under the same one takes its partitions back at once, not after kafka.session_timeout; every live worker needs its own (default: snapshot.writer, the host name; none: no static membership)"`
	TLS           TLS    `yaml:"tls"`
	SASL          SASL   `yaml:"sasl"`
}

// SASL is Kafka authentication.
type SASL struct {
	Mechanism Mechanism `yaml:"mechanism" help:"none, plain (the password in clear text unless kafka.tls is enabled: warned at start), scram-sha-256 or scram-sha-512"`
	Username  string    `yaml:"username" help:"SASL user name"`
	Password  string    `yaml:"password" secret:"true" help:"SASL password (never logged)"`
}

// TLS is a client TLS setting.
type TLS struct {
	Enabled            bool   `yaml:"enabled" help:"connect with TLS"`
	CAFile             string `yaml:"ca_file" help:"PEM file of the CAs to trust (default: the system's)"`
	CertFile           string `yaml:"cert_file" help:"PEM client certificate, for mutual TLS"`
	KeyFile            string `yaml:"key_file" help:"PEM client key, for mutual TLS"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" help:"do not verify the server's certificate (testing only)"`
}

// NATS is how to reach the NATS server.
type NATS struct {
	URL             string `yaml:"url" secret:"url" help:"server URLs, comma-separated, e.g. nats://localhost:4222"`
	CredentialsFile string `yaml:"credentials_file" help:"NATS credentials (.creds) file"`
	NKeyFile        string `yaml:"nkey_file" help:"NKey seed file"`
	TLS             TLS    `yaml:"tls"`
}

// Source is where examples come from.
type Source struct {
	// Kind is kafka, jetstream or nats (core NATS: at-most-once, no replay).
	Kind Kind `yaml:"kind" help:"kafka, jetstream or nats (core NATS, at-most-once)"`
	// Topics are the Kafka topics (Kind kafka).
	Topics []string `yaml:"topics" help:"Kafka topics to read, every partition"`
	// Group is the Kafka consumer group that progress is committed to, for
	// lag monitoring only: the worker never reads its offsets back.
	Group string `yaml:"group" help:"Kafka consumer group for lag monitoring (default hyperplane-<model>)"`
	// Stream is the JetStream stream (Kind jetstream).
	Stream string `yaml:"stream" help:"JetStream stream to read"`
	// StreamPartitions is the partition count of a stream whose subject
	// transform partitions it ({{partition(N,...)}}): each partition is
	// then a shard, learned in epochs by the workers that own it.
	StreamPartitions int `yaml:"stream_partitions" help:"partitions of source.stream's subject transform ({{partition(N,...)}}); 0: the stream is not partitioned"`
	// Partitions are the stream's partitions this worker learns (static
	// assignment): numbers, or "replicas:R" for those k with
	// k mod R = this pod's StatefulSet ordinal (its host name's last
	// "-<n>"). Empty: every partition.
	Partitions []string `yaml:"partitions" help:"partitions of a partitioned stream this worker learns: numbers, or replicas:R for k mod R = the StatefulSet ordinal of the host name; empty: all"`
	// Subject is the NATS subject (Kind nats), or a filter on the stream
	// (Kind jetstream). A partitioned stream is read whole, partition by
	// partition: its Subject is only what setup creates it to store
	// (ex.*, partitioned by the token * matches).
	Subject string `yaml:"subject" help:"NATS subject (core NATS), or subject filter (JetStream)"`
	// Start is where to begin when there is no snapshot: earliest, latest,
	// offset:N (Kafka offset or JetStream sequence) or time:RFC3339.
	Start wire.Start `yaml:"start" help:"where to begin without a snapshot: earliest, latest, offset:N or time:RFC3339"`
	// Format is the examples' encoding: auto, jsonl or msgpack.
	Format      wire.Format `yaml:"format" help:"example encoding: auto, jsonl (JSON) or msgpack"`
	MaxBytes    int         `yaml:"max_bytes" help:"largest example in bytes; larger ones go to the dead letters"`
	MaxFeatures int         `yaml:"max_features" help:"most features per example; more go to the dead letters"`
	// Batch is the most messages processed between two publishes.
	Batch int `yaml:"batch" help:"most messages processed between two publishes of outputs"`
}

// Labels is the second input: labels that arrive after their examples'
// predictions, on another topic, keyed by the example's id, and joined to
// them by the rule of docs/labels.md. An empty Kind means none: examples
// carry their labels.
type Labels struct {
	// Kind is kafka or jetstream; core NATS has no replay, and a join
	// that cannot be replayed is not a function of the logs.
	Kind Kind `yaml:"kind" help:"input of labels that come later: kafka or jetstream; empty: the examples carry their labels"`
	// Topics is the Kafka topic of the labels (Kind kafka): one, with as
	// many partitions as the source's, keyed by the examples' ids.
	Topics []string `yaml:"topics" help:"Kafka topic of the labels, co-partitioned with the source"`
	// Stream and Subject are the JetStream stream of the labels and the
	// subject they are published on (Kind jetstream). With
	// source.stream_partitions the stream is partitioned as the source's:
	// as many partitions, by a subject transform of the same token, such
	// as the id (docs/labels.md, section 9.1).
	Stream  string `yaml:"stream" help:"JetStream stream of the labels; with source.stream_partitions, partitioned as source.stream is (as many partitions, the same token hashed)"`
	Subject string `yaml:"subject" help:"subject of the labels in labels.stream (the worker's marks go there too)"`
	// Format is the labels' encoding: auto, jsonl or msgpack.
	Format wire.Format `yaml:"format" help:"label encoding: auto, jsonl (JSON) or msgpack"`
	// Window is how long an example waits for its label, on the records'
	// own times.
	Window time.Duration `yaml:"window" help:"how long an example waits for its label, on the records' own times (a duration: 10m)"`
	// Default is the label an example is learned with when none came
	// within the window, in any form a label takes; empty: such an
	// example is predicted and not learned.
	Default string `yaml:"default" help:"label of an example whose window closed without one (e.g. -1 for no click); empty: not learned"`
	// MaxPending bounds the examples waiting for their labels: past it
	// the worker stops reading examples until some are decided.
	MaxPending int `yaml:"max_pending" help:"most examples waiting for their labels; past it the worker stops reading examples (back-pressure)"`
}

// Enabled reports whether labels come on an input of their own.
func (l Labels) Enabled() bool { return l.Kind != "" }

// Source is the labels' input as a source of its own, for the broker
// adapters that open it.
func (l Labels) Source(src Source) Source {
	return Source{Kind: l.Kind, Topics: l.Topics, Stream: l.Stream, Subject: l.Subject, Start: wire.Start{Kind: wire.StartEarliest},
		Format: l.Format, MaxBytes: src.MaxBytes, MaxFeatures: src.MaxFeatures, Batch: src.Batch}
}

// Outputs are where events go. A destination is "kafka:<topic>",
// "jetstream:<subject>" or "nats:<subject>"; empty means none.
type Outputs struct {
	Predictions        Destination `yaml:"predictions" help:"destination of prediction events: kafka:<topic>, jetstream:<subject> or nats:<subject>"`
	Misclassifications Destination `yaml:"misclassifications" help:"destination of misclassification events"`
	DeadLetter         Destination `yaml:"dead_letter" help:"destination of dead-letter events (bad input)"`
	// Drift receives an event for each change of concept the model's
	// detector finds (model.drift).
	Drift Destination `yaml:"drift" help:"destination of drift events: a change of concept the model's detector found (model.drift), after which the model starts afresh"`
	// LateLabels receives each label that joined no example (late or
	// unknown), with its reason (docs/labels.md).
	LateLabels Destination `yaml:"late_labels" help:"destination of labels that joined no example (late, unknown), with the reason"`
	// ChallengerPredictions receives the predictions of the model's
	// challengers (model.challengers), each named by its challenger;
	// outputs.predictions has the model's alone.
	ChallengerPredictions Destination `yaml:"challenger_predictions" help:"destination of the challengers' prediction events (model.challengers), each named by its challenger; outputs.predictions gets the model's alone"`
	// Promotions receives an event for each challenger that becomes the
	// model (docs/compare.md, "Promotion").
	Promotions Destination `yaml:"promotions" help:"destination of promotion events: a challenger became the model (hyperplane promote, or model.compare.promote auto)"`
	// Publish says which predictions are published: all, unlabeled or
	// none. Misclassifications are always published when they have a
	// destination.
	Publish wire.Publish `yaml:"publish" help:"which predictions to publish: all, unlabeled or none"`
	// Format is the events' encoding: json or msgpack.
	Format wire.Encoding `yaml:"format" help:"event encoding: json or msgpack"`
}

// Shutdown bounds a shutdown: after SIGTERM the worker stops reading,
// publishes the outputs of what it processed and writes a last snapshot,
// within Timeout. What does not fit is named in the exit error and read
// again at the next start (its positions were not committed).
type Shutdown struct {
	Timeout time.Duration `yaml:"timeout" help:"most time from SIGTERM to exit for flushing outputs and the last snapshot (a duration: 25s); keep it below the orchestrator's grace period"`
}

// HTTP is the metrics and health server.
type HTTP struct {
	Addr string `yaml:"addr" help:"address of /metrics, /healthz and /readyz; empty disables"`
}

// Serve answers prediction requests from the model the worker holds
// while it learns: over HTTP on http.addr (POST /v1/predict) and as the
// NATS micro service "hyperplane" on Subject, in a queue group that the
// replicas share.
type Serve struct {
	HTTP       bool   `yaml:"http" help:"answer POST /v1/predict on http.addr"`
	NATS       bool   `yaml:"nats" help:"answer requests as the NATS micro service hyperplane, endpoint predict on serve.subject, over the nats.* connection"`
	Subject    string `yaml:"subject" help:"NATS subject of the predict endpoint (default hyperplane.<model>.predict)"`
	QueueGroup string `yaml:"queue_group" help:"NATS queue group in which the replicas share the requests"`
	// MaxBytes bounds a request's body; MaxInFlight the requests answered
	// at once, over both interfaces.
	MaxBytes    int `yaml:"max_bytes" help:"largest request body in bytes; a larger one is refused (HTTP 413)"`
	MaxExamples int `yaml:"max_examples" help:"most examples in a request, which bounds its reply; more are refused (HTTP 413)"`
	MaxInFlight int `yaml:"max_in_flight" help:"most requests answered at once; more are refused (HTTP 503 with Retry-After)"`
	// Timeout bounds reading a request and answering it.
	Timeout time.Duration `yaml:"timeout" help:"most time to read a request's body, and again to answer it once read (a duration: 5s)"`
	// Refresh is the most time the served model trails the learning one
	// while examples arrive.
	Refresh time.Duration `yaml:"refresh" help:"how often the served copy of the model follows the learning one (0s: after every batch)"`
	// Generations is how many stored generations, asked for by
	// ?generation=N, are kept loaded.
	Generations int `yaml:"generations" help:"how many stored generations asked for by ?generation=N may be loaded or loading at once; the ones asked for last stay loaded"`
}

// ServeSubject is the NATS subject of the predict endpoint: serve.subject, or
// "hyperplane.<model.name>.predict" when that is empty.
func (c Config) ServeSubject() string {
	if c.Serve.Subject != "" {
		return c.Serve.Subject
	}
	return "hyperplane." + c.Model.Name + ".predict"
}

// SnapshotWriter is this worker's name in what it writes to the store:
// snapshot.writer, or the host name when that is empty (a pod's name in
// Kubernetes, unique among the replicas). It is the one place that
// default is set: snapshot.Resume takes the writer it is given.
func (c Config) SnapshotWriter() string {
	if c.Snapshot.Writer != "" {
		return c.Snapshot.Writer
	}
	return Hostname()
}

// Hostname is this machine's host name, empty if it has none: the
// default of snapshot.writer, and the pod name whose ordinal
// source.partitions "replicas:R" reads (OwnedPartitions). The worker asks
// the system for it here only.
func Hostname() string {
	host, _ := os.Hostname()
	return host
}

// Serving reports whether the worker answers requests on any interface.
func (c Config) Serving() bool {
	return (c.Serve.HTTP && c.HTTP.Addr != "") || c.Serve.NATS
}

// Log is the logger.
type Log struct {
	Level  Level     `yaml:"level" help:"debug, info, warn or error"`
	Format LogFormat `yaml:"format" help:"json, console, or auto (console on a terminal, else json)"`
}

// Default is the configuration before any file, variable or flag.
func Default() Config {
	return Config{
		Model: Model{
			Name:    "default",
			Scope:   ScopeGlobal,
			Mixing:  Mixing{EpochExamples: 100000, Interval: 5 * time.Second, Weights: learner.MixExamples, Rule: learner.MixAuto, Growth: GrowthAuto},
			Learner: learner.DefaultConfig(),
			Drift:   learner.DefaultDrift(),
			Compare: Compare{Alpha: 0.05, Promote: PromoteManual},
		},
		Kafka: Kafka{ClientID: "hyperplane", SessionTimeout: 30 * time.Second, SASL: SASL{Mechanism: MechanismNone}},
		Source: Source{
			Start:       wire.Start{Kind: wire.StartEarliest},
			Format:      wire.FormatAuto,
			MaxBytes:    wire.DefaultMaxBytes,
			MaxFeatures: wire.DefaultMaxFeatures,
			Batch:       1024, // consumer.DefaultBatch (cmd tests that they agree)
		},
		Labels:   Labels{Format: wire.FormatAuto, Window: 10 * time.Minute, MaxPending: 2_000_000},
		Outputs:  Outputs{Publish: wire.PublishAll, Format: wire.EncodingJSON},
		Snapshot: Snapshot{Every: 100000, Interval: 60 * time.Second, Keep: 10},
		Shutdown: Shutdown{Timeout: 25 * time.Second}, // consumer.DefaultShutdownTimeout (cmd tests that they agree)
		HTTP:     HTTP{Addr: ":8080"},
		// The limits are serve.Options' defaults (serve.DefaultMaxBytes,
		// ...), written here so that config does not import serve and
		// its NATS and Prometheus clients; cmd tests that they agree.
		Serve: Serve{
			HTTP:        true,
			QueueGroup:  "hyperplane",
			MaxBytes:    1 << 20,
			MaxExamples: 10000,
			MaxInFlight: 64,
			Timeout:     5 * time.Second,
			Refresh:     100 * time.Millisecond,
			Generations: 4,
		},
		Log: Log{Level: LevelInfo, Format: LogAuto},
	}
}
