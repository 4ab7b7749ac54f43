package memory_test

import (
	"fmt"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
)

func TestSourceConformance(t *testing.T) {
	n := 0
	consumertest.TestSource(t, consumertest.Features{Partitions: 4, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(p int, values ...[]byte), func(map[string]int64) consumer.Source) {
			n++
			log := memory.NewLog(fmt.Sprintf("t%d", n), partitions)
			return log.Append, func(resume map[string]int64) consumer.Source {
				src := memory.NewSource(log, resume)
				t.Cleanup(func() { src.Close() })
				return src
			}
		},
	})
}

func TestSinkConformance(t *testing.T) {
	consumertest.TestSink(t, consumertest.Features{}, consumertest.SinkHarness{
		Setup: func(t *testing.T, topics []string) (consumer.Sink, func(string, int) []consumer.Output) {
			sink := memory.NewSink()
			return sink, func(topic string, n int) []consumer.Output { return sink.Outputs(topic) }
		},
	})
}
