package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// freezingProxy forwards TCP to a server until freeze, from when it
// forwards nothing more and holds the connections open: a server that
// stopped answering, not one that went away.
type freezingProxy struct {
	ln     net.Listener
	frozen chan struct{}
	once   sync.Once
}

func startFreezingProxy(t *testing.T, upstream string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, frozen: make(chan struct{})}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-p.frozen:
				return // hold both ends open, forward nothing
			default:
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, u)
			mu.Unlock()
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
	return p
}

func (p *freezingProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *freezingProxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

// TestEpochsShutdownWithinTimeoutOnAFrozenServer: a worker learning a
// partitioned stream in epochs, whose NATS server stops answering, stops
// within shutdown.timeout of the signal. Its readers were closed one
// after the other, each waiting up to 2 s to delete its consumer on the
// server: 8 s for 4 partitions, whatever shutdown.timeout said.
func TestEpochsShutdownWithinTimeoutOnAFrozenServer(t *testing.T) {
	ns := testbroker.NATS(t)
	js := ns.JetStream(t)
	cfg := natsio.PartitionedStreamConfig("EX", "ex.*", 4)
	cfg.Storage = jetstream.MemoryStorage
	testbroker.CreateStream(t, js, cfg)
	if _, stderr, err := runCmd(t, "", "gen", "-examples", "400", "-format", "msgpack", "-to", "jetstream:ex.*", "-nats-url", ns.URL()); err != nil {
		t.Fatalf("gen: %v\n%s", err, stderr)
	}
	proxy := startFreezingProxy(t, strings.TrimPrefix(ns.URL(), "nats://"))
	dir := t.TempDir()
	const timeout = time.Second
	r := startRun(t, []string{"run", "--model.name", "frozen", "--nats.url", proxy.url(),
		"--source.kind", "jetstream", "--source.stream", "EX", "--source.subject", "ex.*", "--source.stream_partitions", "4",
		"--snapshot.url", "file://" + dir, "--snapshot.every", "1", "--shutdown.timeout", timeout.String(), "--http.addr", ""})
	store := storetest.OpenStore(t, "file://"+dir)
	r.wait(t, time.Minute, "a generation of all 400 examples", func() bool {
		snap, err := store.Latest(context.Background(), "frozen", nil)
		return err == nil && snap != nil && snap.State.Examples == 400
	})
	proxy.freeze()
	start := time.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("run did not stop in a minute:\n%s", r.log())
	}
	// The signal's timeout, and room for the load of a shared machine;
	// the readers closed one after the other took 8 s.
	if took := time.Since(start); took > timeout+2*time.Second {
		t.Fatalf("run stopped %v after the signal, with shutdown.timeout %v:\n%s", took, timeout, r.log())
	}
}
