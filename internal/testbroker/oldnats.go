package testbroker

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// OldNATSServer is a listener that speaks as much of the NATS client
// protocol as a client's connection needs, announcing a server version of
// the test's choosing: it sends INFO with that version, answers PING with
// PONG, and records every line it receives. It stands in for a
// nats-server release older than the nats-server package's (whose version
// is a constant), and serves one connection.
type OldNATSServer struct {
	url   string
	mu    sync.Mutex
	lines []string
	done  chan struct{} // closed when the connection ends
}

// OldNATS starts an OldNATSServer announcing version on a free loopback
// port, closed when the test ends.
func OldNATS(t testing.TB, version string) *OldNATSServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	s := &OldNATSServer{url: fmt.Sprintf("nats://127.0.0.1:%d", port), done: make(chan struct{})}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			close(s.done)
			return
		}
		defer conn.Close()
		defer close(s.done)
		fmt.Fprintf(conn, "INFO {\"server_id\":\"OLD\",\"server_name\":\"OLD\",\"version\":%q,\"proto\":1,\"go\":\"go1.19.8\",\"host\":\"127.0.0.1\",\"port\":%d,\"headers\":true,\"max_payload\":1048576,\"jetstream\":true}\r\n", version, port)
		sc := bufio.NewScanner(conn)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.lines = append(s.lines, line)
			s.mu.Unlock()
			if line == "PING" {
				fmt.Fprint(conn, "PONG\r\n")
			}
		}
	}()
	return s
}

// URL is the server's client URL.
func (s *OldNATSServer) URL() string { return s.url }

// Received waits until the client has closed its connection and returns
// the lines it sent.
func (s *OldNATSServer) Received(t testing.TB) []string {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatal("the client did not close its connection to the old server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines
}
