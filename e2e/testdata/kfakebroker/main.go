// Command kfakebroker runs kfake, franz-go's in-memory Kafka, as a process
// of its own, for e2e's BenchmarkScaleOutProcesses: there the broker is
// neither the benchmark's process nor a worker's. It seeds the topics,
// prints the addresses it listens on, comma-separated, as one line on
// stdout, and runs until its stdin closes (so it dies with the process
// that started it) or it receives SIGTERM or SIGINT.
//
//	go run ./e2e/testdata/kfakebroker -partitions 4 -topics examples -outputs predictions
//
// It lives under testdata so that `go test ./...` and `go vet ./...` skip
// it; the benchmark builds it with `go build`.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	partitions := flag.Int("partitions", 4, "partitions of each topic -topics names")
	topics := flag.String("topics", "examples", "topics of -partitions partitions, comma-separated")
	outputs := flag.String("outputs", "predictions", "topics of one partition, comma-separated")
	flag.Parse()
	// Segments of 16 MiB: kfake keeps a segment in memory as one slice
	// that doubles as it grows, and copies it whole, in the loop that
	// serves every request, each time it does; at the default of 100 MiB
	// a topic that takes a benchmark's outputs stalled every reader for
	// up to 0.6 s at each doubling past 32 MiB. A broker appends to a
	// file and copies nothing.
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(16 << 20)})}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	if *outputs != "" {
		opts = append(opts, kfake.SeedTopics(1, strings.Split(*outputs, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfakebroker:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println(strings.Join(c.ListenAddrs(), ","))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin) //nolint:errcheck // any end of stdin stops the broker
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
}
