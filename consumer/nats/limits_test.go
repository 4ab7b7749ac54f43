package nats_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// headerOverhead is what the Nats-Msg-Id header adds besides the key.
const headerOverhead = len("NATS/1.0\r\nNats-Msg-Id: \r\n\r\n")

// TestSinkMaxOutputBytes: the sinks learn the server's max_payload and,
// on JetStream, the max_msg_size of the stream that captures a subject;
// an output of exactly that size is stored, one byte more is refused.
func TestSinkMaxOutputBytes(t *testing.T) {
	const maxPayload = 64 << 10
	ts := testbroker.NATS(t, testbroker.MaxPayload(maxPayload))
	nc := connect(t, ts)
	js := newJetStream(t, nc)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "limited", Subjects: []string{"limited.>"}, MaxMsgSize: 4096})
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "free", Subjects: []string{"free.>"}})
	core, logs := observer.New(zapcore.WarnLevel)
	log := zaptest.NewLogger(t, zaptest.WrapOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return zapcore.NewTee(c, core) })))
	jsSink, coreSink := newSink(t, nc, true, log), newSink(t, nc, false, log)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, tc := range []struct {
		name    string
		sink    *nats.Sink
		subject string
		limit   int // headers and data
		stream  string
	}{
		{"jetstream, stream max_msg_size", jsSink, "limited.events", 4096, "limited"},
		{"jetstream, server max_payload", jsSink, "free.events", maxPayload, "free"},
		{"core, server max_payload", coreSink, "core.events", maxPayload, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.sink.MaxOutputBytes(tc.subject)
			if want := tc.limit - headerOverhead; limit != want {
				t.Fatalf("MaxOutputBytes(%s) = %d, want %d", tc.subject, limit, want)
			}
			key := "jetstream:in/42"
			fits := consumer.Output{Topic: tc.subject, Key: []byte(key), Value: bytes.Repeat([]byte{'v'}, limit-len(key))}
			over := consumer.Output{Topic: tc.subject, Key: []byte("jetstream:in/43"), Value: append(bytes.Clone(fits.Value), 'v')}
			if tc.stream == "" {
				s, err := nc.SubscribeSync(tc.subject)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Unsubscribe()
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := tc.sink.Publish(ctx, []consumer.Output{fits}); err != nil {
					t.Fatalf("publishing an output of exactly MaxOutputBytes: %v", err)
				}
				m, err := s.NextMsg(5 * time.Second)
				if err != nil || len(m.Data) != len(fits.Value) {
					t.Fatalf("the output at the limit did not arrive: %v", err)
				}
			} else {
				if err := tc.sink.Publish(ctx, []consumer.Output{fits}); err != nil {
					t.Fatalf("publishing an output of exactly MaxOutputBytes: %v", err)
				}
				if got := readStream(t, js, tc.stream, tc.subject, 1); len(got) != 1 || len(got[0].Value) != len(fits.Value) {
					t.Fatalf("stream %s holds %d outputs, want the one at the limit", tc.stream, len(got))
				}
			}
			if err := tc.sink.Publish(ctx, []consumer.Output{over}); err == nil {
				t.Fatal("an output one byte over MaxOutputBytes was published")
			}
		})
	}

	// A subject no stream captures: max_payload, and one warning.
	for range 2 {
		if got, want := jsSink.MaxOutputBytes("nowhere"), maxPayload-headerOverhead; got != want {
			t.Fatalf("MaxOutputBytes(nowhere) = %d, want %d", got, want)
		}
	}
	if n := logs.FilterMessageSnippet("cannot look up").Len(); n != 1 {
		t.Fatalf("%d warnings about the subject without a stream, want 1", n)
	}
}

// TestSinkMaxOutputBytesDefault: a server with the default max_payload
// (1 MiB) and a stream without max_msg_size.
func TestSinkMaxOutputBytesDefault(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	testbroker.CreateStream(t, newJetStream(t, nc), jetstream.StreamConfig{Name: "out", Subjects: []string{"out.>"}})
	sink := newSink(t, nc, true, zaptest.NewLogger(t))
	if got, want := sink.MaxOutputBytes("out.events"), int(nc.MaxPayload())-headerOverhead; got != want || nc.MaxPayload() != 1<<20 {
		t.Fatalf("MaxOutputBytes = %d with max_payload %d, want %d", got, nc.MaxPayload(), want)
	}
}
