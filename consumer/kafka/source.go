package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Reader settings. Latency at the tail comes from minBytes = 1: the broker
// answers a fetch as soon as it has a single new byte, so maxWait only
// bounds how long an idle fetch is held (and how long Close can take: a
// kafka-go reader cannot interrupt a fetch in flight). Throughput when
// catching up comes from maxBytes: up to that much per partition per round
// trip, which kafka-go streams from the socket rather than buffering.
//
// maxBytes is Kafka's own default per partition (max.partition.fetch.bytes,
// 1 MiB; a larger first record batch still comes whole). kafka-go gives
// the broker maxWait to start its answer, so an answer that takes longer
// to put together fails and the same fetch is asked again: at 8 MiB a
// broker slowed down (kfake under the race detector on a busy machine)
// never answered in time, and the worker learned nothing more. 1 MiB was
// also a third faster than 8 (BenchmarkThroughput/kafka/worker).
const (
	minBytes = 1
	maxBytes = 1 << 20
	// maxWait must stay clear of [1s, ~1.5s): kafka-go subtracts up to one
	// second of assumed round trip from it before sending it to the broker,
	// and a broker wait of zero turns an idle reader into a busy loop. At
	// 500ms the broker holds an idle fetch for 375ms.
	maxWait = 500 * time.Millisecond
	// readBatchTimeout is the socket deadline for each message read out of
	// a fetch response.
	readBatchTimeout = 10 * time.Second
	// queueCapacity is how many messages kafka-go buffers per partition;
	// buffered is how many the source buffers across partitions. Together
	// they bound the messages read ahead of Fetch.
	queueCapacity = 128
	buffered      = 1024
	// shardBuffered is buffered for the one partition of a source that
	// Shards.Open returns. The epochs read several such sources at once,
	// each with a batch being learned and a batch's outputs in flight
	// besides what it reads ahead, and keep them reading ahead while an
	// epoch waits at its barrier: a quarter of buffered bounds the values
	// they hold, and the batches they take at once, to as much in all,
	// over the 4 partitions of a usual topic, as one source of NewSource.
	shardBuffered = buffered / 4
)

// errClosed is what Fetch and Commit return once the source is closed.
var errClosed = errors.New("kafka: source closed")

// Source reads partitions of Kafka topics, one kafka-go partition reader
// (and goroutine) per partition, without joining a consumer group: every
// partition of a set of topics (NewSource), or one partition (Shards.Open).
// It implements consumer.Source, plus Lag for metrics.
//
// Topics written by transactional producers are not fully supported:
// kafka-go (v0.4.51) hands transaction markers over as messages (6-byte
// values the worker dead-letters) and does not drop the records of
// aborted transactions, whatever the isolation level.
//
// Fetch is for one goroutine at a time; Commit, Lag and Close may be
// called from any goroutine.
type Source struct {
	log     *zap.Logger
	group   string
	cluster *cluster
	parts   []*partition
	byKey   map[string]*partition
	msgs    chan delivery
	buf     []consumer.Message
	err     error // what ended Fetch for good; Fetch's alone
	// release, if not nil, is called once Close has stopped the readers.
	release func()

	ctx    context.Context // done once Close starts
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

type partition struct {
	key    string
	topic  string
	id     int
	reader *kafkago.Reader
	errs   *errorLog
	// hwm is the partition's high watermark as of the reader's latest
	// fetch (its end when the source opened, before the first).
	hwm atomic.Int64
	// next is the Resume of the last message Fetch returned (its start
	// offset before the first).
	next atomic.Int64
	// fetchErrs counts the errors the reader returned, each after
	// kafka-go gave up its own attempts; the log shows few of them.
	fetchErrs atomic.Int64
}

// delivery is a message, or (err set) why its partition can go no further.
type delivery struct {
	p   *partition
	msg consumer.Message
	err error
}

// cluster is a connection pool for the cluster-wide requests (metadata,
// offsets, commits), with the client that sends them. A Source has its
// own; a Shards shares its own with the sources it opens.
type cluster struct {
	cfg       Config
	transport *kafkago.Transport
	client    *kafkago.Client
	cancel    context.CancelFunc // ends the transport's background work
}

// newCluster connects to cfg's brokers lazily, on the first request;
// topics are the ones whose metadata the pool keeps.
func newCluster(cfg Config, topics []string) *cluster {
	ctx, cancel := context.WithCancel(context.Background())
	t := cfg.transport(ctx, topics)
	// Every request has a time limit: a broker that takes the request and
	// never answers (stopped, or cut off by the network without a reset)
	// would otherwise hold its caller for as long as the connection
	// stays open, unseen by its retries and by /readyz. The limit is
	// for a broker that does not answer, not for one that is slow.
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: requestTimeout, Transport: t}
	return &cluster{cfg: cfg, transport: t, client: client, cancel: cancel}
}

// close ends the pool's background work and closes its connections.
func (c *cluster) close() {
	c.cancel()
	c.transport.CloseIdleConnections()
}

// NewSource opens partition readers on every partition of topics, as they
// are when it is called (partitions added later are read after a restart).
//
// A partition whose key "kafka:<topic>/<partition>" is in resume starts at
// that offset, the next offset to read; the others start at start. Keys in
// resume for other sources are ignored. A starting offset (from resume or a
// start of kind "offset") must lie between the partition's first offset and
// its end, inclusive, or NewSource fails naming the partition:
//
//   - below the first offset, retention (or DeleteRecords) removed messages
//     the model never consumed, and starting at the first offset would leave
//     them out of a model that claims to hold every example exactly once.
//     To accept the loss, the worker must be told so, e.g. by dropping the
//     partition's position so that it begins at start.
//   - beyond the end, the topic was deleted and recreated or its log was
//     truncated (an unclean leader election): the offsets no longer mean
//     what the snapshot recorded.
//
// The same holds while the source runs: if retention overtakes a reader
// that lags behind, Fetch fails naming the partition (kafka-go itself
// would skip ahead silently), and reopening fails as above. Size retention
// well above the worker's worst lag. Jumps over offsets that hold no
// messages (records removed by compaction) cost one offset lookup each.
//
// group, if not empty, is the consumer group that Commit writes offsets to.
// ctx bounds the metadata and offset lookups NewSource makes; the source
// itself lives until Close.
func NewSource(ctx context.Context, cfg Config, topics []string, group string, resume map[string]int64, start wire.Start, log *zap.Logger) (*Source, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	topics = unique(topics)
	if len(topics) == 0 {
		return nil, errors.New("kafka: no topics to read")
	}
	if err := start.Validate(); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	c := newCluster(cfg, topics)
	starts, err := plan(ctx, c, topics, resume, start, log)
	if err != nil {
		c.close()
		return nil, err
	}
	return newSource(c, group, starts, buffered, log, c.close)
}

// newSource starts a partition reader at each of starts. c serves the
// source's lookups and commits; buffered is how many messages the source
// buffers across partitions (besides kafka-go's queueCapacity each);
// release, if not nil, is called once Close has stopped the readers, and
// also when newSource fails.
func newSource(c *cluster, group string, starts []partitionStart, buffered int, log *zap.Logger, release func()) (*Source, error) {
	sctx, cancel := context.WithCancel(context.Background())
	s := &Source{
		log:     log,
		group:   group,
		cluster: c,
		byKey:   map[string]*partition{},
		msgs:    make(chan delivery, buffered),
		release: release,
		ctx:     sctx,
		cancel:  cancel,
	}
	dialer := c.cfg.dialer()
	for _, ps := range starts {
		p := &partition{key: ps.key(), topic: ps.topic, id: ps.id}
		p.errs = newErrorLog(log.With(zap.String("source", p.key)))
		p.reader = kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:          c.cfg.Brokers,
			Topic:            ps.topic,
			Partition:        ps.id,
			Dialer:           dialer,
			QueueCapacity:    queueCapacity,
			MinBytes:         minBytes,
			MaxBytes:         maxBytes,
			MaxWait:          maxWait,
			ReadBatchTimeout: readBatchTimeout,
			ReadLagInterval:  -1, // Lag comes from the fetched messages' watermarks
			ErrorLogger:      p.errs,
		})
		s.parts = append(s.parts, p)
		s.byKey[p.key] = p
		// Before the first FetchMessage this only records the offset.
		if err := p.reader.SetOffset(ps.offset); err != nil {
			s.Close()
			return nil, fmt.Errorf("kafka: %s: set offset %d: %w", p.key, ps.offset, err)
		}
		p.hwm.Store(ps.end)
		p.next.Store(ps.offset)
		log.Info("kafka partition opened", zap.String("source", p.key), zap.Int64("offset", ps.offset),
			zap.String("from", ps.from), zap.Int64("first", ps.first), zap.Int64("end", ps.end))
	}
	for i, p := range s.parts {
		s.wg.Add(1)
		go s.read(p, starts[i].offset)
	}
	return s, nil
}

// unique is topics without repeats or empty names, in order.
func unique(topics []string) []string {
	var out []string
	for _, t := range topics {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic string
	id    int
}

func (tp topicPartition) key() string { return sourceKey(tp.topic, tp.id) }

// shard is the partition as a shard, whose name is its key.
func (tp topicPartition) shard() shardid.ID { return shardid.Kafka(tp.topic, tp.id) }

// partitionOffsets is where a partition's log begins and ends, as the
// broker lists them.
type partitionOffsets struct {
	topicPartition
	first int64 // the first offset the broker still holds
	end   int64 // the high watermark: the next offset to be written
	// at, when the offsets were listed for a time, is the first offset
	// whose message is at or after that time, or end if there is none.
	at int64
}

// partitionStart is where one partition's reader begins, and why.
type partitionStart struct {
	partitionOffsets
	offset int64
	from   string // "resume", the start (fromStart ...), ...: what offset is
}

// fromStart begins partitionStart.from when the offset is the configured
// start resolved, which applies to every partition alike.
const fromStart = "start "

// ErrBeyondEnd is wrapped by the error of a start or a resumed position
// beyond its partition's end: the brokers answered, and the offset is
// what is wrong.
var ErrBeyondEnd = errors.New("is beyond the partition's end")

// check refuses a start below the partition's first offset or beyond its
// end (see NewSource), naming the partition. Messages deleted below the
// first offset never come back, so that error wraps consumer.ErrFatal:
// a worker learning in epochs stops on it (docs/scale-out.md, section
// 5) rather than retry opening the range for ever.
func (ps partitionStart) check() error {
	switch {
	case ps.offset < ps.first:
		return fmt.Errorf("%w: kafka: %s: %s offset %d is below the partition's first offset %d: "+
			"%d messages were deleted (retention?) before the model consumed them; refusing to skip them",
			consumer.ErrFatal, ps.key(), ps.from, ps.offset, ps.first, ps.first-ps.offset)
	case ps.offset > ps.end && strings.HasPrefix(ps.from, fromStart):
		return fmt.Errorf("kafka: %s: %s offset %d %w %d: "+
			"an offset start applies to every partition, and this one has not reached it: "+
			"start at an offset every partition has reached, or at a time", ps.key(), ps.from, ps.offset, ErrBeyondEnd, ps.end)
	case ps.offset > ps.end:
		return fmt.Errorf("kafka: %s: %s offset %d %w %d: "+
			"was the topic recreated or its log truncated?", ps.key(), ps.from, ps.offset, ErrBeyondEnd, ps.end)
	}
	return nil
}

// startAt resolves start (a valid one) on a partition whose offsets were
// listed for start's time, if it has one.
func startAt(po partitionOffsets, start wire.Start) partitionStart {
	ps := partitionStart{partitionOffsets: po, from: fromStart + start.String()}
	switch start.Kind {
	case "", wire.StartEarliest:
		ps.offset = po.first
	case wire.StartLatest:
		ps.offset = po.end
	case wire.StartOffset:
		ps.offset = start.Offset
	case wire.StartTime:
		ps.offset = po.at
	}
	return ps
}

// partitions looks up the partitions of topics: by topic in the order
// given, then by partition number. It fails on a topic that has none.
func (c *cluster) partitions(ctx context.Context, topics []string) ([]topicPartition, error) {
	md, err := c.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata for %q: %w", topics, err)
	}
	ids := map[string][]int{}
	for _, t := range md.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("kafka: topic %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			ids[t.Name] = append(ids[t.Name], p.ID)
		}
	}
	var out []topicPartition
	for _, topic := range topics {
		if len(ids[topic]) == 0 {
			return nil, fmt.Errorf("kafka: topic %s: no partitions (does it exist?)", topic)
		}
		slices.Sort(ids[topic])
		for _, id := range ids[topic] {
			out = append(out, topicPartition{topic, id})
		}
	}
	return out, nil
}

// offsets lists the first offset and the end of each of parts, in the
// same order; with at not zero, also the first offset at or after at. It
// fails naming the first partition the broker gives no offsets for.
func (c *cluster) offsets(ctx context.Context, parts []topicPartition, at time.Time) ([]partitionOffsets, error) {
	return c.listOffsets(ctx, parts, func(id int) []kafkago.OffsetRequest {
		reqs := []kafkago.OffsetRequest{kafkago.FirstOffsetOf(id), kafkago.LastOffsetOf(id)}
		if !at.IsZero() {
			reqs = append(reqs, kafkago.TimeOffsetOf(id, at))
		}
		return reqs
	})
}

// ends is offsets with the end of each partition alone (first is -1): a
// request a partition, where offsets makes one for each offset it asks.
func (c *cluster) ends(ctx context.Context, parts []topicPartition) ([]partitionOffsets, error) {
	return c.listOffsets(ctx, parts, func(id int) []kafkago.OffsetRequest {
		return []kafkago.OffsetRequest{kafkago.LastOffsetOf(id)}
	})
}

// listOffsets asks the offsets of each of parts that ask gives for its
// partition, and lists them in the order of parts.
func (c *cluster) listOffsets(ctx context.Context, parts []topicPartition, ask func(id int) []kafkago.OffsetRequest) ([]partitionOffsets, error) {
	req := &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{}}
	var topics []string
	for _, tp := range parts {
		if !slices.Contains(topics, tp.topic) {
			topics = append(topics, tp.topic)
		}
		req.Topics[tp.topic] = append(req.Topics[tp.topic], ask(tp.id)...)
	}
	start := time.Now()
	res, err := c.client.ListOffsets(ctx, req)
	timedOut := c.client.Timeout > 0 && time.Since(start) >= c.client.Timeout
	if err != nil && timedOut {
		return nil, fmt.Errorf("kafka: list offsets of %q: no answer within %v: %w", topics, c.client.Timeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: list offsets of %q: %w", topics, err)
	}
	// Of a request split among brokers, kafka-go answers each partition
	// of a part that failed, its time limit included, with Unknown (-1).
	listed := map[topicPartition]kafkago.PartitionOffsets{}
	for topic, ps := range res.Topics {
		for _, p := range ps {
			listed[topicPartition{topic, p.Partition}] = p
		}
	}
	out := make([]partitionOffsets, 0, len(parts))
	for _, tp := range parts {
		po, ok := listed[tp]
		if !ok {
			return nil, fmt.Errorf("kafka: %s: no offsets in the broker's answer", tp.key())
		}
		if errors.Is(po.Error, kafkago.Unknown) && timedOut {
			return nil, fmt.Errorf("kafka: %s: list offsets: no answer within %v", tp.key(), c.client.Timeout)
		}
		if po.Error != nil {
			return nil, fmt.Errorf("kafka: %s: list offsets: %w", tp.key(), po.Error)
		}
		o := partitionOffsets{topicPartition: tp, first: po.FirstOffset, end: po.LastOffset, at: po.LastOffset}
		for off := range po.Offsets { // one entry when at is set; -1 if no message is that recent
			if off >= 0 {
				o.at = off
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// plan looks up the partitions of topics and their offsets, and resolves
// where each reader starts to an absolute offset. Resolving "latest" here,
// rather than leaving it to the reader's first connection, makes it mean
// "after NewSource returned".
func plan(ctx context.Context, c *cluster, topics []string, resume map[string]int64, start wire.Start, log *zap.Logger) ([]partitionStart, error) {
	parts, err := c.partitions(ctx, topics)
	if err != nil {
		return nil, err
	}
	var at time.Time
	if start.Kind == wire.StartTime {
		at = start.Time
	}
	offsets, err := c.offsets(ctx, parts, at)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	var out []partitionStart
	for _, po := range offsets {
		key := po.key()
		known[key] = true
		ps := startAt(po, start)
		if off, ok := resume[key]; ok {
			ps.offset, ps.from = off, "resume"
		}
		if err := ps.check(); err != nil {
			return nil, err
		}
		out = append(out, ps)
	}
	for key := range resume {
		if !known[key] && slices.ContainsFunc(topics, func(t string) bool { return inTopic(key, t) }) {
			log.Warn("resume position for a partition the topic no longer has; ignored", zap.String("source", key))
		}
	}
	return out, nil
}

// inTopic reports whether key names a partition of topic.
func inTopic(key, topic string) bool {
	id, err := shardid.Parse(key)
	tp, ok := kafkaPartition(id)
	return err == nil && ok && tp.topic == topic
}

// read forwards one partition's messages, in order, until Close. kafka-go
// retries connection and broker errors by itself; the errors it still
// returns are reported and reading goes on. next is the offset the reader
// starts at.
func (s *Source) read(p *partition, next int64) {
	defer s.wg.Done()
	for {
		m, err := p.reader.FetchMessage(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, io.EOF) {
				return
			}
			p.fetchErrs.Add(1)
			p.errs.Printf("fetch %s: %v", p.key, err)
			continue
		}
		if m.Offset > next {
			if err := s.checkGap(p, next); err != nil {
				if s.ctx.Err() == nil {
					s.send(delivery{p: p, err: err})
				}
				return
			}
		}
		next = m.Offset + 1
		p.hwm.Store(m.HighWaterMark)
		if !s.send(delivery{p: p, msg: consumer.Message{
			Position: wire.Position{Source: p.key, Offset: m.Offset},
			Resume:   m.Offset + 1,
			Value:    m.Value,
			Time:     m.Time,
		}}) {
			return
		}
	}
}

func (s *Source) send(d delivery) bool {
	select {
	case s.msgs <- d:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// checkGap tells why the reader jumped over the offsets from next on. A
// jump is harmless where the log still starts at or before next: those
// offsets hold no messages (transaction markers, compaction). But when
// retention deleted them before the reader got there, kafka-go skips to
// the new first offset without a word, and that is an error: the model
// would silently miss messages, as NewSource refuses to let it at open.
//
// The lookup of the first offset is retried until it succeeds or the
// source is closed (then the error returned is the lookup's).
func (s *Source) checkGap(p *partition, next int64) error {
	var first int64
	err := retry.Do(s.ctx, &retry.Backoff{}, func(context.Context) error {
		var err error
		first, err = s.firstOffset(p)
		return err
	}, func(err error) {
		p.errs.Printf("%s: look up the first offset after a gap at %d: %v", p.key, next, err)
	})
	if err != nil {
		return err
	}
	if first > next {
		return fmt.Errorf("kafka: %s: offsets %d to %d were deleted (retention?) before the source read them; refusing to skip them",
			p.key, next, first-1)
	}
	return nil
}

func (s *Source) firstOffset(p *partition) (int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, lookupTimeout)
	defer cancel()
	res, err := s.cluster.client.ListOffsets(ctx, &kafkago.ListOffsetsRequest{
		Topics: map[string][]kafkago.OffsetRequest{p.topic: {kafkago.FirstOffsetOf(p.id)}},
	})
	if err != nil {
		return 0, err
	}
	for _, po := range res.Topics[p.topic] {
		if po.Partition == p.id {
			return po.FirstOffset, po.Error
		}
	}
	return 0, errors.New("no offset in the broker's answer")
}

// Fetch waits for the first message from any partition, then takes up to
// max in all of those already read ahead, without waiting for more.
// Messages of one partition come in offset order. Each message's Resume is
// its offset + 1: the next offset to read, as NewSource takes it. The slice
// is reused by the next Fetch.
//
// Fetch returns ctx's error when ctx is done; broker outages only delay
// it. It fails for good once the source is closed, or once it finds that
// retention deleted messages of a partition before they were read (see
// NewSource); the messages read before that are returned first.
func (s *Source) Fetch(ctx context.Context, max int) ([]consumer.Message, error) {
	if max < 1 {
		return nil, fmt.Errorf("kafka: Fetch of %d messages", max)
	}
	if s.ctx.Err() != nil {
		return nil, errClosed
	}
	if s.err != nil {
		return nil, s.err
	}
	// The last batch is done with: its messages go, so that their values
	// are not kept alive by a slice waiting for the next batch.
	clear(s.buf)
	s.buf = s.buf[:0]
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.ctx.Done():
		return nil, errClosed
	case d := <-s.msgs:
		if !s.add(d) {
			return nil, s.err
		}
	}
	for len(s.buf) < max {
		select {
		case d := <-s.msgs:
			if !s.add(d) {
				return s.buf, nil
			}
		default:
			return s.buf, nil
		}
	}
	return s.buf, nil
}

// add appends d's message to the batch, or records its error and says no.
func (s *Source) add(d delivery) bool {
	if d.err != nil {
		s.err = d.err
		return false
	}
	d.p.next.Store(d.msg.Resume)
	s.buf = append(s.buf, d.msg)
	return true
}

// Commit writes resume (next offsets, by source key) as the offsets of the
// source's group, for lag monitoring and tooling; it never changes what
// Fetch returns, and keys of other sources are ignored. It does so without
// joining the group (a "simple" commit, generation -1), which the broker
// refuses while the group has live members: the group must be dedicated
// to this worker. Without a group Commit does nothing.
func (s *Source) Commit(ctx context.Context, resume map[string]int64) error {
	if s.group == "" {
		return nil
	}
	if s.ctx.Err() != nil {
		return errClosed
	}
	topics := map[string][]kafkago.OffsetCommit{}
	for key, off := range resume {
		if p := s.byKey[key]; p != nil {
			topics[p.topic] = append(topics[p.topic], kafkago.OffsetCommit{Partition: p.id, Offset: off})
		}
	}
	if len(topics) == 0 {
		return nil
	}
	res, err := s.cluster.client.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{
		GroupID:      s.group,
		GenerationID: -1,
		Topics:       topics,
	})
	if err != nil {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", s.group, err)
	}
	var errs []error
	for topic, ps := range res.Topics {
		for _, p := range ps {
			if p.Error != nil {
				errs = append(errs, fmt.Errorf("%s: %w", sourceKey(topic, p.Partition), p.Error))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", s.group, errors.Join(errs...))
	}
	return nil
}

// Lag is, per source key, how many messages the partition holds beyond the
// last one Fetch returned: the high watermark of the reader's latest fetch
// (the partition's end when the source opened, until then) minus the next
// offset. It is the broker's view, for metrics: it lags the broker by up to
// one fetch round trip and does not move while a partition is idle.
func (s *Source) Lag() map[string]int64 {
	lag := make(map[string]int64, len(s.parts))
	for _, p := range s.parts {
		lag[p.key] = max(0, p.hwm.Load()-p.next.Load())
	}
	return lag
}

// Close stops the readers and their goroutines and waits for them; it can
// take up to maxWait, the time an idle fetch is held by the broker. Fetch
// and Commit then fail. Close is idempotent.
func (s *Source) Close() error {
	s.once.Do(func() {
		s.cancel()
		var wg sync.WaitGroup
		for _, p := range s.parts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.reader.Close(); err != nil {
					s.log.Warn("kafka reader close", zap.String("source", p.key), zap.Error(err))
				}
			}()
		}
		wg.Wait()
		s.wg.Wait()
		if s.release != nil {
			s.release()
		}
	})
	return nil
}
