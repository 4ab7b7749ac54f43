// Package provision creates what a configuration names that is missing,
// for hyperplane setup: the Kafka topics (kafka.CreateTopics) and the
// JetStream streams (nats.ProvisionStreams) of its source, its labels and
// its outputs, and says of each, in a line a person reads, whether it was
// created, exists (with its settings), or failed and what to change. It
// never changes a topic or stream that exists.
package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// Options say how what is missing is made. What exists is never changed,
// whatever they say.
type Options struct {
	Topics  kafkaio.TopicOptions
	Streams natsio.StreamOptions
}

// Brokers reach the brokers: each func is called only when a target of
// its kind needs it.
type Brokers struct {
	Kafka func() (kafkaio.Config, error)
	NATS  func() (*natsgo.Conn, error)
}

// Target is a topic, stream or subject the configuration names.
type Target struct {
	Kind string // kafka (a topic), stream (source.stream), jetstream or nats (an output or core NATS subject)
	// Partitions is source.stream_partitions for the source stream and
	// the labels' stream: a stream created partitioned by its subject
	// transform.
	Partitions int
	Name       string   // the topic, stream or subject
	Subject    string   // kind stream: source.subject or labels.subject, the subjects it stores
	Keys       []string // the keys that name it
}

// Targets lists what cfg names, the source first, each once.
func Targets(cfg config.Config) []Target {
	var ts []Target
	add := func(kind, name, subject, key string) {
		for i := range ts {
			if ts[i].Kind == kind && ts[i].Name == name {
				ts[i].Keys = append(ts[i].Keys, key)
				return
			}
		}
		ts = append(ts, Target{Kind: kind, Name: name, Subject: subject, Keys: []string{key}})
	}
	switch cfg.Source.Kind {
	case config.KindKafka:
		for _, t := range cfg.Source.Topics {
			add("kafka", t, "", "source.topics")
		}
	case config.KindJetStream:
		add("stream", cfg.Source.Stream, cfg.Source.Subject, "source.stream")
		for i := range ts {
			if ts[i].Kind == "stream" {
				ts[i].Partitions = cfg.Source.StreamPartitions
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
		// Partitioned as the source's stream, so that partition k of one
		// joins partition k of the other (docs/labels.md, section 9.1).
		ts[len(ts)-1].Partitions = cfg.Source.StreamPartitions
	}
	for _, d := range cfg.Outputs.Destinations() {
		if !d.Dest.IsZero() {
			add(string(d.Dest.Kind), d.Dest.Topic, "", d.Key)
		}
	}
	return ts
}

func byKind(ts []Target, kinds ...string) []Target {
	var out []Target
	for _, t := range ts {
		if slices.Contains(kinds, t.Kind) {
			out = append(out, t)
		}
	}
	return out
}

// Result is one line of setup's report.
type Result struct {
	State  string // created, exists, nothing or failed
	What   string // kafka topic clicks, jetstream stream SENSORS, nats subject x
	Detail string // its settings, or what went wrong
	Keys   []string
}

// Provision creates the Kafka topics and JetStream streams that cfg, which
// is valid, names and that do not exist yet, with the options o, and
// returns a result for each target (Targets), Kafka's first, then NATS'.
// A partitioned source stream needs nats-server 2.10.0 or later: on an
// older server Provision fails before it creates anything. The error is for
// a broker that could not be asked at all (Kafka is set up first, then
// NATS), and comes with the results so far.
func Provision(ctx context.Context, cfg config.Config, b Brokers, o Options) ([]Result, error) {
	targets := Targets(cfg)
	if slices.ContainsFunc(targets, func(t Target) bool { return t.Kind == "stream" && t.Partitions > 0 }) {
		// Before anything is created, Kafka topics included: a server that
		// cannot partition the stream makes the whole setup pointless.
		if err := checkPartitionedStreamServer(b); err != nil {
			return nil, err
		}
	}
	var results []Result
	var brokerErr error
	if kafka := byKind(targets, "kafka"); len(kafka) > 0 {
		var rs []Result
		rs, brokerErr = setupKafka(ctx, b, kafka, o.Topics)
		results = append(results, rs...)
	}
	if js := byKind(targets, "stream", "jetstream"); len(js) > 0 && brokerErr == nil {
		var rs []Result
		rs, brokerErr = setupJetStream(ctx, b, cfg.Source, js, o.Streams)
		results = append(results, rs...)
	}
	for _, t := range byKind(targets, "nats") {
		results = append(results, Result{State: "nothing", What: "nats subject " + t.Name, Detail: "core NATS stores no messages: nothing to create", Keys: t.Keys})
	}
	return results, brokerErr
}

// timeout bounds each broker's share of setup.
const timeout = 30 * time.Second

// setupKafka creates the topics of ts that are missing. The labels'
// topics come last, with as many partitions as the source's topics have
// once set up, whatever o says: the labels' topic must be co-partitioned
// with the examples' (docs/labels.md, section 9), and run refuses another
// count. An error means the cluster could not be asked at all.
func setupKafka(ctx context.Context, b Brokers, ts []Target, o kafkaio.TopicOptions) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kc, err := b.Kafka()
	if err != nil {
		return nil, err
	}
	isLabels := func(t Target) bool { return slices.Contains(t.Keys, "labels.topics") }
	rs := make([]kafkaio.TopicResult, len(ts))
	create := func(labels bool, o kafkaio.TopicOptions) error {
		var idx []int
		var topics []string
		for i, t := range ts {
			if isLabels(t) == labels {
				idx, topics = append(idx, i), append(topics, t.Name)
			}
		}
		if len(topics) == 0 {
			return nil
		}
		got, err := kafkaio.CreateTopics(ctx, kc, topics, o)
		if err != nil {
			return fmt.Errorf("kafka: %w (%s)", err, brokers.KafkaCheck(err, ""))
		}
		for j, r := range got {
			rs[idx[j]] = r
		}
		return nil
	}
	if err := create(false, o); err != nil {
		return nil, err
	}
	lo := o
	if n := sourcePartitions(ts, rs); n > 0 {
		lo.Partitions = n
	}
	if err := create(true, lo); err != nil {
		return nil, err
	}
	results := make([]Result, len(rs))
	for i, r := range rs {
		results[i] = Result{State: string(r.State), What: "kafka topic " + r.Topic, Detail: describeTopic(r), Keys: ts[i].Keys}
		if n := lo.Partitions; isLabels(ts[i]) && r.State == kafkaio.Exists && r.Partitions > 0 && r.Partitions != n && sourcePartitions(ts, rs) > 0 {
			results[i].State = string(kafkaio.Failed)
			results[i].Detail = fmt.Sprintf("exists with %s, and the source's topics have %d: labels.topics must have as many partitions (docs/labels.md, section 9), "+
				"and run refuses it; use a labels' topic of %d partitions", plural(r.Partitions, "partition"), n, n)
		}
	}
	return results, nil
}

// sourcePartitions is the number of partitions every source topic of ts
// has, as rs found or created them, or 0 if one is unknown or they differ.
func sourcePartitions(ts []Target, rs []kafkaio.TopicResult) int {
	n := 0
	for i, t := range ts {
		if !slices.Contains(t.Keys, "source.topics") {
			continue
		}
		p := rs[i].Partitions
		if rs[i].State == kafkaio.Failed || rs[i].Raced || p <= 0 || (n > 0 && p != n) {
			return 0
		}
		n = p
	}
	return n
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
func setupJetStream(ctx context.Context, b Brokers, source config.Source, ts []Target, o natsio.StreamOptions) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := b.NATS()
	if err != nil {
		return nil, err
	}
	targets := make([]natsio.StreamTarget, len(ts))
	for i, t := range ts {
		if t.Kind == "stream" {
			targets[i] = natsio.StreamTarget{Stream: t.Name, Subject: t.Subject, Partitions: t.Partitions}
		} else {
			targets[i] = natsio.StreamTarget{Subject: t.Name}
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
	results := make([]Result, len(rs))
	for i, r := range rs {
		results[i] = Result{State: string(r.State), What: "jetstream stream " + r.Stream, Detail: describeStreamResult(r, ts[i]), Keys: ts[i].Keys}
		if r.Stream == "" {
			results[i].What = "jetstream subject " + ts[i].Name
		}
	}
	return results, nil
}

// describeStreamResult is the detail of a stream's line: its settings, or
// what went wrong and what to change.
func describeStreamResult(r natsio.StreamResult, t Target) string {
	subject := t.Subject
	if t.Kind != "stream" {
		subject = t.Name
	}
	switch {
	case errors.Is(r.Err, natsio.ErrSubjectNotStored):
		key := subjectKey(t)
		return fmt.Sprintf("exists, but its subjects %s do not include %s %s: change %s, or the stream (setup changes nothing that exists)", strings.Join(r.Info.Config.Subjects, " "), key, t.Subject, key)
	case errors.Is(r.Err, natsio.ErrNotPartitioned):
		return fmt.Sprintf("exists, but has no subject transform, so no partitions, and source.stream_partitions is %d: delete it to have setup create it partitioned (a nats-server older than %s creates it without one), or set source.stream_partitions to 0 (setup changes nothing that exists)", t.Partitions, natsio.PartitionedStreamServer)
	case errors.Is(r.Err, natsio.ErrNoSubject):
		return fmt.Sprintf("does not exist, and %s is empty: set it to the subjects the stream is to store", subjectKey(t))
	case errors.Is(r.Err, natsio.ErrReadBack):
		return fmt.Sprintf("exists and stores %s, but it is the source stream: the worker would read its own events; choose another output subject", subject)
	case errors.Is(r.Err, jetstream.ErrStreamNameAlreadyInUse):
		return fmt.Sprintf("a stream %s exists but does not store %s: change the stream, or the configuration (setup changes nothing that exists)", r.Stream, subject)
	case r.Err != nil:
		return r.Err.Error()
	}
	return describeStream(r.Info)
}

// subjectKey is the key of the subject a stream target stores:
// labels.subject for the labels' stream, source.subject for the source's.
func subjectKey(t Target) string {
	if slices.Contains(t.Keys, "labels.stream") {
		return "labels.subject"
	}
	return "source.subject"
}

// checkPartitionedStreamServer connects to NATS and fails, saying which
// release is needed and how to get one, if the server cannot partition a
// stream.
func checkPartitionedStreamServer(b Brokers) error {
	nc, err := b.NATS()
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
