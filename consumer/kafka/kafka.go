// Package kafka is the Kafka source and sink of package consumer, built on
// github.com/segmentio/kafka-go.
//
// The source reads every partition of its topics with its own partition
// reader (no consumer group membership), starting where the worker's
// snapshot says, so what it delivers follows from the snapshot alone; the
// group offsets it commits are for lag monitoring only. The sink writes
// each batch synchronously with acknowledgement from all in-sync replicas.
package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
	"go.uber.org/zap"
)

// Config is how to reach a Kafka cluster.
type Config struct {
	// Brokers are the bootstrap brokers, host:port.
	Brokers  []string
	ClientID string
	// TLS, if not nil, encrypts every connection; nil means plaintext.
	TLS *tls.Config
	// SASL, if not nil, authenticates every connection (see ParseSASL).
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
		Timeout:       10 * time.Second,
		DualStack:     true,
		TLS:           c.TLS,
		SASLMechanism: c.SASL,
	}
}

// ParseSASL returns the SASL mechanism named by mechanism ("none" or "",
// "plain", "scram-sha-256", "scram-sha-512", in any case) with the given
// credentials. "none" gives a nil mechanism: no authentication.
func ParseSASL(mechanism, user, password string) (sasl.Mechanism, error) {
	m := strings.ToLower(mechanism)
	if m == "" || m == "none" {
		return nil, nil
	}
	if user == "" {
		return nil, fmt.Errorf("kafka: SASL %s needs a user", mechanism)
	}
	switch m {
	case "plain":
		return plain.Mechanism{Username: user, Password: password}, nil
	case "scram-sha-256", "scram-sha-512":
		algo := scram.SHA256
		if m == "scram-sha-512" {
			algo = scram.SHA512
		}
		mech, err := scram.Mechanism(algo, user, password)
		if err != nil {
			return nil, fmt.Errorf("kafka: SASL %s: %w", mechanism, err)
		}
		return mech, nil
	}
	return nil, fmt.Errorf("kafka: unknown SASL mechanism %q (want none, plain, scram-sha-256 or scram-sha-512)", mechanism)
}

// sourceKey is the position source of a partition: kafka:<topic>/<partition>.
func sourceKey(topic string, partition int) string {
	return "kafka:" + topic + "/" + strconv.Itoa(partition)
}

// errorLogEvery is how often an errorLog lets a line through.
const errorLogEvery = 10 * time.Second

// errorLog turns kafka-go's error log lines into warnings, at most one
// every errorLogEvery, counting the lines it held back. kafka-go retries
// most failures internally (broker restarts, leader moves, timeouts) and
// only logs them, so this is where persistent errors become visible
// without flooding the log while a broker is down.
type errorLog struct {
	log *zap.Logger

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Printf implements kafkago.Logger.
func (l *errorLog) Printf(format string, args ...any) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < errorLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	l.log.Warn("kafka client error", zap.String("error", fmt.Sprintf(format, args...)), zap.Int("suppressed", n))
}
