package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestStartupErrors meets every error that stops "hyperplane run" at
// start-up once: each must name the problem and say what to do, on one
// line, and a configuration mistake must be a usage error (exit status 2).
func TestStartupErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	// Real servers for the errors that need one: a NATS server without
	// the stream, a Kafka cluster without the topic.
	ns := testbroker.NATS(t)
	kc := testbroker.Kafka(t)
	// A source that exists, for the errors of the outputs.
	kc.CreateTopic(t, "present", 1)
	testbroker.CreateStream(t, ns.JetStream(t), jetstream.StreamConfig{Name: "PRESENT", Subjects: []string{"present"}})
	// One stream for several outputs.
	testbroker.CreateStream(t, ns.JetStream(t), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}})
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	closed := s3test.ClosedAddr(t)

	// A store holding a model trained with 2^16 weights.
	store := "file://" + t.TempDir()
	old := learner.DefaultConfig()
	old.HashBits = 16
	writeSnapshot(t, store, "clicks", old)

	jetstream := []string{"--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--nats.url", ns.URL(), "--http.addr", "127.0.0.1:0"}
	kafka := []string{"--source.kind", "kafka", "--source.topics", "examples", "--http.addr", "127.0.0.1:0"}
	cases := []struct {
		name    string
		args    []string
		usage   bool   // a usage error, exit status 2
		problem string // names what is wrong
		todo    string // says what to do
	}{
		{"config file missing", []string{"--config", filepath.Join(dir, "missing.yaml")}, true,
			"missing.yaml: no such file", "hyperplane config --defaults prints one"},
		{"config file not YAML", []string{"--config", file("bad.yaml", "model:\n  name: [x\n")}, true,
			"bad.yaml: yaml: line", "the file is not valid YAML"},
		{"unknown key", []string{"--config", file("typo.yaml", "modle:\n  name: x\n")}, true,
			"line 1: unknown key modle", "the configuration has model, kafka"},
		{"value of the wrong type", []string{"--config", file("eta.yaml", "model:\n  learner:\n    eta: fast\n")}, true,
			`model.learner.eta: "fast" is not a number`, "line 3"},
		{"unknown flag", []string{"--colour", "red"}, true,
			"-colour", "hyperplane config --defaults lists them"},
		{"no source", nil, true,
			"source.kind: required", "kafka, jetstream or nats"},
		{"kafka without brokers", kafka, true,
			"kafka.brokers", "required when source.kind is kafka"},
		{"hash bits out of range", append(slices.Clone(jetstream), "--model.learner.hash_bits", "40"), true,
			"model.learner.hash_bits", "between 1 and 30"},
		{"snapshot URL scheme", append(slices.Clone(jetstream), "--snapshot.url", "ftp://host/x"), true,
			`snapshot.url: unknown scheme "ftp"`, "want file, s3, gs, azblob or mem"},
		{"snapshot URL without a bucket", append(slices.Clone(jetstream), "--snapshot.url", "s3://"), true,
			`snapshot.url: "s3://" names no bucket`, "want s3://bucket/prefix"},
		{"NATS URL of colons", append(slices.Clone(jetstream), "--nats.url", "::::", "--outputs.predictions", "nats:predictions"), true,
			`nats.url: "::::" is not a URL`, "an IPv6 address goes in brackets"},
		{"TLS file missing", append(slices.Clone(kafka), "--kafka.brokers", closed, "--kafka.tls.enabled", "--kafka.tls.ca_file", filepath.Join(dir, "ca.pem")), true,
			"kafka.tls.ca_file", "ca.pem: no such file"},
		{"log level", append(slices.Clone(jetstream), "--log.level", "loud"), true,
			`log.level: unknown level "loud"`, "want debug, info, warn or error"},
		{"challenger predictions without challengers", append(slices.Clone(jetstream), "--outputs.challenger_predictions", "nats:challengers"), true,
			"outputs.challenger_predictions: set, but model.challengers", "names no challenger"},
		{"port taken", append(slices.Clone(jetstream), "--http.addr", taken.Addr().String()), false,
			"address already in use", "choose a free address"},
		{"kafka unreachable", append(slices.Clone(kafka), "--kafka.brokers", closed), false,
			"connection refused", "check kafka.brokers, that the brokers are up"},
		{"kafka topic missing", append(slices.Clone(kafka), "--kafka.brokers", kc.ListenAddrs()[0]), false,
			"topic examples", "every topic of source.topics exists"},
		{"kafka output topic missing", []string{"--source.kind", "kafka", "--source.topics", "present", "--http.addr", "127.0.0.1:0", "--kafka.brokers", kc.ListenAddrs()[0], "--outputs.predictions", "kafka:nosuchtopic"}, false,
			"outputs.predictions: kafka topic nosuchtopic does not exist", "create them with hyperplane setup"},
		{"jetstream output stream missing", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--outputs.dead_letter", "jetstream:nosuch.subject"), false,
			"outputs.dead_letter: no JetStream stream stores subject nosuch.subject", "create them with hyperplane setup"},
		{"jetstream output read back", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--outputs.predictions", "jetstream:present"), false,
			"outputs.predictions: subject present is stored in source.stream PRESENT, which the worker reads whole", "choose a subject outside it"},
		{"core NATS output read back", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--outputs.dead_letter", "nats:present"), false,
			"outputs.dead_letter: subject present is stored in source.stream PRESENT", "it would read its own events"},
		{"jetstream outputs sharing ids in one stream", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--outputs.predictions", "jetstream:events.pred", "--outputs.misclassifications", "jetstream:events.mis", "--outputs.late_labels", "jetstream:events.late"), false,
			"outputs.predictions, outputs.misclassifications: stream EVENTS stores events.pred and events.mis, and the events of these outputs share their ids", "give each a subject of a stream of its own"},
		{"jetstream outputs on one subject", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--outputs.dead_letter", "jetstream:events.all", "--outputs.drift", "jetstream:events.all"), true,
			"outputs.drift: jetstream:events.all is also outputs.dead_letter", "give each its own topic or subject"},
		{"labels stream missing", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--labels.kind", "jetstream", "--labels.stream", "NOLABELS", "--labels.subject", "nolabels"), false,
			"labels: jetstream NOLABELS", "check that the stream of labels.stream exists and that labels.subject is one of its subjects"},
		{"labels subject not in its stream", append(slices.Clone(jetstream), "--source.stream", "PRESENT", "--labels.kind", "jetstream", "--labels.stream", "EVENTS", "--labels.subject", "other.labels"), false,
			"labels: jetstream EVENTS: filter other.labels matches none of the stream's subjects, events.>", "labels.subject is one of its subjects"},
		{"nats unreachable", append(slices.Clone(jetstream), "--nats.url", "nats://"+closed), false,
			"no servers available", "check nats.url"},
		{"stream missing", jetstream, false,
			"stream not found", "check that the stream of source.stream exists"},
		{"snapshot directory missing", append(slices.Clone(jetstream), "--snapshot.url", "file://"+filepath.Join(dir, "nowhere")), false,
			"nowhere: no such file or directory", "add ?create_dir=1"},
		{"incompatible snapshot", append(slices.Clone(jetstream), "--model.name", "clicks", "--snapshot.url", store), false,
			"hash_bits is 16 in the snapshot but 18 in the configuration", "set snapshot.reset to start a new model"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, append([]string{"run"}, c.args...), func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
			if err == nil {
				t.Fatal("run started")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.problem) || !strings.Contains(msg, c.todo) {
				t.Errorf("error %q\nwant the problem %q and what to do, %q", msg, c.problem, c.todo)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error %q is more than one line", msg)
			}
			var u *usageError
			if errors.As(err, &u) != c.usage {
				t.Errorf("usage error (exit status 2): %v, want %v", errors.As(err, &u), c.usage)
			}
		})
	}
}

// TestRunHidesStoreCredentials starts "hyperplane run" with credentials
// in snapshot.url and a store that cannot be opened or used: neither the
// error main prints nor anything logged on stderr shows them.
func TestRunHidesStoreCredentials(t *testing.T) {
	const (
		accessKeyID  = "AKIAIOSFODNN7EXAMPLE"
		secretKey    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
		sessionToken = "FwoGZXIvYXdzEXAMPLETOKEN"
	)
	ns := testbroker.NATS(t)
	srv := s3test.Start(t)
	refusing := s3test.StartRefusing(t)
	creds := "access_key_id=" + accessKeyID + "&secret_access_key=" + url.QueryEscape(secretKey) + "&session_token=" + sessionToken
	cases := []struct{ name, url string }{
		{"credentials in the query", "s3://" + srv.Bucket + "/prod?" + srv.Query() + "&" + creds},
		{"user info that does not parse", "s3://" + accessKeyID + ":" + secretKey + "@" + srv.Bucket + "/prod?" + srv.Query()},
		{"a store that refuses", "s3://" + accessKeyID + ":1234/" + url.PathEscape(secretKey) + "@" + refusing.Bucket + "?" + refusing.Query()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			args := []string{"run", "--source.kind", "jetstream", "--source.stream", "EXAMPLES", "--nats.url", ns.URL(),
				"--http.addr", "127.0.0.1:0", "--snapshot.url", c.url}
			err := run(ctx, args, func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
			if err == nil {
				t.Fatal("run started")
			}
			shown := "hyperplane: " + err.Error() + "\n" + errOut.String() + out.String()
			for _, secret := range []string{accessKeyID, secretKey, "wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY", sessionToken} {
				if strings.Contains(shown, secret) {
					t.Errorf("the output shows %q:\n%s", secret, shown)
				}
			}
			if !strings.Contains(err.Error(), "snapshot.url") {
				t.Errorf("the error does not name snapshot.url: %v", err)
			}
		})
	}
}

// writeSnapshot writes a new model of cfg as generation 1 of model in the
// store at url.
func writeSnapshot(t *testing.T, url, model string, cfg learner.Config) {
	t.Helper()
	ctx := context.Background()
	s, err := snapshot.OpenStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, &snapshot.Snapshot{Model: model, Generation: 1, Writer: "test", State: m.State()}); err != nil {
		t.Fatal(err)
	}
}
