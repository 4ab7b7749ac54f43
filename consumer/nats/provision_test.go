package nats_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestProvisionStreams: the streams that are missing are created with the
// options given, a read stream partitioned if asked; a second call with
// other options reports them as they are and changes none.
func TestProvisionStreams(t *testing.T) {
	srv := testbroker.NATS(t)
	nc := srv.Conn(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	targets := []nats.StreamTarget{
		{Stream: "EXAMPLES", Subject: "in.examples.>"},
		{Stream: "KEYED", Subject: "in.keyed.*", Partitions: 4},
		{Subject: "out.predictions"},
	}
	read := targets[0]
	o := nats.StreamOptions{Retention: time.Hour, DuplicateWindow: 5 * time.Minute, Replicas: 1}
	rs, err := nats.ProvisionStreams(ctx, nc, targets, read, o)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"EXAMPLES", "KEYED", "OUT_PREDICTIONS"}
	subjects := []string{"in.examples.>", "in.keyed.*", "out.predictions"}
	before := map[string]jetstream.StreamConfig{}
	for i, r := range rs {
		if r.State != nats.Created || r.Err != nil || r.Stream != names[i] || r.Info == nil {
			t.Fatalf("target %+v: %+v, want stream %s created", targets[i], r, names[i])
		}
		s, err := js.Stream(ctx, names[i])
		if err != nil {
			t.Fatalf("stream %s: %v", names[i], err)
		}
		c := s.CachedInfo().Config
		if !reflect.DeepEqual(c.Subjects, []string{subjects[i]}) || c.MaxAge != time.Hour || c.Duplicates != 5*time.Minute || c.Replicas != 1 || c.Storage != jetstream.FileStorage {
			t.Errorf("stream %s: subjects %v, max age %v, duplicates %v, replicas %d, %v storage; want [%s], 1h, 5m, 1, file",
				names[i], c.Subjects, c.MaxAge, c.Duplicates, c.Replicas, c.Storage, subjects[i])
		}
		if partitioned := c.SubjectTransform != nil; partitioned != (targets[i].Partitions > 0) {
			t.Errorf("stream %s: subject transform %+v, want one only if partitioned", names[i], c.SubjectTransform)
		}
		before[names[i]] = c
	}

	rs, err = nats.ProvisionStreams(ctx, nc, targets, read, nats.StreamOptions{Retention: 2 * time.Hour, DuplicateWindow: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.State != nats.Exists || r.Err != nil || r.Stream != names[i] || !reflect.DeepEqual(r.Info.Config, before[names[i]]) {
			t.Errorf("target %+v again: %+v, want stream %s as it was", targets[i], r, names[i])
		}
	}
}

// TestProvisionStreamsUnfit: a stream that exists but does not fit is a
// failure naming why, and is left as it is; so is a stream that cannot be
// created.
func TestProvisionStreamsUnfit(t *testing.T) {
	srv := testbroker.NATS(t)
	nc := srv.Conn(t)
	js := srv.JetStream(t)
	ctx := context.Background()
	all := testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "ALL", Subjects: []string{"in.>", "out.taken"}})
	was := all.CachedInfo().Config
	source := nats.StreamTarget{Stream: "ALL", Subject: "in.>"}
	cases := []struct {
		name   string
		target nats.StreamTarget
		read   nats.StreamTarget
		state  nats.State
		err    error  // errors.Is
		text   string // in the error, when err is nil
		stream string
	}{
		{"stored elsewhere", nats.StreamTarget{Stream: "ALL", Subject: "elsewhere.>"}, source, nats.Failed, nats.ErrSubjectNotStored, "", "ALL"},
		{"not partitioned", nats.StreamTarget{Stream: "ALL", Subject: "in.*", Partitions: 4}, source, nats.Failed, nats.ErrNotPartitioned, "", "ALL"},
		{"no subject", nats.StreamTarget{Stream: "NEW"}, source, nats.Failed, nats.ErrNoSubject, "", "NEW"},
		{"subjects taken", nats.StreamTarget{Stream: "EXAMPLES", Subject: "in.examples"}, nats.StreamTarget{}, nats.Failed, nil, "could not create it for in.examples: ", "EXAMPLES"},
		{"name taken", nats.StreamTarget{Subject: "all"}, source, nats.Failed, jetstream.ErrStreamNameAlreadyInUse, "", "ALL"},
		{"read back", nats.StreamTarget{Subject: "in.dead"}, source, nats.Failed, nats.ErrReadBack, "", "ALL"},
		{"read back, unfiltered", nats.StreamTarget{Subject: "out.taken"}, nats.StreamTarget{Stream: "ALL"}, nats.Failed, nats.ErrReadBack, "", "ALL"},
		{"beside the subject read", nats.StreamTarget{Subject: "out.taken"}, source, nats.Exists, nil, "", "ALL"},
		{"stored, not read", nats.StreamTarget{Subject: "in.dead"}, nats.StreamTarget{}, nats.Exists, nil, "", "ALL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, err := nats.ProvisionStreams(ctx, nc, []nats.StreamTarget{c.target}, c.read, nats.StreamOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r := rs[0]
			if r.State != c.state || r.Stream != c.stream {
				t.Fatalf("%+v: want %s, stream %s", r, c.state, c.stream)
			}
			switch {
			case c.err != nil && !errors.Is(r.Err, c.err):
				t.Errorf("error %v, want %v", r.Err, c.err)
			case c.text != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), c.text)):
				t.Errorf("error %v, want one with %q", r.Err, c.text)
			case c.state != nats.Failed && r.Err != nil:
				t.Errorf("error %v, want none", r.Err)
			}
			// A stream that fits, or does not, is reported as it is; one
			// whose name is taken by another is not looked at.
			if r.Stream == "ALL" && c.err != jetstream.ErrStreamNameAlreadyInUse && (r.Info == nil || !reflect.DeepEqual(r.Info.Config, was)) {
				t.Errorf("stream ALL reported as %+v, want as it is", r.Info)
			}
		})
	}
	if s, err := js.Stream(ctx, "ALL"); err != nil || !reflect.DeepEqual(s.CachedInfo().Config, was) {
		t.Errorf("the stream that existed was changed (%v)", err)
	}
	for _, name := range []string{"EXAMPLES", "NEW"} {
		if _, err := js.Stream(ctx, name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s: %v, want none", name, err)
		}
	}
}

// TestProvisionStreamsWithoutJetStream: a server without JetStream is an
// error that says so, before anything is asked of a stream.
func TestProvisionStreamsWithoutJetStream(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, err = nats.ProvisionStreams(context.Background(), nc, []nats.StreamTarget{{Stream: "S", Subject: "s"}}, nats.StreamTarget{}, nats.StreamOptions{})
	if !errors.Is(err, jetstream.ErrJetStreamNotEnabled) && !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		t.Fatalf("error %v, want JetStream not enabled", err)
	}
}

// TestCheckPartitionedStreams: a server older than 2.10.0 cannot partition
// a stream, which the check says from the version the server announced,
// asking it nothing; a current one can.
func TestCheckPartitionedStreams(t *testing.T) {
	old := testbroker.OldNATS(t, "2.9.10")
	nc, err := natsgo.Connect(old.URL())
	if err != nil {
		t.Fatal(err)
	}
	err = nats.CheckPartitionedStreams(nc)
	nc.Close()
	var e *nats.OldServerError
	if !errors.As(err, &e) || e.Version != "2.9.10" || !strings.Contains(err.Error(), nats.PartitionedStreamServer) {
		t.Fatalf("nats-server 2.9.10: error %v, want an *OldServerError naming 2.9.10 and %s", err, nats.PartitionedStreamServer)
	}
	for _, line := range old.Received(t) {
		if verb, _, _ := strings.Cut(line, " "); verb != "CONNECT" && verb != "PING" && verb != "PONG" {
			t.Errorf("the check sent the old server %q: it asked more than the handshake", line)
		}
	}

	if err := nats.CheckPartitionedStreams(testbroker.NATS(t).Conn(t)); err != nil {
		t.Errorf("nats-server %s: %v", server.VERSION, err)
	}
}

func TestStreamName(t *testing.T) {
	for subject, want := range map[string]string{
		"sensors.dead-letter": "SENSORS_DEAD-LETTER",
		"out.predictions":     "OUT_PREDICTIONS",
		"a.*.b.>":             "A___B__",
	} {
		if got := nats.StreamName(subject); got != want {
			t.Errorf("StreamName(%q) = %s, want %s", subject, got, want)
		}
	}
}
