// Package e2e runs the real hyperplane binary against real brokers: an
// in-process NATS server with JetStream (or the one HYPERPLANE_E2E_NATS_URL
// names) and franz-go's in-process Kafka, kfake.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// binary is the hyperplane binary TestMain builds.
type binary struct{ path string }

var hyperplane binary //nolint:gochecknoglobals // built once by TestMain for every test

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hyperplane-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hyperplane.path = filepath.Join(dir, "hyperplane")
	build := exec.Command("go", "build", "-o", hyperplane.path, "../cmd/hyperplane")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build hyperplane:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running hyperplane process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	mu     sync.Mutex
	addr   string // its HTTP address, once it listens
	stderr bytes.Buffer
	done   chan error
}

// listening finds the address in the worker's "http listening" line.
var listening = regexp.MustCompile(`"msg":"http listening".*"addr":"([^"]+)"`)

// start runs hyperplane with args and an HTTP server on a port the
// system gives it, which the process logs: a port chosen here and freed
// for the process could be taken by another in between.
func start(t testing.TB, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, done: make(chan error, 1)}
	p.cmd = exec.Command(hyperplane.path, append(args, "--http.addr", "127.0.0.1:0")...)
	p.cmd.Env = append(os.Environ(), "HYPERPLANE_LOG_FORMAT=json")
	r, w := io.Pipe()
	p.cmd.Stderr = w
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.Write(sc.Bytes())
			p.stderr.WriteByte('\n')
			if m := listening.FindSubmatch(sc.Bytes()); m != nil && p.addr == "" {
				p.addr = string(m[1])
			}
			p.mu.Unlock()
		}
	}()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		w.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill() //nolint:errcheck // may have exited
		if t.Failed() {
			t.Logf("hyperplane stderr:\n%s", p.log())
		}
	})
	return p
}

// httpAddr is the process's HTTP address, or one where nothing listens
// before it serves: a request then fails as it would to a server not up
// yet.
func (p *proc) httpAddr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr == "" {
		return "127.0.0.1:0"
	}
	return p.addr
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends SIGTERM, once the process serves HTTP (so its signal
// handler is in place), and requires a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	wait.For(p.t, 30*time.Second, 50*time.Millisecond, "the process to serve /healthz", func() bool {
		resp, err := http.Get("http://" + p.httpAddr() + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("hyperplane exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		p.t.Fatal("hyperplane did not exit within 30s of SIGTERM")
	}
}

// metric reads one sample from /metrics, e.g.
// hyperplane_examples_total{result="mistake"}: NaN while the server is
// not up yet.
func (p *proc) metric(name string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.httpAddr() + "/metrics")
	if err != nil {
		return math.NaN()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		p.t.Fatal(err)
	}
	return v
}

// hasMetric reports whether /metrics has a series name: the worker's
// appear once it has resumed its model.
func (p *proc) hasMetric(name string) bool {
	resp, err := http.Get("http://" + p.httpAddr() + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` `).Match(body)
}

// ready reports /readyz.
func (p *proc) ready() bool {
	resp, err := http.Get("http://" + p.httpAddr() + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(strings.TrimSpace(yaml)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
