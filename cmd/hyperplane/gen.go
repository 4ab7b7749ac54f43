package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/feed"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

func runGen(ctx context.Context, e *env, args []string) error {
	o := synth.DefaultOptions()
	var n, start, keys int
	var format, brokers, natsURL string
	var to feed.Target
	var rate float64
	fs := newFlagSet("gen", "[flags] [--config FILE] [--key value ...]", e)
	fs.IntVar(&n, "examples", 1000, "number of examples")
	fs.IntVar(&o.Features, "features", o.Features, "non-zero features per example")
	fs.IntVar(&o.Vocab, "vocab", o.Vocab, "size of the feature-name vocabulary (f0, f1, ...)")
	fs.Float64Var(&o.Noise, "noise", o.Noise, "probability that a label is wrong")
	fs.Float64Var(&o.Unlabeled, "unlabeled", o.Unlabeled, "probability that an example has no label")
	fs.IntVar(&o.Classes, "classes", o.Classes, "0 for binary labels 1/-1, or the number of classes (labels 0..N-1)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the stream, its hidden hyperplane and its examples: the same flags give the same stream; another seed is another hyperplane (for new examples of this one, -start)")
	fs.Uint64Var(&o.DriftAt, "drift-at", 0, "index of the example (from 0) where the concept changes: from there on labels follow another hidden hyperplane, the examples are drawn as without drift; 0: no change")
	fs.Uint64Var(&o.DriftWidth, "drift-width", 0, "with -drift-at: make the change gradual, over about this many examples around -drift-at (as MOA's concept drift stream); 0: abrupt")
	fs.IntVar(&start, "start", 0, "index of the first example: examples 0 to `N`-1 of the stream are left out, so that -start N goes on where -examples N ended, with the same hidden hyperplane")
	fs.StringVar(&format, "format", "jsonl", "output format: jsonl or msgpack")
	fs.TextVar(&to, "to", to, "publish to a `destination`, kafka:<topic>, jetstream:<subject> or nats:<subject>, instead of writing to standard output; a * token in the subject is each example's key (see below)")
	fs.IntVar(&keys, "keys", 1024, "with a * token in -to's subject: how many keys there are; example i's key is i mod keys")
	fs.StringVar(&brokers, "kafka-brokers", "localhost:9092", "Kafka bootstrap brokers, comma-separated (-to kafka:...)")
	fs.StringVar(&natsURL, "nats-url", "nats://localhost:4222", "NATS server URL (-to jetstream:... or nats:...)")
	fs.Float64Var(&rate, "rate", 0, "examples per second when publishing; 0: as fast as the broker takes them")
	var labels genLabels
	fs.TextVar(&labels.to, "labels-to", labels.to, "with -to: publish the examples without their labels, and each label to this `destination` (kafka:<topic> or jetstream:<subject>, whose * token is its example's key) later, as {\"id\":...,\"label\":...} (docs/labels.md)")
	fs.DurationVar(&labels.delay, "label-delay", 10*time.Second, "with -labels-to: the mean time from an example to its label (exponentially distributed)")
	fs.Float64Var(&labels.missing, "label-missing", 0, "with -labels-to: the fraction of examples never labeled")
	flagsUsage := fs.Usage
	fs.Usage = func() {
		flagsUsage()
		fmt.Fprint(e.stdout, genKeysHelp+genIDsHelp+genSubjectKeysHelp)
	}
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	if n < 0 {
		return usagef("-examples: must be 0 or more, got %d", n)
	}
	if start < 0 {
		return usagef("-start: must be 0 or more, got %d", start)
	}
	if err := o.Validate(); err != nil {
		return usagef("-%v", err)
	}
	appendRecord := synth.AppendJSON
	switch format {
	case "jsonl", "json":
		format = "jsonl" // one name for one stream in Options.StreamID
	case "msgpack":
		appendRecord = synth.AppendMsgpack
	default:
		return usagef("-format: unknown format %q (want jsonl or msgpack)", format)
	}
	if rate < 0 {
		return usagef("-rate: must be 0 or more, got %v", rate)
	}
	if keys < 1 {
		return usagef("-keys: must be 1 or more, got %d", keys)
	}
	to.Keys, labels.to.Keys = keys, keys
	s := synth.New(o)
	for i := range start {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		s.Next()
	}
	if !labels.to.IsZero() && to.IsZero() {
		return usagef("-labels-to: needs -to, where the examples go")
	}
	// A flag of publishing given without its destination would be
	// ignored: the stream written would not be the one asked for.
	var unused error
	fs.Visit(func(f *flag.Flag) {
		switch {
		case unused != nil:
		case (f.Name == "label-delay" || f.Name == "label-missing") && labels.to.IsZero():
			unused = usagef("-%s: needs -labels-to, where the labels go (-unlabeled P leaves examples without their label)", f.Name)
		case (f.Name == "rate" || f.Name == "keys" || f.Name == "kafka-brokers" || f.Name == "nats-url") && to.IsZero():
			unused = usagef("-%s: is for publishing: add -to", f.Name)
		}
	})
	if unused != nil {
		return unused
	}
	if !to.IsZero() || len(cfgArgs) > 0 {
		cfg, err := genConfig(e, fs, cfgArgs, brokers, natsURL)
		if err != nil {
			return err
		}
		if to.IsZero() {
			return usagef("configuration keys are for publishing: add -to")
		}
		message := appendRecord
		if format != "msgpack" {
			// A message is one example, without the line end.
			message = func(dst []byte, r *synth.Record) []byte {
				return bytes.TrimSuffix(synth.AppendJSON(dst, r), []byte("\n"))
			}
		}
		if !labels.to.IsZero() {
			if err := labels.validate(to); err != nil {
				return err
			}
			labels.format = format
			labels.seed = o.Seed
		}
		return publishGen(ctx, e, cfg, s, start, n, message, to, rate, o.StreamID(format), &labels)
	}
	w := bufio.NewWriterSize(e.stdout, 1<<20)
	var buf []byte
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			// w holds whole records: the output ends with a whole line.
			w.Flush()
			return ctx.Err()
		}
		buf = appendRecord(buf[:0], s.Next())
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return w.Flush()
}

// genKeysHelp and genIDsHelp end gen -h.
const genKeysHelp = `
Configuration keys it reads with -to, as run reads them (--config FILE, HYPERPLANE_* variables, --key value):
  kafka.brokers, kafka.client_id, kafka.tls.*, kafka.sasl.*
  nats.url, nats.credentials_file, nats.nkey_file, nats.tls.*
  -kafka-brokers and -nats-url, when given, override kafka.brokers and nats.url, and
  stand in for them when the configuration leaves them empty.
`

const genIDsHelp = `
Message ids (with -to):
  Every published example carries an id, gen-<stream>-<index>: <stream> is a
  hash of the options that make the stream (-features, -vocab, -noise,
  -unlabeled, -classes, -seed, -drift-at, -drift-width and -format; not
  -examples or -start) and
  <index> is the example's place in the stream, from 0. The id is the Kafka
  record key and the JetStream Nats-Msg-Id header.
  Running gen again with the same options sends the same ids, and JetStream
  drops every message whose id it has already stored within the stream's
  duplicate window (2 minutes unless the stream says otherwise): gen reports
  how many the stream stored and how many it dropped as duplicates. Kafka and
  core NATS do not deduplicate: they keep every copy.
  To publish new examples of the same hidden hyperplane, go on where the last
  run ended: after -examples 200000, -start 200000 sends examples 200000 on,
  with new ids. Another -seed is another hyperplane as well as other
  examples: a model learned on one seed predicts another's no better than
  chance.
`

const genSubjectKeysHelp = `
Keys in the subject (with -to jetstream:... or nats:...):
  A * token in the subject, as in -to jetstream:ex.*, is replaced by each
  example's key: example i's is i mod -keys, so example 1030 goes to ex.6
  with -keys 1024. A stream that partitions ex.* by a subject transform, such
  as ex.* -> ex.{{partition(N,1)}}.{{wildcard(1)}}, then stores the examples
  of a key in one of its N partitions, chosen by a hash of the key: the same
  options put the same examples in the same partitions, in the same order.
  Without a * every example goes to one subject, and so to one partition. A
  Kafka topic takes no *: Kafka partitions by the record key, the message id.
`

// genConfig is the configuration gen publishes with: the keys in args, the
// HYPERPLANE_* variables and the file, as run reads them, of which it uses
// and checks the broker connections; -kafka-brokers and -nats-url override
// kafka.brokers and nats.url when given, and stand in for them when empty.
func genConfig(e *env, fs *flag.FlagSet, args []string, brokers, natsURL string) (config.Config, error) {
	cfg, err := loadCommandConfig(e, fs, args)
	if err != nil {
		return config.Config{}, &usageError{msg: err.Error()}
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["kafka-brokers"] || len(cfg.Kafka.Brokers) == 0 {
		cfg.Kafka.Brokers = strings.Split(brokers, ",")
	}
	if given["nats-url"] || cfg.NATS.URL == "" {
		cfg.NATS.URL = natsURL
	}
	if cfg.Kafka.ClientID == config.Default().Kafka.ClientID {
		cfg.Kafka.ClientID = "hyperplane-gen"
	}
	if err := cfg.ValidateBrokers(); err != nil {
		return config.Config{}, &usageError{msg: "config: " + err.Error()}
	}
	return cfg, nil
}

// publishGen publishes n examples of s, the stream's from index first on,
// each encoded by message, to the destination to (example i on
// to.Subject(i)), at most rate a second (0: as fast as the broker takes
// them). Each message's key (the Kafka key, the JetStream Nats-Msg-Id) is
// gen-<id>-<index>, id naming the stream's options, so the same stream
// published twice is recognisably the same (and JetStream stores it once
// within its duplicate window: gen counts what it stored and dropped).
func publishGen(ctx context.Context, e *env, cfg config.Config, s *synth.Stream, first, n int, message func([]byte, *synth.Record) []byte, to feed.Target, rate float64, id string, labels *genLabels) error {
	log := newLogger(config.Log{Level: config.LevelWarn, Format: config.LogAuto}, e.stderr)
	b := brokers.New(cfg, "hyperplane gen", log)
	defer b.Close()
	var sink consumer.Sink
	var acks *natsio.Sink // JetStream only: it counts what the stream kept
	if to.Kind == config.KindJetStream {
		// A sink of the examples' own, which the labels do not share, so
		// that its counts are the examples'.
		nc, err := b.NATSConn()
		if err != nil {
			return err
		}
		if acks, err = natsio.NewSink(nc, true, log); err != nil {
			return err
		}
		defer acks.Close()
		sink = acks
	} else {
		var err error
		if sink, err = b.Sink(to.Kind); err != nil {
			return err
		}
	}
	// Batches of a tenth of a second's examples when paced, so that the
	// pace holds at low rates too.
	batchSize := 500
	if rate > 0 {
		batchSize = max(1, min(batchSize, int(rate/10)))
	}
	f := feed.Feeder{Sink: sink, To: to, Batch: batchSize, Rate: rate, Log: log}
	if labels.enabled() {
		ls, err := b.Sink(to.Kind)
		if err != nil {
			return err
		}
		format := wire.FormatJSON
		if labels.format == "msgpack" {
			format = wire.FormatMsgpack
		}
		f.Labels = feed.NewLabels(ls, labels.to.Destination, labels.delay, labels.missing, format, labels.seed)
	}
	began := time.Now()
	err := f.Run(ctx, n, func(i int) consumer.Output {
		rec := s.Next()
		key := fmt.Appendf(nil, "gen-%s-%d", id, first+i)
		if f.Labels != nil {
			f.Labels.Hold(rec, key, labels.to.Subject(first+i))
		}
		return consumer.Output{Topic: to.Subject(first + i), Key: key, Value: message(nil, rec)}
	})
	if err != nil {
		return err
	}
	if f.Labels != nil {
		fmt.Fprintf(e.stderr, "gen: published %d labels to %s (%d examples left without one)\n", f.Labels.Sent, labels.to, f.Labels.Unlabeled)
	}
	fmt.Fprintf(e.stderr, "gen: published %d examples to %s in %v", n, to, time.Since(began).Round(time.Millisecond))
	if acks != nil {
		stored, duplicates := acks.Acks()
		fmt.Fprintf(e.stderr, ": %d stored, %d dropped as duplicates", stored, duplicates)
		if duplicates > 0 {
			fmt.Fprint(e.stderr, " (the stream already held messages with their ids: see gen -h)")
		}
	}
	fmt.Fprintln(e.stderr)
	return nil
}
