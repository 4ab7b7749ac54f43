package kafka

import (
	"context"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// CoordinatorTimeout bounds a request to the coordinator beyond the time
// the coordinator may hold it on purpose.
const CoordinatorTimeout = coordinatorTimeout

// Crash ends g's membership without leaving the group, as a process
// killed with SIGKILL does.
func Crash(g *Group) { g.crash() }

// ShortenRequestTimeout shortens the time limit of s's requests to the
// cluster (metadata, offsets) to d, if they have one.
func ShortenRequestTimeout(s *Shards, d time.Duration) {
	if c := s.cluster.client; c.Timeout > d {
		c.Timeout = d
	}
}

// SetLookupRetry sets how long s goes by the fallback limit after a failed
// lookup.
func SetLookupRetry(s *Sink, d time.Duration) { s.lookupRetry = d }

// BatchTimeout is how long the writer of topic waits for a partition's
// batch to fill, 0 if s has no writer for topic yet.
func BatchTimeout(s *Sink, topic string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tw := s.topics[topic]; tw != nil {
		return tw.w.BatchTimeout
	}
	return 0
}

// FetchErrors is how many errors the reader of partition key returned to
// s, 0 if s has no such partition.
func FetchErrors(s *Source, key string) int64 {
	if p := s.byKey[key]; p != nil {
		return p.fetchErrs.Load()
	}
	return 0
}

// MemoTransport is the sink writers' transport over t.
func MemoTransport(t kafkago.RoundTripper) kafkago.RoundTripper { return memoTransport{t} }

// WithMetadataMemo is ctx as one WriteMessages of the sink gets it.
func WithMetadataMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, metadataMemoKey{}, &metadataMemo{})
}
