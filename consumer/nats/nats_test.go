package nats_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/wire"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// connect opens a connection with the package's own Connect, closed when
// the test ends.
func connect(t *testing.T, ts *testbroker.NATSServer) *natsgo.Conn {
	t.Helper()
	nc, err := nats.Connect(nats.Config{URL: ts.URL(), Name: t.Name()}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startJetStream starts a server for the test and returns it, a
// connection to it made with the package's own Connect, and a JetStream
// context on that connection.
func startJetStream(t *testing.T) (*testbroker.NATSServer, *natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	return ts, nc, newJetStream(t, nc)
}

func newJetStream(t *testing.T, nc *natsgo.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func publish(t *testing.T, js jetstream.JetStream, subject string, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, v := range values {
		if _, err := js.Publish(ctx, subject, []byte(v)); err != nil {
			t.Errorf("publish %s: %v", subject, err)
			return
		}
	}
}

// cutAfter is a time after the stored time of stream's last message and
// before that of any message published after it returns, which waits for
// the clock to pass it.
func cutAfter(t *testing.T, js jetstream.JetStream, stream string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut := info.State.LastTime.Add(time.Nanosecond)
	wait.For(t, time.Minute, time.Millisecond, "the clock to pass the last message's time", func() bool { return time.Now().After(cut) })
	return cut
}

func expectNothing(t *testing.T, src consumer.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	batch, err := src.Fetch(ctx, 10)
	if err == nil {
		t.Fatalf("unexpected message %q at %+v", batch[0].Value, batch[0].Position)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch with nothing to read: %v, want the context's error", err)
	}
}

// openCore subscribes a core NATS source to subject, closed when the test
// ends.
func openCore(t *testing.T, nc *natsgo.Conn, subject string, log *zap.Logger) *nats.CoreSource {
	t.Helper()
	return resumeCore(t, nc, subject, nil, log)
}

// resumeCore is openCore resuming from resume.
func resumeCore(t *testing.T, nc *natsgo.Conn, subject string, resume map[string]int64, log *zap.Logger) *nats.CoreSource {
	t.Helper()
	src, err := nats.NewCoreSource(nc, subject, resume, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// publishCore publishes values on subject as core NATS messages. It may
// run on another goroutine, so it reports with Errorf.
func publishCore(t *testing.T, nc *natsgo.Conn, subject string, values ...string) {
	for _, v := range values {
		if err := nc.Publish(subject, []byte(v)); err != nil {
			t.Errorf("publish %s: %v", subject, err)
			return
		}
	}
}

func valuesOf(msgs []consumer.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Value))
	}
	return out
}

func seqValues(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("m%d", i))
	}
	return out
}

func openJetStream(t *testing.T, nc *natsgo.Conn, stream, subject string, resume map[string]int64, start wire.Start) *nats.JetStreamSource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := nats.NewJetStreamSource(ctx, nc, stream, subject, resume, start, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func TestJetStreamSourceConformance(t *testing.T) {
	_, nc, js := startJetStream(t)
	var streams atomic.Int64
	consumertest.TestSource(t, consumertest.Features{Partitions: 1, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), func(map[string]int64) consumer.Source) {
			name := fmt.Sprintf("conf%d", streams.Add(1))
			// The stream captures two subjects and the source reads one, so
			// the suite also covers the subject filter.
			testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".*"}, Storage: jetstream.MemoryStorage})
			subject := name + ".in"
			produce := func(p int, values ...[]byte) {
				for _, v := range values {
					publish(t, js, name+".other", "noise")
					publish(t, js, subject, string(v))
				}
			}
			open := func(resume map[string]int64) consumer.Source {
				return openJetStream(t, nc, name, subject, resume, wire.Start{Kind: "earliest"})
			}
			return produce, open
		},
	})
}

// TestCoreSourceConformance runs the conformance suite on core NATS,
// which keeps nothing: no replay, so the suite skips what needs it (a
// source opened at a position, messages produced while none is open) and
// opens each source before producing.
func TestCoreSourceConformance(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	var subjects atomic.Int64
	consumertest.TestSource(t, consumertest.Features{Partitions: 1}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(int, ...[]byte), func(map[string]int64) consumer.Source) {
			subject := fmt.Sprintf("core.conf%d", subjects.Add(1))
			produce := func(p int, values ...[]byte) {
				for _, v := range values {
					publishCore(t, nc, subject, string(v))
				}
			}
			open := func(resume map[string]int64) consumer.Source {
				return openCore(t, nc, subject, zaptest.NewLogger(t))
			}
			return produce, open
		},
	})
}

// TestCoreSource checks what is particular to core NATS beyond the
// conformance suite: positions numbered one by one in arrival order, after
// every position of a source before, a Commit that does nothing, and a
// Fetch that returns at most its limit of what is waiting.
func TestCoreSource(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	log := zaptest.NewLogger(t)

	t.Run("Positions", func(t *testing.T) {
		src := openCore(t, nc, "core.order", log)
		publishCore(t, nc, "core.order", seqValues(0, 200)...)
		got := consumertest.FetchN(t, src, 200)
		expectNothing(t, src)
		first := got[0].Position.Offset
		for i, m := range got {
			want := wire.Position{Source: "nats:core.order", Offset: first + int64(i)}
			if string(m.Value) != fmt.Sprintf("m%d", i) || m.Position != want || m.Resume != want.Offset {
				t.Fatalf("message %d is %q at %+v (resume %d), want m%d at %+v", i, m.Value, m.Position, m.Resume, i, want)
			}
		}
		if err := src.Commit(context.Background(), map[string]int64{"nats:core.order": 200}); err != nil {
			t.Fatalf("Commit: %v", err)
		}
	})
	// A worker's events take their ids from these positions: a source
	// opened again, after a stop that recorded its last position or a
	// crash that recorded an older one, must not give a new message the
	// position of one read before, or a JetStream output drops the new
	// message's events as repeats.
	t.Run("Restart", func(t *testing.T) {
		last := int64(0)
		for _, resume := range []func(int64) map[string]int64{
			func(int64) map[string]int64 { return nil },
			func(last int64) map[string]int64 { return map[string]int64{"nats:core.restart": last} },
			func(last int64) map[string]int64 { return map[string]int64{"nats:core.restart": last / 2} },
			func(last int64) map[string]int64 { return nil },
		} {
			src := resumeCore(t, nc, "core.restart", resume(last), log)
			publishCore(t, nc, "core.restart", seqValues(0, 3)...)
			for _, m := range consumertest.FetchN(t, src, 3) {
				if m.Position.Offset <= last {
					t.Fatalf("%q at offset %d, after a source that read up to %d", m.Value, m.Position.Offset, last)
				}
				last = m.Position.Offset
			}
			if err := src.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("ResumeAhead", func(t *testing.T) {
		// A recorded position ahead of the clock: the offsets go on from it.
		ahead := time.Now().Add(time.Hour).UnixNano()
		src := resumeCore(t, nc, "core.ahead", map[string]int64{"nats:core.ahead": ahead}, log)
		publishCore(t, nc, "core.ahead", "a")
		if got := consumertest.FetchN(t, src, 1); got[0].Position.Offset != ahead+1 {
			t.Fatalf("first offset %d, want %d", got[0].Position.Offset, ahead+1)
		}
	})
	t.Run("FetchLimit", func(t *testing.T) {
		src := openCore(t, nc, "core.limit", log)
		publishCore(t, nc, "core.limit", seqValues(0, 10)...)
		// The source's subscription is on nc: the server sends it the ten
		// before its answer to the flush's ping, so all ten are waiting.
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		batch, err := src.Fetch(context.Background(), 4)
		if err != nil {
			t.Fatal(err)
		}
		if v := valuesOf(batch); !slices.Equal(v, seqValues(0, 4)) {
			t.Fatalf("first Fetch(4) got %q, want the first four", v)
		}
	})
}

func TestJetStreamSinkConformance(t *testing.T) {
	_, nc, js := startJetStream(t)
	var streams atomic.Int64
	consumertest.TestSink(t, consumertest.Features{Deduplicates: true}, consumertest.SinkHarness{
		Setup: func(t *testing.T, topics []string) (consumer.Sink, func(string, int) []consumer.Output) {
			name := fmt.Sprintf("sink%d", streams.Add(1))
			testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: name, Subjects: topics, Storage: jetstream.MemoryStorage})
			// The suite reuses topic names; a subject belongs to one stream.
			t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
			sink, err := nats.NewSink(nc, true, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			read := func(topic string, n int) []consumer.Output {
				return readStream(t, js, name, topic, n)
			}
			return sink, read
		},
	})
}

// readStream reads the messages on topic in stream, waiting up to a few
// seconds for n and then briefly for any more.
func readStream(t *testing.T, js jetstream.JetStream, stream, topic string, n int) []consumer.Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	it, err := cons.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	var out []consumer.Output
	deadline := time.Now().Add(time.Minute)
	for {
		wait := time.Until(deadline)
		if len(out) >= n {
			wait = 100 * time.Millisecond
		}
		m, err := it.Next(jetstream.NextMaxWait(wait))
		if err != nil {
			return out
		}
		out = append(out, consumer.Output{Topic: m.Subject(), Key: []byte(m.Headers().Get(jetstream.MsgIDHeader)), Value: m.Data()})
	}
}

func TestCoreSinkConformance(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	reader := connect(t, ts)
	// Core NATS delivers what it is sent, repeats included, to whoever is
	// subscribed, and keeps nothing.
	consumertest.TestSink(t, consumertest.Features{}, consumertest.SinkHarness{
		Setup: func(t *testing.T, topics []string) (consumer.Sink, func(string, int) []consumer.Output) {
			// Core NATS keeps nothing: subscribe before anything is published.
			subs := map[string]*natsgo.Subscription{}
			for _, topic := range topics {
				sub, err := reader.SubscribeSync(topic)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = sub.Unsubscribe() })
				subs[topic] = sub
			}
			if err := reader.Flush(); err != nil {
				t.Fatal(err)
			}
			sink, err := nats.NewSink(nc, false, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			read := func(topic string, n int) []consumer.Output {
				var out []consumer.Output
				deadline := time.Now().Add(time.Minute)
				for {
					wait := time.Until(deadline)
					if len(out) >= n {
						wait = 100 * time.Millisecond
					}
					m, err := subs[topic].NextMsg(wait)
					if err != nil {
						return out
					}
					out = append(out, consumer.Output{Topic: m.Subject, Key: []byte(m.Header.Get(jetstream.MsgIDHeader)), Value: m.Data})
				}
			}
			return sink, read
		},
	})
}

func TestJetStreamStart(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "start", Subjects: []string{"start.in"}})
	publish(t, js, "start.in", seqValues(0, 5)...) // sequences 1-5
	cut := cutAfter(t, js, "start")
	publish(t, js, "start.in", seqValues(5, 10)...) // sequences 6-10

	for _, tc := range []struct {
		name   string
		resume map[string]int64
		start  wire.Start
		first  int // index of the first message delivered
	}{
		{"earliest", nil, wire.Start{Kind: "earliest"}, 0},
		{"default", nil, wire.Start{}, 0},
		{"offset", nil, wire.Start{Kind: "offset", Offset: 4}, 3},
		{"time", nil, wire.Start{Kind: "time", Time: cut}, 5},
		{"resume", map[string]int64{"jetstream:start": 7, "jetstream:other": 1}, wire.Start{Kind: "latest"}, 7},
		{"resume zero", map[string]int64{"jetstream:start": 0}, wire.Start{Kind: "latest"}, 0},
		{"resume at end", map[string]int64{"jetstream:start": 10}, wire.Start{Kind: "earliest"}, 10},
		{"latest", nil, wire.Start{Kind: "latest"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := openJetStream(t, nc, "start", "", tc.resume, tc.start)
			if tc.first == 10 {
				expectNothing(t, src)
				return
			}
			got := consumertest.FetchN(t, src, 10-tc.first)
			if v := valuesOf(got); !slices.Equal(v, seqValues(tc.first, 10)) {
				t.Fatalf("got %q, want %q", v, seqValues(tc.first, 10))
			}
			for i, m := range got {
				seq := int64(tc.first + i + 1)
				if m.Position != (wire.Position{Source: "jetstream:start", Offset: seq}) || m.Resume != seq {
					t.Fatalf("message %q at %+v resume %d, want sequence %d", m.Value, m.Position, m.Resume, seq)
				}
				if m.Time.IsZero() || (seq > 5 && m.Time.Before(cut)) || (seq <= 5 && m.Time.After(cut)) {
					t.Fatalf("message %d stored at %v, cut at %v", seq, m.Time, cut)
				}
			}
			expectNothing(t, src)
		})
	}

	t.Run("latest then more", func(t *testing.T) {
		src := openJetStream(t, nc, "start", "", nil, wire.Start{Kind: "latest"})
		publish(t, js, "start.in", "m10", "m11")
		got := consumertest.FetchN(t, src, 2)
		if v := valuesOf(got); !slices.Equal(v, []string{"m10", "m11"}) || got[0].Position.Offset != 11 {
			t.Fatalf("got %q from %+v, want m10 m11 from sequence 11", v, got[0].Position)
		}
	})

	for _, tc := range []struct {
		name   string
		stream string
		resume map[string]int64
		start  wire.Start
	}{
		{"unknown kind", "start", nil, wire.Start{Kind: "newest"}},
		{"offset zero", "start", nil, wire.Start{Kind: "offset"}},
		{"time zero", "start", nil, wire.Start{Kind: "time"}},
		{"negative resume", "start", map[string]int64{"jetstream:start": -1}, wire.Start{}},
		{"no stream", "missing", nil, wire.Start{}},
		{"latest no stream", "missing", nil, wire.Start{Kind: "latest"}},
	} {
		t.Run("error/"+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			src, err := nats.NewJetStreamSource(ctx, nc, tc.stream, "", tc.resume, tc.start, zaptest.NewLogger(t))
			if err == nil {
				src.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.stream) {
				t.Fatalf("error %q does not name the stream", err)
			}
		})
	}
}

// TestJetStreamSourceFilter: a filter that matches none of the stream's
// subjects is refused, naming the filter and the subjects (the server
// takes it, and the source would wait for ever); one that matches some of
// them, wider, narrower or across, reads what it matches.
func TestJetStreamSourceFilter(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "flt", Subjects: []string{"flt.a", "flt.b.*"}})
	publish(t, js, "flt.a", "a0")
	publish(t, js, "flt.b.x", "bx0")
	for _, filter := range []string{"other.x", "flt.c", "flt.b", "flt.a.>"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		src, err := nats.NewJetStreamSource(ctx, nc, "flt", filter, nil, wire.Start{}, zaptest.NewLogger(t))
		cancel()
		if err == nil {
			src.Close()
			t.Fatalf("filter %s: no error", filter)
		}
		if msg := err.Error(); !strings.Contains(msg, "flt") || !strings.Contains(msg, filter) || !strings.Contains(msg, "flt.a, flt.b.*") {
			t.Fatalf("filter %s: error %q, want it to name the stream, the filter and the stream's subjects", filter, msg)
		}
	}
	for filter, want := range map[string][]string{
		"flt.>":   {"a0", "bx0"},
		"flt.*":   {"a0"},
		"flt.b.x": {"bx0"},
		"*.b.>":   {"bx0"},
	} {
		src := openJetStream(t, nc, "flt", filter, nil, wire.Start{})
		if v := valuesOf(consumertest.FetchN(t, src, len(want))); !slices.Equal(v, want) {
			t.Fatalf("filter %s read %q, want %q", filter, v, want)
		}
	}
}

// TestJetStreamSourceGone: a source resuming from a position whose next
// messages the stream no longer holds (a purge, its limits) says so at
// Warn, naming the sequences, and reads on from the stream's first; one
// whose next message is there says nothing.
func TestJetStreamSourceGone(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "gone", Subjects: []string{"gone.in"}})
	publish(t, js, "gone.in", seqValues(0, 10)...)
	st, err := js.Stream(context.Background(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background(), jetstream.WithPurgeSequence(6)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		resume int64
		warn   bool
	}{{2, true}, {5, false}, {7, false}} {
		core, logs := observer.New(zap.WarnLevel)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		src, err := nats.NewJetStreamSource(ctx, nc, "gone", "", map[string]int64{"jetstream:gone": c.resume}, wire.Start{}, zap.New(core))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := consumertest.FetchN(t, src, int(10-max(c.resume, 5)))
		src.Close()
		if got[0].Position.Offset != max(c.resume, 5)+1 {
			t.Errorf("resuming after %d: first message at %d", c.resume, got[0].Position.Offset)
		}
		warned := logs.FilterMessageSnippet("no longer holds").All()
		switch {
		case !c.warn && len(warned) > 0:
			t.Errorf("resuming after %d: warned %q", c.resume, warned[0].Message)
		case c.warn && len(warned) != 1:
			t.Errorf("resuming after %d: %d warnings that messages are gone, want 1", c.resume, len(warned))
		case c.warn:
			if f := warned[0].ContextMap(); f["from_sequence"] != uint64(3) || f["to_sequence"] != uint64(5) {
				t.Errorf("resuming after %d: warning with %v, want sequences 3 to 5", c.resume, f)
			}
		}
	}
}

// TestJetStreamSourceRecreatedWhileReading: a stream deleted and created
// again while a source reads it ends the source with an error naming the
// stream and both sequences, rather than the source waiting without a
// word for the new stream to pass the sequence it had read.
func TestJetStreamSourceRecreatedWhileReading(t *testing.T) {
	defer func(d time.Duration) { nats.RecreatedCheck = d }(nats.RecreatedCheck)
	nats.RecreatedCheck = 50 * time.Millisecond
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "anew", Subjects: []string{"anew.in"}, Storage: jetstream.MemoryStorage})
	publish(t, js, "anew.in", seqValues(0, 5)...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src, err := nats.NewJetStreamSource(ctx, nc, "anew", "", nil, wire.Start{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for n := 0; n < 5; {
		msgs, err := src.Fetch(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		n += len(msgs)
	}
	if err := js.DeleteStream(ctx, "anew"); err != nil {
		t.Fatal(err)
	}
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "anew", Subjects: []string{"anew.in"}, Storage: jetstream.MemoryStorage})
	publish(t, js, "anew.in", seqValues(0, 2)...)
	msgs, err := src.Fetch(ctx, 5)
	if err == nil {
		t.Fatalf("a stream recreated with 2 messages after 5 were read: fetched %d, want an error", len(msgs))
	}
	// The source's check may look before the new messages are published,
	// between them or after: the stream's last sequence is 0 to 2. It
	// takes the sequence read before it looks, which may be before the
	// last was read: any of the 5.
	if msg := err.Error(); !strings.Contains(msg, "anew") || !regexp.MustCompile(`sequence [1-5] was read`).MatchString(msg) || !regexp.MustCompile(`last sequence is now [0-2]:`).MatchString(msg) || !strings.Contains(msg, "recreated") {
		t.Errorf("a stream recreated with 2 messages after 5 were read: %v, want the stream and both sequences named", err)
	}
}

// TestJetStreamSourceRecreated: a source resuming from a position past
// the stream's last sequence (the stream was deleted and created again)
// fails naming both sequences, rather than waiting for the new stream to
// reach the old position and skipping every message before it; one at
// the last sequence, after a purge of every message, opens.
func TestJetStreamSourceRecreated(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "again", Subjects: []string{"again.in"}})
	publish(t, js, "again.in", seqValues(0, 10)...)
	st, err := js.Stream(context.Background(), "again")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	src, err := nats.NewJetStreamSource(ctx, nc, "again", "", map[string]int64{"jetstream:again": 10}, wire.Start{}, zap.NewNop())
	if err != nil {
		t.Fatalf("resuming at the last sequence of a purged stream: %v", err)
	}
	src.Close()
	if err := js.DeleteStream(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "again", Subjects: []string{"again.in"}})
	publish(t, js, "again.in", seqValues(0, 3)...)
	src, err = nats.NewJetStreamSource(ctx, nc, "again", "", map[string]int64{"jetstream:again": 10}, wire.Start{}, zap.NewNop())
	if err == nil {
		src.Close()
		t.Fatal("resuming after sequence 10 of a stream recreated with 3 messages: opened, want it refused")
	}
	if msg := err.Error(); !strings.Contains(msg, "sequence 10") || !strings.Contains(msg, "last sequence 3") || !strings.Contains(msg, "recreated") {
		t.Errorf("resuming after sequence 10 of a stream recreated with 3 messages: %v, want both sequences named", err)
	}
}

// TestJetStreamCommitDoesNotMove is the conformance suite's
// CommitDoesNotMove with fetches limited to what the test wants.
func TestJetStreamCommitDoesNotMove(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "commit", Subjects: []string{"commit.in"}})
	publish(t, js, "commit.in", seqValues(0, 20)...)
	src := openJetStream(t, nc, "commit", "", nil, wire.Start{})
	got := consumertest.FetchN(t, src, 10)
	last := got[len(got)-1]
	if err := src.Commit(context.Background(), map[string]int64{last.Position.Source: last.Resume}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if v := valuesOf(consumertest.FetchN(t, src, 10)); !slices.Equal(v, seqValues(10, 20)) {
		t.Fatalf("after Commit: %q, want m10 to m19", v)
	}
	expectNothing(t, src)
	// A new source ignores what was committed: it starts where it is told.
	again := openJetStream(t, nc, "commit", "", nil, wire.Start{})
	if v := valuesOf(consumertest.FetchN(t, again, 1)); v[0] != "m0" {
		t.Fatalf("a new source from the start begins at %q", v[0])
	}
}

func TestJetStreamLag(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "lag", Subjects: []string{"lag.*"}})
	for i := range 10 {
		publish(t, js, "lag.a", fmt.Sprintf("a%d", i))
		publish(t, js, "lag.b", fmt.Sprintf("b%d", i))
	}
	src := openJetStream(t, nc, "lag", "lag.a", nil, wire.Start{})
	if lag := src.Lag(); lag["jetstream:lag"] != 10 || len(lag) != 1 {
		t.Fatalf("lag before Fetch %v, want jetstream:lag 10", lag)
	}
	got := consumertest.FetchN(t, src, 4)
	if lag := src.Lag()["jetstream:lag"]; lag != 6 {
		t.Fatalf("lag after 4 of 10 fetched: %d, want 6", lag)
	}
	if got[3].Position.Offset != 7 {
		t.Fatalf("fourth lag.a message at sequence %d, want 7", got[3].Position.Offset)
	}
	consumertest.FetchN(t, src, 6)
	if lag := src.Lag()["jetstream:lag"]; lag != 0 {
		t.Fatalf("lag after everything fetched: %d, want 0", lag)
	}
}

func TestJetStreamSourceClose(t *testing.T) {
	ts, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "close", Subjects: []string{"close.in"}})
	src := openJetStream(t, nc, "close", "", nil, wire.Start{})
	ctx := context.Background()
	if n := consumerCount(t, js, "close"); n != 1 {
		t.Fatalf("%d consumers while reading, want 1", n)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Fetch(ctx, 1); err == nil {
		t.Fatal("Fetch after Close returned no error")
	}
	if err := src.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := consumerCount(t, js, "close"); n != 0 {
		t.Fatalf("%d consumers left after Close", n)
	}

	// A closed connection ends the source: Fetch says so instead of waiting.
	other := connect(t, ts)
	src = openJetStream(t, other, "close", "", nil, wire.Start{})
	other.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := src.Fetch(ctx, 1); !errors.Is(err, natsgo.ErrConnectionClosed) {
		t.Fatalf("Fetch on a closed connection: %v, want %v", err, natsgo.ErrConnectionClosed)
	}
}

// TestJetStreamConsumerDeleted deletes the source's consumer on the server
// mid-stream: the source makes a new one and goes on from the next
// sequence, losing and repeating nothing.
func TestJetStreamConsumerDeleted(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "del", Subjects: []string{"del.in"}})
	publish(t, js, "del.in", seqValues(0, 5)...)
	src := openJetStream(t, nc, "del", "", nil, wire.Start{})
	if v := valuesOf(consumertest.FetchN(t, src, 5)); !slices.Equal(v, seqValues(0, 5)) {
		t.Fatalf("got %q", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	names := st.ConsumerNames(ctx)
	var deleted int
	for name := range names.Name() {
		if err := js.DeleteConsumer(ctx, "del", name); err != nil {
			t.Fatal(err)
		}
		deleted++
	}
	if deleted != 1 {
		t.Fatalf("deleted %d consumers, want 1", deleted)
	}
	publish(t, js, "del.in", seqValues(5, 10)...)
	got := consumertest.FetchN(t, src, 5)
	if v := valuesOf(got); !slices.Equal(v, seqValues(5, 10)) || got[0].Position.Offset != 6 {
		t.Fatalf("after the consumer was deleted: %q from %+v", v, got[0].Position)
	}
	expectNothing(t, src)
}

func consumerCount(t *testing.T, js jetstream.JetStream, stream string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Consumers
}

func outputs(from, to int) []consumer.Output {
	var out []consumer.Output
	for i := from; i < to; i++ {
		out = append(out, consumer.Output{Topic: "out.events", Key: fmt.Appendf(nil, "jetstream:in/%d", i), Value: fmt.Appendf(nil, "m%d", i)})
	}
	return out
}

func streamMsgs(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func TestJetStreamSinkDeduplicates(t *testing.T) {
	_, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "out", Subjects: []string{"out.>"}})
	sink := newSink(t, nc, true, zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch := outputs(0, 50)
	for range 2 {
		if err := sink.Publish(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, js, "out"); n != 50 {
		t.Fatalf("stream holds %d messages after publishing 50 twice, want 50", n)
	}
	// Overlapping retry with new keys: only the new ones are stored.
	if err := sink.Publish(ctx, outputs(40, 60)); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, "out"); n != 60 {
		t.Fatalf("stream holds %d messages, want 60", n)
	}
	got := readStream(t, js, "out", "out.events", 60)
	for i, o := range got {
		if want := outputs(i, i+1)[0]; string(o.Key) != string(want.Key) || string(o.Value) != string(want.Value) {
			t.Fatalf("stored message %d is %q = %q, want %q = %q", i, o.Key, o.Value, want.Key, want.Value)
		}
	}
}

func TestJetStreamSinkNoStream(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	sink := newSink(t, nc, true, zaptest.NewLogger(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := sink.Publish(ctx, []consumer.Output{{Topic: "nowhere", Key: []byte("k"), Value: []byte("v")}})
	if err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Fatalf("publishing to a subject without a stream: %v, want an error naming it", err)
	}
}

// TestServerRestart stops the server in the middle of a stream and starts
// it again on the same port and store: the sources carry on where they
// were, the sinks fail while it is down and succeed once it is back, and a
// JetStream batch published again after a failure is stored once.
func TestServerRestart(t *testing.T) {
	ts, nc, js := startJetStream(t)
	testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: "rs", Subjects: []string{"out.>"}, Storage: jetstream.FileStorage})
	log := zaptest.NewLogger(t)
	jsSink, coreSink := newSink(t, nc, true, log), newSink(t, nc, false, log)
	jsSrc := openJetStream(t, nc, "rs", "out.events", nil, wire.Start{})
	coreSrc := openCore(t, nc, "core.rs", log)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	if err := jsSink.Publish(ctx, outputs(0, 10)); err != nil {
		t.Fatal(err)
	}
	if err := coreSink.Publish(ctx, []consumer.Output{{Topic: "core.rs", Key: []byte("c0"), Value: []byte("c0")}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if v := valuesOf(consumertest.FetchN(t, jsSrc, 10)); !slices.Equal(v, seqValues(0, 10)) {
		t.Fatalf("before the restart: %q", v)
	}
	c0 := consumertest.FetchN(t, coreSrc, 1)[0]
	if string(c0.Value) != "c0" {
		t.Fatalf("core before the restart: %q at %+v", c0.Value, c0.Position)
	}

	ts.Shutdown()
	wait.For(t, time.Minute, 10*time.Millisecond, "the client to notice the shutdown", func() bool { return !nc.IsConnected() })
	for _, sink := range []*nats.Sink{jsSink, coreSink} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		err := sink.Publish(ctx, outputs(10, 15))
		cancel()
		if err == nil {
			t.Fatal("Publish with the server down returned nil")
		}
		// Its context ends it after a second; one that waited for the
		// server instead would never return.
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("Publish with the server down took %v", d)
		}
	}
	expectNothing(t, jsSrc)

	ts.Start()
	// nc noticed the shutdown, so once it is connected again it is to the
	// new server.
	wait.For(t, time.Minute, 10*time.Millisecond, "the client to reconnect", nc.IsConnected)
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The batch that failed, again: the stream may already hold some of it
	// (the client sends what it buffered when it reconnects), and holds
	// each message once.
	if err := jsSink.Publish(ctx, outputs(10, 15)); err != nil {
		t.Fatalf("Publish after the restart: %v", err)
	}
	if err := jsSink.Publish(ctx, outputs(15, 20)); err != nil {
		t.Fatalf("Publish after the restart: %v", err)
	}
	got := consumertest.FetchN(t, jsSrc, 10)
	if v := valuesOf(got); !slices.Equal(v, seqValues(10, 20)) {
		t.Fatalf("after the restart: %q", v)
	}
	if got[0].Position.Offset != 11 || got[9].Position.Offset != 20 {
		t.Fatalf("after the restart: sequences %d to %d, want 11 to 20", got[0].Position.Offset, got[9].Position.Offset)
	}
	expectNothing(t, jsSrc)
	if n := streamMsgs(t, js, "rs"); n != 20 {
		t.Fatalf("stream holds %d messages, want 20", n)
	}

	// Core NATS lost whatever was sent while it was down; new messages
	// arrive, numbered on from before.
	if err := coreSink.Publish(ctx, []consumer.Output{{Topic: "core.rs", Key: []byte("c1"), Value: []byte("c1")}}); err != nil {
		t.Fatalf("core Publish after the restart: %v", err)
	}
	for {
		batch, err := coreSrc.Fetch(ctx, 10)
		if err != nil {
			t.Fatalf("core Fetch after the restart: %v", err)
		}
		last := batch[len(batch)-1]
		if string(last.Value) == "c1" {
			if last.Position.Offset <= c0.Position.Offset {
				t.Fatalf("core position after the restart %+v, want more than c0's, %d", last.Position, c0.Position.Offset)
			}
			break
		}
	}
}

// TestServerBackWithSmallerMaxPayload restarts the server with a smaller
// max_payload while a message over it was published during the outage:
// the connection reconnects and stays usable. A client that held the
// message to send on reconnecting would have the server close the
// connection for good (Maximum Payload Violation), and the worker would
// never publish again.
func TestServerBackWithSmallerMaxPayload(t *testing.T) {
	ts := testbroker.NATS(t)
	nc := connect(t, ts)
	ts.Shutdown()
	wait.For(t, time.Minute, 10*time.Millisecond, "the client to notice the shutdown", func() bool { return !nc.IsConnected() })
	if err := nc.Publish("core.big", make([]byte, 2000)); err == nil {
		t.Log("the client took a publish while reconnecting")
	}
	ts.SetMaxPayload(1000)
	ts.Start()
	wait.For(t, time.Minute, 10*time.Millisecond, "the client to reconnect", func() bool { return nc.IsConnected() || nc.IsClosed() })
	// A round trip: the server has read whatever the client sent on
	// reconnecting by the time it answers.
	if err := nc.FlushTimeout(30 * time.Second); err != nil {
		t.Fatalf("flush after the restart: %v (connection %s, last error %v)", err, nc.Status(), nc.LastError())
	}
	if nc.IsClosed() {
		t.Fatalf("connection closed after the restart: %v", nc.LastError())
	}
	if got := nc.MaxPayload(); got != 1000 {
		t.Fatalf("max_payload after the restart %d, want 1000", got)
	}
}

func TestConnectErrors(t *testing.T) {
	log := zaptest.NewLogger(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	_, err = nats.Connect(nats.Config{URL: "nats://user:s3cret@" + addr}, log)
	if err == nil {
		t.Fatal("connecting to a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("error %q: want the address without the password", err)
	}
	if _, err := nats.Connect(nats.Config{}, log); err == nil {
		t.Fatal("no URL: no error")
	}
	_, err = nats.Connect(nats.Config{URL: "nats://" + addr, NKeyFile: t.TempDir() + "/missing.nk"}, log)
	if err == nil || !strings.Contains(err.Error(), "missing.nk") {
		t.Fatalf("missing NKey file: %v", err)
	}
}

// newSink returns a sink on nc, to JetStream or core NATS, closed when the
// test ends.
func newSink(t *testing.T, nc *natsgo.Conn, jetStream bool, log *zap.Logger) *nats.Sink {
	t.Helper()
	sink, err := nats.NewSink(nc, jetStream, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink
}

// TestJetStreamSourceGoneWhileReading: messages that the stream's limits or
// a purge remove while the source reads, before it has read them, are
// warned about with the sequences lost, as they are at start-up, rather
// than skipped without a word; a filter that skips other subjects' sequences
// is no loss.
func TestJetStreamSourceGoneWhileReading(t *testing.T) {
	_, nc, js := startJetStream(t)
	for _, c := range []struct{ stream, filter string }{{"lost", ""}, {"lostf", "lostf.in"}} {
		testbroker.CreateStream(t, js, jetstream.StreamConfig{Name: c.stream, Subjects: []string{c.stream + ".in", c.stream + ".other"}, Storage: jetstream.MemoryStorage})
		publish(t, js, c.stream+".in", seqValues(0, 3)...)
		core, logs := observer.New(zap.WarnLevel)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		src, err := nats.NewJetStreamSource(ctx, nc, c.stream, c.filter, nil, wire.Start{}, zap.New(core))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		consumertest.FetchN(t, src, 3)
		st, err := js.Stream(ctx, c.stream)
		if err != nil {
			t.Fatal(err)
		}
		var name string
		for n := range st.ConsumerNames(ctx).Name() {
			name = n
		}
		// The consumer paused holds back what is published next, so the
		// purge removes messages the source has not read.
		if _, err := js.PauseConsumer(ctx, c.stream, name, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		publish(t, js, c.stream+".in", seqValues(3, 8)...)
		if err := st.Purge(ctx, jetstream.WithPurgeSequence(9)); err != nil {
			t.Fatal(err)
		}
		publish(t, js, c.stream+".in", "9")
		publish(t, js, c.stream+".other", "o")
		publish(t, js, c.stream+".in", "10")
		if _, err := js.ResumeConsumer(ctx, c.stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		want := []int64{9, 10, 11}
		if c.filter != "" {
			want = []int64{9, 11}
		}
		for i, m := range consumertest.FetchN(t, src, len(want)) {
			if m.Position.Offset != want[i] {
				t.Fatalf("%s: read %d after the purge, want %v", c.stream, m.Position.Offset, want)
			}
		}
		warned := logs.FilterMessageSnippet("no longer holds").All()
		if len(warned) != 1 {
			t.Fatalf("%s: %d warnings that messages are gone, want 1: %v", c.stream, len(warned), warned)
		}
		if f := warned[0].ContextMap(); f["from_sequence"] != uint64(4) || f["to_sequence"] != uint64(8) || f["stream"] != c.stream {
			t.Errorf("%s: warning with %v, want sequences 4 to 8 of the stream", c.stream, f)
		}
	}
}
