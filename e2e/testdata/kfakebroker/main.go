// Command kfakebroker runs kfake, franz-go's in-memory Kafka, as a process
// of its own, for e2e's benchmarks of the real binary
// (BenchmarkScaleOutProcesses, BenchmarkNewModel and its kin): there the
// broker is neither the benchmark's process nor a worker's. It seeds the topics,
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
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sys/unix"
)

func main() {
	partitions := flag.Int("partitions", 4, "partitions of each topic -topics names")
	topics := flag.String("topics", "examples", "topics of -partitions partitions, comma-separated")
	outputs := flag.String("outputs", "predictions", "topics of one partition, comma-separated")
	prefault := flag.Int("prefault", 0, "MiB of memory to touch before serving, for the heap to grow into without faulting (run with GODEBUG=madvdontneed=0, so that the runtime keeps them)")
	flag.Parse()
	touch(*prefault << 20)
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

// touch allocates n bytes, writes to every page of them and lets them go:
// kfake keeps every record in its heap, and each step of a heap that grows
// into fresh memory faults its pages in, tens of thousands of faults in a
// loop that serves every request; touched once at start, the pages are
// the heap's to reuse.
func touch(n int) {
	if n <= 0 {
		return
	}
	b := make([]byte, n)
	// In pages of 2 MiB where the kernel allows it (transparent huge
	// pages in madvise mode): a fault a page is slow on virtual machines.
	unix.Madvise(b, unix.MADV_HUGEPAGE) //nolint:errcheck // pages of 4 KiB do as well, more slowly
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	runtime.KeepAlive(b)
	runtime.GC()
}
