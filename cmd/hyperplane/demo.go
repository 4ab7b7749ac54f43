package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/feed"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

type demoStream struct{ name, subject, what string }

// demoStreams are the demo's streams: examples in, three kinds of events
// out.
func demoStreams() []demoStream {
	return []demoStream{
		{"EXAMPLES", "demo.examples", "examples"},
		{"PREDICTIONS", "demo.predictions", "prediction events"},
		{"MISCLASSIFICATIONS", "demo.misclassifications", "misclassification events"},
		{"DEAD_LETTERS", "demo.dead_letters", "dead-letter events"},
	}
}

func runDemo(ctx context.Context, e *env, args []string) error {
	o := synth.DefaultOptions()
	o.Seed, o.Vocab = 1, 1000
	var n int
	var garbage float64
	cfg := config.Default()
	cfg.Model.Name = "demo"
	fs := newFlagSet("demo", "[flags]", e)
	fs.IntVar(&n, "examples", 200000, "number of examples to stream")
	fs.Float64Var(&o.Noise, "noise", o.Noise, "probability that a label is wrong")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated stream")
	fs.Float64Var(&garbage, "garbage", 0.0005, "share of malformed messages, to show the dead letters")
	fs.StringVar(&cfg.HTTP.Addr, "http", "127.0.0.1:0", "address of /metrics, /healthz and /readyz; empty disables")
	var dataDir string
	fs.StringVar(&dataDir, "data", "hyperplane-data", "`directory` for the model's snapshots (the previous demo's are replaced)")
	var labelDelay time.Duration
	var rate float64
	fs.Float64Var(&rate, "rate", 0, "examples a second (0: as fast as the stream takes them; 5000 with -label-delay, so that labels come while the examples still stream)")
	fs.DurationVar(&labelDelay, "label-delay", 0, "send the examples without their labels, and each label on a stream of its own this long after its example on average (exponentially distributed), for the worker to join (docs/labels.md); labels.window is ten times this. 0: the examples carry their labels")
	learnerFlags(fs, &cfg.Model.Learner)
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	if n < 1 {
		return usagef("-examples: must be at least 1, got %d", n)
	}
	if !(garbage >= 0 && garbage <= 1) {
		return usagef("-garbage: must be a probability in [0, 1], got %v", garbage)
	}
	if !(o.Noise >= 0 && o.Noise <= 1) {
		return usagef("-noise: must be a probability in [0, 1], got %v", o.Noise)
	}
	if err := validateLearner(cfg.Model.Learner); err != nil {
		return err
	}
	// The stream has the model's classes: with three or more, labels 0
	// to k-1 name them; a binary model (none or two) takes labels 1/-1.
	if k := len(cfg.Model.Learner.Classes); k > 2 {
		if k > 1000 {
			return usagef("-classes: the demo generates at most 1000 classes, got %d", k)
		}
		o.Classes = k
	}
	if labelDelay < 0 {
		return usagef("-label-delay: must be 0s or more, got %s", labelDelay)
	}
	if rate < 0 {
		return usagef("-rate: must be 0 or more, got %v", rate)
	}
	if labelDelay > 0 && 10*labelDelay < time.Millisecond {
		return usagef("-label-delay: must be 0s or at least 100µs (labels.window, ten times it, is at least 1ms), got %s", labelDelay)
	}
	if labelDelay > 0 && !flagGiven(fs, "rate") {
		rate = 5000
	}

	dataDir, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	cfg.Snapshot.URL = "file://" + filepath.ToSlash(dataDir)
	cfg.Source.Kind = config.KindJetStream
	cfg.Source.Stream = "EXAMPLES"
	cfg.Outputs.Predictions = config.Destination{Kind: config.KindJetStream, Topic: "demo.predictions"}
	cfg.Outputs.Misclassifications = config.Destination{Kind: config.KindJetStream, Topic: "demo.misclassifications"}
	cfg.Outputs.DeadLetter = config.Destination{Kind: config.KindJetStream, Topic: "demo.dead_letters"}
	if labelDelay > 0 {
		cfg.Labels = config.Labels{Kind: config.KindJetStream, Stream: "LABELS", Subject: "demo.labels", Format: cfg.Source.Format,
			Window: 10 * labelDelay, MaxPending: config.Default().Labels.MaxPending}
		cfg.Outputs.LateLabels = config.Destination{Kind: config.KindJetStream, Topic: "demo.late_labels"}
	}
	// Checked before the previous demo's snapshots are removed and the
	// server started, naming the flag: the server's URL is not known yet.
	cfg.NATS.URL = "nats://127.0.0.1:4222"
	if err := cfg.Validate(); err != nil {
		return configErr(err, map[string]string{"http.addr": "-http"})
	}
	// Bound before the previous demo's snapshots are removed, so that a
	// taken port leaves them; the address is printed, since the default
	// port is any free one.
	ln, err := listenHTTP(cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("-http: %w (choose a free address, or -http '' to run without /metrics and the probes)", err)
	}
	if ln != nil {
		defer ln.Close()
	}
	// Each demo streams a new stream: the previous demo's model would
	// resume from positions this one does not have.
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return usagef("-data %s: %v (want a directory, or where one can be made)", dataDir, err)
	}
	if err := os.RemoveAll(filepath.Join(dataDir, cfg.Model.Name)); err != nil {
		return usagef("-data %s: %v (want a directory the demo may write in)", dataDir, err)
	}
	// Snapshots by count only, not by time: the same demo writes the same
	// generations however fast the machine is (the README shows them).
	cfg.Snapshot.Every, cfg.Snapshot.Interval = 50000, 0
	cfg.Snapshot.Writer = "hyperplane demo"

	storeDir, err := os.MkdirTemp("", "hyperplane-demo-nats-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(storeDir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: storeDir, NoSigs: true})
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		return errors.New("nats server: not ready after 10s")
	}
	nc, err := natsgo.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	sink, err := natsio.NewSink(nc, true, zap.NewNop())
	if err != nil {
		return err
	}
	defer sink.Close()
	streams := demoStreams()
	if labelDelay > 0 {
		streams = append(streams, demoLabelStreams()...)
	}
	for _, s := range streams {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: s.name, Subjects: []string{s.subject}}); err != nil {
			return fmt.Errorf("create stream %s: %w", s.name, err)
		}
	}
	fmt.Fprintf(e.stdout, "hyperplane demo: an embedded NATS JetStream server at %s\n", ns.ClientURL())
	if ln != nil {
		fmt.Fprintf(e.stdout, "the worker's /metrics, /healthz, /readyz and POST /v1/predict at http://%s\n", ln.Addr())
	}
	fmt.Fprintf(e.stdout, "streaming %d generated examples (a hidden hyperplane, %.0f%% label noise) through the %s learner\n", n, o.Noise*100, cfg.Model.Learner.Algorithm)
	var labels *feed.Labels
	if labelDelay > 0 {
		labels = feed.NewLabels(sink, config.Destination{Kind: config.KindJetStream, Topic: "demo.labels"}, labelDelay, 0, wire.FormatJSON, o.Seed)
		fmt.Fprintf(e.stdout, "without their labels: each label follows its example by %s on average, on stream LABELS; labels.window is %s\n", labelDelay, cfg.Labels.Window)
	}
	fmt.Fprintln(e.stdout)

	cfg.NATS.URL = ns.ClientURL()
	if err := cfg.Validate(); err != nil {
		return err
	}

	interrupted := ctx // Ctrl-C (or SIGTERM) stops the demo, as it stops run
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feedErr := make(chan error, 1)
	go func() { feedErr <- feedDemo(ctx, sink, o, n, garbage, rate, labels) }()

	started := make(chan *consumer.Worker, 1)
	served := make(chan error, 1)
	go func() { served <- runWorker(ctx, cfg, zap.NewNop(), ln, started) }()
	var w *consumer.Worker
	select {
	case w = <-started:
	case err := <-served:
		return err
	}

	bar := newProgress(e.stderr, 0, nil)
	defer bar.end() // an error, printed by main, starts a line of its own
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	begin := time.Now()
	var last time.Time
	for done := false; !done; {
		select {
		case err := <-feedErr:
			if interrupted.Err() != nil {
				cancel()
				return stopDemo(e, bar, <-served)
			}
			if err != nil {
				return fmt.Errorf("feed: %w", err)
			}
			feedErr = nil
		case err := <-served:
			if interrupted.Err() != nil {
				return stopDemo(e, bar, err)
			}
			return fmt.Errorf("worker stopped early: %w", err)
		case <-tick.C:
		}
		// Done once every event is durable, so that the summary counts
		// them all; the line shows what the model has learned.
		done = w.Published()[demoSource()] >= int64(n)
		line := demoProgressLine(w, n, time.Since(begin))
		if bar.on {
			bar.show(line)
		} else if time.Since(last) >= time.Second || done {
			fmt.Fprintln(e.stderr, line)
			last = time.Now()
		}
	}
	bar.done()
	secs := time.Since(begin).Seconds()
	cancel()
	if err := <-served; err != nil {
		return err
	}
	m := w.Model().Metrics()
	fmt.Fprintf(e.stdout, "done: %d examples in %.1fs (%.0f/s), %d labeled, %d mistakes, prequential accuracy %.4f, rolling accuracy %.4f, %d updates\n\n",
		m.Examples, secs, float64(m.Examples)/secs, m.Labeled, m.Mistakes, m.Accuracy, m.RollingAccuracy, m.Updates)
	if labels != nil {
		c := w.JoinCounts()
		fmt.Fprintf(e.stdout, "  labels: %d joined, %d late, %d unknown, %d duplicate; %d examples whose window closed without one\n",
			c.Labels[consumer.LabelJoined], c.Labels[consumer.LabelLate], c.Labels[consumer.LabelUnknown], c.Labels[consumer.LabelDuplicate], c.Expired)
		if c.Served > 0 {
			fmt.Fprintf(e.stdout, "  served accuracy %.4f, log-loss %.4f: the predictions as they were published, scored when their labels came\n\n",
				float64(c.ServedCorrect)/float64(c.Served), c.ServedLogLoss/float64(c.Served))
		}
	}
	for _, s := range streams {
		st, err := js.Stream(context.Background(), s.name)
		if err != nil {
			return err
		}
		info, err := st.Info(context.Background())
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "  %-8d %-26s in JetStream stream %-18s (subject %s)\n", info.State.Msgs, s.what, s.name, s.subject)
	}
	if s, err := snapshot.LoadURL(context.Background(), cfg.Snapshot.URL+"/"+cfg.Model.Name, nil); err == nil {
		fmt.Fprintf(e.stdout, "\n  snapshots of the model in %s (newest: generation %d, at position %d)\n", filepath.Join(dataDir, cfg.Model.Name), s.Generation, s.Positions[demoSource()])
		fmt.Fprintf(e.stdout, "  look inside: hyperplane inspect %s/%s\n", cfg.Snapshot.URL, cfg.Model.Name)
	}
	fmt.Fprintln(e.stdout, "\nThe embedded server and its streams are gone when the demo exits; point `hyperplane run` at your own brokers to keep them.")
	return nil
}

// stopDemo ends a demo interrupted before the end of its stream: the
// worker stopped with err, nil if it stopped cleanly.
func stopDemo(e *env, bar *progress, err error) error {
	if err != nil {
		return err
	}
	bar.end()
	fmt.Fprintln(e.stderr, "interrupted: the demo stopped before the end of its stream")
	return nil
}

// demoLabelStreams are the demo's streams with -label-delay: the labels
// in, the labels that joined nothing out.
func demoLabelStreams() []demoStream {
	return []demoStream{
		{"LABELS", "demo.labels", "labels"},
		{"LATE_LABELS", "demo.late_labels", "late or unknown labels"},
	}
}

// demoSource is the position key of the demo's example stream.
func demoSource() string { return shardid.Stream("EXAMPLES").String() }

// learnedCounts is what a progress line reads of a worker: the position
// its model has reached and its metrics there, which the worker updates
// together after each batch.
type learnedCounts interface {
	Positions() map[string]int64
	Metrics() learner.Metrics
}

// demoProgressLine is the demo's progress: how many of the n messages the
// model has read, with the mistakes and accuracy of the model at that
// very point. Positions and metrics are two reads; the metrics read again
// after the positions, and found unchanged, say that no batch came
// between them, so the line never shows a batch's mistakes beside the
// position before it.
func demoProgressLine(w learnedCounts, n int, elapsed time.Duration) string {
	m := w.Metrics()
	var pos int64
	for {
		pos = w.Positions()[demoSource()]
		again := w.Metrics()
		if again.Examples == m.Examples && again.Mistakes == m.Mistakes {
			break
		}
		m = again
	}
	return fmt.Sprintf("%7d/%d examples  %6.0f/s  mistakes %d  rolling accuracy %.4f", pos, n, float64(pos)/elapsed.Seconds(), m.Mistakes, m.RollingAccuracy)
}

// feedDemo publishes n generated examples to the demo's example stream, a
// share of them malformed. With labels, the examples go without their
// labels, which labels publishes later, and feed waits for those too.
// rate, if not 0, paces the examples.
func feedDemo(ctx context.Context, sink consumer.Sink, o synth.Options, n int, garbage, rate float64, labels *feed.Labels) error {
	s := synth.New(o)
	every := 0
	if garbage > 0 {
		every = int(1 / garbage)
	}
	// Small batches when the labels or the pace must keep up with the
	// examples; otherwise as many as the sink keeps in flight.
	f := feed.Feeder{Sink: sink, To: demoExamples, Batch: 1024, Rate: rate, Labels: labels, Log: zap.NewNop()}
	if labels != nil || rate > 0 {
		f.Batch = 256
	}
	return f.Run(ctx, n, func(i int) consumer.Output {
		if every > 0 && (i+1)%every == 0 {
			return consumer.Output{Topic: demoExamples.Topic, Value: []byte(`{"label": 1, "features": {"f1": "oops", "f2": [1, 2]}}`)}
		}
		rec := s.Next()
		if labels != nil {
			labels.Hold(rec, nil, "")
		}
		data := synth.AppendJSON(nil, rec)
		return consumer.Output{Topic: demoExamples.Topic, Value: data[:len(data)-1]} // one message per example: no newline
	})
}

// demoExamples is where the demo publishes its examples.
var demoExamples = config.Destination{Kind: config.KindJetStream, Topic: "demo.examples"}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
