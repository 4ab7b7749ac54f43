package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/wire"
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

// BenchmarkServeLoad is the worker learning from a topic at full speed,
// as in BenchmarkSnapshotting, while clients ask its live model for
// predictions of one 40-feature JSON example per request, over loopback
// HTTP (a net/http server on 127.0.0.1 serving serve.Server.Register) or
// NATS request-reply (serve.Server.AddService on an in-process
// nats-server). The worker publishes a view every 100ms, the default
// serve.refresh. A pass is the whole topic, from starting the worker to
// the last prediction event out, with serveClients clients sending
// requests throughout: back to back (saturating), or at a fixed total
// rate (paced, each client sleeping until its next turn).
//
// The topic is a Kafka topic (kfake, in-process; the worker's Kafka
// source and sink) or a memory one (consumer/memory): without a broker
// the worker runs at its own speed, so what a load takes from it shows
// the most.
//
// Each op is four passes over the same topic: the worker alone (no views,
// no server), under the load, under the load again, and alone again, so
// that neither the order of the passes nor whatever else the machine does
// favours one. sec/op is the two passes under load. msgs/s is the learning
// throughput under load (every message is a labeled example),
// alone-msgs/s without it, and ratio the first over the second: the
// fraction of its learning throughput the worker keeps while it answers.
// req/s is the requests answered over the time the load ran; p50-ms and
// p99-ms are the latencies a client saw, from sending a request to having
// read its reply. The load generator runs in the same process, on the
// same cores as the worker (and the broker), so the ratio is a lower
// bound of what a worker whose clients run elsewhere keeps.
func BenchmarkServeLoad(b *testing.B) {
	msgs, size := benchMessages(16 * benchN)
	b.Logf("%d messages of %d bytes on average", len(msgs), size)
	bodies := serveBodies(1024)
	loads := []serveLoad{{iface: "idle"}}
	for _, iface := range []string{"http", "nats"} {
		loads = append(loads, serveLoad{iface: iface})
		for _, r := range servePaced {
			loads = append(loads, serveLoad{iface: iface, rate: r})
		}
	}
	n := int64(len(msgs))
	for _, topic := range []string{"memory", "kafka"} {
		pass := func(b *testing.B, timed bool, load serveLoad, natsURL string, stats *serveLoadStats) time.Duration {
			t := newServeTopic(b, topic, msgs)
			// The topic and its messages make a heap of a few hundred
			// megabytes that the worker alone would not have: every pass
			// begins with the garbage of the last one collected, not
			// with the collector still at work on it. (Returning the
			// memory to the system as well, debug.FreeOSMemory, made
			// every pass page it in again: a third of the time.)
			runtime.GC()
			if timed {
				b.StartTimer()
			}
			took, cleanup, err := serveLoadPass(t, n, load, natsURL, bodies, stats)
			b.StopTimer()
			cleanup()
			if err != nil {
				b.Fatal(err)
			}
			return took
		}
		b.Run("topic="+topic, func(b *testing.B) {
			// Three passes first, not reported: the first two in a
			// process ran up to a third slower than the ones after them,
			// whatever their load, as the heap grew into memory the
			// process had not touched yet.
			b.StopTimer()
			for range 3 {
				pass(b, false, serveLoad{}, "", &serveLoadStats{})
			}
			for _, load := range loads {
				b.Run(load.name(), func(b *testing.B) {
					b.StopTimer()
					var natsURL string
					if load.iface == "nats" {
						// One server per benchmark run, shut down when it ends.
						natsURL = testbroker.NATS(b).URL()
					}
					var stats serveLoadStats
					var alone, loaded time.Duration
					for range b.N {
						// Alone, loaded, loaded, alone: the second pass
						// of a pair ran up to a tenth slower than the
						// first, whichever it was.
						for _, withLoad := range []bool{false, true, true, false} {
							if withLoad {
								loaded += pass(b, true, load, natsURL, &stats)
							} else {
								alone += pass(b, false, serveLoad{}, "", &serveLoadStats{})
							}
						}
					}
					// Two passes of each per op.
					b.ReportMetric(float64(2*int64(b.N)*n)/loaded.Seconds(), "msgs/s")
					b.ReportMetric(float64(2*int64(b.N)*n)/alone.Seconds(), "alone-msgs/s")
					b.ReportMetric(alone.Seconds()/loaded.Seconds(), "ratio")
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
		})
	}
}

// serveTopic is the worker's source and sink for a pass of
// BenchmarkServeLoad: a topic holding the messages, read from its start.
type serveTopic struct {
	src   consumer.Source
	sink  consumer.Sink
	key   string // the source key of the one partition
	out   string // the predictions' topic
	close func()
}

// newServeTopic returns a Kafka (kfake) or memory topic holding msgs.
func newServeTopic(b *testing.B, kind string, msgs [][]byte) serveTopic {
	if kind == "memory" {
		log := memory.NewLog("examples", 1)
		log.Append(0, msgs...)
		return serveTopic{src: memory.NewSource(log, nil), sink: memory.NewSink(), key: log.Key(0), out: "predictions", close: func() {}}
	}
	addrs, in, out, closeTopic := newBenchTopic(b, msgs)
	kc := kafkaio.Config{Brokers: addrs}
	src, err := kafkaio.NewSource(context.Background(), kc, []string{in}, "", nil, wire.Start{Kind: "earliest"}, zap.NewNop())
	if err != nil {
		closeTopic()
		b.Fatal(err)
	}
	sink, err := kafkaio.NewSink(kc, zap.NewNop())
	if err != nil {
		src.Close()
		closeTopic()
		b.Fatal(err)
	}
	return serveTopic{src: src, sink: sink, key: "kafka:" + in + "/0", out: out, close: func() {
		sink.Close()
		src.Close()
		closeTopic()
	}}
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

// serveLoadPass runs the worker over t until the predictions of
// its n messages are out, with load on its server meanwhile, then stops
// the load and the worker. It returns the time from starting the worker
// to the last prediction out, and a cleanup that closes the rest.
func serveLoadPass(t serveTopic, n int64, load serveLoad, natsURL string, bodies [][]byte, stats *serveLoadStats) (time.Duration, func(), error) {
	ctx := context.Background()
	cleanups := []func(){t.close}
	cleanup := func() {
		for _, c := range slices.Backward(cleanups) {
			c()
		}
	}
	src, sink, out := t.src, t.sink, t.out
	lcfg := learner.DefaultConfig()
	model, err := learner.New(lcfg)
	if err != nil {
		return 0, cleanup, err
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
			return 0, cleanup, err
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
			return 0, cleanup, err
		}
		cleanups = append(cleanups, nc.Close)
		const subject = "hyperplane.bench.predict"
		svc, err := srv.AddService(nc, serve.ServiceOptions{Subject: subject, QueueGroup: "hyperplane", Version: "0.0.0"})
		if err != nil {
			return 0, cleanup, err
		}
		cleanups = append(cleanups, func() { svc.Stop() }) //nolint:errcheck // closing
		conns := make([]*natsgo.Conn, serveClients)
		for c := range conns {
			if conns[c], err = natsgo.Connect(natsURL); err != nil {
				return 0, cleanup, err
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
	start := time.Now()
	go func() { done <- w.Run(wctx) }()
	var stopLoad func()
	if send != nil {
		stopLoad = startServeLoad(load.rate, send, stats)
	}
	var runErr error
	for w.Published()[t.key] < n {
		select {
		case err := <-done:
			runErr = fmt.Errorf("worker stopped: %v", err)
		case <-time.After(time.Millisecond):
		}
		if runErr != nil {
			break
		}
	}
	took := time.Since(start)
	if stopLoad != nil {
		stopLoad()
	}
	cancel()
	if runErr != nil {
		return took, cleanup, runErr
	}
	return took, cleanup, <-done
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
