//go:build linux

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// BenchmarkScaleOutProcesses runs `hyperplane run` as one process and as
// two (one consumer group, each owning two of the four partitions), with
// kfake in a process of its own (testdata/kfakebroker), over the stream of
// BenchmarkEpochs in a topic of four partitions, and measures how long the
// workers take to learn all of it: from the moment the examples are there
// to the first generation in the store (file://) that includes every
// partition's end. Every example's prediction is published to a topic on
// the same broker. The sub-benchmarks are model.mixing.epoch_examples
// (epoch, with model.mixing.growth 0: every epoch that size),
// snapshot.every (epoch times the partitions writes about every epoch's
// mixed model, 400000 only the last) and the number of worker processes.
//
// Each op has a broker and a store of its own. A first example in each
// partition is learned by a worker alone, which writes generation 1 and
// stops; then the workers start from it, on a topic with nothing new, and
// are let settle until the group is stable with every member assigned.
// Then they are stopped (SIGSTOP), the examples are produced, and they are
// continued (SIGCONT) with the timer started: the window holds neither the
// processes' start, nor the group's join and rebalance, nor the producer.
// The final model must be the same to the bit whatever the number of
// workers.
//
// Besides examples/s it reports, over the window: the mean time per epoch
// at the barrier and mixing, from the workers' /metrics (the
// hyperplane_epoch_barrier_seconds and hyperplane_epoch_mix_seconds
// histograms, over every worker's epochs; a worker overtaken at the
// barrier observes neither); how often a worker was overtaken (its log's
// "overtaken: continuing from a newer generation"); and the CPU time the
// workers, the broker, this process and the whole machine used, from
// /proc (Linux).
//
//	go test -run XXX -bench BenchmarkScaleOutProcesses -benchtime 1x -count 6 ./e2e/
func BenchmarkScaleOutProcesses(b *testing.B) {
	broker := buildBenchBroker(b)
	msgs, size := epochsBenchMessages(epochsBenchN)
	b.Logf("%d messages of %d bytes on average, in %d partitions", len(msgs), size, epochsBenchPartitions)
	// The final model's, by epoch_examples and snapshot.every: both decide
	// where epochs are cut (snapshots bound the epoch), so only the number
	// of workers may not change it.
	digests := map[[2]int][32]byte{}
	for _, c := range []struct{ epoch, every int }{{10000, len(msgs)}, {10000, 10000 * epochsBenchPartitions}, {100000, 100000 * epochsBenchPartitions}} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("epoch=%d/every=%d/workers=%d", c.epoch, c.every, workers), func(b *testing.B) {
				var st procStats
				for i := range b.N {
					b.StopTimer()
					benchProcessesOp(b, broker, msgs, c.epoch, c.every, workers, i, &st, digests)
				}
				b.ReportMetric(float64(b.N*(len(msgs)-epochsBenchPartitions))/b.Elapsed().Seconds(), "examples/s")
				st.report(b)
			})
		}
	}
}

// procStats sums what the ops of BenchmarkScaleOutProcesses measured
// besides time.
type procStats struct {
	barrier, mix           float64  // seconds, over every worker
	barrierCount, mixCount float64  // epochs, over every worker
	workerCPU, brokerCPU   float64  // seconds
	cpu                    cpuClock // this process's and the machine's
	epochs                 float64  // epochs in the window
	overtaken              float64  // times a worker continued from another's generation
	ops                    int
}

func (s *procStats) report(b *testing.B) {
	n := float64(s.ops)
	b.ReportMetric(s.epochs/n, "epochs/op")
	if s.barrierCount > 0 {
		b.ReportMetric(1000*s.barrier/s.barrierCount, "barrier-ms/epoch")
	}
	if s.mixCount > 0 {
		b.ReportMetric(1000*s.mix/s.mixCount, "mix-ms/epoch")
	}
	b.ReportMetric(s.overtaken/n, "overtaken/op")
	b.ReportMetric(s.workerCPU/n, "worker-cpu-s/op")
	b.ReportMetric(s.brokerCPU/n, "broker-cpu-s/op")
	b.ReportMetric(s.cpu.self/n, "bench-cpu-s/op")
	b.ReportMetric(s.cpu.machine/n, "machine-cpu-s/op")
}

// benchProcessesOp is one op of BenchmarkScaleOutProcesses, with a broker
// and a store of its own.
func benchProcessesOp(b *testing.B, brokerBin string, msgs [][]byte, epoch, every, workers, op int, st *procStats, digests map[[2]int][32]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	br := startBenchProc(b, brokerBin, []string{"-partitions", strconv.Itoa(epochsBenchPartitions), "-topics", "examples", "-outputs", "predictions"}, true)
	defer br.stop(b)
	addrs := br.firstLine(b)
	store := "file://" + filepath.Join(dir, "store") + "?create_dir=1"
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
model:
  name: bench
  mixing:
    epoch_examples: %d
    growth: 0
kafka:
  brokers: [%s]
source:
  kind: kafka
  topics: [examples]
  group: bench
outputs:
  predictions: kafka:predictions
snapshot:
  url: %s
  every: %d
  interval: 0s
  keep: 3
`, epoch, addrs, store, every)), 0o644); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(addrs, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	s, err := snapshot.OpenStore(ctx, store)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	produce := func(msgs [][]byte) {
		recs := make([]*kgo.Record, len(msgs))
		for i, m := range msgs {
			recs[i] = &kgo.Record{Topic: "examples", Partition: int32(i % epochsBenchPartitions), Value: m}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	// covered waits for a generation newer than seen whose positions are
	// at every partition's end, end, and returns it.
	var seen uint64
	covered := func(ws []*benchProc, end int64, what string) *snapshot.Snapshot {
		var snap *snapshot.Snapshot
		waitBench(b, ws, 5*time.Minute, what, func() bool {
			gens, err := s.Generations(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if len(gens) == 0 || gens[len(gens)-1] == seen {
				return false
			}
			seen = gens[len(gens)-1]
			snap, err = s.Load(ctx, "bench", seen)
			if errors.Is(err, snapshot.ErrNotFound) {
				return false // retained away meanwhile
			}
			if err != nil {
				b.Fatal(err)
			}
			for p := range epochsBenchPartitions {
				if snap.Positions[fmt.Sprintf("kafka:examples/%d", p)] != end {
					return false
				}
			}
			return true
		})
		return snap
	}

	// Settle. First a worker learns a first example of each partition
	// and writes it as generation 1 (snapshot.every 1), then stops: a
	// worker that starts on a store with an epoch log and no generation
	// refuses to, and two starting together on an empty store race for
	// that. Then the workers start from generation 1, and the group is
	// let settle until it is stable with every worker assigned. With no
	// new examples, no epoch is cut meanwhile.
	produce(msgs[:epochsBenchPartitions])
	addr := freeAddr(b)
	warm := startBenchProc(b, hyperplane.path, []string{"run", "--config", cfg, "--snapshot.writer", "warm-up", "--snapshot.every", "1", "--http.addr", addr}, false)
	defer warm.stop(b)
	first := covered([]*benchProc{warm}, 1, "the first generation")
	warm.stop(b)
	var ws []*benchProc
	for i := range workers {
		addr := freeAddr(b)
		w := startBenchProc(b, hyperplane.path, []string{"run", "--config", cfg, "--snapshot.writer", fmt.Sprintf("w%d-%d", op, i), "--http.addr", addr}, false)
		w.addr = addr
		defer w.stop(b)
		ws = append(ws, w)
	}
	waitBench(b, ws, 2*time.Minute, "the workers to settle", func() bool {
		if !groupStable(ctx, cl, "bench", workers) {
			return false
		}
		for _, w := range ws {
			if !w.ready() {
				return false
			}
		}
		return true
	})
	waitBench(b, ws, 2*time.Minute, "every worker to begin the group's generation", func() bool { return begun(ws) })
	before := make([]map[string]float64, len(ws))
	for i, w := range ws {
		if before[i], err = w.metrics(); err != nil {
			b.Fatal(err)
		}
	}
	for _, w := range ws {
		w.signal(b, syscall.SIGSTOP)
	}
	// The warm-up's examples are the stream's first: the labeled examples
	// in all come to len(msgs), a multiple of every snapshot.every here,
	// so the last generation that falls due includes every example.
	produce(msgs[epochsBenchPartitions:])
	cpu0, clock0 := cpuSeconds(b, ws, br), readCPU(b)
	b.StartTimer()
	for _, w := range ws {
		w.signal(b, syscall.SIGCONT)
	}
	last := covered(ws, int64(len(msgs)/epochsBenchPartitions), "a generation that includes every example")
	b.StopTimer()
	cpu1, clock1 := cpuSeconds(b, ws, br), readCPU(b)
	st.workerCPU += cpu1[0] - cpu0[0]
	st.brokerCPU += cpu1[1] - cpu0[1]
	st.cpu.self += clock1.self - clock0.self
	st.cpu.machine += clock1.machine - clock0.machine
	// However many workers learned it, the model is the same to the bit.
	if d, ok := digests[[2]int{epoch, every}]; !ok {
		digests[[2]int{epoch, every}] = last.State.Digest()
	} else if d != last.State.Digest() {
		b.Fatalf("%d workers learned state_sha256 %x, an earlier op %x", workers, last.State.Digest(), d)
	}
	for i, w := range ws {
		after, err := w.metrics()
		if err != nil {
			b.Fatal(err)
		}
		d := func(name string) float64 { return after[name] - before[i][name] }
		st.barrier += d("hyperplane_epoch_barrier_seconds_sum")
		st.barrierCount += d("hyperplane_epoch_barrier_seconds_count")
		st.mix += d("hyperplane_epoch_mix_seconds_sum")
		st.mixCount += d("hyperplane_epoch_mix_seconds_count")
		st.overtaken += float64(strings.Count(w.log(), "overtaken: continuing"))
	}
	st.epochs += float64(last.Epoch - first.Epoch)
	st.ops++
}

// begun reports whether every worker has begun the same generation of
// the consumer group, owning some partitions, and not ended it, as the
// workers' logs say.
func begun(ws []*benchProc) bool {
	type line struct {
		Msg        string   `json:"msg"`
		Generation int      `json:"generation"`
		Owned      []string `json:"owned"`
	}
	gen := -1
	for _, w := range ws {
		var cur line
		active := false
		for _, text := range strings.Split(w.log(), "\n") {
			var l line
			if json.Unmarshal([]byte(text), &l) != nil {
				continue
			}
			switch l.Msg {
			case "kafka consumer group generation":
				cur, active = l, true
			case "kafka consumer group generation ended":
				active = false
			}
		}
		if !active || len(cur.Owned) == 0 || (gen >= 0 && cur.Generation != gen) {
			return false
		}
		gen = cur.Generation
	}
	return true
}

// groupStable reports whether the consumer group is stable with members
// members, each assigned some partitions.
func groupStable(ctx context.Context, cl *kgo.Client, group string, members int) bool {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 {
		return false
	}
	g := resp.Groups[0]
	if g.State != "Stable" || len(g.Members) != members {
		return false
	}
	for _, m := range g.Members {
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil || len(a.Topics) == 0 {
			return false
		}
	}
	return true
}

// cpuSeconds is the CPU time (user and system) the workers have used, in
// total, and the broker's, from /proc/<pid>/stat.
func cpuSeconds(b *testing.B, workers []*benchProc, broker *benchProc) [2]float64 {
	var cpu [2]float64
	for _, w := range workers {
		cpu[0] += w.cpu(b)
	}
	cpu[1] = broker.cpu(b)
	return cpu
}

// benchProc is a process a benchmark runs: the hyperplane binary or the
// broker.
type benchProc struct {
	cmd    *exec.Cmd
	addr   string // its HTTP address, for a worker
	stdin  io.WriteCloser
	lines  chan string // the broker's stdout
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{} // closed once it has exited, with err
	err    error
	once   sync.Once
}

// startBenchProc starts path with args; broker says it is the broker,
// which prints its address on stdout and stops when its stdin closes.
func startBenchProc(b *testing.B, path string, args []string, broker bool) *benchProc {
	b.Helper()
	p := &benchProc{cmd: exec.Command(path, args...), done: make(chan struct{}), lines: make(chan string, 1)}
	p.cmd.Env = append(os.Environ(), "HYPERPLANE_LOG_FORMAT=json")
	if broker {
		p.cmd.Env = append(p.cmd.Env, "GODEBUG=madvdontneed=0")
	}
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	var stdout io.ReadCloser
	if broker {
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			b.Fatal(err)
		}
		if stdout, err = p.cmd.StdoutPipe(); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	if stdout != nil {
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				select {
				case p.lines <- sc.Text():
				default:
				}
			}
			io.Copy(io.Discard, stdout) //nolint:errcheck // drained until the process exits
		}()
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	return p
}

// firstLine is the first line the process printed.
func (p *benchProc) firstLine(b *testing.B) string {
	b.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-p.done:
		b.Fatalf("%s exited (%v):\n%s", p.cmd.Path, p.err, p.log())
	case <-time.After(30 * time.Second):
		b.Fatalf("%s printed nothing in 30s:\n%s", p.cmd.Path, p.log())
	}
	return ""
}

func (p *benchProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *benchProc) signal(b *testing.B, sig syscall.Signal) {
	b.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		b.Fatal(err)
	}
	if sig == syscall.SIGSTOP {
		// It takes effect asynchronously: wait until the process is
		// stopped, so that nothing it asked before sees the examples.
		wait.For(b, 10*time.Second, time.Millisecond, p.cmd.Path+" to stop", func() bool { return p.state(b) == 'T' })
	}
}

// ready reports the worker's /readyz.
func (p *benchProc) ready() bool {
	resp, err := http.Get("http://" + p.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stat is the fields of /proc/<pid>/stat after the command name.
func (p *benchProc) stat(b *testing.B) []string {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	i := bytes.LastIndexByte(raw, ')')
	return strings.Fields(string(raw[i+1:]))
}

func (p *benchProc) state(b *testing.B) byte { return p.stat(b)[0][0] }

// cpu is the CPU time, user and system, the process has used so far, in
// seconds (at Linux's USER_HZ of 100).
func (p *benchProc) cpu(b *testing.B) float64 {
	f := p.stat(b)
	// utime and stime are fields 14 and 15 of stat, 12 and 13 here.
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		b.Fatal(err)
	}
	return (utime + stime) / 100
}

// metrics scrapes the worker's /metrics: each sample, by its name with
// its labels.
func (p *benchProc) metrics() (map[string]float64, error) {
	resp, err := pollClient.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// pollClient reads the workers' metrics uncompressed: a benchmark polls
// them every few milliseconds, far more often than a scraper, and the
// worker's cost of compressing each page would be counted in its time.
var pollClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// stop ends the process: SIGTERM for a worker, the end of stdin for the
// broker; SIGKILL if it is still there after 30 s.
func (p *benchProc) stop(b *testing.B) {
	p.once.Do(func() {
		if p.stdin != nil {
			p.stdin.Close()
		} else {
			p.cmd.Process.Signal(syscall.SIGCONT) //nolint:errcheck // it may be stopped, or gone
			p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may be gone
		}
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill() //nolint:errcheck // it may be gone
			<-p.done
			b.Errorf("%s did not stop within 30s:\n%s", p.cmd.Path, p.log())
		}
	})
}

// waitBench polls cond until it holds, failing if the time is up or a
// worker exits.
func waitBench(b *testing.B, workers []*benchProc, d time.Duration, what string, cond func() bool) {
	b.Helper()
	waited := false
	defer func() {
		if !waited {
			b.Logf("the first worker's log:\n%s", workers[0].log())
		}
	}()
	wait.For(b, d, 25*time.Millisecond, what, func() bool {
		if cond() {
			return true
		}
		for _, w := range workers {
			select {
			case <-w.done:
				b.Fatalf("a worker exited (%v) while waiting for %s:\n%s", w.err, what, w.log())
			default:
			}
		}
		return false
	})
	waited = true
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// buildBenchBroker builds the kfake broker that the benchmarks run in a
// process of their own, and skips b without the hyperplane binary.
func buildBenchBroker(b *testing.B) string {
	b.Helper()
	if hyperplane.path == "" {
		b.Skip("no hyperplane binary (TestMain builds it)")
	}
	broker := filepath.Join(b.TempDir(), "kfakebroker")
	build := exec.Command("go", "build", "-o", broker, "./testdata/kfakebroker")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the broker: %v\n%s", err, out)
	}
	return broker
}
