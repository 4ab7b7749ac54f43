// Package brokers reaches the Kafka cluster and the NATS server of a
// configuration for every command that talks to them: the adapters'
// sources, shards and sinks, made from config's values.
package brokers

import (
	"context"
	"errors"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// Clients reaches the Kafka cluster and the NATS server of a
// configuration, one way for every command that talks to them (run,
// replay, setup, gen): Kafka with kafka.tls and kafka.sasl, NATS with
// nats.tls and a credentials file or an NKey. It connects to NATS once,
// when first asked, and makes one sink per kind of destination; Close
// closes everything it opened, the last first. It is for one goroutine.
type Clients struct {
	kafka config.Kafka
	nats  config.NATS
	name  string // of the NATS connection, as the server shows it
	log   *zap.Logger

	nc      *natsgo.Conn
	sinks   map[config.Kind]consumer.Sink
	closers []func() error
	// warnedPlain is set once the clear-text password is warned of.
	warnedPlain bool
}

// New returns the clients of cfg's brokers, connecting to none yet; name
// names the NATS connection.
func New(cfg config.Config, name string, log *zap.Logger) *Clients {
	return &Clients{kafka: cfg.Kafka, nats: cfg.NATS, name: name, log: log, sinks: map[config.Kind]consumer.Sink{}}
}

// Defer adds close to what Close closes, before what was opened so far.
func (b *Clients) Defer(close func() error) {
	b.closers = append(b.closers, close)
}

// Close closes everything the clients opened, the last first.
func (b *Clients) Close() {
	for i := len(b.closers) - 1; i >= 0; i-- {
		b.closers[i]() //nolint:errcheck // best effort at shutdown
	}
	b.closers = nil
}

// KafkaConfig is how to reach Kafka.
func (b *Clients) KafkaConfig() (kafkaio.Config, error) {
	tc, err := b.kafka.TLS.Client()
	if err != nil {
		return kafkaio.Config{}, fmt.Errorf("kafka.tls: %w", err)
	}
	mech, err := kafkaio.Mechanism(b.kafka.SASL.Mechanism).SASL(b.kafka.SASL.Username, b.kafka.SASL.Password)
	if err != nil {
		return kafkaio.Config{}, fmt.Errorf("kafka.sasl: %w", err)
	}
	if b.kafka.SASL.Mechanism == config.MechanismPlain && tc == nil && !b.warnedPlain {
		b.warnedPlain = true
		b.log.Warn("kafka.sasl.mechanism plain without kafka.tls.enabled: the password goes to the brokers in clear text; enable kafka.tls, or use scram-sha-256 or scram-sha-512",
			zap.String("username", b.kafka.SASL.Username))
	}
	return kafkaio.Config{Brokers: b.kafka.Brokers, ClientID: b.kafka.ClientID, TLS: tc, SASL: mech}, nil
}

// NATSConn is the connection to NATS, made at the first call.
func (b *Clients) NATSConn() (*natsgo.Conn, error) {
	if b.nc != nil {
		return b.nc, nil
	}
	tc, err := b.nats.TLS.Client()
	if err != nil {
		return nil, fmt.Errorf("nats.tls: %w", err)
	}
	nc, err := natsio.Connect(natsio.Config{URL: b.nats.URL, CredentialsFile: b.nats.CredentialsFile, NKeyFile: b.nats.NKeyFile, TLS: tc, Name: b.name}, b.log)
	if err != nil {
		return nil, fmt.Errorf("nats: %w (check nats.url, the credentials and that the server is up)", err)
	}
	b.nc = nc
	b.closers = append(b.closers, func() error {
		nc.Close()
		b.log.Info("nats connection closed", zap.String("servers", redact.URLs(b.nats.URL)))
		return nil
	})
	return nc, nil
}

// Source opens the source s names. Each partition or stream resumes after
// its position in positions, the model's, or begins at s.Start; group is
// the Kafka consumer group that progress is committed to.
func (b *Clients) Source(ctx context.Context, s config.Source, group string, positions map[string]int64) (consumer.Source, error) {
	return b.keep(b.openSource(ctx, "source", s, group, positions))
}

// LabelsSource is Source for the labels' input, s being
// config.Labels.Source: its errors name the labels.* keys.
func (b *Clients) LabelsSource(ctx context.Context, s config.Source, group string, positions map[string]int64) (consumer.Source, error) {
	return b.keep(b.openSource(ctx, "labels", s, group, positions))
}

// keep closes src with the clients.
func (b *Clients) keep(src consumer.Source, err error) (consumer.Source, error) {
	if err != nil {
		return nil, err
	}
	b.closers = append(b.closers, src.Close)
	return src, nil
}

// OpenSource is Source for a caller that closes what it opens.
func (b *Clients) OpenSource(ctx context.Context, s config.Source, group string, positions map[string]int64) (consumer.Source, error) {
	return b.openSource(ctx, "source", s, group, positions)
}

// openSource opens s, whose keys are under section (source or labels):
// its errors name them.
func (b *Clients) openSource(ctx context.Context, section string, s config.Source, group string, positions map[string]int64) (consumer.Source, error) {
	var src consumer.Source
	switch s.Kind {
	case config.KindKafka:
		kc, err := b.KafkaConfig()
		if err != nil {
			return nil, err
		}
		if src, err = kafkaio.NewSource(ctx, kc, s.Topics, group, positions, s.Start, b.log); err != nil {
			if errors.Is(err, consumer.ErrFatal) || errors.Is(err, kafkaio.ErrBeyondEnd) {
				// The brokers answered: the log does not hold what the
				// model needs (no longer, or not yet), which no setting
				// of theirs mends.
				return nil, fmt.Errorf("%s: %w", section, err)
			}
			return nil, fmt.Errorf("%s: %w (%s)", section, err, KafkaCheck(err, "that every topic of "+section+".topics exists"))
		}
	case config.KindJetStream:
		nc, err := b.NATSConn()
		if err != nil {
			return nil, err
		}
		if src, err = natsio.NewJetStreamSource(ctx, nc, s.Stream, s.Subject, positions, s.Start, b.log); err != nil {
			return nil, fmt.Errorf("%s: %w (check that the stream of %s.stream exists and that %s.subject is one of its subjects)", section, err, section, section)
		}
	case config.KindNATS:
		nc, err := b.NATSConn()
		if err != nil {
			return nil, err
		}
		if src, err = natsio.NewCoreSource(nc, s.Subject, positions, b.log); err != nil {
			return nil, fmt.Errorf("%s: %w", section, err)
		}
	default:
		return nil, fmt.Errorf("%s.kind: %w", section, s.Kind.Validate())
	}
	return src, nil
}

// KafkaShards opens the partitions of s's topics as shards when there
// are at least that many, and returns them with their number; with fewer it
// returns nil shards: the source is read as it comes.
func (b *Clients) KafkaShards(ctx context.Context, s config.Source, least int) (*kafkaio.Shards, int, error) {
	return b.kafkaShards(ctx, "source", s, least)
}

// kafkaShards is KafkaShards for the topics of section (source or
// labels): its errors name them.
func (b *Clients) kafkaShards(ctx context.Context, section string, s config.Source, least int) (*kafkaio.Shards, int, error) {
	kc, err := b.KafkaConfig()
	if err != nil {
		return nil, 0, err
	}
	shards, err := kafkaio.NewShards(kc, s.Topics, b.log)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", section, err)
	}
	ends, err := shards.Ends(ctx)
	if err != nil || len(ends) < least {
		shards.Close() //nolint:errcheck // not used
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w (%s)", section, err, KafkaCheck(err, "that every topic of "+section+".topics exists"))
		}
		return nil, len(ends), nil
	}
	return shards, len(ends), nil
}

// KafkaPartitions is the number of partitions of s's topics.
func (b *Clients) KafkaPartitions(ctx context.Context, s config.Source) (int, error) {
	return b.kafkaPartitions(ctx, "source", s)
}

// kafkaPartitions is KafkaPartitions for the topics of section.
func (b *Clients) kafkaPartitions(ctx context.Context, section string, s config.Source) (int, error) {
	shards, n, err := b.kafkaShards(ctx, section, s, 1)
	if shards != nil {
		shards.Close() //nolint:errcheck // only counted
	}
	return n, err
}

// CoPartitioned opens the partitions of the labels' topic as shards,
// which Close closes, once it has checked that the topic is
// co-partitioned with the examples', as far as counts tell: as many
// partitions, partition p joined to partition p (docs/labels.md,
// sections 9 and 11).
func (b *Clients) CoPartitioned(ctx context.Context, examples, labels config.Source) (*kafkaio.Shards, error) {
	nex, err := b.KafkaPartitions(ctx, examples)
	if err != nil {
		return nil, fmt.Errorf("source.topics: %w", err)
	}
	lb, nlb, err := b.kafkaShards(ctx, "labels", labels, 1)
	if err != nil {
		return nil, fmt.Errorf("labels.topics: %w", err)
	}
	if nlb != nex || lb == nil {
		if lb != nil {
			lb.Close() //nolint:errcheck // not used
		}
		return nil, fmt.Errorf("labels.topics: topic %s has %d partitions and source.topics' %s has %d: the labels' topic must be co-partitioned with the examples' (as many partitions, the same key), partition p joined to partition p (docs/labels.md, sections 9 and 11)",
			labels.Topics[0], nlb, examples.Topics[0], nex)
	}
	b.Defer(lb.Close)
	return lb, nil
}

// CoPartitionedStream opens the partitions of the labels' stream as
// shards once it has checked that its subject transform partitions it
// into as many partitions as the examples' stream
// (examples.StreamPartitions): partition k joined to partition k
// (docs/labels.md, section 9.1). The token each transform hashes is not
// checked.
func (b *Clients) CoPartitionedStream(ctx context.Context, examples, labels config.Source) (*natsio.JetStreamShards, error) {
	nc, err := b.NATSConn()
	if err != nil {
		return nil, err
	}
	lb, err := natsio.NewJetStreamShards(ctx, nc, labels.Stream, examples.StreamPartitions, b.log)
	if err != nil {
		return nil, fmt.Errorf("labels.stream: %w; source.stream %s has source.stream_partitions %d: the labels' stream must be partitioned as the examples' is, by a subject transform of the same token into as many partitions, partition k joined to partition k (docs/labels.md, section 9.1; hyperplane setup creates it so)",
			err, examples.Stream, examples.StreamPartitions)
	}
	return lb, nil
}

// JetStreamShards opens the partitions of s's stream, partitioned by its
// subject transform into s.StreamPartitions, as shards.
func (b *Clients) JetStreamShards(ctx context.Context, s config.Source) (*natsio.JetStreamShards, error) {
	nc, err := b.NATSConn()
	if err != nil {
		return nil, err
	}
	shards, err := natsio.NewJetStreamShards(ctx, nc, s.Stream, s.StreamPartitions, b.log)
	if err != nil {
		return nil, fmt.Errorf("source.stream_partitions: %w (the stream's subject transform must partition it into as many: see hyperplane setup)", err)
	}
	return shards, nil
}

// Sink is the sink of kind, made at the first call.
func (b *Clients) Sink(kind config.Kind) (consumer.Sink, error) {
	if s, ok := b.sinks[kind]; ok {
		return s, nil
	}
	var s consumer.Sink
	switch kind {
	case config.KindKafka:
		kc, err := b.KafkaConfig()
		if err != nil {
			return nil, err
		}
		if s, err = kafkaio.NewSink(kc, b.log); err != nil {
			return nil, err
		}
	case config.KindJetStream, config.KindNATS:
		nc, err := b.NATSConn()
		if err != nil {
			return nil, err
		}
		if s, err = natsio.NewSink(nc, kind == config.KindJetStream, b.log); err != nil {
			return nil, err
		}
	default:
		return nil, kind.Validate()
	}
	b.sinks[kind] = s
	b.closers = append(b.closers, s.Close)
	return s, nil
}

// Destination is where the output key sends its events: the sink and the
// topic of d, or none when d is none.
func (b *Clients) Destination(key string, d config.Destination) (consumer.Destination, error) {
	if d.IsZero() {
		return consumer.Destination{}, nil
	}
	s, err := b.Sink(d.Kind)
	if err != nil {
		return consumer.Destination{}, fmt.Errorf("%s: %w", key, err)
	}
	return consumer.Destination{Sink: s, Topic: d.Topic}, nil
}
