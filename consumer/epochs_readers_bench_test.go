package consumer

import (
	"context"
	"testing"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// batchSource returns the same batch of messages at every Fetch: it
// stands for a broker's reader in a measure of what a range's reader
// adds to each message it passes on.
type batchSource struct{ msgs []Message }

func (s *batchSource) Fetch(context.Context, int) ([]Message, error)  { return s.msgs, nil }
func (s *batchSource) Commit(context.Context, map[string]int64) error { return nil }
func (s *batchSource) Close() error                                   { return nil }

// BenchmarkRangeReaderFetch is a range's reader passing on batches of
// 256 messages that lie within the range's end, as every Fetch of a
// range but its last does: ns and allocations per message.
//
//	go test -run XXX -bench BenchmarkRangeReaderFetch -benchmem ./consumer/
func BenchmarkRangeReaderFetch(b *testing.B) {
	msgs := make([]Message, 256)
	for i := range msgs {
		msgs[i] = Message{Position: wire.Position{Source: "kafka:examples/0", Offset: int64(i)}, Resume: int64(i) + 1, Value: []byte(`{"label":1}`)}
	}
	r := &rangeReader{Source: &batchSource{msgs: msgs}, end: ResumeTo(int64(len(msgs)))}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		got, err := r.Fetch(ctx, len(msgs))
		if err != nil || len(got) != len(msgs) {
			b.Fatalf("Fetch: %d messages, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/message")
}
