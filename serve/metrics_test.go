package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetrics counts requests of each outcome over both interfaces: the
// requests counter has each under its interface and outcome, and the
// latency histogram one observation per request.
func TestMetrics(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	live := liveOf(m)
	reg := prometheus.NewRegistry()
	met := serve.NewMetrics(reg)
	srv := serve.New(serve.Options{Model: modelName, MaxBytes: 256}, cfg, live, nil, met)
	hs := httpServer(t, srv)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)
	good := []byte(`{"features":{"f1":1}}`)
	bad := []byte(`{"features":{"x":[1]}}`)
	large := []byte(strings.Repeat(" ", 300) + string(good))

	for range 3 {
		post(t, hs.URL, "", good).ok(t, "application/json", m.Version())
	}
	post(t, hs.URL, "", bad).refused(t, 400)
	post(t, hs.URL, "", []byte("{")).refused(t, 400)
	post(t, hs.URL, "", large).refused(t, 413)
	post(t, hs.URL+"?generation=1", "", good).refused(t, 404)
	live.view.Store(nil)
	post(t, hs.URL, "", good).refused(t, 503)
	live.view.Store(m.View())

	for range 2 {
		if r := request(t, nc, good); r.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("error reply %s", r.Header.Get(micro.ErrorHeader))
		}
	}
	if r := request(t, nc, bad); r.Header.Get(micro.ErrorCodeHeader) != "400" {
		t.Fatalf("reply %q, want an error", r.Data)
	}

	want := map[[2]string]float64{
		{"http", "ok"}:          3,
		{"http", "bad_request"}: 2,
		{"http", "too_large"}:   1,
		{"http", "not_found"}:   1,
		{"http", "unavailable"}: 1,
		{"nats", "ok"}:          2,
		{"nats", "bad_request"}: 1,
	}
	// A NATS request is counted just after its reply is sent.
	wait.For(t, time.Minute, time.Millisecond, "the NATS bad request counted", func() bool {
		return testutil.ToFloat64(met.Requests.WithLabelValues("nats", "bad_request")) == 1
	})
	for k, n := range want {
		if got := testutil.ToFloat64(met.Requests.WithLabelValues(k[0], k[1])); got != n {
			t.Errorf("requests{interface=%q,outcome=%q} = %v, want %v", k[0], k[1], got, n)
		}
	}
	if got := testutil.CollectAndCount(met.Requests); got != len(want) {
		t.Errorf("%d series of requests, want %d", got, len(want))
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	observed := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "hyperplane_serve_request_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "interface" {
					observed[l.GetValue()] = mt.GetHistogram().GetSampleCount()
				}
			}
			if mt.GetHistogram().GetSampleSum() <= 0 {
				t.Errorf("latency of %v sums to %v", mt.GetLabel(), mt.GetHistogram().GetSampleSum())
			}
		}
	}
	if observed["http"] != 8 || observed["nats"] != 3 {
		t.Errorf("latency observations %v, want http 8, nats 3", observed)
	}
}

// TestMetricsInFlight counts a request refused for the in-flight limit as
// unavailable.
func TestMetricsInFlight(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	body := []byte(`{"features":{"f1":1}}`)
	states, wants := storedGenerations(t, cfg, 1, [][]byte{body})
	gl := newGatedLoad(states, 1)
	met := serve.NewMetrics(nil)
	srv := serve.New(serve.Options{Model: modelName, MaxInFlight: 1, Timeout: time.Minute}, cfg, liveOf(m), gl.load, met)
	hs := httpServer(t, srv)
	held := holdToken(t, hs, gl, body)
	post(t, hs.URL, "", body).refused(t, 503, "serve.max_in_flight")
	close(gl.gates[1])
	(<-held).ok(t, "application/json", wants[0][0].version)
	if got := testutil.ToFloat64(met.Requests.WithLabelValues("http", "unavailable")); got != 1 {
		t.Errorf("unavailable = %v, want 1", got)
	}
	if got := testutil.ToFloat64(met.Requests.WithLabelValues("http", "ok")); got != 1 {
		t.Errorf("ok = %v, want 1: the request that held the token", got)
	}
}

// TestMetricsClientLeft has the client of a request for a generation
// being loaded go away: the request is counted as cancelled, not as an
// error of the server's.
func TestMetricsClientLeft(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))[:1]
	states, _ := storedGenerations(t, cfg, 1, raws)
	gl := newGatedLoad(states, 1)
	met := serve.NewMetrics(nil)
	srv := serve.New(serve.Options{Model: modelName, Timeout: time.Minute}, cfg, liveOf(trained(t, cfg, 100)), gl.load, met)
	ctx, leave := context.WithCancel(context.Background())
	left := make(chan reply, 1)
	go func() { left <- serveDirect(ctx, srv, "1", raws[0]) }()
	<-gl.started
	leave()
	<-left
	if got := testutil.ToFloat64(met.Requests.WithLabelValues("http", "cancelled")); got != 1 {
		t.Errorf("requests{outcome=\"cancelled\"} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(met.Requests.WithLabelValues("http", "error")); got != 0 {
		t.Errorf("requests{outcome=\"error\"} = %v, want 0", got)
	}
}

// TestMetricsReplyNotRead: a reply the client does not read within
// serve.timeout is counted as a timeout, not as an answer.
func TestMetricsReplyNotRead(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	met := serve.NewMetrics(prometheus.NewRegistry())
	const examples = 100000 // a reply of some 10 MB, more than the sockets buffer
	srv := serve.New(serve.Options{Model: modelName, MaxExamples: examples, Timeout: time.Second}, cfg, liveOf(m), nil, met)
	mux := http.NewServeMux()
	srv.Register(mux)
	done := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(rw, r)
		done <- struct{}{}
	}))
	t.Cleanup(hs.Close)
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("{}\n"), examples)
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n", serve.PredictPath, len(body))
	if _, err := conn.Write(append([]byte(head), body...)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute): // a guard: the write gives up after a second
		t.Fatal("the server still writes the reply nobody reads")
	}
	for outcome, want := range map[string]float64{"ok": 0, "timeout": 1} {
		if got := testutil.ToFloat64(met.Requests.WithLabelValues("http", outcome)); got != want {
			t.Errorf("outcome %s counted %v times, want %v", outcome, got, want)
		}
	}
}
