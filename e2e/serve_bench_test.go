package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/serve"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

// serveClients is how many clients the load generator runs at once, each
// with a connection of its own (HTTP keep-alive; NATS, a connection per
// client).
const serveClients = 8

// servePaced are the total request rates, per second, of the paced loads.
var servePaced = []int{1000, 2000, 4000, 8000} //nolint:gochecknoglobals // the benchmark's table

// serveLoad is one load on the serving interfaces while the worker learns.
type serveLoad struct {
	// iface is "" for no server and no views, "idle" for views and an
	// HTTP server that no one asks, "http" or "nats" for requests.
	iface string
	rate  int // requests/s over all clients; 0 saturates
}

func (l serveLoad) name() string {
	switch {
	case l.iface == "":
		return "load=none"
	case l.iface == "idle":
		return "load=idle"
	case l.rate == 0:
		return "load=" + l.iface + "-saturating"
	}
	return fmt.Sprintf("load=%s-paced-%d", l.iface, l.rate)
}

// requests reports whether the load sends any.
func (l serveLoad) requests() bool { return l.iface == "http" || l.iface == "nats" }

// BenchmarkServeLoad is the worker learning from a Kafka topic (kfake
// in-process) at full speed, as in BenchmarkSnapshotting, while clients
// ask its live model for predictions of one 40-feature JSON example per
// request, over loopback HTTP (a net/http server on 127.0.0.1 serving
// serve.Server.Register) or NATS request-reply (serve.Server.AddService on
// an in-process nats-server). The worker publishes a view every 100ms,
// the default serve.refresh. One op is the whole topic, from opening the
// clients to the last prediction event acknowledged, with serveClients
// clients sending requests throughout: back to back (saturating), or at a
// fixed total rate (paced, each client sleeping until its next turn).
//
// msgs/s is the learning throughput (every message is a labeled
// example), to compare with load=none (the same worker without views or
// a server) and load=idle (views, and an HTTP server no one asks); req/s
// is the requests answered over the time the load ran; p50-ms and p99-ms
// are the latencies a client saw, from sending a request to having read
// its reply. The load generator runs in the same process, on the same
// cores as the worker and the broker.
func BenchmarkServeLoad(b *testing.B) {
	msgs, size := benchMessages(16 * benchN)
	b.Logf("%d messages of %d bytes on average", len(msgs), size)
	bodies := serveBodies(1024)
	loads := []serveLoad{{}, {iface: "idle"}}
	for _, iface := range []string{"http", "nats"} {
		loads = append(loads, serveLoad{iface: iface})
		for _, r := range servePaced {
			loads = append(loads, serveLoad{iface: iface, rate: r})
		}
	}
	// A first pass, not reported: the first in a process ran a third
	// slower than the ones after it, whatever its load, as the heap grew
	// into memory the process had not touched yet.
	benchKafkaTopics(b, msgs, func(b *testing.B, addrs []string, in, out string) (func(), error) {
		return serveLoadPass(b, addrs, in, out, int64(len(msgs)), serveLoad{}, "", bodies, &serveLoadStats{})
	})
	for _, load := range loads {
		b.Run(load.name(), func(b *testing.B) {
			var natsURL string
			if load.iface == "nats" {
				// One server per benchmark run, shut down when it ends.
				natsURL = testbroker.NATS(b).URL()
			}
			var stats serveLoadStats
			benchKafkaTopics(b, msgs, func(b *testing.B, addrs []string, in, out string) (func(), error) {
				return serveLoadPass(b, addrs, in, out, int64(len(msgs)), load, natsURL, bodies, &stats)
			})
			if !load.requests() {
				return
			}
			if stats.failed > 0 {
				b.Fatalf("%d requests failed, the first with %v", stats.failed, stats.firstErr)
			}
			slices.Sort(stats.latencies)
			b.ReportMetric(float64(len(stats.latencies))/stats.ran.Seconds(), "req/s")
			b.ReportMetric(latencyQuantile(stats.latencies, 0.5).Seconds()*1e3, "p50-ms")
			b.ReportMetric(latencyQuantile(stats.latencies, 0.99).Seconds()*1e3, "p99-ms")
		})
	}
}

// serveBodies are n request bodies of one unlabeled JSON example of 40
// features each.
func serveBodies(n int) [][]byte {
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled = 4, 1
	s := synth.New(o)
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = synth.AppendJSON(nil, s.Next())
	}
	return bodies
}

// serveLoadStats gather what the clients saw over every op of a benchmark.
type serveLoadStats struct {
	mu        sync.Mutex
	latencies []time.Duration // of every answered request
	ran       time.Duration   // how long the load ran, summed over ops
	failed    int
	firstErr  error
}

func (s *serveLoadStats) add(lat []time.Duration, failed int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latencies = append(s.latencies, lat...)
	s.failed += failed
	if s.firstErr == nil {
		s.firstErr = err
	}
}

func latencyQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// serveLoadPass runs the worker over the topic in until the predictions of
// its n messages are out, with load on its server meanwhile, then stops
// the timer, the load and the worker. The cleanup it returns closes the
// rest, untimed.
func serveLoadPass(b *testing.B, addrs []string, in, out string, n int64, load serveLoad, natsURL string, bodies [][]byte, stats *serveLoadStats) (func(), error) {
	ctx := context.Background()
	kc := kafkaio.Config{Brokers: addrs}
	src, err := kafkaio.NewSource(ctx, kc, []string{in}, "", nil, consumer.Start{Kind: "earliest"}, zap.NewNop())
	if err != nil {
		return func() {}, err
	}
	sink, err := kafkaio.NewSink(kc, zap.NewNop())
	if err != nil {
		return func() { src.Close() }, err
	}
	var cleanups []func()
	cleanups = append(cleanups, func() { src.Close() }, func() { sink.Close() })
	cleanup := func() {
		for _, c := range slices.Backward(cleanups) {
			c()
		}
	}
	lcfg := learner.DefaultConfig()
	model, err := learner.New(lcfg)
	if err != nil {
		return cleanup, err
	}
	w := consumer.NewWorker(consumer.WorkerConfig{
		Model:        "bench",
		Batch:        1024,
		Predictions:  consumer.Destination{Sink: sink, Topic: out},
		Views:        load.iface != "",
		ViewInterval: 100 * time.Millisecond,
	}, src, model, nil, nil, zap.NewNop())

	// The clients: send(i) sends request i and waits for its reply.
	var send func(client, i int) error
	switch load.iface {
	case "http", "idle":
		srv := serve.New(serve.Options{Model: "bench"}, lcfg, w, nil, nil)
		mux := http.NewServeMux()
		srv.Register(mux)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return cleanup, err
		}
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go hs.Serve(ln) //nolint:errcheck // ErrServerClosed at cleanup
		cleanups = append(cleanups, func() { hs.Close() })
		tr := &http.Transport{MaxIdleConnsPerHost: serveClients, DisableCompression: true}
		cleanups = append(cleanups, tr.CloseIdleConnections)
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		url := "http://" + ln.Addr().String() + serve.PredictPath
		if !load.requests() {
			break
		}
		send = func(_, i int) error {
			resp, err := client.Post(url, "application/json", bytes.NewReader(bodies[i%len(bodies)]))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %s", resp.Status)
			}
			return nil
		}
	case "nats":
		srv := serve.New(serve.Options{Model: "bench"}, lcfg, w, nil, nil)
		nc, err := natsgo.Connect(natsURL)
		if err != nil {
			return cleanup, err
		}
		cleanups = append(cleanups, nc.Close)
		const subject = "hyperplane.bench.predict"
		svc, err := srv.AddService(nc, serve.ServiceOptions{Subject: subject, QueueGroup: "hyperplane", Version: "0.0.0"})
		if err != nil {
			return cleanup, err
		}
		cleanups = append(cleanups, func() { svc.Stop() }) //nolint:errcheck // closing
		conns := make([]*natsgo.Conn, serveClients)
		for c := range conns {
			if conns[c], err = natsgo.Connect(natsURL); err != nil {
				return cleanup, err
			}
			cleanups = append(cleanups, conns[c].Close)
		}
		send = func(c, i int) error {
			msg, err := conns[c].Request(subject, bodies[i%len(bodies)], 10*time.Second)
			if err != nil {
				return err
			}
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
				return fmt.Errorf("error %s: %s", code, msg.Header.Get("Nats-Service-Error"))
			}
			return nil
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var stopLoad func()
	if send != nil {
		stopLoad = startServeLoad(load.rate, send, stats)
	}
	var runErr error
	for w.Published()["kafka:"+in+"/0"] < n {
		select {
		case err := <-done:
			runErr = fmt.Errorf("worker stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
		if runErr != nil {
			break
		}
	}
	b.StopTimer()
	if stopLoad != nil {
		stopLoad()
	}
	cancel()
	if runErr != nil {
		return cleanup, runErr
	}
	return cleanup, <-done
}

// startServeLoad starts serveClients clients calling send, back to back when
// rate is 0, else each at rate/serveClients requests per second on a
// fixed schedule (a client that falls behind sends at once until it is
// on schedule again). The function it returns stops them, waits for the
// requests in flight and adds what they saw to stats.
func startServeLoad(rate int, send func(client, i int) error, stats *serveLoadStats) func() {
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for c := range serveClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			var failed int
			var firstErr error
			var interval time.Duration
			next := start
			if rate > 0 {
				interval = time.Duration(float64(time.Second) * serveClients / float64(rate))
				// The clients' turns are spread over the interval.
				next = start.Add(interval * time.Duration(c) / serveClients)
			}
			for i := c; !stop.Load(); i += serveClients {
				if rate > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
						if stop.Load() {
							break
						}
					}
					next = next.Add(interval)
				}
				t := time.Now()
				if err := send(c, i); err != nil {
					failed++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				lat = append(lat, time.Since(t))
			}
			stats.add(lat, failed, firstErr)
		}()
	}
	return func() {
		stop.Store(true)
		ran := time.Since(start)
		wg.Wait()
		stats.mu.Lock()
		stats.ran += ran
		stats.mu.Unlock()
	}
}
