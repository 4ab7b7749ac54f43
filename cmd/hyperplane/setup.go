package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/nats-io/nats.go/jetstream"
)

// setupOptions say how setup makes what is missing, as its flags set
// them; -retention is both a topic's and a stream's. What exists is never
// changed, whatever they say.
type setupOptions struct {
	topics  kafkaio.TopicOptions
	streams natsio.StreamOptions
}

func (o setupOptions) validate() error {
	t, s := o.topics, o.streams
	switch {
	case t.Partitions < 1:
		return usagef("-partitions: must be at least 1, got %d", t.Partitions)
	case t.ReplicationFactor < 1 && t.ReplicationFactor != -1:
		return usagef("-replication-factor: must be at least 1, or -1 for the brokers' default, got %d", t.ReplicationFactor)
	case s.Retention < 0:
		return usagef("-retention: must be 0 or more, got %v", s.Retention)
	case s.DuplicateWindow < 0 || (s.DuplicateWindow > 0 && s.DuplicateWindow < 100*time.Millisecond):
		return usagef("-duplicate-window: must be 0 (the server's default) or at least 100ms, got %v", s.DuplicateWindow)
	case s.Retention > 0 && s.DuplicateWindow > s.Retention:
		return usagef("-duplicate-window %v is longer than -retention %v: JetStream cannot remember a message id longer than it keeps the message", s.DuplicateWindow, s.Retention)
	case s.Replicas < 1 || s.Replicas > 5:
		return usagef("-replicas: must be between 1 and 5, got %d", s.Replicas)
	}
	return nil
}

// setupKeys is what setup reads of the configuration, for its usage.
const setupKeys = `
Configuration keys it reads, as run reads them (--config FILE, HYPERPLANE_* variables, --key value):
  source.kind, source.topics       Kafka: the topics to create
  source.stream, source.subject    JetStream: the stream to create, storing source.subject
  source.stream_partitions         JetStream: the new stream is partitioned into N by its
                                   subject transform (needs nats-server 2.10.0 or later)
  outputs.predictions, outputs.misclassifications, outputs.dead_letter, outputs.drift
                                   kafka:<topic> outputs: a topic each; jetstream:<subject>
                                   outputs: a stream each (SUBJECT_IN_CAPITALS), unless a
                                   stream stores the subject already
  kafka.brokers, kafka.client_id, kafka.tls.*, kafka.sasl.*
  nats.url, nats.credentials_file, nats.nkey_file, nats.tls.*
The whole configuration must be valid, as for run; "hyperplane run -h" lists every key.
Core NATS subjects (nats:<subject>, source.kind nats) need nothing: core NATS stores nothing.
`

// runSetup creates the Kafka topics and JetStream streams that the
// configuration's source and outputs name and that do not exist yet, and
// reports each one on a line of its own: created or exists, with its main
// settings. It never changes a topic or stream that exists. It fails (exit
// status 1) if any could not be created or is unusable as it is, or if a
// broker cannot be reached (Kafka is set up first, then NATS). A
// partitioned source stream needs nats-server 2.10.0 or later: on an older
// server setup fails before it creates anything.
func runSetup(ctx context.Context, e *env, args []string) error {
	// One partition by default: a single partition is a total order, so a
	// replay or a restart reproduces the same model and the same events
	// (DESIGN §5), and Kafka can add partitions to a topic later but never
	// take them away. The brokers' default.replication.factor is right
	// for one broker and for a cluster.
	o := setupOptions{topics: kafkaio.TopicOptions{Partitions: 1, ReplicationFactor: -1}, streams: natsio.StreamOptions{Replicas: 1}}
	fs := newFlagSet("setup", "--config FILE [flags] [--key value ...]", e)
	fs.IntVar(&o.topics.Partitions, "partitions", o.topics.Partitions, "partitions of each new Kafka topic")
	fs.IntVar(&o.topics.ReplicationFactor, "replication-factor", o.topics.ReplicationFactor, "replicas of each partition of a new Kafka topic; -1: the brokers' default.replication.factor")
	fs.DurationVar(&o.streams.Retention, "retention", 0, "how long a new topic or stream keeps messages (Kafka retention.ms, JetStream max age), e.g. 168h; 0: the Kafka brokers' default, no limit on JetStream")
	fs.DurationVar(&o.streams.DuplicateWindow, "duplicate-window", 0, "how long a new stream remembers message ids to drop republished events (longer than snapshot.interval plus a restart); 0: the server's default, 2m or the retention if shorter")
	fs.IntVar(&o.streams.Replicas, "replicas", o.streams.Replicas, "replicas of each new JetStream stream (1 to 5, at most the cluster's size)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(e.stdout, setupKeys)
	}
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	o.topics.Retention = o.streams.Retention
	if err := o.validate(); err != nil {
		return err
	}
	cfg, err := loadConfig(e, cfgArgs) // -h went to fs
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{msg: "config: " + err.Error()}
	}
	// Only trouble is logged: the report is the output.
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit

	b := newBrokers(cfg, "hyperplane "+cfg.Model.Name, log)
	defer b.close()
	targets := setupTargets(cfg)
	if slices.ContainsFunc(targets, func(t setupTarget) bool { return t.kind == "stream" && t.partitions > 0 }) {
		// Before anything is created, Kafka topics included: a server that
		// cannot partition the stream makes the whole setup pointless.
		if err := checkPartitionedStreamServer(b); err != nil {
			return err
		}
	}
	var results []setupResult
	var brokerErr error
	if kafka := byKind(targets, "kafka"); len(kafka) > 0 {
		var rs []setupResult
		rs, brokerErr = setupKafka(ctx, b, kafka, o.topics)
		results = append(results, rs...)
	}
	if js := byKind(targets, "stream", "jetstream"); len(js) > 0 && brokerErr == nil {
		var rs []setupResult
		rs, brokerErr = setupJetStream(ctx, b, cfg.Source, js, o.streams)
		results = append(results, rs...)
	}
	for _, t := range byKind(targets, "nats") {
		results = append(results, setupResult{state: "nothing", what: "nats subject " + t.name, detail: "core NATS stores no messages: nothing to create", keys: t.keys})
	}
	printSetup(e.stdout, results)
	if brokerErr != nil {
		return brokerErr
	}
	failed := 0
	for _, r := range results {
		if r.state == "failed" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("setup: %d of %d could not be set up (see the failed lines)", failed, len(results))
	}
	return nil
}

// setupTarget is a topic, stream or subject the configuration names.
type setupTarget struct {
	kind string // kafka (a topic), stream (source.stream), jetstream or nats (an output or core NATS subject)
	// partitions is source.stream_partitions for the source stream: a
	// stream created partitioned by its subject transform.
	partitions int
	name       string   // the topic, stream or subject
	subject    string   // kind stream: source.subject, the subjects it stores
	keys       []string // the keys that name it
}

// setupTargets lists what cfg names, the source first, each once.
func setupTargets(cfg config.Config) []setupTarget {
	var ts []setupTarget
	add := func(kind, name, subject, key string) {
		for i := range ts {
			if ts[i].kind == kind && ts[i].name == name {
				ts[i].keys = append(ts[i].keys, key)
				return
			}
		}
		ts = append(ts, setupTarget{kind: kind, name: name, subject: subject, keys: []string{key}})
	}
	switch cfg.Source.Kind {
	case config.KindKafka:
		for _, t := range cfg.Source.Topics {
			add("kafka", t, "", "source.topics")
		}
	case config.KindJetStream:
		add("stream", cfg.Source.Stream, cfg.Source.Subject, "source.stream")
		for i := range ts {
			if ts[i].kind == "stream" {
				ts[i].partitions = cfg.Source.StreamPartitions
			}
		}
	case config.KindNATS:
		add("nats", cfg.Source.Subject, "", "source.subject")
	}
	switch cfg.Labels.Kind {
	case config.KindKafka:
		for _, t := range cfg.Labels.Topics {
			add("kafka", t, "", "labels.topics")
		}
	case config.KindJetStream:
		add("stream", cfg.Labels.Stream, cfg.Labels.Subject, "labels.stream")
	}
	for _, d := range cfg.Outputs.Destinations() {
		if !d.Dest.IsZero() {
			add(string(d.Dest.Kind), d.Dest.Topic, "", d.Key)
		}
	}
	return ts
}

func byKind(ts []setupTarget, kinds ...string) []setupTarget {
	var out []setupTarget
	for _, t := range ts {
		if slices.Contains(kinds, t.kind) {
			out = append(out, t)
		}
	}
	return out
}

// setupResult is one line of setup's report.
type setupResult struct {
	state  string // created, exists, nothing or failed
	what   string // kafka topic clicks, jetstream stream SENSORS, nats subject x
	detail string // its settings, or what went wrong
	keys   []string
}

// printSetup writes one aligned line per result; results about the same
// topic or stream with the same outcome share a line.
func printSetup(w io.Writer, results []setupResult) {
	var merged []setupResult
	for _, r := range results {
		i := slices.IndexFunc(merged, func(m setupResult) bool {
			return m.state == r.state && m.what == r.what && m.detail == r.detail
		})
		if i < 0 {
			merged = append(merged, r)
			continue
		}
		merged[i].keys = append(merged[i].keys, r.keys...)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range merged {
		fmt.Fprintf(tw, "%s\t%s\t%s\tfor %s\n", r.state, r.what, r.detail, strings.Join(r.keys, ", "))
	}
	tw.Flush()
}

// setupTimeout bounds each broker's share of setup.
const setupTimeout = 30 * time.Second

// setupKafka creates the topics of ts that are missing. An error means
// the cluster could not be asked at all.
func setupKafka(ctx context.Context, b *brokers, ts []setupTarget, o kafkaio.TopicOptions) ([]setupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	kc, err := b.kafkaConfig()
	if err != nil {
		return nil, err
	}
	topics := make([]string, len(ts))
	for i, t := range ts {
		topics[i] = t.name
	}
	rs, err := kafkaio.CreateTopics(ctx, kc, topics, o)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w (check kafka.brokers, the TLS and SASL settings, and that the brokers are up)", err)
	}
	results := make([]setupResult, len(rs))
	for i, r := range rs {
		results[i] = setupResult{state: string(r.State), what: "kafka topic " + r.Topic, detail: describeTopic(r), keys: ts[i].keys}
	}
	return results, nil
}

// describeTopic is the detail of a topic's line: its settings, or what
// went wrong.
func describeTopic(r kafkaio.TopicResult) string {
	switch {
	case r.Err != nil:
		return r.Err.Error()
	case r.Raced:
		return "created by someone else meanwhile"
	case r.State == kafkaio.Created:
		rf, ret := "the brokers' default", "the brokers' default"
		if r.ReplicationFactor > 0 {
			rf = strconv.Itoa(r.ReplicationFactor)
		}
		if r.Retention > 0 {
			ret = shortDuration(r.Retention)
		}
		return fmt.Sprintf("%s, replication factor %s, retention %s", plural(r.Partitions, "partition"), rf, ret)
	}
	s := plural(r.Partitions, "partition")
	if r.Partitions > 0 {
		s += fmt.Sprintf(", replication factor %d", r.ReplicationFactor)
	}
	switch {
	case r.Retention < 0:
		s += ", retention unlimited"
	case r.Retention > 0:
		s += ", retention " + shortDuration(r.Retention)
	}
	return s
}

// setupJetStream creates the streams of ts that are missing: source.stream
// storing source.subject, and a stream for each output subject that no
// stream stores. An error means the server could not be asked at all.
func setupJetStream(ctx context.Context, b *brokers, source config.Source, ts []setupTarget, o natsio.StreamOptions) ([]setupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	nc, err := b.natsConn()
	if err != nil {
		return nil, err
	}
	targets := make([]natsio.StreamTarget, len(ts))
	for i, t := range ts {
		if t.kind == "stream" {
			targets[i] = natsio.StreamTarget{Stream: t.name, Subject: t.subject, Partitions: t.partitions}
		} else {
			targets[i] = natsio.StreamTarget{Subject: t.name}
		}
	}
	var read natsio.StreamTarget
	if source.Kind == config.KindJetStream {
		read = natsio.StreamTarget{Stream: source.Stream, Subject: source.Subject}
	}
	rs, err := natsio.ProvisionStreams(ctx, nc, targets, read, o)
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("nats: JetStream is not enabled on %s (start nats-server with -js, or add jetstream {} to its configuration)", redact.URLs(nc.ConnectedUrl()))
	}
	if err != nil {
		return nil, fmt.Errorf("nats: %w (check nats.url, the credentials and that the server is up)", err)
	}
	results := make([]setupResult, len(rs))
	for i, r := range rs {
		results[i] = setupResult{state: string(r.State), what: "jetstream stream " + r.Stream, detail: describeStreamResult(r, ts[i]), keys: ts[i].keys}
		if r.Stream == "" {
			results[i].what = "jetstream subject " + ts[i].name
		}
	}
	return results, nil
}

// describeStreamResult is the detail of a stream's line: its settings, or
// what went wrong and what to change.
func describeStreamResult(r natsio.StreamResult, t setupTarget) string {
	subject := t.subject
	if t.kind != "stream" {
		subject = t.name
	}
	switch {
	case errors.Is(r.Err, natsio.ErrSubjectNotStored):
		return fmt.Sprintf("exists, but its subjects %s do not include source.subject %s: change source.subject, or the stream (setup changes nothing that exists)", strings.Join(r.Info.Config.Subjects, " "), t.subject)
	case errors.Is(r.Err, natsio.ErrNotPartitioned):
		return fmt.Sprintf("exists, but has no subject transform, so no partitions, and source.stream_partitions is %d: delete it to have setup create it partitioned (a nats-server older than %s creates it without one), or set source.stream_partitions to 0 (setup changes nothing that exists)", t.partitions, natsio.PartitionedStreamServer)
	case errors.Is(r.Err, natsio.ErrNoSubject):
		return "does not exist, and source.subject is empty: set it to the subjects the stream is to store"
	case errors.Is(r.Err, natsio.ErrReadBack):
		return fmt.Sprintf("exists and stores %s, but it is the source stream: the worker would read its own events; choose another output subject", subject)
	case errors.Is(r.Err, jetstream.ErrStreamNameAlreadyInUse):
		return fmt.Sprintf("a stream %s exists but does not store %s: change the stream, or the configuration (setup changes nothing that exists)", r.Stream, subject)
	case r.Err != nil:
		return r.Err.Error()
	}
	return describeStream(r.Info)
}

// checkPartitionedStreamServer connects to NATS and fails, saying which
// release is needed and how to get one, if the server cannot partition a
// stream.
func checkPartitionedStreamServer(b *brokers) error {
	nc, err := b.natsConn()
	if err != nil {
		return err
	}
	if err := natsio.CheckPartitionedStreams(nc); err != nil {
		return fmt.Errorf("nats: %s is nats-server %s, but a partitioned stream (source.stream_partitions) needs nats-server %s or later, whose streams take a subject transform; "+
			"nothing was created: run a newer server (go install github.com/nats-io/nats-server/v2@latest, or a release from https://github.com/nats-io/nats-server/releases; "+
			"Debian's and Ubuntu's packages may be older)", redact.URLs(nc.ConnectedUrl()), nc.ConnectedServerVersion(), natsio.PartitionedStreamServer)
	}
	return nil
}

func describeStream(info *jetstream.StreamInfo) string {
	c := info.Config
	age := "unlimited"
	if c.MaxAge > 0 {
		age = shortDuration(c.MaxAge)
	}
	subjects := strings.Join(c.Subjects, " ")
	if t := c.SubjectTransform; t != nil {
		subjects += " stored as " + t.Destination
	}
	return fmt.Sprintf("subjects %s, max age %s, duplicate window %s, %s, %s storage, %s",
		subjects, age, shortDuration(c.Duplicates), plural(max(c.Replicas, 1), "replica"), strings.ToLower(c.Storage.String()), plural(int(info.State.Msgs), "message"))
}

// shortDuration is d without Go's trailing zero units: 168h, 2m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
