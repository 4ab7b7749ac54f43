// Package consumertest is the conformance suite that every source and sink
// of package consumer passes: one set of tests, run against each broker
// adapter with a real (in-process) broker. An adapter states what it can
// do in a Features value; the suite runs every subtest the adapter's
// features allow and skips the others, naming the feature they need.
package consumertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
)

// Features says what an adapter and its broker can do. The zero value is
// the least: a source of one partition that sees only what is produced
// while it is open, a sink whose broker keeps every copy it is sent.
type Features struct {
	// Partitions is the most partitions a source reads at once (Kafka: a
	// topic's); 0 means 1, for sources without partitions.
	Partitions int
	// Replay: the broker keeps messages, so a source delivers what was
	// produced before it opened, and one opened at a resume position
	// delivers from there on: what makes the model exactly-once. Without
	// it (core NATS) a source is at-most-once: it sees only what is
	// produced while it is subscribed, and the suite opens it before
	// producing.
	Replay bool
	// Deduplicates: the broker stores an output published again with the
	// same key once (JetStream's Nats-Msg-Id, within the stream's
	// duplicate window), so a batch retried after an error reaches readers
	// once. Without it outputs are at-least-once and readers drop repeats
	// by key.
	Deduplicates bool
}

func (f Features) partitions() int { return max(1, f.Partitions) }

// require skips t, naming the feature, unless the adapter has it.
func require(t *testing.T, has bool, feature, why string) {
	t.Helper()
	if !has {
		t.Skipf("the adapter lacks Features.%s: %s", feature, why)
	}
}

// SourceHarness connects the suite to one kind of source on a running
// broker. Every call of Setup gives a fresh, empty place to read from
// (a new topic or stream).
type SourceHarness struct {
	// Setup creates a new topic or stream with the given partition count
	// (at most Features.Partitions) and returns functions to produce to
	// partition p and to open a source on it from the given resume
	// positions (nil: from the beginning, or for a source without replay,
	// from now on).
	Setup func(t *testing.T, partitions int) (produce func(p int, values ...[]byte), open func(resume map[string]int64) consumer.Source)
}

// TestSource runs the source conformance suite on the sources h opens,
// whose features are f.
func TestSource(t *testing.T, f Features, h SourceHarness) {
	t.Run("Order", func(t *testing.T) { testOrder(t, f, h) })
	t.Run("Resume", func(t *testing.T) {
		require(t, f.Replay, "Replay", "a source opened at a position cannot start from there")
		testResume(t, h)
	})
	t.Run("Reopen", func(t *testing.T) {
		require(t, f.Replay, "Replay", "what is produced while no source is open is lost")
		testReopen(t, h)
	})
	t.Run("CommitDoesNotMove", func(t *testing.T) { testCommit(t, f, h) })
	t.Run("WaitsForMessages", func(t *testing.T) { testWaits(t, h) })
	t.Run("CancelledFetchLosesNothing", func(t *testing.T) { testCancelledFetch(t, h) })
}

// produceThenOpen produces with produce and opens a source from the
// beginning, in that order if the broker keeps messages (the source reads
// a backlog) and the other way round if it does not.
func produceThenOpen(f Features, produce func(), open func(map[string]int64) consumer.Source) consumer.Source {
	if !f.Replay {
		src := open(nil)
		produce()
		return src
	}
	produce()
	return open(nil)
}

func values(p, from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, fmt.Appendf(nil, "p%d-m%d", p, i))
	}
	return out
}

// FetchN fetches from src until it has n messages, at most 64 at a time,
// and returns copies of them. It fails the test if a Fetch fails, returns
// nothing or more than it was asked for, or if the n messages take more
// than two minutes.
func FetchN(t testing.TB, src consumer.Source, n int) []consumer.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got []consumer.Message
	for len(got) < n {
		limit := min(64, n-len(got))
		batch, err := src.Fetch(ctx, limit)
		if err != nil {
			t.Fatalf("Fetch after %d of %d messages: %v", len(got), n, err)
		}
		if len(batch) == 0 || len(batch) > limit {
			t.Fatalf("Fetch returned %d messages, want 1 to %d", len(batch), limit)
		}
		for _, m := range batch {
			m.Value = slices.Clone(m.Value)
			got = append(got, m)
		}
	}
	return got
}

// noMore checks that nothing else arrives for a short while.
func noMore(t *testing.T, src consumer.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if batch, err := src.Fetch(ctx, 64); err == nil {
		t.Fatalf("unexpected extra messages: %d, first %q", len(batch), batch[0].Value)
	}
}

func testOrder(t *testing.T, f Features, h SourceHarness) {
	parts := min(3, f.partitions())
	produce, open := h.Setup(t, parts)
	const n = 200
	src := produceThenOpen(f, func() {
		for p := range parts {
			produce(p, values(p, 0, n)...)
		}
	}, open)
	defer src.Close()
	got := FetchN(t, src, parts*n)
	noMore(t, src)
	next := map[string]int{}
	last := map[string]consumer.Message{}
	keys := map[string]int{}
	for _, m := range got {
		var p, i int
		if _, err := fmt.Sscanf(string(m.Value), "p%d-m%d", &p, &i); err != nil {
			t.Fatalf("bad value %q", m.Value)
		}
		src := m.Position.Source
		if k, ok := keys[src]; ok && k != p {
			t.Fatalf("source %s carries partitions %d and %d", src, k, p)
		}
		keys[src] = p
		if i != next[src] {
			t.Fatalf("%s: message %d arrived where %d was due", src, i, next[src])
		}
		next[src]++
		if prev, ok := last[src]; ok && (m.Position.Offset <= prev.Position.Offset || m.Resume <= prev.Resume) {
			t.Fatalf("%s: positions not increasing: %+v after %+v", src, m.Position, prev.Position)
		}
		last[src] = m
	}
	if len(keys) != parts {
		t.Fatalf("%d distinct source keys, want %d", len(keys), parts)
	}
}

func testResume(t *testing.T, h SourceHarness) {
	produce, open := h.Setup(t, 1)
	produce(0, values(0, 0, 50)...)
	src := open(nil)
	first := FetchN(t, src, 50)
	src.Close()
	cut := first[19]
	resumed := open(map[string]int64{cut.Position.Source: cut.Resume})
	defer resumed.Close()
	rest := FetchN(t, resumed, 30)
	for i, m := range rest {
		if want := first[20+i]; string(m.Value) != string(want.Value) || m.Position != want.Position || m.Resume != want.Resume {
			t.Fatalf("after resuming at %+v message %d is %q at %+v, want %q at %+v", cut.Position, i, m.Value, m.Position, want.Value, want.Position)
		}
	}
	noMore(t, resumed)
}

// testReopen reads part of a stream, closes the source as a crash would,
// produces more, and reopens from the last position read: nothing is lost
// or repeated.
func testReopen(t *testing.T, h SourceHarness) {
	produce, open := h.Setup(t, 1)
	produce(0, values(0, 0, 10)...)
	src := open(nil)
	got := FetchN(t, src, 10)
	src.Close()
	produce(0, values(0, 10, 25)...)
	last := got[len(got)-1]
	again := open(map[string]int64{last.Position.Source: last.Resume})
	defer again.Close()
	more := FetchN(t, again, 15)
	for i, m := range more {
		if want := fmt.Sprintf("p0-m%d", 10+i); string(m.Value) != want {
			t.Fatalf("message %d after reopening is %q, want %q", i, m.Value, want)
		}
	}
}

func testCommit(t *testing.T, f Features, h SourceHarness) {
	produce, open := h.Setup(t, 1)
	src := produceThenOpen(f, func() { produce(0, values(0, 0, 20)...) }, open)
	defer src.Close()
	got := FetchN(t, src, 10)
	last := got[len(got)-1]
	if err := src.Commit(context.Background(), map[string]int64{last.Position.Source: last.Resume}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	rest := FetchN(t, src, 10)
	if string(rest[0].Value) != "p0-m10" {
		t.Fatalf("after Commit the next message is %q, want p0-m10", rest[0].Value)
	}
}

func testWaits(t *testing.T, h SourceHarness) {
	produce, open := h.Setup(t, 1)
	src := open(nil)
	defer src.Close()
	// The messages come a moment after the Fetch starts, most likely
	// while it waits; the Fetch must return them, not nothing, whenever
	// they come.
	go func() {
		time.Sleep(200 * time.Millisecond)
		produce(0, values(0, 0, 3)...)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	batch, err := src.Fetch(ctx, 3)
	if err != nil || len(batch) == 0 {
		t.Fatalf("Fetch on an empty source returned %d messages, %v; want it to wait for the first", len(batch), err)
	}
	got := make([]consumer.Message, 0, 3)
	for _, m := range batch {
		m.Value = slices.Clone(m.Value)
		got = append(got, m)
	}
	got = append(got, FetchN(t, src, 3-len(got))...)
	for i, m := range got {
		if want := fmt.Sprintf("p0-m%d", i); string(m.Value) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Value, want)
		}
	}
}

// testCancelledFetch checks that a Fetch ended by its context loses
// nothing: the worker ends Fetch on an idle stream when a snapshot falls
// due, and the next Fetch must go on from the same place.
func testCancelledFetch(t *testing.T, h SourceHarness) {
	produce, open := h.Setup(t, 1)
	src := open(nil)
	defer src.Close()
	// On an empty source: the context's error, and nothing else.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := src.Fetch(ctx, 8); err == nil {
		t.Fatal("Fetch on an empty source returned without its context's error")
	}
	cancel()
	produce(0, values(0, 0, 20)...)
	// Fetches whose context is already done either return messages or
	// the context's error; either way the stream goes on in order.
	var got []consumer.Message
	done, stop := context.WithCancel(context.Background())
	stop()
	for range 20 {
		batch, err := src.Fetch(done, 1)
		if err == nil {
			for _, m := range batch {
				m.Value = slices.Clone(m.Value)
				got = append(got, m)
			}
		}
	}
	got = append(got, FetchN(t, src, 20-len(got))...)
	for i, m := range got {
		if want := fmt.Sprintf("p0-m%d", i); string(m.Value) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Value, want)
		}
	}
}

// SinkHarness connects the suite to one kind of sink on a running broker.
type SinkHarness struct {
	// Setup creates fresh topics (or subjects) named by topics and returns
	// an open sink and a function that reads back every output on a topic
	// so far, waiting up to a few seconds for n of them.
	Setup func(t *testing.T, topics []string) (consumer.Sink, func(topic string, n int) []consumer.Output)
}

// TestSink runs the sink conformance suite on the sinks h opens, whose
// features are f.
func TestSink(t *testing.T, f Features, h SinkHarness) {
	t.Run("PublishesEverything", func(t *testing.T) {
		topics := []string{"predictions", "misclassifications"}
		sink, read := h.Setup(t, topics)
		defer sink.Close()
		var batch []consumer.Output
		for i := range 300 {
			batch = append(batch, consumer.Output{Topic: topics[i%2], Key: fmt.Appendf(nil, "kafka:in/0/%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sink.Publish(ctx, batch[:100]); err != nil {
			t.Fatal(err)
		}
		if err := sink.Publish(ctx, batch[100:]); err != nil {
			t.Fatal(err)
		}
		for ti, topic := range topics {
			got := read(topic, 150)
			if len(got) != 150 {
				t.Fatalf("%s: read %d outputs, want 150", topic, len(got))
			}
			want := map[string]string{}
			for i := ti; i < 300; i += 2 {
				want[string(batch[i].Key)] = string(batch[i].Value)
			}
			for _, o := range got {
				if v, ok := want[string(o.Key)]; !ok || v != string(o.Value) {
					t.Fatalf("%s: unexpected output %q = %q", topic, o.Key, o.Value)
				}
				delete(want, string(o.Key))
			}
		}
	})
	t.Run("CallerReusesBuffers", func(t *testing.T) {
		testCallerReusesBuffers(t, h)
	})
	t.Run("EmptyBatch", func(t *testing.T) {
		sink, _ := h.Setup(t, []string{"x"})
		defer sink.Close()
		if err := sink.Publish(context.Background(), nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
	})
	t.Run("RetryStoredOnce", func(t *testing.T) {
		require(t, f.Deduplicates, "Deduplicates", "a batch published again reaches readers twice (at-least-once)")
		testRetryStoredOnce(t, h)
	})
	t.Run("CancelledContext", func(t *testing.T) {
		sink, _ := h.Setup(t, []string{"y"})
		defer sink.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := sink.Publish(ctx, []consumer.Output{{Topic: "y", Key: []byte("k"), Value: []byte("v")}}); err == nil {
			t.Fatal("Publish with a cancelled context returned nil")
		}
	})
}

// testCallerReusesBuffers publishes outputs whose keys and values share
// one buffer, as the worker's do, and overwrites it once Publish returns,
// as the worker does with its next batch: readers get what was published.
func testCallerReusesBuffers(t *testing.T, h SinkHarness) {
	const topic, n = "reused", 20
	sink, read := h.Setup(t, []string{topic})
	defer sink.Close()
	var buf []byte
	var ends []int
	for i := range n {
		buf = fmt.Appendf(buf, `{"n":%d}`, i)
		ends = append(ends, len(buf))
		buf = fmt.Appendf(buf, "kafka:in/0/%d", i)
		ends = append(ends, len(buf))
	}
	batch := make([]consumer.Output, n)
	want := map[string]string{}
	start := 0
	for i := range batch {
		v, k := ends[2*i], ends[2*i+1]
		batch[i] = consumer.Output{Topic: topic, Value: buf[start:v:v], Key: buf[v:k:k]}
		want[string(batch[i].Key)] = string(batch[i].Value)
		start = k
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sink.Publish(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	for _, o := range read(topic, n) {
		if v, ok := want[string(o.Key)]; !ok || v != string(o.Value) {
			t.Fatalf("output %q = %q: not what was published", o.Key, o.Value)
		}
		delete(want, string(o.Key))
	}
	if len(want) > 0 {
		t.Fatalf("%d of %d outputs not read back", len(want), n)
	}
}

// testRetryStoredOnce publishes a batch twice, as the worker does after an
// error, and then a batch that overlaps it: readers get each output once.
func testRetryStoredOnce(t *testing.T, h SinkHarness) {
	const topic = "retried"
	sink, read := h.Setup(t, []string{topic})
	defer sink.Close()
	outputs := func(from, to int) []consumer.Output {
		var out []consumer.Output
		for i := from; i < to; i++ {
			out = append(out, consumer.Output{Topic: topic, Key: fmt.Appendf(nil, "kafka:in/0/%d", i), Value: fmt.Appendf(nil, `{"n":%d}`, i)})
		}
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, batch := range [][]consumer.Output{outputs(0, 50), outputs(0, 50), outputs(40, 60)} {
		if err := sink.Publish(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	for _, o := range outputs(0, 60) {
		want[string(o.Key)] = string(o.Value)
	}
	for _, o := range read(topic, 60) {
		if v, ok := want[string(o.Key)]; !ok || v != string(o.Value) {
			t.Fatalf("output %s = %q read twice or not published", o.Key, o.Value)
		}
		delete(want, string(o.Key))
	}
	if len(want) > 0 {
		t.Fatalf("%d of 60 outputs not read back", len(want))
	}
}
