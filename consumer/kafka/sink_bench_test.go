package kafka_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// BenchmarkSinkPublish publishes batches of 256 outputs of about 300 bytes,
// each keyed by its own event id, to a topic of one partition and to one
// of four, on kfake in the same process: what a range of the epochs (256
// messages a batch) or a worker publishes after every batch it learns.
// The broker's work is in the figures too.
func BenchmarkSinkPublish(b *testing.B) {
	for _, partitions := range []int{1, 4} {
		b.Run(fmt.Sprintf("partitions=%d", partitions), func(b *testing.B) {
			c := testbroker.Kafka(b)
			c.CreateTopic(b, "out", partitions)
			sink, err := kafka.NewSink(config(c), zap.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			defer sink.Close()
			value := make([]byte, 300)
			batch := make([]consumer.Output, 256)
			for i := range batch {
				batch[i] = consumer.Output{Topic: "out", Value: value}
			}
			ctx := context.Background()
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for i := range batch {
					batch[i].Key = fmt.Appendf(batch[i].Key[:0], "examples:0:%d", n)
					n++
				}
				if err := sink.Publish(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
