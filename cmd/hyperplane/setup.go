package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/provision"
)

// validateSetup checks the options of setup's flags, naming the flag of a
// wrong one; -retention is both a topic's and a stream's.
func validateSetup(o provision.Options) error {
	t, s := o.Topics, o.Streams
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
  labels.topics, labels.stream, labels.subject
                                   the labels' topic, with as many partitions as the
                                   source's topics, or stream (partitioned as the
                                   source's with source.stream_partitions)
  outputs.predictions, outputs.misclassifications, outputs.dead_letter, outputs.drift,
  outputs.late_labels, outputs.challenger_predictions, outputs.promotions
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
	o := provision.Options{Topics: kafkaio.TopicOptions{Partitions: 1, ReplicationFactor: -1}, Streams: natsio.StreamOptions{Replicas: 1}}
	fs := newFlagSet("setup", "--config FILE [flags] [--key value ...]", e)
	fs.IntVar(&o.Topics.Partitions, "partitions", o.Topics.Partitions, "partitions of each new Kafka topic")
	fs.IntVar(&o.Topics.ReplicationFactor, "replication-factor", o.Topics.ReplicationFactor, "replicas of each partition of a new Kafka topic; -1: the brokers' default.replication.factor")
	fs.DurationVar(&o.Streams.Retention, "retention", 0, "how long a new topic or stream keeps messages (Kafka retention.ms, JetStream max age), e.g. 168h; 0: the Kafka brokers' default, no limit on JetStream")
	fs.DurationVar(&o.Streams.DuplicateWindow, "duplicate-window", 0, "how long a new stream remembers message ids to drop republished events (longer than snapshot.interval plus a restart); 0: the server's default, 2m or the retention if shorter")
	fs.IntVar(&o.Streams.Replicas, "replicas", o.Streams.Replicas, "replicas of each new JetStream stream (1 to 5, at most the cluster's size)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(e.stdout, setupKeys)
	}
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	o.Topics.Retention = o.Streams.Retention
	if err := validateSetup(o); err != nil {
		return err
	}
	cfg, err := loadCommandConfig(e, fs, cfgArgs) // -h went to fs
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return invalidConfig(e, args, err)
	}
	// Only trouble is logged: the report is the output.
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit

	b := brokers.New(cfg, "hyperplane "+cfg.Model.Name, log)
	defer b.Close()
	results, brokerErr := provision.Provision(ctx, cfg, provision.Brokers{Kafka: b.KafkaConfig, NATS: b.NATSConn}, o)
	printSetup(e.stdout, results)
	if brokerErr != nil {
		return brokerErr
	}
	failed := 0
	for _, r := range results {
		if r.State == "failed" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("setup: %d of %d could not be set up (see the failed lines)", failed, len(results))
	}
	return nil
}

// printSetup writes one aligned line per result; results about the same
// topic or stream with the same outcome share a line.
func printSetup(w io.Writer, results []provision.Result) {
	var merged []provision.Result
	for _, r := range results {
		i := slices.IndexFunc(merged, func(m provision.Result) bool {
			return m.State == r.State && m.What == r.What && m.Detail == r.Detail
		})
		if i < 0 {
			merged = append(merged, r)
			continue
		}
		merged[i].Keys = append(merged[i].Keys, r.Keys...)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range merged {
		fmt.Fprintf(tw, "%s\t%s\t%s\tfor %s\n", r.State, r.What, r.Detail, strings.Join(r.Keys, ", "))
	}
	tw.Flush()
}
