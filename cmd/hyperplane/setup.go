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
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/nats-io/nats.go/jetstream"
	kafkago "github.com/segmentio/kafka-go"
)

// setupOptions say how setup makes what is missing. What exists is never
// changed, whatever they say.
type setupOptions struct {
	// partitions of a new Kafka topic. One by default: a single partition
	// is a total order, so a replay or a restart reproduces the same model
	// and the same events (DESIGN §5), and Kafka can add partitions to a
	// topic later but never take them away.
	partitions int
	// replicationFactor of a new Kafka topic; -1 is the brokers'
	// default.replication.factor, right for one broker and for a cluster.
	replicationFactor int
	// retention of a new topic (retention.ms) or stream (MaxAge); 0 is the
	// brokers' default on Kafka and no age limit on JetStream.
	retention time.Duration
	// duplicateWindow of a new stream: how long JetStream remembers a
	// Nats-Msg-Id, so how late a republished event is still dropped; 0 is
	// the server's default, 2m or the retention if shorter.
	duplicateWindow time.Duration
	// replicas of a new stream.
	replicas int
}

func (o setupOptions) validate() error {
	switch {
	case o.partitions < 1:
		return usagef("-partitions: must be at least 1, got %d", o.partitions)
	case o.replicationFactor < 1 && o.replicationFactor != -1:
		return usagef("-replication-factor: must be at least 1, or -1 for the brokers' default, got %d", o.replicationFactor)
	case o.retention < 0:
		return usagef("-retention: must be 0 or more, got %v", o.retention)
	case o.duplicateWindow < 0 || (o.duplicateWindow > 0 && o.duplicateWindow < 100*time.Millisecond):
		return usagef("-duplicate-window: must be 0 (the server's default) or at least 100ms, got %v", o.duplicateWindow)
	case o.retention > 0 && o.duplicateWindow > o.retention:
		return usagef("-duplicate-window %v is longer than -retention %v: JetStream cannot remember a message id longer than it keeps the message", o.duplicateWindow, o.retention)
	case o.replicas < 1 || o.replicas > 5:
		return usagef("-replicas: must be between 1 and 5, got %d", o.replicas)
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
	o := setupOptions{partitions: 1, replicationFactor: -1, replicas: 1}
	fs := newFlagSet("setup", "--config FILE [flags] [--key value ...]", e)
	fs.IntVar(&o.partitions, "partitions", o.partitions, "partitions of each new Kafka topic")
	fs.IntVar(&o.replicationFactor, "replication-factor", o.replicationFactor, "replicas of each partition of a new Kafka topic; -1: the brokers' default.replication.factor")
	fs.DurationVar(&o.retention, "retention", 0, "how long a new topic or stream keeps messages (Kafka retention.ms, JetStream max age), e.g. 168h; 0: the Kafka brokers' default, no limit on JetStream")
	fs.DurationVar(&o.duplicateWindow, "duplicate-window", 0, "how long a new stream remembers message ids to drop republished events (longer than snapshot.interval plus a restart); 0: the server's default, 2m or the retention if shorter")
	fs.IntVar(&o.replicas, "replicas", o.replicas, "replicas of each new JetStream stream (1 to 5, at most the cluster's size)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(e.stdout, setupKeys)
	}
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
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
		rs, brokerErr = setupKafka(ctx, b, kafka, o)
		results = append(results, rs...)
	}
	if js := byKind(targets, "stream", "jetstream"); len(js) > 0 && brokerErr == nil {
		var rs []setupResult
		rs, brokerErr = setupJetStream(ctx, b, cfg.Source, js, o)
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
func setupKafka(ctx context.Context, b *brokers, ts []setupTarget, o setupOptions) ([]setupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	kc, err := b.kafkaConfig()
	if err != nil {
		return nil, err
	}
	transport := &kafkago.Transport{ClientID: kc.ClientID, TLS: kc.TLS, SASL: kc.SASL}
	defer transport.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(kc.Brokers...), Timeout: setupTimeout, Transport: transport}

	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.name
	}
	meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: names})
	if err != nil {
		return nil, fmt.Errorf("kafka: %w (check kafka.brokers, the TLS and SASL settings, and that the brokers are up)", err)
	}
	found := map[string]kafkago.Topic{}
	for _, t := range meta.Topics {
		found[t.Name] = t
	}
	results := make([]setupResult, len(ts))
	var create []kafkago.TopicConfig
	var existing []string
	for i, t := range ts {
		results[i] = setupResult{what: "kafka topic " + t.name, keys: t.keys}
		mt, ok := found[t.name]
		switch {
		case ok && mt.Error == nil:
			existing = append(existing, t.name)
		case !ok || errors.Is(mt.Error, kafkago.UnknownTopicOrPartition):
			tc := kafkago.TopicConfig{Topic: t.name, NumPartitions: o.partitions, ReplicationFactor: o.replicationFactor}
			if o.retention > 0 {
				tc.ConfigEntries = []kafkago.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(o.retention.Milliseconds(), 10)}}
			}
			create = append(create, tc)
		default:
			results[i].state, results[i].detail = "failed", mt.Error.Error()
		}
	}
	retention := topicRetention(ctx, client, existing)
	var createErrs map[string]error
	if len(create) > 0 {
		resp, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: create})
		if err != nil {
			return nil, fmt.Errorf("kafka: creating topics: %w (check that the brokers are up)", err)
		}
		createErrs = resp.Errors
	}
	for i, t := range ts {
		r := &results[i]
		if r.state != "" {
			continue
		}
		if slices.Contains(existing, t.name) {
			r.state, r.detail = "exists", describeTopic(found[t.name], retention[t.name])
			continue
		}
		switch err := createErrs[t.name]; {
		case err == nil:
			r.state = "created"
			rf, ret := "the brokers' default", "the brokers' default"
			if o.replicationFactor > 0 {
				rf = strconv.Itoa(o.replicationFactor)
			}
			if o.retention > 0 {
				ret = shortDuration(o.retention)
			}
			r.detail = fmt.Sprintf("%s, replication factor %s, retention %s", plural(o.partitions, "partition"), rf, ret)
		case errors.Is(err, kafkago.TopicAlreadyExists):
			r.state, r.detail = "exists", "created by someone else meanwhile"
		default:
			r.state, r.detail = "failed", "could not create it: "+err.Error()
		}
	}
	return results, nil
}

// topicRetention asks for the retention of topics, by name. It is only
// for the report: a topic whose configuration cannot be read is left out.
func topicRetention(ctx context.Context, client *kafkago.Client, topics []string) map[string]string {
	out := map[string]string{}
	if len(topics) == 0 {
		return out
	}
	req := &kafkago.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafkago.DescribeConfigRequestResource{
			ResourceType: kafkago.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"retention.ms"},
		})
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return out
	}
	for _, r := range resp.Resources {
		for _, c := range r.ConfigEntries {
			if r.Error != nil || c.ConfigName != "retention.ms" {
				continue
			}
			ms, err := strconv.ParseInt(c.ConfigValue, 10, 64)
			switch {
			case err != nil:
			case ms < 0:
				out[r.ResourceName] = "unlimited"
			default:
				out[r.ResourceName] = shortDuration(time.Duration(ms) * time.Millisecond)
			}
		}
	}
	return out
}

func describeTopic(t kafkago.Topic, retention string) string {
	s := plural(len(t.Partitions), "partition")
	if len(t.Partitions) > 0 {
		s += fmt.Sprintf(", replication factor %d", len(t.Partitions[0].Replicas))
	}
	if retention != "" {
		s += ", retention " + retention
	}
	return s
}

// setupJetStream creates the streams of ts that are missing: source.stream
// storing source.subject, and a stream for each output subject that no
// stream stores. An error means the server could not be asked at all.
func setupJetStream(ctx context.Context, b *brokers, source config.Source, ts []setupTarget, o setupOptions) ([]setupResult, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	nc, err := b.natsConn()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	if _, err := js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("nats: JetStream is not enabled on %s (start nats-server with -js, or add jetstream {} to its configuration)", redact.URLs(nc.ConnectedUrl()))
		}
		return nil, fmt.Errorf("nats: %w (check nats.url, the credentials and that the server is up)", err)
	}
	results := make([]setupResult, len(ts))
	for i, t := range ts {
		if t.kind == "stream" {
			results[i] = setupSourceStream(ctx, js, t, o)
		} else {
			results[i] = setupOutputStream(ctx, js, source, t, o)
		}
		results[i].keys = t.keys
	}
	return results, nil
}

// partitionedStreamServer is the first nats-server release whose streams
// take a subject transform (StreamConfig.SubjectTransform), which is what
// partitions a stream. An older server ignores the transform: it creates
// the stream unpartitioned, and nats.go then reports
// ErrStreamSubjectTransformNotSupported with the stream left behind.
const partitionedStreamServer = "2.10.0"

// checkPartitionedStreamServer connects to NATS and fails, saying which
// release is needed and how to get one, if the server is older than
// partitionedStreamServer. A version it cannot read is let through: the
// stream's creation then tells.
func checkPartitionedStreamServer(b *brokers) error {
	nc, err := b.natsConn()
	if err != nil {
		return err
	}
	v := nc.ConnectedServerVersion()
	have, ok := parseServerVersion(v)
	need, _ := parseServerVersion(partitionedStreamServer)
	if !ok || slices.Compare(have[:], need[:]) >= 0 {
		return nil
	}
	return fmt.Errorf("nats: %s is nats-server %s, but a partitioned stream (source.stream_partitions) needs nats-server %s or later, whose streams take a subject transform; "+
		"nothing was created: run a newer server (go install github.com/nats-io/nats-server/v2@latest, or a release from https://github.com/nats-io/nats-server/releases; "+
		"Debian's and Ubuntu's packages may be older)", redact.URLs(nc.ConnectedUrl()), v, partitionedStreamServer)
}

// parseServerVersion reads major.minor.patch from the start of a server's
// version, such as 2.9.10 or 2.10.0-beta.1 (a pre-release counts as its
// release).
func parseServerVersion(v string) (mmp [3]int, ok bool) {
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) != 3 {
		return mmp, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return mmp, false
		}
		mmp[i] = n
	}
	return mmp, true
}

// setupSourceStream creates source.stream storing source.subject, or
// checks that the stream there stores source.subject.
func setupSourceStream(ctx context.Context, js jetstream.JetStream, t setupTarget, o setupOptions) setupResult {
	r := setupResult{what: "jetstream stream " + t.name}
	s, err := js.Stream(ctx, t.name)
	switch {
	case err == nil:
		info := s.CachedInfo()
		subjects := info.Config.Subjects
		if t.subject != "" && len(subjects) > 0 && !slices.ContainsFunc(subjects, func(s string) bool { return subjectWithin(t.subject, s) }) {
			r.state, r.detail = "failed", fmt.Sprintf("exists, but its subjects %s do not include source.subject %s: change source.subject, or the stream (setup changes nothing that exists)", strings.Join(subjects, " "), t.subject)
			return r
		}
		if t.partitions > 0 && info.Config.SubjectTransform == nil {
			r.state, r.detail = "failed", fmt.Sprintf("exists, but has no subject transform, so no partitions, and source.stream_partitions is %d: delete it to have setup create it partitioned (a nats-server older than %s creates it without one), or set source.stream_partitions to 0 (setup changes nothing that exists)", t.partitions, partitionedStreamServer)
			return r
		}
		r.state, r.detail = "exists", describeStream(info)
		return r
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		r.state, r.detail = "failed", err.Error()
		return r
	case t.subject == "":
		r.state, r.detail = "failed", "does not exist, and source.subject is empty: set it to the subjects the stream is to store"
		return r
	}
	if t.partitions > 0 {
		sc := natsio.PartitionedStreamConfig(t.name, t.subject, t.partitions)
		return createStreamWith(ctx, js, r, sc, t.subject, o)
	}
	return createStream(ctx, js, r, t.name, t.subject, o)
}

// setupOutputStream makes sure a stream stores the output subject
// t.name: one that does already, or a new one named after the subject.
// A subject that the source stream stores and reads is a failure: the
// worker would read its own events as examples.
func setupOutputStream(ctx context.Context, js jetstream.JetStream, source config.Source, t setupTarget, o setupOptions) setupResult {
	name, err := js.StreamNameBySubject(ctx, t.name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		name = streamNameFor(t.name)
		return createStream(ctx, js, setupResult{what: "jetstream stream " + name}, name, t.name, o)
	case err != nil:
		return setupResult{state: "failed", what: "jetstream subject " + t.name, detail: err.Error()}
	}
	r := setupResult{what: "jetstream stream " + name}
	s, err := js.Stream(ctx, name)
	if err != nil {
		r.state, r.detail = "failed", err.Error()
		return r
	}
	if source.Kind == config.KindJetStream && name == source.Stream && (source.Subject == "" || subjectWithin(t.name, source.Subject)) {
		r.state, r.detail = "failed", fmt.Sprintf("exists and stores %s, but it is the source stream: the worker would read its own events; choose another output subject", t.name)
		return r
	}
	r.state, r.detail = "exists", describeStream(s.CachedInfo())
	return r
}

func createStream(ctx context.Context, js jetstream.JetStream, r setupResult, name, subject string, o setupOptions) setupResult {
	return createStreamWith(ctx, js, r, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}, subject, o)
}

// createStreamWith creates the stream sc describes, with setup's storage,
// retention, duplicate window and replicas.
func createStreamWith(ctx context.Context, js jetstream.JetStream, r setupResult, sc jetstream.StreamConfig, subject string, o setupOptions) setupResult {
	name := sc.Name
	sc.Storage, sc.MaxAge, sc.Duplicates, sc.Replicas = jetstream.FileStorage, o.retention, o.duplicateWindow, o.replicas
	s, err := js.CreateStream(ctx, sc)
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		r.state, r.detail = "failed", fmt.Sprintf("a stream %s exists but does not store %s: change the stream, or the configuration (setup changes nothing that exists)", name, subject)
	case err != nil:
		r.state, r.detail = "failed", fmt.Sprintf("could not create it for %s: %v", subject, err)
	default:
		r.state, r.detail = "created", describeStream(s.CachedInfo())
	}
	return r
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

// streamNameFor names the stream setup makes for an output subject: the
// subject in capitals, dots (and anything else a stream name cannot hold)
// as underscores: sensors.predictions is stored in SENSORS_PREDICTIONS.
func streamNameFor(subject string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(".*> \t\r\n/\\", r) {
			return '_'
		}
		return r
	}, strings.ToUpper(subject))
}

// subjectWithin reports whether every subject that sub matches is matched
// by of; both may hold wildcards.
func subjectWithin(sub, of string) bool {
	st, ot := strings.Split(sub, "."), strings.Split(of, ".")
	for i, o := range ot {
		if o == ">" {
			return len(st) > i
		}
		if i >= len(st) || st[i] == ">" || (o != "*" && (st[i] == "*" || st[i] != o)) {
			return false
		}
	}
	return len(st) == len(ot)
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
