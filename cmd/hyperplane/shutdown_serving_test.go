package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// TestRequestsAnsweredWhileStopping: after a signal, while the worker
// stops (here held by a store that refuses its last snapshot), the HTTP
// server still answers: /readyz says the worker is stopping, and a
// prediction request sent then, as one sent before the load balancer
// heard of the signal is, is answered. It closes once the worker has
// stopped.
func TestRequestsAnsweredWhileStopping(t *testing.T) {
	dir := t.TempDir()
	lines := strings.Split(strings.TrimSpace(readFile(t, genFile(t, dir, "ex.jsonl", "-examples", "200", "-seed", "5"))), "\n")
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "served", 1)
	produce(t, c, "served", 1, lines)
	srv, heal := s3test.StartRefusingWrites(t)
	r := startRun(t, []string{"run", "--model.name", "m",
		"--source.kind", "kafka", "--source.topics", "served", "--kafka.brokers", c.ListenAddrs()[0],
		"--http.addr", "127.0.0.1:0", "--log.format", "json", "--shutdown.timeout", "2m",
		"--snapshot.url", srv.URL(t), "--snapshot.interval", "100ms"})
	var addr string
	r.wait(t, time.Minute, "the http listening line", func() bool { addr = listenedAddr(r.stderr); return addr != "" })
	// The worker is learning, and its snapshots are refused.
	r.wait(t, time.Minute, "a refused snapshot", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		body := string(readReply(t, resp, resp.StatusCode))
		return strings.Contains(body, "snapshots: ")
	})
	r.cancel()
	wait.For(t, time.Minute, 10*time.Millisecond, "/readyz saying the worker stops", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("/readyz while the worker stops: %v\n%s", err, r.log())
		}
		body := string(readReply(t, resp, http.StatusServiceUnavailable))
		return strings.Contains(body, "shutdown: ")
	})
	resp, err := http.Post("http://"+addr+"/v1/predict", "application/json", strings.NewReader(`{"features":{"a":1}}`))
	if err != nil {
		t.Fatalf("a prediction request while the worker stops: %v", err)
	}
	if body := readReply(t, resp, http.StatusOK); !strings.Contains(string(body), `"score"`) {
		t.Fatalf("a prediction request while the worker stops: %s", body)
	}
	heal()
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("run did not stop a minute after the store took writes again:\n%s", r.log())
	}
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.log())
	}
	if _, err := http.Get("http://" + addr + "/readyz"); err == nil {
		t.Fatal("the HTTP server still answers after the worker stopped")
	}
}
