package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// TestLagOfEveryPartition: a worker that learns a topic of four
// partitions, in epochs or in partition scope, exports hyperplane_lag
// for each partition (docs/metrics.md), as a worker of one partition
// does, and each comes to 0 once the backlog is learned.
func TestLagOfEveryPartition(t *testing.T) {
	t.Parallel()
	const partitions, n = 4, 2000
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", fmt.Sprint(n), "-seed", "41"))), "\n")
	for _, scope := range []string{"global", "partition"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			c := testbroker.Kafka(t)
			c.CreateTopic(t, "lagged", partitions)
			produce(t, c, "lagged", partitions, lines)
			w := startRun(t, []string{"run", "--model.name", "lagged", "--model.scope", scope,
				"--source.kind", "kafka", "--source.topics", "lagged", "--kafka.brokers", c.ListenAddrs()[0],
				"--snapshot.url", "file://" + filepath.Join(t.TempDir(), "store") + "?create_dir=1",
				"--snapshot.interval", "100ms", "--model.mixing.epoch_examples", "100",
				"--http.addr", "127.0.0.1:0", "--log.format", "json"})
			var addr string
			w.wait(t, time.Minute, "the http listening line", func() bool { addr = listenedAddr(w.stderr); return addr != "" })

			re := regexp.MustCompile(`(?m)^hyperplane_lag\{source="kafka:lagged/(\d+)"\} (\S+)$`)
			var lag map[int]float64
			wait.For(t, 2*time.Minute, 50*time.Millisecond, "hyperplane_lag at 0 for every partition", func() bool {
				select {
				case <-w.done:
					t.Fatalf("run stopped: %v\n%s", w.err, w.log())
				default:
				}
				resp, err := http.Get("http://" + addr + "/metrics")
				if err != nil {
					return false // not listening yet
				}
				lag = map[int]float64{}
				for _, m := range re.FindAllStringSubmatch(string(readReply(t, resp, http.StatusOK)), -1) {
					p, _ := strconv.Atoi(m[1])
					v, err := strconv.ParseFloat(m[2], 64)
					if err != nil {
						t.Fatalf("hyperplane_lag of partition %d: %v", p, err)
					}
					lag[p] = v
				}
				if len(lag) < partitions {
					return false
				}
				for _, v := range lag {
					if v != 0 {
						return false
					}
				}
				return true
			})
			if len(lag) != partitions {
				t.Errorf("hyperplane_lag has series for partitions %v, want 0 to %d", lag, partitions-1)
			}
			w.stop(t)
		})
	}
}
