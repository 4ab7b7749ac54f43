// Package memory is an in-process Source and Sink for tests of the worker
// and of code built on it: partitions and topics in memory, with failures
// on command. The source keeps the Source contract (order, resume,
// positions that follow from the resume map alone), and it passes the
// same conformance suite as the broker adapters. A Log is also a
// consumer.Shards whose shards are its partitions.
package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// ErrClosed is what Fetch returns after Close.
var ErrClosed = errors.New("memory: source closed")

// Log is an append-only set of partitions that sources read: what a topic
// is to Kafka. Its zero value is not usable; use NewLog.
type Log struct {
	name string

	mu         sync.Mutex
	partitions [][][]byte
	times      map[int][]time.Time // by partition, when any message has a time of its own
	purged     map[int]int64       // by partition, the first offset not deleted (Purge)
	grew       chan struct{}       // closed and replaced whenever a message is appended
}

// NewLog returns a log with the given number of partitions, whose source
// keys are "memory:<name>/<partition>".
func NewLog(name string, partitions int) *Log {
	return &Log{name: name, partitions: make([][][]byte, partitions), grew: make(chan struct{})}
}

// AddPartitions adds n empty partitions after the log's, as a topic's
// partitions are added to.
func (l *Log) AddPartitions(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partitions = append(l.partitions, make([][][]byte, n)...)
	close(l.grew)
	l.grew = make(chan struct{})
}

// Purge deletes the messages of partition p below offset before, as a
// purge or retention does: their offsets stay theirs, and a source that
// reads below before goes on from there without a word.
func (l *Log) Purge(p int, before int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.purged == nil {
		l.purged = map[int]int64{}
	}
	l.purged[p] = max(l.purged[p], before)
	close(l.grew)
	l.grew = make(chan struct{})
}

// Key is the source key of partition p, the name of its Shard.
func (l *Log) Key(p int) string { return l.Shard(p).String() }

// Shard is partition p as a shard, "memory:<name>/<p>".
func (l *Log) Shard(p int) shardid.ID { return shardid.Memory(l.name, p) }

// Append adds values to partition p, in order.
func (l *Log) Append(p int, values ...[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range values {
		l.partitions[p] = append(l.partitions[p], slices.Clone(v))
	}
	close(l.grew)
	l.grew = make(chan struct{})
}

// AppendAt adds value to partition p with time t, its record time (every
// message Append adds has messageTime).
func (l *Log) AppendAt(p int, t time.Time, value []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.times == nil {
		l.times = map[int][]time.Time{}
	}
	ts := l.times[p]
	for len(ts) < len(l.partitions[p]) {
		ts = append(ts, messageTime)
	}
	l.partitions[p] = append(l.partitions[p], slices.Clone(value))
	l.times[p] = append(ts, t)
	close(l.grew)
	l.grew = make(chan struct{})
}

// time is the record time of message off of partition p. l.mu is held.
func (l *Log) time(p int, off int64) time.Time {
	if ts := l.times[p]; off < int64(len(ts)) {
		return ts[off]
	}
	return messageTime
}

// messageTime is the Time of every message of a Log that AppendAt did
// not add.
var messageTime = time.Unix(0, 0)

// Len is the number of messages in partition p.
func (l *Log) Len(p int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.partitions[p])
}

var _ consumer.Shards = (*Log)(nil)

// Spread is 1: a partition's offsets are its own.
func (l *Log) Spread() int { return 1 }

// Ends returns the length of every partition, by shard: its end, the
// next offset to be written.
func (l *Log) Ends(ctx context.Context) (map[shardid.ID]int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ends := make(map[shardid.ID]int64, len(l.partitions))
	for p, part := range l.partitions {
		ends[l.Shard(p)] = int64(len(part))
	}
	return ends, nil
}

// Start resolves start on shard, the source key of a partition: 0 for
// earliest, the partition's length for latest, the offset (at most the
// length), or for a time the first message at or after it (every message
// is stored at the Unix epoch).
func (l *Log) Start(ctx context.Context, shard shardid.ID, start wire.Start) (int64, error) {
	if err := start.Validate(); err != nil {
		return 0, fmt.Errorf("memory: %s: %w", shard, err)
	}
	p, err := l.partition(shard)
	if err != nil {
		return 0, err
	}
	end := int64(l.Len(p))
	switch start.Kind {
	case wire.StartLatest:
		return end, nil
	case wire.StartOffset:
		if start.Offset > end {
			return 0, fmt.Errorf("memory: %s: start %s is beyond the partition's end %d", shard, start, end)
		}
		return start.Offset, nil
	case wire.StartTime:
		if start.Time.After(messageTime) {
			return end, nil
		}
	}
	return 0, nil
}

// Open returns a *Source that reads shard's partition alone from offset
// from, which must lie between 0 and the partition's length. Its Commit
// moves nothing (Committed records it, as for NewSource's).
func (l *Log) Open(ctx context.Context, shard shardid.ID, from int64) (consumer.Source, error) {
	p, err := l.partition(shard)
	if err != nil {
		return nil, err
	}
	if end := int64(l.Len(p)); from < 0 || from > end {
		return nil, fmt.Errorf("memory: %s: range start offset %d is outside the partition's offsets 0 to %d", shard, from, end)
	}
	s := newSource(l)
	s.parts, s.next = []int{p}, []int64{from}
	return s, nil
}

// partition is shard's partition.
func (l *Log) partition(shard shardid.ID) (int, error) {
	l.mu.Lock()
	n := len(l.partitions)
	l.mu.Unlock()
	for p := range n {
		if l.Shard(p) == shard {
			return p, nil
		}
	}
	return 0, fmt.Errorf("memory: %q is not a partition of log %s: %w", shard, l.name, consumer.ErrNoShard)
}

// Source reads partitions of a Log from resume positions: for each
// partition the next offset to read, as a Kafka partition's are. It reads
// every partition (NewSource) or one (Log.Open). It implements
// consumer.Source.
type Source struct {
	log   *Log
	parts []int   // the partitions it reads
	next  []int64 // by index in parts
	buf   []consumer.Message
	// round is the partition the next Fetch starts from, so that no
	// partition starves.
	round int

	mu        sync.Mutex
	committed map[string]int64
	commits   int
	fetchErr  error
	// hung, when not nil, makes Commit wait for its context (HangCommits).
	hung      chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

// NewSource opens log at resume (nil or a missing key: the partition's
// first message).
func NewSource(log *Log, resume map[string]int64) *Source {
	s := newSource(log)
	for p := range log.partitions {
		s.parts = append(s.parts, p)
		s.next = append(s.next, resume[log.Key(p)])
	}
	return s
}

func newSource(log *Log) *Source {
	return &Source{log: log, closed: make(chan struct{}), committed: map[string]int64{}}
}

// FailFetch makes every Fetch fail with err until it is called with nil.
func (s *Source) FailFetch(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fetchErr = err
}

// Fetch waits until a message is available and returns up to max, taking
// partitions in turn. Cancelling ctx loses nothing: the next Fetch
// returns the same messages.
func (s *Source) Fetch(ctx context.Context, max int) ([]consumer.Message, error) {
	if max < 1 {
		return nil, fmt.Errorf("memory: Fetch of %d messages", max)
	}
	for {
		s.mu.Lock()
		err := s.fetchErr
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-s.closed:
			return nil, ErrClosed
		default:
		}
		s.log.mu.Lock()
		grew := s.log.grew
		s.buf = s.buf[:0]
		for i := range s.next {
			j := (s.round + i) % len(s.next)
			p := s.parts[j]
			part := s.log.partitions[p]
			if first := s.log.purged[p]; s.next[j] < first {
				s.next[j] = first
			}
			for s.next[j] < int64(len(part)) && len(s.buf) < max {
				off := s.next[j]
				s.buf = append(s.buf, consumer.Message{
					Position: wire.Position{Source: s.log.Key(p), Offset: off},
					Resume:   off + 1,
					Value:    part[off],
					Time:     s.log.time(p, off),
				})
				s.next[j]++
			}
		}
		s.log.mu.Unlock()
		if len(s.buf) > 0 {
			s.round = (s.round + 1) % len(s.next)
			return s.buf, nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closed:
			return nil, ErrClosed
		}
	}
}

// HangCommits makes every Commit wait until its context is done, as a
// broker that takes the request and never answers, and fail with the
// context's error; until it is called with false, which ends the waits.
func (s *Source) HangCommits(hang bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case hang && s.hung == nil:
		s.hung = make(chan struct{})
	case !hang && s.hung != nil:
		close(s.hung)
		s.hung = nil
	}
}

// Commit records resume; Committed and Commits read it back.
func (s *Source) Commit(ctx context.Context, resume map[string]int64) error {
	s.mu.Lock()
	if hung := s.hung; hung != nil {
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hung:
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	maps.Copy(s.committed, resume)
	s.commits++
	return nil
}

// Committed is what was committed so far, by source key.
func (s *Source) Committed() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.committed)
}

// Commits counts the calls of Commit.
func (s *Source) Commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits
}

// Close ends Fetch.
func (s *Source) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}

// Sink keeps what is published, by topic. It implements consumer.Sink.
type Sink struct {
	mu       sync.Mutex
	topics   map[string][]consumer.Output
	fail     error
	attempts int
	changed  chan struct{}
}

// NewSink returns an empty sink.
func NewSink() *Sink {
	return &Sink{topics: map[string][]consumer.Output{}, changed: make(chan struct{})}
}

// Fail makes every Publish fail with err, publishing nothing, until it is
// called with nil.
func (s *Sink) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = err
}

// Publish keeps a copy of batch, keys and values, or fails as Fail says.
func (s *Sink) Publish(ctx context.Context, batch []consumer.Output) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts++
	if s.fail != nil {
		return s.fail
	}
	for _, o := range batch {
		o.Key, o.Value = slices.Clone(o.Key), slices.Clone(o.Value)
		s.topics[o.Topic] = append(s.topics[o.Topic], o)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}

// Attempts counts the calls of Publish, failed ones included.
func (s *Sink) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Outputs returns what was published to topic, in order.
func (s *Sink) Outputs(topic string) []consumer.Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.topics[topic])
}

// Close does nothing.
func (s *Sink) Close() error { return nil }
