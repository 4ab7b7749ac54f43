package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/oneof"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/hyperplane-ml/hyperplane/internal/subject"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// FieldError says which key is wrong and why. Field is the dotted key
// (kafka.sasl.password), as in the YAML file and the flags.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// Validate reports the first key that is wrong, as a *FieldError, checking
// the model, the source, the outputs, the broker connections, HTTP and the
// log in that order. A key is checked even when nothing uses it (a Kafka
// SASL setting with a NATS source), and every file the configuration names
// must be readable now. Validate starts nothing and opens no connection.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.validateModel,
		c.validateChallengers,
		c.validateSource,
		c.validateOutputs,
		c.validateLabels,
		c.validateReadBack,
		c.validateSharedIDs,
		c.validateNoHiddenText,
		c.validateKafka,
		c.validateNATS,
		c.validateSnapshot,
		c.validateShutdown,
		c.validateHTTP,
		c.validateServe,
		c.validateLog,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// ValidateBrokers is Validate for the broker connections alone, kafka.*
// and nats.*: for the commands that connect to the brokers without running
// the worker (gen).
func (c Config) ValidateBrokers() error {
	if err := c.validateKafka(); err != nil {
		return err
	}
	return c.validateNATS()
}

// validateNoHiddenText refuses a secret key whose value holds the text
// that stands for what the configuration does not show: one copied from
// hyperplane config or a log, whose credentials are missing (an S3 URL's
// token would reach the store as a query parameter named [redacted]).
func (c Config) validateNoHiddenText() error {
	root := reflect.ValueOf(c)
	for _, k := range keys() {
		if k.secret == public {
			continue
		}
		if strings.Contains(formatText(root.FieldByIndex(k.index)), redactedText) {
			return fieldErr(k.path, "holds %s, which stands for credentials hyperplane config and the logs do not show: give the credentials themselves (docs/operations.md says where each kind goes)", redactedText)
		}
	}
	return nil
}

func (c Config) validateSnapshot() error {
	s := c.Snapshot
	if s.URL != "" {
		scheme, _, ok := strings.Cut(s.URL, "://")
		switch {
		case !ok:
			return fieldErr("snapshot.url", "%q is not a URL (want file:///dir, s3://bucket/prefix, gs://, azblob:// or mem://)", redact.URLs(s.URL))
		case scheme != "file" && scheme != "s3" && scheme != "gs" && scheme != "azblob" && scheme != "mem":
			return fieldErr("snapshot.url", "unknown scheme %q (want file, s3, gs, azblob or mem)", scheme)
		case scheme == "file":
			if err := checkFileURL(s.URL); err != nil {
				return fieldErr("snapshot.url", "%v", err)
			}
		case scheme != "mem":
			if err := checkBucketURL(s.URL); err != nil {
				return fieldErr("snapshot.url", "%v", err)
			}
		}
	}
	if s.Every < 0 {
		return fieldErr("snapshot.every", "must be 0 or more, got %d", s.Every)
	}
	if s.Interval < 0 {
		return fieldErr("snapshot.interval", "must be 0s or more, got %s", formatDuration(s.Interval))
	}
	if s.URL != "" && s.Every == 0 && s.Interval == 0 {
		return fieldErr("snapshot.every", "with snapshot.interval 0s too, no snapshot would ever be taken")
	}
	if s.Keep < 1 {
		return fieldErr("snapshot.keep", "must be at least 1, got %d", s.Keep)
	}
	return nil
}

func (c Config) validateServe() error {
	s := c.Serve
	switch {
	case s.NATS && c.NATS.URL == "":
		return fieldErr("serve.nats", "needs nats.url: the service answers on a NATS connection")
	case s.Subject != "" && !s.NATS:
		return fieldErr("serve.nats", "is false, but serve.subject is set: turn serve.nats on to answer there, or remove serve.subject")
	case s.Subject != "" && !validSubject(s.Subject):
		return fieldErr("serve.subject", "%q is not a NATS subject: dot-separated tokens, none empty, without spaces or wildcards", s.Subject)
	case s.NATS && !validSubject(c.ServeSubject()):
		return fieldErr("serve.subject", "the default %q, from model.name, is not a NATS subject: set one", c.ServeSubject())
	case s.QueueGroup == "" || strings.ContainsAny(s.QueueGroup, " \t\r\n*>"):
		return fieldErr("serve.queue_group", "%q is not a queue group name (no spaces or wildcards)", s.QueueGroup)
	case s.MaxBytes < 1:
		return fieldErr("serve.max_bytes", "must be at least 1, got %d", s.MaxBytes)
	case s.MaxExamples < 1:
		return fieldErr("serve.max_examples", "must be at least 1, got %d", s.MaxExamples)
	case s.MaxInFlight < 1:
		return fieldErr("serve.max_in_flight", "must be at least 1, got %d", s.MaxInFlight)
	case s.Timeout <= 0:
		return fieldErr("serve.timeout", "must be more than 0s (such as 5s), got %s", formatDuration(s.Timeout))
	case s.Refresh < 0:
		return fieldErr("serve.refresh", "must be 0s or more, got %s", formatDuration(s.Refresh))
	case s.Generations < 1:
		return fieldErr("serve.generations", "must be at least 1, got %d", s.Generations)
	}
	return nil
}

// validSubject reports whether s is a NATS subject a service can answer
// on: dot-separated tokens, none empty or a wildcard, without spaces.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

func (c Config) validateShutdown() error {
	if c.Shutdown.Timeout <= 0 {
		return fieldErr("shutdown.timeout", "must be more than 0s (such as 25s), got %s", formatDuration(c.Shutdown.Timeout))
	}
	return nil
}

// KafkaGroup is the Kafka consumer group that progress is committed to:
// source.group, or "hyperplane-<model.name>" when that is empty.
func (c Config) KafkaGroup() string {
	if c.Source.Group != "" {
		return c.Source.Group
	}
	return "hyperplane-" + c.Model.Name
}

// NoGroupInstance is the kafka.group_instance that makes the worker a
// dynamic member of the consumer group.
const NoGroupInstance = "none"

// KafkaGroupInstance is this worker's static membership of the consumer
// group (Kafka's group.instance.id): kafka.group_instance; or, when that
// is empty, SnapshotWriter (the host name by default) if it is a valid
// instance id; "" (a dynamic member) for NoGroupInstance or a default
// that is not valid. A worker restarted under the same instance id within
// kafka.session_timeout of a crash takes its partitions back without a
// rebalance (docs/scale-out.md, section 3.5).
func (c Config) KafkaGroupInstance() string {
	switch id := c.Kafka.GroupInstance; id {
	case NoGroupInstance:
		return ""
	case "":
		if w := c.SnapshotWriter(); validInstanceID(w) == nil {
			return w
		}
		return ""
	default:
		return id
	}
}

// validInstanceID checks id by Kafka's rule for a group.instance.id (that
// of a topic name): 1 to 249 of a-z, A-Z, 0-9, '.', '_' and '-'.
func validInstanceID(id string) error {
	if id == "" || len(id) > 249 {
		return fmt.Errorf("must be 1 to 249 characters long, got %d", len(id))
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q has %q: only a-z, A-Z, 0-9, '.', '_' and '-' are allowed", id, r)
		}
	}
	return nil
}

// maxNameLen bounds model.name, which is one segment of object keys.
const maxNameLen = 200

func (c Config) validateModel() error {
	name := c.Model.Name
	switch {
	case name == "":
		return fieldErr("model.name", "required: the model's name, used in events and snapshot keys")
	case len(name) > maxNameLen:
		return fieldErr("model.name", "longer than %d bytes", maxNameLen)
	case name == "." || name == "..":
		return fieldErr("model.name", "%q is not a name (it is part of object keys)", name)
	}
	for _, r := range name {
		if !isNameRune(r) {
			return fieldErr("model.name", "%q may hold only letters, digits, '.', '_' and '-' (it is part of object keys)", name)
		}
	}
	if err := c.Model.Scope.Validate(); err != nil {
		return fieldErr("model.scope", "%v", err)
	}
	if c.Model.Scope == ScopePartition && (c.Source.Kind == KindNATS || (c.Source.Kind == KindJetStream && c.Source.StreamPartitions == 0)) {
		return fieldErr("model.scope", "partition needs a source of partitions: a Kafka topic, or a JetStream stream with source.stream_partitions")
	}
	switch m := c.Model.Mixing; {
	case m.EpochExamples < 1:
		return fieldErr("model.mixing.epoch_examples", "must be at least 1, got %d", m.EpochExamples)
	case m.Interval <= 0:
		return fieldErr("model.mixing.interval", "must be more than 0s (such as 5s), got %s", formatDuration(m.Interval))
	case m.Growth < GrowthAuto:
		return fieldErr("model.mixing.growth", "must be auto, 0 (epochs of epoch_examples) or more (such as 16), got %d", m.Growth)
	case m.Rule == learner.MixPegasos && c.Model.Learner.Algorithm != learner.Pegasos:
		return fieldErr("model.mixing.rule", "pegasos mixes Pegasos models only, not %s (auto chooses the rule for the algorithm)", c.Model.Learner.Algorithm)
	case m.Rule == learner.MixAROW && c.Model.Learner.Algorithm != learner.AROW:
		return fieldErr("model.mixing.rule", "arow mixes AROW models only, not %s (auto chooses the rule for the algorithm)", c.Model.Learner.Algorithm)
	}
	// The detector's settings are model.drift's, which Load copies into
	// the learner's: a Config built otherwise is checked as it will run.
	lc := c.Model.Learner
	lc.Drift = c.Model.Drift
	if err := lc.ValidateNew(); err != nil {
		var fe *learner.FieldError
		switch {
		case errors.As(err, &fe) && strings.HasPrefix(fe.Field, "drift."):
			return &FieldError{Field: "model." + fe.Field, Problem: fe.Problem}
		case errors.As(err, &fe):
			return &FieldError{Field: "model.learner." + fe.Field, Problem: fe.Problem}
		}
		return &FieldError{Field: "model.learner", Problem: err.Error()}
	}
	if c.Model.Learner.Drift != c.Model.Drift {
		return fieldErr("model.drift", "is %+v but model.learner holds %+v: set model.drift, and Load copies it", c.Model.Drift, c.Model.Learner.Drift)
	}
	return nil
}

func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// maxBatch bounds source.batch.
const maxBatch = 100000

func (c Config) validateSource() error {
	s := c.Source
	switch s.Kind {
	case KindKafka:
		if len(c.Kafka.Brokers) == 0 {
			return fieldErr("kafka.brokers", "required when source.kind is kafka")
		}
		if len(s.Topics) == 0 {
			return fieldErr("source.topics", "required when source.kind is kafka: the topics to read")
		}
		for i, t := range s.Topics {
			if err := checkTopic(t); err != nil {
				return fieldErr("source.topics", "%v", err)
			}
			if slices.Contains(s.Topics[:i], t) {
				return fieldErr("source.topics", "topic %q is named twice: name it once (a list flag given more than once collects every value)", t)
			}
		}
	case KindJetStream:
		if c.NATS.URL == "" {
			return fieldErr("nats.url", "required when source.kind is jetstream")
		}
		if s.Stream == "" {
			return fieldErr("source.stream", "required when source.kind is jetstream: the stream to read")
		}
		if strings.ContainsAny(s.Stream, " \t\r\n.*>/\\") {
			return fieldErr("source.stream", "%q is not a stream name (no spaces, '.', '*', '>', '/' or '\\')", s.Stream)
		}
		if s.Subject != "" {
			if err := checkSubject(s.Subject, true); err != nil {
				return fieldErr("source.subject", "%v", err)
			}
		}
		if s.StreamPartitions < 0 {
			return fieldErr("source.stream_partitions", "must be 0 (not partitioned) or more, got %d", s.StreamPartitions)
		}
		if _, err := c.OwnedPartitions(""); err != nil {
			return err
		}
	case KindNATS:
		if c.NATS.URL == "" {
			return fieldErr("nats.url", "required when source.kind is nats")
		}
		if s.Subject == "" {
			return fieldErr("source.subject", "required when source.kind is nats: the subject to subscribe to")
		}
		if err := checkSubject(s.Subject, true); err != nil {
			return fieldErr("source.subject", "%v", err)
		}
	case "":
		return fieldErr("source.kind", "required: %s", oneof.List(Kinds()...))
	default:
		return fieldErr("source.kind", "%v", s.Kind.Validate())
	}
	if err := c.checkSourceKeysOfKind(); err != nil {
		return err
	}
	if err := s.Start.Validate(); err != nil {
		return fieldErr("source.start", "%v", err)
	}
	if s.Kind == KindNATS && (s.Start.Kind == wire.StartOffset || s.Start.Kind == wire.StartTime) {
		return fieldErr("source.start", "%s: core NATS has no replay, and a nats source reads what arrives after it subscribes, whatever the start: leave source.start out, or read a jetstream source to start at an offset or a time", s.Start)
	}
	if s.Kind == KindJetStream && s.Start.Kind == wire.StartOffset && s.Start.Offset < 1 {
		return fieldErr("source.start", "offset:%d: stream sequences start at 1 (offset:1 is the stream's first message; earliest is the first it still holds)", s.Start.Offset)
	}
	if err := s.Format.Validate(); err != nil {
		return fieldErr("source.format", "%v", err)
	}
	if s.MaxBytes < 1 {
		return fieldErr("source.max_bytes", "must be at least 1, got %d", s.MaxBytes)
	}
	if s.MaxFeatures < 1 {
		return fieldErr("source.max_features", "must be at least 1, got %d", s.MaxFeatures)
	}
	if s.Batch < 1 || s.Batch > maxBatch {
		return fieldErr("source.batch", "must be between 1 and %d, got %d", maxBatch, s.Batch)
	}
	return nil
}

func (c Config) validateOutputs() error {
	o := c.Outputs
	for _, d := range o.Destinations() {
		if d.Dest.IsZero() {
			continue
		}
		if err := d.Dest.Validate(); err != nil {
			return fieldErr(d.Key, "%v", err)
		}
		if d.Dest.Kind == KindKafka && len(c.Kafka.Brokers) == 0 {
			return fieldErr("kafka.brokers", "required by %s (%s)", d.Key, d.Dest)
		}
		if d.Dest.Kind != KindKafka && c.NATS.URL == "" {
			return fieldErr("nats.url", "required by %s (%s)", d.Key, d.Dest)
		}
	}
	if err := o.Publish.Validate(); err != nil {
		return fieldErr("outputs.publish", "%v", err)
	}
	if err := o.Format.Validate(); err != nil {
		return fieldErr("outputs.format", "%v", err)
	}
	return nil
}

func (c Config) validateKafka() error {
	if c.Kafka.SessionTimeout < time.Second {
		return fieldErr("kafka.session_timeout", "must be at least 1s (such as 30s), got %s", formatDuration(c.Kafka.SessionTimeout))
	}
	if id := c.Kafka.GroupInstance; id != "" && id != NoGroupInstance {
		if err := validInstanceID(id); err != nil {
			return fieldErr("kafka.group_instance", "%v", err)
		}
	}
	k := c.Kafka
	for _, b := range k.Brokers {
		if strings.Contains(b, "@") {
			return fieldErr("kafka.brokers", "%q has user info: a broker is host:port, and Kafka credentials go in kafka.sasl.username and kafka.sasl.password", redact.URLs(b))
		}
		if err := checkHostPort(b, false); err != nil {
			return fieldErr("kafka.brokers", "%v", err)
		}
	}
	s := k.SASL
	if err := s.Mechanism.Validate(); err != nil {
		return fieldErr("kafka.sasl.mechanism", "%v", err)
	}
	if s.Mechanism == MechanismNone {
		if s.Username != "" || s.Password != "" {
			return fieldErr("kafka.sasl.mechanism", "is none, but a username or password is set: choose %s", oneof.List(Mechanisms()[1:]...))
		}
	} else {
		if s.Username == "" {
			return fieldErr("kafka.sasl.username", "required when kafka.sasl.mechanism is %s", s.Mechanism)
		}
		if s.Password == "" {
			return fieldErr("kafka.sasl.password", "required when kafka.sasl.mechanism is %s", s.Mechanism)
		}
	}
	return checkTLS("kafka.tls", k.TLS)
}

func (c Config) validateNATS() error {
	n := c.NATS
	if n.URL != "" {
		for _, u := range strings.Split(n.URL, ",") {
			if err := checkNATSURL(strings.TrimSpace(u)); err != nil {
				return fieldErr("nats.url", "%v", err)
			}
		}
	}
	if n.CredentialsFile != "" && n.NKeyFile != "" {
		return fieldErr("nats.nkey_file", "set nats.credentials_file or nats.nkey_file, not both")
	}
	if err := checkFile("nats.credentials_file", n.CredentialsFile); err != nil {
		return err
	}
	if err := checkFile("nats.nkey_file", n.NKeyFile); err != nil {
		return err
	}
	return checkTLS("nats.tls", n.TLS)
}

func (c Config) validateHTTP() error {
	if c.HTTP.Addr == "" {
		return nil
	}
	if err := checkHostPort(c.HTTP.Addr, true); err != nil {
		return fieldErr("http.addr", "%v", err)
	}
	return nil
}

func (c Config) validateLog() error {
	if err := c.Log.Level.Validate(); err != nil {
		return fieldErr("log.level", "%v", err)
	}
	if err := c.Log.Format.Validate(); err != nil {
		return fieldErr("log.format", "%v", err)
	}
	return nil
}

// checkTLS checks the TLS section whose dotted path is prefix. Files and
// insecure_skip_verify without enabled are an error rather than silently
// ignored.
func checkTLS(prefix string, t TLS) error {
	if !t.Enabled {
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ca_file", t.CAFile != ""},
			{"cert_file", t.CertFile != ""},
			{"key_file", t.KeyFile != ""},
			{"insecure_skip_verify", t.InsecureSkipVerify},
		} {
			if f.set {
				return fieldErr(prefix+".enabled", "is false, but %s.%s is set: enable TLS or remove it", prefix, f.name)
			}
		}
		return nil
	}
	if t.CertFile != "" && t.KeyFile == "" {
		return fieldErr(prefix+".key_file", "required with %s.cert_file", prefix)
	}
	if t.KeyFile != "" && t.CertFile == "" {
		return fieldErr(prefix+".cert_file", "required with %s.key_file", prefix)
	}
	for _, f := range []struct{ field, path string }{
		{prefix + ".ca_file", t.CAFile},
		{prefix + ".cert_file", t.CertFile},
		{prefix + ".key_file", t.KeyFile},
	} {
		if err := checkFile(f.field, f.path); err != nil {
			return err
		}
	}
	return nil
}

// checkFile reports, as the key field, a named file that cannot be opened
// for reading or is a directory. An empty path names no file.
func checkFile(field, path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fieldErr(field, "%v", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fieldErr(field, "%v", err)
	}
	if info.IsDir() {
		return fieldErr(field, "%s is a directory, not a file", path)
	}
	return nil
}

// checkHostPort checks a host:port address. A listening address may leave
// the host empty (all interfaces) and use port 0 (any free port).
func checkHostPort(addr string, listen bool) error {
	shown := redact.URLs(addr) // what an error may quote: addr may carry credentials
	if shown != addr {
		return fmt.Errorf("%q is not host:port: it has user info, a query or a fragment", shown)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			err = errors.New(ae.Err)
		}
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if host == "" && !listen {
		return fmt.Errorf("%q has no host", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 && !listen {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", addr, port)
	}
	return nil
}

// checkFileURL checks a file:// store URL: its directory is its path,
// which is absolute. The text after "file://" up to the next '/' is a
// host, and a host other than localhost is not a directory: file://data
// would open the root directory, not ./data. gocloud's fileblob reads
// file://./dir as the relative directory dir.
func checkFileURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("%q is not a URL", redact.URLs(s))
	}
	switch u.Host {
	case "", "localhost", ".":
		return nil
	}
	rel := redact.URLs(strings.TrimSuffix(u.Host+u.Path, "/"))
	return fmt.Errorf("%q names the host %q, not a directory: for the directory %s write file:///absolute/path/%s, or file://./%s relative to the current directory",
		redact.URLs(s), u.Host, rel, rel, rel)
}

// parseURL parses raw, the URL s as written or completed. Its error quotes
// s, and only the parser's reason when s carries no credentials, which
// the reason may quote part of.
func parseURL(s, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err == nil {
		return u, nil
	}
	if shown := redact.URLs(s); shown != s {
		return nil, fmt.Errorf("%q is not a URL", shown)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return nil, fmt.Errorf("%q is not a URL: %w", s, err)
}

// checkBucketURL checks the URL of a store in the cloud (s3, gs,
// azblob), which names its bucket, or container, as its host.
func checkBucketURL(s string) error {
	shown := redact.URLs(s) // what an error may quote: s may carry credentials
	u, err := parseURL(s, s)
	if err != nil {
		return err
	}
	if u.Host == "" {
		bucket := "bucket"
		if u.Scheme == "azblob" {
			bucket = "container"
		}
		return fmt.Errorf("%q names no %s: want %s://%s/prefix", shown, bucket, u.Scheme, bucket)
	}
	return nil
}

// checkNATSURL checks one server URL the way nats.go reads it: a bare
// host[:port] means nats://host[:port].
func checkNATSURL(s string) error {
	if s == "" {
		return errors.New("an empty server URL")
	}
	raw := s
	if !strings.Contains(s, "://") {
		raw = "nats://" + s
	}
	shown := redact.URLs(s) // what an error may quote: s may carry credentials
	u, err := parseURL(s, raw)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("%q: unknown scheme %q (want nats, tls, ws or wss)", shown, u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", shown)
	}
	if strings.Contains(u.Hostname(), ":") && !strings.HasPrefix(u.Host, "[") {
		// url.Parse takes the text after the last colon for the port;
		// the client could dial no such host.
		return fmt.Errorf("%q is not a URL: its host holds a colon (an IPv6 address goes in brackets: nats://[::1]:4222)", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("%q: port %q is not a number from 1 to 65535", shown, p)
		}
	}
	return nil
}

// maxTopicLen is Kafka's limit on a topic name.
const maxTopicLen = 249

// checkTopic checks a Kafka topic name as the broker will.
func checkTopic(t string) error {
	if t == "" {
		return errors.New("an empty topic name")
	}
	if len(t) > maxTopicLen || t == "." || t == ".." {
		return fmt.Errorf("%q is not a Kafka topic name", t)
	}
	for _, r := range t {
		if !isNameRune(r) {
			return fmt.Errorf("%q is not a Kafka topic name (letters, digits, '.', '_' and '-' only)", t)
		}
	}
	return nil
}

// checkSubject checks a NATS subject: dot-separated non-empty tokens with
// no white space. With wildcards, a token may be "*" and the last may be
// ">"; without, neither may appear, as in a subject to publish to.
func checkSubject(s string, wildcards bool) error {
	if s == "" {
		return errors.New("an empty subject")
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("subject %q contains white space", s)
	}
	tokens := strings.Split(s, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q has an empty token", s)
		case tok == "*" || tok == ">":
			if !wildcards {
				return fmt.Errorf("subject %q has a wildcard: events are published to one subject", s)
			}
			if tok == ">" && i != len(tokens)-1 {
				return fmt.Errorf("subject %q has '>' before its last token", s)
			}
		}
	}
	return nil
}

// validateReadBack refuses an output that the worker would read back as
// input: a Kafka topic of source.topics or labels.topics, or a subject
// that source.subject or labels.subject takes in. A JetStream publish is
// a NATS message too, so a core NATS source takes in a jetstream: output
// as it does a nats: one, and a stream stores both. Each event read back
// would be learned or joined, and give another event: the stream would
// feed itself. (A JetStream source without source.subject reads its whole
// stream, whose subjects only the server knows: setup checks that case.)
func (c Config) validateReadBack() error {
	for _, d := range c.Outputs.Destinations() {
		dest := d.Dest
		if dest.IsZero() {
			continue
		}
		if dest.Kind == KindKafka {
			if c.Source.Kind == KindKafka && slices.Contains(c.Source.Topics, dest.Topic) {
				return fieldErr(d.Key, "%s is a topic of source.topics: the worker would read its own events as examples; choose another topic", dest)
			}
			if c.Labels.Kind == KindKafka && slices.Contains(c.Labels.Topics, dest.Topic) {
				return fieldErr(d.Key, "%s is a topic of labels.topics: the worker would read its own events as labels; choose another topic", dest)
			}
			continue
		}
		if s := c.Source.Subject; (c.Source.Kind == KindJetStream || c.Source.Kind == KindNATS) && s != "" && subject.Within(dest.Topic, s) {
			return fieldErr(d.Key, "%s is taken in by source.subject %s: the worker would read its own events as examples; choose a subject outside it", dest, s)
		}
		if s := c.Labels.Subject; c.Labels.Kind == KindJetStream && s != "" && subject.Within(dest.Topic, s) {
			return fieldErr(d.Key, "%s is taken in by labels.subject %s: the worker would read its own events as labels; choose a subject outside it", dest, s)
		}
	}
	return nil
}

// validateSharedIDs refuses two outputs whose events share the example's
// event_id (ExampleIDOutputs) on one Kafka topic or one NATS subject: a
// consumer that drops repeats by event_id (docs/events.md) would keep one
// of each example's events and drop the others, and JetStream would drop
// them itself by their Nats-Msg-Id. (Subjects that differ but that one
// JetStream stream stores are refused at start-up, when the streams are
// known.)
func (c Config) validateSharedIDs() error {
	first := map[string]string{}
	for _, d := range c.Outputs.Destinations() {
		if d.Dest.IsZero() || !ExampleIDOutputs[d.Key] {
			continue
		}
		// A JetStream publish is a NATS message: jetstream:x and nats:x
		// are one subject.
		where := "nats:" + d.Dest.Topic
		if d.Dest.Kind == KindKafka {
			where = "kafka:" + d.Dest.Topic
		}
		if k, ok := first[where]; ok {
			return fieldErr(d.Key, "%s is also %s: the events of both carry the event_id of the example they are about, so a consumer that drops repeats by it would lose one kind; give each its own topic or subject", d.Dest, k)
		}
		first[where] = d.Key
	}
	return nil
}

// ExampleIDOutputs are the outputs whose events carry the event_id of the
// example they are about (docs/events.md), so that one example's events
// on two of them have the same id (on JetStream, the same Nats-Msg-Id).
// The late labels carry their label's position, and the challengers'
// predictions add the challenger's name to it.
var ExampleIDOutputs = map[string]bool{
	"outputs.predictions":        true,
	"outputs.misclassifications": true,
	"outputs.dead_letter":        true,
	"outputs.drift":              true,
	"outputs.promotions":         true,
}

// checkSourceKeysOfKind refuses a key of source that another kind of
// source reads: the worker would ignore it, and a Kafka worker given
// source.partitions, say, would learn every partition it is assigned.
func (c Config) checkSourceKeysOfKind() error {
	s := c.Source
	for _, f := range []struct {
		name  string
		set   bool
		kinds []Kind // the kinds of source that read the key
	}{
		{"topics", len(s.Topics) > 0, []Kind{KindKafka}},
		{"group", s.Group != "", []Kind{KindKafka}},
		{"stream", s.Stream != "", []Kind{KindJetStream}},
		{"stream_partitions", s.StreamPartitions != 0, []Kind{KindJetStream}},
		{"partitions", len(s.Partitions) > 0, []Kind{KindJetStream}},
		{"subject", s.Subject != "", []Kind{KindJetStream, KindNATS}},
	} {
		if f.set && !slices.Contains(f.kinds, s.Kind) {
			names := make([]string, len(f.kinds))
			for i, k := range f.kinds {
				names[i] = string(k)
			}
			return fieldErr("source."+f.name, "set, but a %s source does not read it (only %s): remove it, or change source.kind", s.Kind, strings.Join(names, " or "))
		}
	}
	return nil
}

// OwnedPartitions are the partitions of a partitioned stream that this
// worker learns, as source.partitions says, for the pod whose host name
// is host (for "replicas:R"): nil means every partition. The error names
// the key.
func (c Config) OwnedPartitions(host string) ([]int, error) {
	s := c.Source
	if len(s.Partitions) == 0 {
		return nil, nil
	}
	if s.StreamPartitions == 0 {
		return nil, fieldErr("source.partitions", "needs source.stream_partitions: only a partitioned stream is shared out")
	}
	var owned []int
	for _, p := range s.Partitions {
		if r, ok := strings.CutPrefix(p, "replicas:"); ok {
			replicas, err := strconv.Atoi(r)
			if err != nil || replicas < 1 || len(s.Partitions) > 1 {
				return nil, fieldErr("source.partitions", "%q: want replicas:R, R at least 1, alone", p)
			}
			if host == "" {
				return nil, nil // checked when the host is known
			}
			i := strings.LastIndexByte(host, '-')
			ordinal, err := strconv.Atoi(host[i+1:])
			if i < 0 || err != nil || ordinal < 0 {
				return nil, fieldErr("source.partitions", "replicas:%d needs a host name ending in -<ordinal>, as a StatefulSet's pods have; %q does not", replicas, host)
			}
			if ordinal >= replicas {
				return nil, fieldErr("source.partitions", "host %s is ordinal %d of replicas:%d", host, ordinal, replicas)
			}
			for k := ordinal; k < s.StreamPartitions; k += replicas {
				owned = append(owned, k)
			}
			if len(owned) == 0 {
				return nil, fieldErr("source.partitions", "host %s is ordinal %d of replicas:%d, but the stream has %d partitions: this pod would learn none (run at most %d replicas)", host, ordinal, replicas, s.StreamPartitions, s.StreamPartitions)
			}
			return owned, nil
		}
		k, err := strconv.Atoi(p)
		if err != nil || k < 0 || k >= s.StreamPartitions {
			return nil, fieldErr("source.partitions", "%q is not a partition of %d (0 to %d)", p, s.StreamPartitions, s.StreamPartitions-1)
		}
		if !slices.Contains(owned, k) {
			owned = append(owned, k)
		}
	}
	return owned, nil
}

func (c Config) validateLabels() error {
	l := c.Labels
	// Checked with or without a kind, as every key is.
	if l.Window < time.Millisecond {
		return fieldErr("labels.window", "must be at least 1ms, got %s", formatDuration(l.Window))
	}
	if l.MaxPending < 1 {
		return fieldErr("labels.max_pending", "must be at least 1, got %d", l.MaxPending)
	}
	switch l.Kind {
	case "":
		// Without a kind there is no join: a labels' topic, stream or
		// default set here would be ignored, and the examples waiting
		// for those labels predicted and never learned.
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"topics", len(l.Topics) > 0},
			{"stream", l.Stream != ""},
			{"subject", l.Subject != ""},
			{"default", l.Default != ""},
		} {
			if f.set {
				return fieldErr("labels.kind", "required with labels.%s: kafka or jetstream, the input of the labels that come later (or remove labels.%s)", f.name, f.name)
			}
		}
		return nil
	case KindKafka:
		if c.Source.Kind != KindKafka {
			return fieldErr("labels.kind", "kafka needs a kafka source: the labels are joined partition by partition with source.topics (source.kind is %s)", c.Source.Kind)
		}
		if len(l.Topics) != 1 {
			return fieldErr("labels.topics", "one topic, co-partitioned with source.topics, got %d", len(l.Topics))
		}
		if err := checkTopic(l.Topics[0]); err != nil {
			return fieldErr("labels.topics", "%v", err)
		}
		if len(c.Source.Topics) != 1 {
			return fieldErr("source.topics", "with labels, one topic, co-partitioned with labels.topics, got %d", len(c.Source.Topics))
		}
		if l.Topics[0] == c.Source.Topics[0] {
			return fieldErr("labels.topics", "%q is source.topics: the labels need a topic of their own", l.Topics[0])
		}
	case KindJetStream:
		if c.Source.Kind != KindJetStream {
			return fieldErr("labels.kind", "jetstream needs a jetstream source (source.kind is %s)", c.Source.Kind)
		}
		if c.Source.StreamPartitions == 1 && c.Model.Scope != ScopePartition {
			return fieldErr("source.stream_partitions", "1 with labels in global scope: a stream of one partition joins labels from a stream that is not partitioned (source.stream_partitions 0), or in model.scope partition (docs/labels.md, section 9.1)")
		}
		if l.Stream == "" {
			return fieldErr("labels.stream", "required when labels.kind is jetstream: the stream of the labels")
		}
		if strings.ContainsAny(l.Stream, " \t\r\n.*>/\\") {
			return fieldErr("labels.stream", "%q is not a stream name (no spaces, '.', '*', '>', '/' or '\\')", l.Stream)
		}
		if l.Stream == c.Source.Stream {
			return fieldErr("labels.stream", "%q is source.stream: the labels need a stream of their own", l.Stream)
		}
		if l.Subject == "" {
			return fieldErr("labels.subject", "required when labels.kind is jetstream: the subject the labels, and the worker's marks, are published on")
		}
		// A partitioned stream's subject is its transform's source, such
		// as clicks.*; an unpartitioned one's is where marks go.
		if err := checkSubject(l.Subject, c.Source.StreamPartitions > 0); err != nil {
			return fieldErr("labels.subject", "%v", err)
		}
	case KindNATS:
		return fieldErr("labels.kind", "nats (core NATS) has no replay, and a join that cannot be replayed is not a function of the logs: use kafka or jetstream")
	default:
		return fieldErr("labels.kind", "%v", l.Kind.Validate())
	}
	if err := l.Format.Validate(); err != nil {
		return fieldErr("labels.format", "%v", err)
	}
	if l.Default != "" {
		if _, err := c.DefaultLabel(); err != nil {
			return fieldErr("labels.default", "%v", err)
		}
	}
	// A challenger learns a delayed example at the join's tail, long
	// after the model's prediction was served, and publishes nothing:
	// its destination would stay empty.
	if c.Outputs.ChallengerPredictions.Kind != "" {
		return fieldErr("outputs.challenger_predictions", "set, but with labels that come later (labels.kind) the challengers learn each example at the join's tail and publish no prediction; leave it out, and read their comparison with hyperplane compare")
	}
	// The join keeps an example as the model decoded it, not its
	// message, until its label is decided: every challenger must hash as
	// the model does (the worker checks the model it resumes again).
	mc := c.Model.Learner
	for i, ch := range c.Model.Challengers {
		cc := ch.Learner(mc)
		if cc.HashBits == mc.HashBits && cc.HashSeed == mc.HashSeed {
			continue
		}
		key := "hash_seed"
		if cc.HashBits != mc.HashBits {
			key = "hash_bits"
		}
		return fieldErr(fmt.Sprintf("model.challengers[%d].%s", i, key), "%s hashes otherwise than the model (hash_bits %d, hash_seed %d against %d, %d), and with labels that come later the join keeps each example as the model decoded it; give it the model's hashing, or compare it with hyperplane backtest",
			ch.Name, cc.HashBits, cc.HashSeed, mc.HashBits, mc.HashSeed)
	}
	return nil
}

// DefaultLabel is labels.default as the model's label: a name of its
// classes, a number as an example's label is written (1, -1 or 0; a class
// index), or true or false. It is an error for an empty default.
func (c Config) DefaultLabel() (int, error) {
	text := c.Labels.Default
	labels := c.Model.Learner.Labels()
	if label, ok := labels.ParseName([]byte(text)); ok {
		return label, nil
	}
	if v, err := strconv.ParseFloat(text, 64); err == nil {
		if label, ok := labels.ParseNumber(v); ok {
			return label, nil
		}
		return 0, errors.New(labels.NumberProblem(v, text))
	}
	if v, err := strconv.ParseBool(text); err == nil {
		if label, ok := labels.ParseBool(v); ok {
			return label, nil
		}
		return 0, errors.New(labels.BoolProblem(v))
	}
	return 0, errors.New(labels.NameProblem(strconv.Quote(text)))
}
