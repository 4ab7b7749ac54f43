package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// pill is the poison pill of the issue: an invalid example whose dead
// letter, with the payload in base64 (1,066,684 bytes), is over 1 MiB,
// though the message itself is within every input limit.
var pill = []byte(`{"label":"` + strings.Repeat("a", 800_000) + `"}`)

// withPill is 10 valid examples, the pill, and 10 valid examples.
func withPill() [][]byte {
	valid, _ := messages(20)
	return append(append(valid[:10:10], pill), valid[10:]...)
}

// Per-message overhead of the sinks besides key and value: the
// Nats-Msg-Id header; a Kafka record batch and kafka-go's accounting.
const (
	natsOverhead = len("NATS/1.0\r\nNats-Msg-Id: \r\n\r\n")
	// smallMsgSize is the max_msg_size of the streams that an event
	// with an id of wire.MaxIDBytes does not fit, and every other does.
	smallMsgSize  = 1024
	kafkaOverhead = 61 + 23
)

// deadLetter is a dead-letter event as JSON.
type deadLetter struct {
	EventID      string `json:"event_id"`
	Error        string `json:"error"`
	Payload      []byte `json:"payload"`
	PayloadBytes *int   `json:"payload_bytes"`
	Truncated    *bool  `json:"truncated"`
}

// checkPill checks the outputs of withPill: 20 predictions, and one dead
// letter for the pill, keyed eventID, that fits limit (counting its key)
// and carries the whole pill or, if truncated, as much of it as fits with
// the pill's size.
func checkPill(t *testing.T, preds, dead [][]byte, eventID string, limit int, truncated bool) {
	t.Helper()
	if len(preds) != 20 {
		t.Errorf("%d predictions, want one for each of the 20 valid examples", len(preds))
	}
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	var dl deadLetter
	if err := json.Unmarshal(dead[0], &dl); err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	size := len(eventID) + len(dead[0])
	if dl.EventID != eventID || !strings.HasPrefix(dl.Error, "label: ") {
		t.Fatalf("dead letter %s: %q, want %s with the label's error", dl.EventID, dl.Error, eventID)
	}
	if size > limit {
		t.Fatalf("dead letter of %d bytes with its key, over the limit of %d", size, limit)
	}
	if !truncated {
		if !bytes.Equal(dl.Payload, pill) || dl.Truncated != nil || dl.PayloadBytes != nil {
			t.Fatalf("dead letter with %d payload bytes, truncated %v: want the whole pill (%d bytes) and no truncation fields", len(dl.Payload), dl.Truncated, len(pill))
		}
		return
	}
	if dl.Truncated == nil || !*dl.Truncated || dl.PayloadBytes == nil || *dl.PayloadBytes != len(pill) {
		t.Fatalf("dead letter says truncated %v, payload_bytes %v; want true and %d", dl.Truncated, dl.PayloadBytes, len(pill))
	}
	if !bytes.HasPrefix(pill, dl.Payload) || len(dl.Payload) >= len(pill) {
		t.Fatalf("dead letter payload of %d bytes is not a proper prefix of the pill", len(dl.Payload))
	}
	// As much as fits: base64 comes in 4 characters for 3 bytes.
	if size <= limit-4 {
		t.Fatalf("dead letter of %d bytes carries less of the payload than the limit of %d allows", size, limit)
	}
}

// TestWorkerPoisonPillJetStream reproduces the issue on JetStream with the
// server's default max_payload (1 MiB): the pill's dead letter is cut to
// fit, the valid outputs batched with it are published, and the worker's
// positions, published positions and snapshots move past it.
func TestWorkerPoisonPillJetStream(t *testing.T) {
	b := newBroker(t)
	msgs := withPill()
	b.publish(t, msgs)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer store.Close()
	cfg := consumer.WorkerConfig{
		Model:              "m",
		Predictions:        consumer.Destination{Topic: "t.PRED"},
		Misclassifications: consumer.Destination{Topic: "t.MIS"},
		DeadLetter:         consumer.Destination{Topic: "t.DEAD"},
		Batch:              8,
		Snapshots:          snapshot.NewSnapshotter(store, "m", "test", 1, 100, zaptest.NewLogger(t)),
		SnapshotEvery:      5,
	}
	w, _ := runWorker(t, b, cfg, newModel(t), len(msgs))
	if pos := w.Positions()["jetstream:IN"]; pos != int64(len(msgs)) {
		t.Fatalf("position %d, want %d", pos, len(msgs))
	}
	if n := w.Model().Metrics().Examples; n != 20 {
		t.Fatalf("the model learned %d examples, want 20", n)
	}
	checkPill(t, b.read(t, "PRED"), b.read(t, "DEAD"), "jetstream:IN/11", int(b.nc.MaxPayload())-natsOverhead, true)
	latest, err := store.Latest(context.Background(), "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pos := latest.Positions["jetstream:IN"]; pos != int64(len(msgs)) {
		t.Fatalf("the last snapshot is at %d, want %d", pos, len(msgs))
	}
}

// TestWorkerPoisonPillKafka reproduces the issue on Kafka, with a
// dead-letter topic that takes 64 MiB (the dead letter goes whole, though
// it is over kafka-go's default batch limit of 1 MiB) and one that takes
// 16 KiB (the dead letter is cut to fit).
func TestWorkerPoisonPillKafka(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deadMax   int // the dead-letter topic's max.message.bytes
		truncated bool
	}{
		{"dead letters take 64 MiB", 64 << 20, false},
		{"dead letters take 16 KiB", 16 << 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testbroker.Kafka(t)
			cl := c.Client(t)
			for _, topic := range []string{"in", "pred", "mis"} {
				c.CreateTopic(t, topic, 1)
			}
			c.CreateTopic(t, "dead", 1, "max.message.bytes", strconv.Itoa(tc.deadMax))
			msgs := withPill()
			var recs []*kgo.Record
			for _, m := range msgs {
				recs = append(recs, &kgo.Record{Topic: "in", Value: m})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			log := zaptest.NewLogger(t)
			kc := kafkaio.Config{Brokers: c.ListenAddrs(), ClientID: "hyperplane-test"}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			src, err := kafkaio.NewSource(ctx, kc, []string{"in"}, "", nil, wire.Start{Kind: "earliest"}, log)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			sink, err := kafkaio.NewSink(kc, log)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			cfg := consumer.WorkerConfig{
				Model:              "m",
				Predictions:        consumer.Destination{Sink: sink, Topic: "pred"},
				Misclassifications: consumer.Destination{Sink: sink, Topic: "mis"},
				DeadLetter:         consumer.Destination{Sink: sink, Topic: "dead"},
				Batch:              8,
			}
			w := consumer.NewWorker(cfg, src, newModel(t), nil, nil, log)
			runUntilPublished(t, w, "kafka:in/0", int64(len(msgs)))
			if pos := w.Positions()["kafka:in/0"]; pos != int64(len(msgs)) {
				t.Fatalf("position %d, want %d", pos, len(msgs))
			}
			checkPill(t, c.ReadTopic(t, ctx, "pred"), c.ReadTopic(t, ctx, "dead"), "kafka:in/0/10", tc.deadMax-kafkaOverhead, tc.truncated)
		})
	}
}

// TestWorkerOversizedEvent: a valid example whose event is over its
// output's limit (here a 100 kB id, and a prediction stream whose
// max_msg_size is 64 KiB) gets a dead letter naming the event, its size
// and the limit, instead of stalling the stream; the model learns from it
// all the same, and one message never gets two dead letters: when its
// misclassification is over its limit too, the one dead letter names both.
func TestWorkerOversizedEvent(t *testing.T) {
	huge := fmt.Appendf(nil, `{"id":%q,"label":-1,"features":{"a":1}}`, strings.Repeat("i", wire.MaxIDBytes))
	for _, tc := range []struct {
		name         string
		mis          string // the misclassifications' stream
		misPublished bool   // whether the huge example's misclassification fits it
	}{
		{"prediction over the limit", "MIS", true},
		{"prediction and misclassification over the limit", "SMALLMIS", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t)
			for _, s := range []string{"SMALLPRED", "SMALLMIS"} {
				if _, err := b.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: s, Subjects: []string{"t." + s}, MaxMsgSize: smallMsgSize}); err != nil {
					t.Fatal(err)
				}
			}
			valid, _ := messages(10)
			msgs := append([][]byte{huge}, valid...) // first, so that the model gets it wrong
			b.publish(t, msgs)
			cfg := consumer.WorkerConfig{
				Model:              "m",
				Predictions:        consumer.Destination{Topic: "t.SMALLPRED"},
				Misclassifications: consumer.Destination{Topic: "t." + tc.mis},
				DeadLetter:         consumer.Destination{Topic: "t.DEAD"},
			}
			w, _ := runWorker(t, b, cfg, newModel(t), len(msgs))
			if n := w.Model().Metrics().Examples; n != uint64(len(msgs)) {
				t.Fatalf("the model learned %d examples, want all %d", n, len(msgs))
			}
			if n := len(b.read(t, "SMALLPRED")); n != len(valid) {
				t.Fatalf("%d predictions, want %d (all but the huge one)", n, len(valid))
			}
			dead := b.read(t, "DEAD")
			if len(dead) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dead))
			}
			var dl deadLetter
			if err := json.Unmarshal(dead[0], &dl); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(" bytes exceed the limit of %d of output t.SMALLPRED", smallMsgSize-natsOverhead)
			if dl.EventID != "jetstream:IN/1" || !strings.HasPrefix(dl.Error, "prediction event: ") || !strings.Contains(dl.Error, want) {
				t.Fatalf("dead letter %s: %q, want jetstream:IN/1 with an error like %q", dl.EventID, dl.Error, "prediction event: N"+want)
			}
			if size, err := strconv.Atoi(strings.Fields(dl.Error)[2]); err != nil || size <= wire.MaxIDBytes {
				t.Fatalf("error %q does not give the event's size", dl.Error)
			}
			if !bytes.Equal(dl.Payload, huge) || dl.Truncated != nil {
				t.Fatalf("dead letter payload of %d bytes, want the example's %d", len(dl.Payload), len(huge))
			}
			var hugeMis int
			for _, m := range b.read(t, tc.mis) {
				if bytes.Contains(m, []byte(`"event_id":"jetstream:IN/1"`)) {
					hugeMis++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tc.misPublished]; hugeMis != want {
				t.Fatalf("%d misclassifications of the huge example, want %d", hugeMis, want)
			}
			wantMis := fmt.Sprintf(" bytes exceed the limit of %d of output t.SMALLMIS", smallMsgSize-natsOverhead)
			if named := strings.Contains(dl.Error, "; misclassification event: ") && strings.HasSuffix(dl.Error, wantMis); named == tc.misPublished {
				t.Fatalf("dead letter error %q: naming the dropped misclassification is %v, want %v", dl.Error, named, !tc.misPublished)
			}
		})
	}
}

// runUntilPublished runs w until the outputs of source key's messages up
// to n are durable, then stops it.
func runUntilPublished(t *testing.T, w *consumer.Worker, key string, n int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// A failed wait ends the test's goroutine: the worker stops first.
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	defer stop()
	wait.For(t, 2*time.Minute, 20*time.Millisecond, fmt.Sprintf("the outputs of %d messages of %s published", n, key), func() bool {
		return w.Published()[key] >= n
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestJoinedWorkerOversizedEvents: with labels that come later, a late
// label and a joined label's misclassification are events too, and a
// label's id can make either larger than its output takes (here ids of
// wire.MaxIDBytes, and streams whose max_msg_size is smallMsgSize). Each is dropped and
// logged, rather than retried for ever with the stream stalled behind it:
// the worker goes on reading both inputs and publishing the other events.
func TestJoinedWorkerOversizedEvents(t *testing.T) {
	b := newBroker(t)
	for _, s := range []string{"SMALLMIS", "SMALLLATE", "LATE"} {
		cfg := jetstream.StreamConfig{Name: s, Subjects: []string{"t." + s}}
		if s != "LATE" {
			cfg.MaxMsgSize = smallMsgSize
		}
		if _, err := b.js.CreateStream(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
	}
	joined, unknown := strings.Repeat("j", wire.MaxIDBytes), strings.Repeat("u", wire.MaxIDBytes)
	const window = time.Second
	ex, labels := memory.NewLog("examples", 1), memory.NewLog("labels", 1)
	at := func(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
	// The huge example is predicted +1 by the new model, and its label
	// says -1: a misclassification over smallMsgSize.
	ex.AppendAt(0, at(0), fmt.Appendf(nil, `{"id":%q,"features":{"a":1}}`, joined))
	labels.AppendAt(0, at(0), fmt.Appendf(nil, `{"id":%q,"label":-1}`, joined))
	// A label no example has: unknown once the examples pass its window.
	labels.AppendAt(0, at(0), fmt.Appendf(nil, `{"id":%q,"label":1}`, unknown))
	labels.AppendAt(0, at(0), []byte(`{"id":"small","label":1}`))
	ex.AppendAt(0, at(3*window.Milliseconds()), []byte(`{"id":"later","label":1,"features":{"a":1}}`))

	log := zaptest.NewLogger(t)
	sink, err := natsio.NewSink(b.nc, true, log)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	for _, late := range []string{"SMALLLATE", "LATE"} {
		t.Run("late labels to "+late, func(t *testing.T) {
			lc := &consumer.LabelsConfig{
				Join:   consumer.JoinConfig{Window: window},
				Source: memory.NewSource(labels, nil),
				OpenTail: func(_ context.Context, resume map[string]int64) (consumer.Source, error) {
					return memory.NewSource(ex, resume), nil
				},
				LateLabels: consumer.Destination{Sink: sink, Topic: "t." + late},
				Format:     wire.FormatJSON, Writer: "w",
			}
			cfg := consumer.WorkerConfig{Model: "joined", Batch: 16, Labels: lc,
				Misclassifications: consumer.Destination{Sink: sink, Topic: "t.SMALLMIS"}}
			w := consumer.NewWorker(cfg, memory.NewSource(ex, nil), newModel(t), nil, nil, log)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() { errc <- w.Run(ctx) }()
			exKey, lbKey := ex.Key(0), labels.Key(0)
			wait.For(t, 30*time.Second, 5*time.Millisecond, "both inputs read and their outputs published", func() bool {
				select {
				case err := <-errc:
					t.Fatalf("Run stopped: %v", err)
				default:
				}
				p := w.Published()
				return p[exKey] >= 2 && p[lbKey] >= 3
			})
			if !w.Ready() {
				t.Error("the worker is not ready")
			}
			cancel()
			if err := <-errc; err != nil {
				t.Fatalf("Run: %v", err)
			}
			if mis := b.read(t, "SMALLMIS"); len(mis) != 0 {
				t.Errorf("%d misclassifications published, want none (the only one is over the limit)", len(mis))
			}
			var ids []string
			for _, m := range b.read(t, late) {
				var ll struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(m, &ll); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, ll.ID[:min(len(ll.ID), 5)])
			}
			if want := map[string]string{"SMALLLATE": "[small]", "LATE": "[uuuuu small]"}[late]; fmt.Sprint(ids) != want {
				t.Errorf("late labels %v, want %s", ids, want)
			}
		})
	}
}

// TestWorkerStopsWhenTheServerLowersItsLimit: outputs made while the
// NATS server was away fit the max_payload the connection knew, and the
// server comes back with a smaller one, which they are over. Publishing
// them again fails alike for ever: the worker stops, saying why, rather
// than stay not ready until someone restarts it, and no snapshot includes
// the messages whose outputs were not published (the next start reads
// them again and makes their outputs to the new limit).
func TestWorkerStopsWhenTheServerLowersItsLimit(t *testing.T) {
	for _, jetStream := range []bool{false, true} {
		t.Run(map[bool]string{false: "core", true: "jetstream"}[jetStream], func(t *testing.T) {
			store, runErr := stopsForALoweredLimit(t, jetStream, 10, nil)
			if !errors.Is(runErr, consumer.ErrOutputTooLarge) || !strings.Contains(runErr.Error(), "max_payload is 100 bytes") {
				t.Fatalf("Run: %v, want an output too large for the server's max_payload of 100 bytes", runErr)
			}
			if latest, err := store.Latest(context.Background(), "m", nil); err == nil && latest.Positions["memory:in/0"] > 0 {
				t.Fatalf("generation %d includes %d messages whose outputs were not published", latest.Generation, latest.Positions["memory:in/0"])
			}
		})
	}
}

// TestWorkerStopsAtOnceWithAFullQueue: the worker that stops for an output
// over a max_payload lowered since stops at once, though the batches it
// processed while the server was away fill the queue to the publisher:
// nothing publishes them any more, so waiting for room in the queue would
// hold the stop until the shutdown limit.
func TestWorkerStopsAtOnceWithAFullQueue(t *testing.T) {
	_, err := stopsForALoweredLimit(t, true, 40, func(cfg *consumer.WorkerConfig) {
		cfg.Batch, cfg.ShutdownTimeout = 1, time.Hour
	})
	if !errors.Is(err, consumer.ErrOutputTooLarge) {
		t.Fatalf("Run: %v, want an output too large for the server's max_payload", err)
	}
}

// stopsForALoweredLimit runs a worker over n valid examples whose
// predictions go to t.PRED (a JetStream stream, or core NATS) while the
// server is away, restarts the server with a max_payload of 100 bytes
// once the outputs have failed, and returns what Run returned, within a
// minute, with the worker's store. tune, if set, changes the worker's
// configuration.
func stopsForALoweredLimit(t *testing.T, jetStream bool, n int, tune func(*consumer.WorkerConfig)) (*snapshot.Store, error) {
	t.Helper()
	ts := testbroker.NATS(t)
	if jetStream {
		testbroker.CreateStream(t, ts.JetStream(t), jetstream.StreamConfig{Name: "PRED", Subjects: []string{"t.PRED"}})
	}
	log := zaptest.NewLogger(t)
	nc, err := natsio.Connect(natsio.Config{URL: ts.URL(), Name: t.Name()}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	sink, err := natsio.NewSink(nc, jetStream, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	// The subject's stream limit is looked up while the server is up.
	limit := sink.MaxOutputBytes("t.PRED")

	ts.Shutdown()
	wait.For(t, time.Minute, 10*time.Millisecond, "the client to notice the shutdown", func() bool { return !nc.IsConnected() })
	in := memory.NewLog("in", 1)
	valid, _ := messages(n)
	in.Append(0, valid...)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { store.Close() })
	cfg := consumer.WorkerConfig{
		Model:       "m",
		Predictions: consumer.Destination{Topic: "t.PRED", Sink: sink},
		Snapshots:   snapshot.NewSnapshotter(store, "m", "test", 1, 100, log),
	}
	if tune != nil {
		tune(&cfg)
	}
	w := consumer.NewWorker(cfg, memory.NewSource(in, nil), newModel(t), nil, consumer.NewMetrics(nil), log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// A worker is not ready from the start, until it consumes: the
	// outputs' own reason shows that they were made, and failed.
	wait.For(t, time.Minute, 10*time.Millisecond, "the outputs failing while the server is away", func() bool {
		return hasReason(w.NotReady(), consumer.NotReadyOutputs)
	})

	ts.SetMaxPayload(100)
	ts.Start()
	select {
	case err := <-done:
		return store, err
	case <-time.After(time.Minute):
		t.Fatalf("the worker still runs a minute after the server came back with a max_payload of 100 bytes, its outputs made to %d", limit)
		return nil, nil
	}
}
