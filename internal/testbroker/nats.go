// Package testbroker starts the brokers that tests run against, in
// process, one per test and stopped when it ends: a NATS server with
// JetStream (the nats-server Go package) and a Kafka cluster (franz-go's
// kfake). Both can be shut down and started again on the same address
// with the same data, for outage tests.
//
// It is for tests only: every function takes the test's testing.TB and
// fails the test on error.
package testbroker

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds how long a server may take to accept connections.
const readyTimeout = 10 * time.Second

// NATSServer is a NATS server with JetStream for one test: in-process,
// unless Standalone names one that runs already.
type NATSServer struct {
	t    testing.TB
	opts *server.Options
	srv  *server.Server // nil while shut down, and when standalone
	url  string
}

// NATSOption configures NATS.
type NATSOption func(*natsSettings)

type natsSettings struct {
	opts       server.Options
	standalone string
}

// MaxPayload sets the server's max_payload: the largest message, headers
// and data, that it takes.
func MaxPayload(bytes int32) NATSOption {
	return func(s *natsSettings) { s.opts.MaxPayload = bytes }
}

// Standalone uses the server at url, which must have JetStream, instead of
// starting one; an empty url starts one as usual. A standalone server
// outlives the test, so a test that uses one names what it creates
// uniquely, and cannot shut it down.
func Standalone(url string) NATSOption {
	return func(s *natsSettings) { s.standalone = url }
}

// NATS starts an in-process NATS server with JetStream on a free loopback
// port, with its store in a temporary directory, and shuts it down when
// the test ends.
func NATS(t testing.TB, opts ...NATSOption) *NATSServer {
	t.Helper()
	s := natsSettings{opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		NoLog:     true,
		NoSigs:    true,
	}}
	for _, o := range opts {
		o(&s)
	}
	if s.standalone != "" {
		return &NATSServer{t: t, url: s.standalone}
	}
	s.opts.StoreDir = t.TempDir() // removed after the server is shut down
	n := &NATSServer{t: t, opts: &s.opts}
	n.Start()
	t.Cleanup(n.Shutdown)
	return n
}

// URL is the server's client URL. It stays the same across Shutdown and
// Start.
func (n *NATSServer) URL() string { return n.url }

// Start starts the server again after Shutdown, on the same port and with
// the same store, so streams and their messages survive. Clients that
// reconnect find it there.
func (n *NATSServer) Start() {
	n.t.Helper()
	if n.opts == nil {
		n.t.Fatal("testbroker: a standalone NATS server cannot be started")
	}
	srv, err := server.NewServer(n.opts.Clone())
	if err != nil {
		n.t.Fatalf("nats server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		n.t.Fatalf("nats server not ready within %v", readyTimeout)
	}
	n.srv = srv
	n.opts.Port = srv.Addr().(*net.TCPAddr).Port
	n.url = srv.ClientURL()
}

// SetMaxPayload sets the max_payload the server has from its next Start,
// as a server restarted with a changed configuration.
func (n *NATSServer) SetMaxPayload(bytes int32) {
	n.t.Helper()
	if n.opts == nil {
		n.t.Fatal("testbroker: a standalone NATS server cannot be configured")
	}
	n.opts.MaxPayload = bytes
}

// Shutdown stops the server and waits until it has. Clients see it go
// away, as in an outage; Start brings it back. Shutting down a server
// that is down does nothing.
func (n *NATSServer) Shutdown() {
	n.t.Helper()
	if n.opts == nil {
		n.t.Fatal("testbroker: a standalone NATS server cannot be shut down")
	}
	if n.srv == nil {
		return
	}
	n.srv.Shutdown()
	n.srv.WaitForShutdown()
	n.srv = nil
}

// Conn is a plain client connection to the server, closed when t ends. It
// reconnects forever, quickly, so that it outlives a Shutdown and Start.
// Tests of the project's own connection code use that code instead.
func (n *NATSServer) Conn(t testing.TB) *natsgo.Conn {
	t.Helper()
	nc, err := natsgo.Connect(n.url, natsgo.Name(t.Name()), natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to nats at %s: %v", n.url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream is a JetStream context on a new Conn.
func (n *NATSServer) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.Conn(t))
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// CreateStream creates a stream through js.
func CreateStream(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	return s
}

// ReadStream returns the data of every message stream holds when it is
// called, in sequence order.
func ReadStream(t testing.TB, ctx context.Context, js jetstream.JetStream, stream string) [][]byte {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	n := int(info.State.Msgs)
	if n == 0 {
		return nil
	}
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	var out [][]byte
	for len(out) < n {
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("read stream %s: %v", stream, err)
		}
		for m := range batch.Messages() {
			out = append(out, m.Data())
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("read stream %s: %v", stream, err)
		}
	}
	return out
}
