package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
)

// Writer settings.
const (
	// batchTimeout is how long kafka-go waits for a partition's batch to
	// fill before sending it. A synchronous WriteMessages hands over the
	// whole Publish batch at once and nothing else adds to it, so waiting
	// only adds latency (kafka-go's default is a full second per Publish):
	// every range of the epochs waits for its last Publish before its
	// result is written. Whatever one Publish assigns to a partition is
	// added under one lock, before the timer can send the batch, so the
	// shortest wait splits nothing (a zero setting means kafka-go's second).
	batchTimeout = 50 * time.Microsecond
	// batchSize is the most messages per produce request and partition;
	// the topic's limit bounds its bytes too (see topicWriter). kafka-go
	// preallocates batchSize messages per partition batch, which keeps it
	// from being much larger.
	batchSize = 1000
	// maxAttempts is how often kafka-go tries a partition's batch before
	// Publish fails: few, since the caller retries the whole batch with
	// its own backoff and must learn soon that the output is down.
	maxAttempts = 3
	// writeTimeout bounds each produce request.
	writeTimeout = 10 * time.Second
)

// Message size limits. A broker refuses a record batch larger than the
// topic's max.message.bytes (by default the broker's message.max.bytes),
// and kafka-go refuses, before sending, a message larger than the
// Writer's BatchBytes; either refusal repeats on every retry.
const (
	// FallbackMaxMessageBytes is the max.message.bytes assumed for a
	// topic whose limit cannot be looked up (DescribeConfigs not allowed,
	// the cluster unreachable): 1 MiB, just under Kafka's default of
	// 1048588.
	FallbackMaxMessageBytes = 1 << 20
	// recordBatchOverhead is the header of a v2 record batch (Kafka 0.11
	// and later), which the broker counts against max.message.bytes
	// besides the records.
	recordBatchOverhead = 61
	// messageOverhead is what kafka-go counts for each message besides
	// its key and value (kafka.Message's size in the legacy format) when
	// it checks a message against BatchBytes and fills a batch up to it.
	// The v2 record of one of the sink's messages (no headers, no
	// timestamp of its own, so a delta of 0; at most batchSize in a
	// batch) takes at most 20 bytes besides key and value, so a batch
	// kafka-go fills up to BatchBytes is at most
	// BatchBytes+recordBatchOverhead bytes on the wire.
	messageOverhead = 23
	// lookupTimeout bounds one lookup of cluster metadata: a topic's
	// limit, or a partition's first offset (see Source.checkGap).
	lookupTimeout = 10 * time.Second
	// requestTimeout bounds one request of a Source's or Shards' client
	// (metadata, offsets, commits): long enough that a broker slowed by
	// its load answers, short enough that one that never answers is
	// reported (not ready) and retried.
	requestTimeout = 30 * time.Second
)

// Sink publishes outputs to Kafka topics. It implements consumer.Sink.
//
// Each topic gets its own kafka-go Writer, created on first use with the
// topic's limit, so that no batch it sends is larger than the topic
// takes, and no message the topic takes is refused before it is sent.
type Sink struct {
	addr      net.Addr
	transport *kafkago.Transport
	client    *kafkago.Client
	cancel    context.CancelFunc // ends the transport's background work
	log       *zap.Logger
	errorLog  *errorLog // the writers' retries
	// lookupRetry is how long a topic goes by the fallback limit after a
	// failed lookup (the constant lookupRetry; shorter in tests).
	lookupRetry time.Duration

	mu     sync.Mutex
	topics map[string]*topicWriter // nil once closed
}

// topicWriter writes to one topic.
type topicWriter struct {
	w *kafkago.Writer
	// maxMessageBytes is the topic's max.message.bytes as looked up (or
	// FallbackMaxMessageBytes). A limit that was looked up never changes:
	// a topic whose limit is changed keeps the old one until the sink is
	// created again (a lowered one fails Publish with
	// consumer.ErrOutputTooLarge, which stops the worker).
	maxMessageBytes int
	// retryLookup, when the lookup failed and maxMessageBytes is the
	// fallback, is when to look the limit up again.
	retryLookup time.Time
}

// lookupRetry is how long a topic goes by FallbackMaxMessageBytes after a
// failed lookup of its limit before the sink asks again.
const lookupRetry = 30 * time.Second

// maxOutputBytes is the largest key and value that fit maxMessageBytes:
// alone in a record batch, and within the writer's BatchBytes.
func (tw *topicWriter) maxOutputBytes() int {
	return max(0, tw.maxMessageBytes-recordBatchOverhead-messageOverhead)
}

// NewSink returns a sink on the cluster. It connects on the first Publish
// or MaxOutputBytes.
func NewSink(cfg Config, log *zap.Logger) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := cfg.transport(ctx, nil)
	addr := kafkago.TCP(cfg.Brokers...)
	log = log.With(zap.String("sink", "kafka"))
	return &Sink{
		addr:      addr,
		transport: t,
		client:    &kafkago.Client{Addr: addr, Transport: t},
		cancel:    cancel,
		log:       log,
		// Attempts that fail are logged here; the final error is
		// Publish's to return.
		errorLog:    newErrorLog(log),
		lookupRetry: lookupRetry,
		topics:      map[string]*topicWriter{},
	}, nil
}

// MaxOutputBytes is the largest output, counted as len(Key)+len(Value),
// that Publish delivers to topic: its max.message.bytes less the record
// batch's overhead. The topic's own setting counts if it has one, and the
// broker's message.max.bytes otherwise (also for a topic that does not
// exist yet). The first call for a topic looks its limit up, within
// lookupTimeout; if that fails, it logs a warning and uses
// FallbackMaxMessageBytes for the topic, asking again every lookupRetry
// until a lookup succeeds.
func (s *Sink) MaxOutputBytes(topic string) int {
	tw, err := s.writer(topic)
	if err != nil {
		return (&topicWriter{maxMessageBytes: FallbackMaxMessageBytes}).maxOutputBytes()
	}
	return tw.maxOutputBytes()
}

// writer returns topic's writer, creating it on first use, and again once
// the limit of a topic that went by the fallback is known. The lookup of
// the limit holds the sink's lock: it happens once per topic, or once per
// lookupRetry while it fails.
func (s *Sink) writer(topic string) (*topicWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics == nil {
		return nil, errors.New("kafka: sink closed")
	}
	old := s.topics[topic]
	if old != nil && (old.retryLookup.IsZero() || time.Now().Before(old.retryLookup)) {
		return old, nil
	}
	limit, err := s.lookupLimit(topic)
	var retry time.Time
	if err != nil {
		if old != nil {
			old.retryLookup = time.Now().Add(s.lookupRetry)
			return old, nil
		}
		limit, retry = FallbackMaxMessageBytes, time.Now().Add(s.lookupRetry)
		s.log.Warn("cannot look up the topic's message size limit; assuming the fallback until a lookup succeeds",
			zap.String("topic", topic), zap.Int("max_message_bytes", limit), zap.Duration("retry_in", s.lookupRetry), zap.Error(err))
	}
	if old != nil {
		// The limit is known at last. A Publish still holding the old
		// writer fails and is retried with this one.
		go old.w.Close() //nolint:errcheck // the caller retries whatever it had in flight
		s.log.Info("looked up the topic's message size limit", zap.String("topic", topic), zap.Int("max_message_bytes", limit))
	}
	tw := &topicWriter{
		maxMessageBytes: limit,
		retryLookup:     retry,
		w: &kafkago.Writer{
			Addr:         s.addr,
			Transport:    memoTransport{s.transport},
			Balancer:     &chosenOrHash{},
			RequiredAcks: kafkago.RequireAll,
			Async:        false,
			BatchTimeout: batchTimeout,
			BatchSize:    batchSize,
			BatchBytes:   int64(max(1, limit-recordBatchOverhead)),
			MaxAttempts:  maxAttempts,
			WriteTimeout: writeTimeout,
			ErrorLogger:  s.errorLog,
		},
	}
	s.topics[topic] = tw
	return tw, nil
}

// lookupLimit asks the cluster for topic's max.message.bytes: the topic's
// own setting if it has one, else the broker's message.max.bytes (which a
// topic without a setting of its own inherits), else what the topic
// reports (the broker default, to a broker that will not describe
// itself).
func (s *Sink) lookupLimit(topic string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	limit, own, terr := s.describeConfig(ctx, kafkago.ResourceTypeTopic, topic, "max.message.bytes")
	if terr == nil && own {
		return limit, nil
	}
	broker, berr := s.broker(ctx)
	if berr == nil {
		var blimit int
		if blimit, _, berr = s.describeConfig(ctx, kafkago.ResourceTypeBroker, broker, "message.max.bytes"); berr == nil {
			return blimit, nil
		}
	}
	if terr == nil {
		return limit, nil
	}
	return 0, fmt.Errorf("topic %s: %w; broker: %w", topic, terr, berr)
}

// broker is the id of a broker to ask for broker configs: the controller,
// else any.
func (s *Sink) broker(ctx context.Context) (string, error) {
	meta, err := s.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{}})
	if err != nil {
		return "", err
	}
	switch {
	case meta.Controller.Host != "":
		return strconv.Itoa(meta.Controller.ID), nil
	case len(meta.Brokers) > 0:
		return strconv.Itoa(meta.Brokers[0].ID), nil
	}
	return "", fmt.Errorf("no brokers in the cluster metadata")
}

// describeConfig returns the integer config name of a resource, and
// whether it is set on the resource itself rather than inherited.
func (s *Sink) describeConfig(ctx context.Context, typ kafkago.ResourceType, resource, name string) (value int, own bool, err error) {
	resp, err := s.client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{
		Resources: []kafkago.DescribeConfigRequestResource{{ResourceType: typ, ResourceName: resource, ConfigNames: []string{name}}},
	})
	if err != nil {
		return 0, false, err
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return 0, false, fmt.Errorf("describe %s: %w", name, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != name {
				continue
			}
			value, err := strconv.Atoi(e.ConfigValue)
			if err != nil || value <= 0 {
				return 0, false, fmt.Errorf("%s is %q", name, e.ConfigValue)
			}
			// Sources: 1 is a topic's own setting; 0 (unknown) is all
			// a version 0 response says, with IsDefault.
			own = e.ConfigSource == 1 || (e.ConfigSource == 0 && !e.IsDefault)
			return value, own, nil
		}
	}
	return 0, false, fmt.Errorf("describe %s: not in the response", name)
}

// Publish writes batch: each output to its Topic, keyed by its Key, on the
// partition the key hashes to (FNV-1a, as Sarama does), so one event id
// always lands on one partition, or on the partition the output chooses
// (Output.HasPartition); a chosen partition the topic does not have fails
// the output. It returns nil once every in-sync replica
// holds every output, and otherwise an error saying how many failed, after
// which the caller publishes the whole batch again (outputs are
// at-least-once; partitions that succeeded get duplicates with the same
// keys). Outputs of one partition are written in batch order; the topics
// of a batch are written concurrently, each with one synchronous
// WriteMessages. An output larger than MaxOutputBytes of its topic fails
// on every attempt.
//
// Publish hands kafka-go the batch's keys and values without copying
// them. WriteMessages keeps them past a ctx that ends before every write
// finished, as consumer.Sink allows; otherwise it is done with them when
// it returns, so the caller may reuse them then. A ctx that is already
// done writes nothing.
func (s *Sink) Publish(ctx context.Context, batch []consumer.Output) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	msgs := make([]kafkago.Message, len(batch))
	for i := range batch {
		o := &batch[i]
		m := &msgs[i]
		m.Topic = o.Topic
		if len(o.Key) > 0 {
			m.Key = o.Key
		}
		m.Value = o.Value
		if m.Value == nil {
			// An empty value, never a null one.
			m.Value = []byte{}
		}
		if o.HasPartition {
			m.WriterData = chosenPartition(o.Partition)
		}
	}
	// One run of messages per topic, each in batch order.
	slices.SortStableFunc(msgs, func(a, b kafkago.Message) int { return strings.Compare(a.Topic, b.Topic) })
	var runs []topicRun
	for len(msgs) > 0 {
		n := 1
		for n < len(msgs) && msgs[n].Topic == msgs[0].Topic {
			n++
		}
		tw, err := s.writer(msgs[0].Topic)
		if err != nil {
			return err
		}
		runs = append(runs, topicRun{tw: tw, msgs: msgs[:n]})
		msgs = msgs[n:]
	}
	if len(runs) == 1 {
		runs[0].write(ctx)
	} else {
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() { runs[i].write(ctx) })
		}
		wg.Wait()
	}
	failed := 0
	var first error
	var topics []string
	for _, r := range runs {
		if r.failed == 0 {
			continue
		}
		failed += r.failed
		topics = append(topics, strconv.Quote(r.msgs[0].Topic))
		if first == nil {
			first = r.err
		}
	}
	if failed > 0 {
		// Name the topics: the broker's error alone does not say which
		// output fails.
		hint := ""
		if errors.Is(first, kafkago.UnknownTopicOrPartition) || errors.Is(first, protocol.ErrNoTopic) {
			hint = " (the topic does not exist: create it, with hyperplane setup)"
		}
		if errors.Is(first, kafkago.MessageSizeTooLarge) {
			// Outputs are made to fit the limit looked up: the topic's
			// max.message.bytes was lowered since, and every attempt
			// fails alike.
			return fmt.Errorf("%w (the topic's max.message.bytes was lowered since): kafka: publish to topic %s: %d of %d outputs failed: %w",
				consumer.ErrOutputTooLarge, strings.Join(topics, ", "), failed, len(batch), first)
		}
		return fmt.Errorf("kafka: publish to topic %s: %d of %d outputs failed: %w%s", strings.Join(topics, ", "), failed, len(batch), first, hint)
	}
	return nil
}

// topicRun is the messages of one Publish to one topic.
type topicRun struct {
	tw     *topicWriter
	msgs   []kafkago.Message
	failed int   // how many
	err    error // the first failure
}

func (r *topicRun) write(ctx context.Context) {
	ctx = context.WithValue(ctx, metadataMemoKey{}, &metadataMemo{})
	err := r.tw.w.WriteMessages(ctx, r.msgs...)
	if err == nil {
		return
	}
	var werrs kafkago.WriteErrors
	if !errors.As(err, &werrs) {
		r.failed, r.err = len(r.msgs), err
		return
	}
	r.failed = werrs.Count()
	for _, e := range werrs {
		if e != nil {
			r.err = e
			return
		}
	}
}

// Close waits for writes in flight (kafka-go finishes or gives up on them)
// and closes the connections. Publish fails after Close.
func (s *Sink) Close() error {
	s.mu.Lock()
	topics := s.topics
	s.topics = nil
	s.mu.Unlock()
	var errs []error
	for topic, tw := range topics {
		if err := tw.w.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", topic, err))
		}
	}
	s.cancel()
	s.transport.CloseIdleConnections()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka: close sink: %w", err)
	}
	return nil
}

// memoTransport is the writers' transport. kafka-go's Writer asks its
// transport for the topic's partitions once for every message of a
// WriteMessages (Writer.partitions); the transport answers from its cache,
// but copies the answer each time, which cost about 5% of a worker's CPU.
// Within a WriteMessages whose ctx carries a metadataMemo (topicRun.write)
// every message after the first gets the first one's answer: one write
// balances all its messages over the same partitions.
type memoTransport struct{ kafkago.RoundTripper }

// metadataMemoKey is the ctx key of a metadataMemo.
type metadataMemoKey struct{}

// metadataMemo is the topic metadata one WriteMessages was answered.
type metadataMemo struct {
	mu    sync.Mutex
	topic string
	auto  bool
	res   kafkago.Response
}

func (t memoTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafkago.Request) (kafkago.Response, error) {
	m, ok := req.(*metadataAPI.Request)
	if !ok || len(m.TopicNames) != 1 {
		return t.RoundTripper.RoundTrip(ctx, addr, req)
	}
	memo, _ := ctx.Value(metadataMemoKey{}).(*metadataMemo)
	if memo == nil {
		return t.RoundTripper.RoundTrip(ctx, addr, req)
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if memo.res != nil && memo.topic == m.TopicNames[0] && memo.auto == m.AllowAutoTopicCreation {
		return memo.res, nil
	}
	res, err := t.RoundTripper.RoundTrip(ctx, addr, req)
	if err == nil {
		memo.topic, memo.auto, memo.res = m.TopicNames[0], m.AllowAutoTopicCreation, res
	}
	return res, err
}

// chosenPartition is the partition an output chose, carried to the
// balancer in its message's WriterData.
type chosenPartition int32

// chosenOrHash is the sink's balancer: the partition a message chose, or
// else kafka-go's Hash of its key (FNV-1a, as Sarama's).
type chosenOrHash struct{ hash kafkago.Hash }

func (b *chosenOrHash) Balance(msg kafkago.Message, partitions ...int) int {
	if p, ok := msg.WriterData.(chosenPartition); ok {
		// A partition the topic does not have is written to all the same,
		// and the broker refuses it.
		return int(p)
	}
	return b.hash.Balance(msg, partitions...)
}
