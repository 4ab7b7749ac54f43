// Package kafka is the Kafka source and sink of package consumer, built on
// github.com/segmentio/kafka-go.
//
// The source reads every partition of its topics with its own partition
// reader (no consumer group membership), starting where the worker's
// snapshot says, so what it delivers follows from the snapshot alone; the
// group offsets it commits are for lag monitoring only. Shards reads the
// same partitions one at a time, each from any offset, for the epoch
// protocol of docs/scale-out.md. The sink writes each batch synchronously
// with acknowledgement from all in-sync replicas. CreateTopics creates the
// topics that are missing, and never changes one that exists.
package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// Config is how to reach a Kafka cluster.
type Config struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers  []string
	ClientID string
	// TLS, if not nil, encrypts every connection; nil means plaintext.
	TLS *tls.Config
	// SASL, if not nil, authenticates every connection (see Mechanism.SASL).
	SASL sasl.Mechanism
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return fmt.Errorf("kafka: no brokers configured")
	}
	for _, b := range c.Brokers {
		if b == "" {
			return fmt.Errorf("kafka: empty broker address in %q", c.Brokers)
		}
	}
	return nil
}

// transport is the connection pool for the cluster-wide requests (metadata,
// offsets, commits, produce). Its background work ends with done.
func (c Config) transport(ctx context.Context, topics []string) *kafkago.Transport {
	return &kafkago.Transport{
		ClientID:       c.ClientID,
		TLS:            c.TLS,
		SASL:           c.SASL,
		MetadataTopics: topics,
		Context:        ctx,
	}
}

// dialer is how partition readers connect to partition leaders.
func (c Config) dialer() *kafkago.Dialer {
	return &kafkago.Dialer{
		ClientID:      c.ClientID,
		Timeout:       dialTimeout,
		DualStack:     true,
		TLS:           c.TLS,
		SASLMechanism: c.SASL,
	}
}

// sourceKey is the position source of a partition, its shard's name:
// kafka:<topic>/<partition>.
func sourceKey(topic string, partition int) string {
	return shardid.Kafka(topic, partition).String()
}

// dialTimeout bounds a partition reader's connection to a broker,
// TLS and SASL included.
const dialTimeout = 10 * time.Second

// errorLogEvery is how often an errorLog lets a line through.
const errorLogEvery = 10 * time.Second

// errorLog turns kafka-go's error log lines into warnings, at most one
// every errorLogEvery, counting the lines it held back. kafka-go retries
// most failures internally (broker restarts, leader moves, timeouts) and
// only logs them, so this is where persistent errors become visible
// without flooding the log while a broker is down.
type errorLog struct{ limit *retry.LogLimiter }

func newErrorLog(log *zap.Logger) *errorLog {
	return &errorLog{limit: retry.NewLogLimiter(log, errorLogEvery)}
}

// Printf implements kafkago.Logger.
func (l *errorLog) Printf(format string, args ...any) {
	l.limit.Warn("kafka client error", zap.Stringer("error", printf{format, args}))
}

// printf is a line formatted only if it is logged.
type printf struct {
	format string
	args   []any
}

func (p printf) String() string { return fmt.Sprintf(p.format, p.args...) }
