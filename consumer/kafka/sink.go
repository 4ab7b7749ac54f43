package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
)

// Writer settings.
const (
	// batchTimeout is how long kafka-go waits for a partition's batch to
	// fill before sending it. A synchronous WriteMessages hands over the
	// whole Publish batch at once and nothing else adds to it, so waiting
	// only adds latency (kafka-go's default is a full second per Publish).
	// Whatever one Publish assigns to a partition is added under one lock,
	// before the timer can send the batch.
	batchTimeout = time.Millisecond
	// batchSize is the most messages per produce request and partition;
	// batchBytes, the broker's default message.max.bytes, bounds it too.
	// kafka-go preallocates batchSize messages per partition batch, which
	// keeps it from being much larger.
	batchSize  = 1000
	batchBytes = 1 << 20
	// maxAttempts is how often kafka-go tries a partition's batch before
	// Publish fails: few, since the caller retries the whole batch with
	// its own backoff and must learn soon that the output is down.
	maxAttempts = 3
	// writeTimeout bounds each produce request.
	writeTimeout = 10 * time.Second
)

// Sink publishes outputs to Kafka topics. It implements consumer.Sink.
type Sink struct {
	w         *kafkago.Writer
	transport *kafkago.Transport
	cancel    context.CancelFunc // ends the transport's background work
}

// NewSink returns a sink on the cluster. It connects on the first Publish.
func NewSink(cfg Config, log *zap.Logger) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := cfg.transport(ctx, nil)
	return &Sink{
		transport: t,
		cancel:    cancel,
		w: &kafkago.Writer{
			Addr:         kafkago.TCP(cfg.Brokers...),
			Transport:    t,
			Balancer:     &kafkago.Hash{},
			RequiredAcks: kafkago.RequireAll,
			Async:        false,
			BatchTimeout: batchTimeout,
			BatchSize:    batchSize,
			BatchBytes:   batchBytes,
			MaxAttempts:  maxAttempts,
			WriteTimeout: writeTimeout,
			// Attempts that fail are logged here; the final error is
			// Publish's to return.
			ErrorLogger: &errorLog{log: log.With(zap.String("sink", "kafka"))},
		},
	}, nil
}

// Publish writes batch with one synchronous WriteMessages: each output to
// its Topic, keyed by its Key, on the partition the key hashes to (FNV-1a,
// as Sarama does), so one event id always lands on one partition. It
// returns nil once every in-sync replica holds every output, and otherwise
// an error saying how many failed, after which the caller publishes the
// whole batch again (outputs are at-least-once; partitions that succeeded
// get duplicates with the same keys). Outputs of one partition are written
// in batch order.
//
// Publish copies the batch, so the caller may reuse its buffers once it
// returns, even when ctx ended it while kafka-go still retries in the
// background. A ctx that is already done writes nothing.
func (s *Sink) Publish(ctx context.Context, batch []consumer.Output) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	size := 0
	for i := range batch {
		size += len(batch[i].Key) + len(batch[i].Value)
	}
	buf := make([]byte, 0, size)
	msgs := make([]kafkago.Message, len(batch))
	for i := range batch {
		o := &batch[i]
		m := &msgs[i]
		m.Topic = o.Topic
		if o.Key != "" {
			k := len(buf)
			buf = append(buf, o.Key...)
			m.Key = buf[k:len(buf):len(buf)]
		}
		v := len(buf)
		buf = append(buf, o.Value...)
		m.Value = buf[v:len(buf):len(buf)]
	}
	err := s.w.WriteMessages(ctx, msgs...)
	if err == nil {
		return nil
	}
	var werrs kafkago.WriteErrors
	if errors.As(err, &werrs) {
		var first error
		for _, e := range werrs {
			if e != nil && first == nil {
				first = e
			}
		}
		return fmt.Errorf("kafka: publish: %d of %d outputs failed: %w", werrs.Count(), len(batch), first)
	}
	return fmt.Errorf("kafka: publish %d outputs: %w", len(batch), err)
}

// Close waits for writes in flight (kafka-go finishes or gives up on them)
// and closes the connections.
func (s *Sink) Close() error {
	err := s.w.Close()
	s.cancel()
	s.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("kafka: close sink: %w", err)
	}
	return nil
}
