package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The soak: soakRate examples a second for soakDuration over a topic of
// soakPartitions partitions, the rate and length at which a worker's
// resident memory is first measured against its budget.
const (
	soakRate       = 5_000
	soakDuration   = 120 * time.Second
	soakPartitions = 3
)

// BenchmarkSoak is a worker at the defaults under a steady stream: the
// real binary learns a new model in epochs from a topic of
// soakPartitions partitions, while this process produces soakRate
// examples a second to it, round-robin, for soakDuration. kfake runs in a
// process of its own. Once every example is in the positions it reports
// the worker's peak resident memory (VmHWM, MiB), its resident memory at
// the end, and the epochs it mixed; an op fails unless the positions hold
// exactly the examples produced.
//
//	go test -run XXX -bench BenchmarkSoak -benchtime 1x -timeout 0 ./e2e/
func BenchmarkSoak(b *testing.B) {
	broker := buildBenchBroker(b)
	n := int(soakRate * soakDuration / time.Second)
	msgs, _ := epochsBenchMessages(n)
	var peak, end, epochs float64
	for range b.N {
		p, e, ep := soakOp(b, broker, msgs)
		peak, end, epochs = peak+p, end+e, epochs+ep
	}
	b.ReportMetric(peak/float64(b.N), "peak-RSS-MiB")
	b.ReportMetric(end/float64(b.N), "end-RSS-MiB")
	b.ReportMetric(epochs/float64(b.N), "epochs/op")
}

// soakOp is one op of BenchmarkSoak: a broker, a store and a worker of
// its own. It returns the worker's peak and final RSS in MiB and the
// epochs it mixed.
func soakOp(b *testing.B, brokerBin string, msgs [][]byte) (peak, end, epochs float64) {
	br := startBenchProc(b, brokerBin, []string{"-partitions", strconv.Itoa(soakPartitions), "-topics", "examples", "-outputs", "predictions"}, true)
	defer br.stop(b)
	addrs := br.firstLine(b)
	w := startDefaultWorker(b, addrs, "soak")
	defer w.stop(b)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	// Every tick produces what the rate owes since the start, so that a
	// slow tick is made up by the next.
	const tick = 10 * time.Millisecond
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	start, sent := time.Now(), 0
	for sent < len(msgs) {
		<-ticker.C
		due := min(len(msgs), int(time.Since(start).Seconds()*soakRate))
		recs := make([]*kgo.Record, 0, due-sent)
		for ; sent < due; sent++ {
			recs = append(recs, &kgo.Record{Topic: "examples", Partition: int32(sent % soakPartitions), Value: msgs[sent]})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	var last map[string]float64
	waitBench(b, []*benchProc{w}, 5*time.Minute, "the positions at every example", func() bool {
		m, err := w.metrics()
		if err != nil {
			return false
		}
		sum := sumOf(m, "hyperplane_position{")
		last = m
		if sum > float64(len(msgs)) {
			b.Fatalf("the positions hold %v examples, more than the %d produced", sum, len(msgs))
		}
		return sum == float64(len(msgs))
	})
	peak, end = procMemory(b, w.cmd.Process.Pid, "VmHWM"), procMemory(b, w.cmd.Process.Pid, "VmRSS")
	return peak, end, last["hyperplane_epoch"]
}

// procMemory is field (VmHWM, VmRSS) of process pid's /proc status, in
// MiB.
func procMemory(b *testing.B, pid int, field string) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			b.Fatalf("/proc/%d/status: %s: %v", pid, field, err)
		}
		return kb / 1024
	}
	b.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}
