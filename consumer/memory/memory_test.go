package memory_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/consumertest"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/wire"
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

func TestShardConformance(t *testing.T) {
	n := 0
	consumertest.TestSource(t, consumertest.Features{Partitions: 1, Replay: true}, consumertest.SourceHarness{
		Setup: func(t *testing.T, partitions int) (func(p int, values ...[]byte), func(map[string]int64) consumer.Source) {
			n++
			log := memory.NewLog(fmt.Sprintf("t%d", n), partitions)
			return log.Append, func(resume map[string]int64) consumer.Source {
				return openShard(t, log, log.Shard(0), resume[log.Key(0)])
			}
		},
	})
}

func openShard(t *testing.T, log *memory.Log, shard shardid.ID, from int64) consumer.Source {
	t.Helper()
	src, err := log.Open(context.Background(), shard, from)
	if err != nil {
		t.Fatalf("Open(%s, %d): %v", shard, from, err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// shardsLog is a log "t" of three partitions holding 5, 0 and 12
// messages, "p<partition>-m<i>" at offset i.
func shardsLog() *memory.Log {
	log := memory.NewLog("t", 3)
	for p, n := range []int{5, 0, 12} {
		for i := range n {
			log.Append(p, fmt.Appendf(nil, "p%d-m%d", p, i))
		}
	}
	return log
}

// idle checks that src delivers nothing more for a while.
func idle(t *testing.T, src consumer.Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if batch, err := src.Fetch(ctx, 64); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch on a source with nothing more to read = %d messages, %v; want the deadline", len(batch), err)
	}
}

func TestLogEnds(t *testing.T) {
	log := shardsLog()
	check := func(want map[string]int64) {
		t.Helper()
		ends, err := log.Ends(context.Background())
		if err != nil {
			t.Fatalf("Ends: %v", err)
		}
		named := map[string]int64{}
		for id, end := range ends {
			named[id.String()] = end
		}
		if !maps.Equal(named, want) {
			t.Fatalf("Ends() = %v, want %v", named, want)
		}
	}
	check(map[string]int64{"memory:t/0": 5, "memory:t/1": 0, "memory:t/2": 12})
	log.Append(1, []byte("p1-m0"), []byte("p1-m1"))
	check(map[string]int64{"memory:t/0": 5, "memory:t/1": 2, "memory:t/2": 12})
}

func TestLogOpen(t *testing.T) {
	log := shardsLog()
	for _, from := range []int{0, 1, 7, 11, 12} {
		t.Run(fmt.Sprint("from ", from), func(t *testing.T) {
			src := openShard(t, log, shardid.Memory("t", 2), int64(from))
			if from < 12 {
				for i, m := range consumertest.FetchN(t, src, 12-from) {
					off := int64(from + i)
					want := consumer.Message{Position: wire.Position{Source: "memory:t/2", Offset: off}, Resume: off + 1}
					if string(m.Value) != fmt.Sprintf("p2-m%d", off) || m.Position != want.Position || m.Resume != want.Resume {
						t.Fatalf("message %d is %q at %+v resume %d, want p2-m%d at %+v resume %d",
							i, m.Value, m.Position, m.Resume, off, want.Position, want.Resume)
					}
				}
			}
			idle(t, src)
		})
	}

	t.Run("only its partition", func(t *testing.T) {
		src := openShard(t, log, shardid.Memory("t", 1), 0)
		idle(t, src)
		log.Append(0, []byte("p0-m5"))
		log.Append(2, []byte("p2-m12"))
		log.Append(1, []byte("p1-m0"), []byte("p1-m1"))
		for i, m := range consumertest.FetchN(t, src, 2) {
			if m.Position.Source != "memory:t/1" || m.Position.Offset != int64(i) || string(m.Value) != fmt.Sprintf("p1-m%d", i) {
				t.Fatalf("message %d is %q at %+v, want p1-m%d at memory:t/1 offset %d", i, m.Value, m.Position, i, i)
			}
		}
		idle(t, src)
	})

	t.Run("closed", func(t *testing.T) {
		src := openShard(t, log, shardid.Memory("t", 0), 0)
		src.Close()
		if _, err := src.Fetch(context.Background(), 1); !errors.Is(err, memory.ErrClosed) {
			t.Fatalf("Fetch after Close: %v, want ErrClosed", err)
		}
	})
}

func TestLogOpenErrors(t *testing.T) {
	log := shardsLog()
	for _, tc := range []struct {
		name  string
		shard shardid.ID
		from  int64
		want  string // in the error
	}{
		{"beyond end", shardid.Memory("t", 0), 6, "memory:t/0: range start offset 6 is outside the partition's offsets 0 to 5"},
		{"beyond end of empty", shardid.Memory("t", 1), 1, "memory:t/1: range start offset 1 is outside"},
		{"negative", shardid.Memory("t", 0), -1, "memory:t/0: range start offset -1 is outside"},
		{"no such partition", shardid.Memory("t", 3), 0, `"memory:t/3" is not a partition of log t`},
		{"other log", shardid.Memory("u", 0), 0, `"memory:u/0" is not a partition of log t`},
		{"kafka", shardid.Kafka("t", 0), 0, `"kafka:t/0" is not a partition of log t`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := log.Open(context.Background(), tc.shard, tc.from)
			if err == nil {
				src.Close()
				t.Fatalf("Open succeeded, want an error with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestLogStart(t *testing.T) {
	log := shardsLog()
	epoch := time.Unix(0, 0)
	for _, tc := range []struct {
		name  string
		shard shardid.ID
		start wire.Start
		want  int64
		err   string // in the error, instead of want
	}{
		{"default", shardid.Memory("t", 2), wire.Start{}, 0, ""},
		{"earliest", shardid.Memory("t", 2), wire.Start{Kind: "earliest"}, 0, ""},
		{"latest", shardid.Memory("t", 2), wire.Start{Kind: "latest"}, 12, ""},
		{"latest of empty", shardid.Memory("t", 1), wire.Start{Kind: "latest"}, 0, ""},
		{"offset", shardid.Memory("t", 2), wire.Start{Kind: "offset", Offset: 4}, 4, ""},
		{"offset at end", shardid.Memory("t", 2), wire.Start{Kind: "offset", Offset: 12}, 12, ""},
		{"offset beyond end", shardid.Memory("t", 2), wire.Start{Kind: "offset", Offset: 13}, 0, "memory:t/2: start offset:13 is beyond the partition's end 12"},
		{"time of the messages", shardid.Memory("t", 2), wire.Start{Kind: "time", Time: epoch}, 0, ""},
		{"time after them", shardid.Memory("t", 2), wire.Start{Kind: "time", Time: epoch.Add(time.Nanosecond)}, 12, ""},
		{"bad start", shardid.Memory("t", 2), wire.Start{Kind: "newest"}, 0, `memory:t/2: unknown start "newest"`},
		{"no such partition", shardid.Memory("t", 3), wire.Start{}, 0, `"memory:t/3" is not a partition`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := log.Start(context.Background(), tc.shard, tc.start)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Start(%s, %s): %v, want %d", tc.shard, tc.start, err, tc.want)
			case tc.err == "" && got != tc.want:
				t.Fatalf("Start(%s, %s) = %d, want %d", tc.shard, tc.start, got, tc.want)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Start(%s, %s) = %d, %v; want an error with %q", tc.shard, tc.start, got, err, tc.err)
			}
		})
	}
}

func TestShardsConformance(t *testing.T) {
	consumertest.TestShards(t, consumertest.ShardsHarness{
		Setup: func(t *testing.T, partitions int) (func(p int, values ...[]byte), consumer.Shards) {
			log := memory.NewLog("shards", partitions)
			return log.Append, log
		},
	})
}
