package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/internal/actors"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

func runRun(ctx context.Context, e *env, args []string) error {
	cfg, err := loadConfig(e, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(e.stdout, "Usage: hyperplane run [--config FILE] [--key value ...]")
		fmt.Fprintln(e.stdout)
		fmt.Fprintln(e.stdout, "Every key below is also a YAML field of the config file and an HYPERPLANE_* variable;")
		fmt.Fprintln(e.stdout, "a flag beats a variable, a variable beats the file, the file beats the default.")
		fmt.Fprintln(e.stdout)
		config.Usage(e.stdout)
		return nil
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if err := cfg.Validate(); err != nil {
		return invalidConfig(e, args, err)
	}
	// source.partitions' replicas:R against this host's ordinal: a pod
	// beyond R is a wrong value, refused before anything is opened.
	if _, err := cfg.OwnedPartitions(config.Hostname()); err != nil {
		return invalidConfig(e, args, err)
	}
	// The port first: a taken one is the quickest start-up error to report.
	ln, err := listenHTTP(cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http.addr: %w (choose a free address, or set http.addr empty to run without /metrics and the probes)", err)
	}
	log := newLogger(cfg.Log, e.stderr)
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
	return runWorker(ctx, cfg, log, ln, nil)
}

// listenHTTP opens the listener of the worker's HTTP server on addr, or
// none (nil) when addr is empty.
func listenHTTP(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	return net.Listen("tcp", addr)
}

// httpShutdownTimeout bounds how long the HTTP server waits for the
// requests in flight when it stops.
const httpShutdownTimeout = 5 * time.Second

// httpIdleTimeout closes a kept-alive connection that has carried no
// request for this long: prediction clients keep connections open, and
// the ones they forget should not pile up.
const httpIdleTimeout = 2 * time.Minute

// runWorker builds the worker of cfg, which is valid, and runs it with its
// HTTP server (the probes, the metrics and prediction requests), its NATS
// service and its lag reporter until ctx is done or one of them stops,
// which stops the others; it returns the first error any of them stopped
// with. The HTTP server answers on ln (listenHTTP's; nil: no HTTP server),
// which runWorker closes. started, if not nil, receives the worker once it
// is built.
func runWorker(ctx context.Context, cfg config.Config, log *zap.Logger, ln net.Listener, started chan<- *consumer.Worker) error {
	if ln != nil {
		defer ln.Close()
	}
	// The probes answer while the model is resumed, which takes time for a
	// large one and waits for a store that does not answer: the process is
	// alive, and not ready. The server starts here, before the group that
	// runs the rest, which needs the pipeline; the group's actor for it
	// takes over its end, and every return before closes it.
	var front swapHandler
	var httpSrv *http.Server
	served := make(chan error, 1)
	if ln != nil {
		front.set(startingHandler(cfg.Serving() && cfg.Serve.HTTP))
		httpSrv = &http.Server{Handler: &front, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: httpIdleTimeout}
		go func() { served <- httpSrv.Serve(ln) }()
		log.Info("http listening", zap.String("addr", ln.Addr().String()))
		// Once the worker has stopped and the server has shut down, or
		// when start-up fails: closing a closed server does nothing.
		defer httpSrv.Close()
	} else {
		log.Info("no http server: http.addr is empty, so there are no probes, no /metrics and no prediction requests over HTTP")
	}
	p, err := openPipeline(ctx, cfg, log, pipelineUse{Epochs: true, Marks: true, WaitForStore: true})
	if err != nil {
		// A signal while it waits for the store is a stop, not a failure.
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			log.Info("worker stopped before it started", zap.Error(err))
			return nil
		}
		return err
	}
	defer p.close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := consumer.NewMetrics(reg)
	serving := serve.NewMetrics(reg)
	// Leaving the consumer group, as p.close does, is part of the
	// shutdown, which has shutdown.timeout from the signal on. The group
	// is joined once the engine asks whose the shards are.
	var signalled atomic.Int64
	stopSignalled := context.AfterFunc(ctx, func() { signalled.Store(time.Now().UnixNano()) })
	defer func() {
		stopSignalled()
		timeout := cfg.Shutdown.Timeout
		if timeout <= 0 {
			timeout = consumer.DefaultShutdownTimeout
		}
		if at := signalled.Load(); at != 0 && p.group != nil {
			p.group.LeaveBy(time.Unix(0, at).Add(timeout))
		}
	}()
	if created := p.Resumed().Created; !created.IsZero() {
		metrics.LastSnapshot.Set(float64(created.UnixNano()) / 1e9)
	}
	opts := serve.Options{
		Model:       cfg.Model.Name,
		MaxBytes:    cfg.Serve.MaxBytes,
		MaxExamples: cfg.Serve.MaxExamples,
		MaxInFlight: cfg.Serve.MaxInFlight,
		Timeout:     cfg.Serve.Timeout,
		Generations: cfg.Serve.Generations,
		Decoder:     p.config.Decoder,
	}
	w := p.Engine(metrics)
	if started != nil {
		w.OnWorker(func(worker *consumer.Worker) { started <- worker })
	}
	var srv *serve.Server
	switch {
	case !cfg.Serving():
	case cfg.Model.Scope == config.ScopePartition:
		srv = serve.NewSharded(opts, p.Resumed().Model.Config(), shardViews{w}, p.loadShardGeneration(cfg.Model.Name), serving)
	default:
		srv = serve.New(opts, p.Resumed().Model.Config(), w, p.loadGeneration(cfg.Model.Name), serving)
	}
	if srv != nil && cfg.Serve.NATS {
		svc, err := p.service(srv, cfg)
		if err != nil {
			return err
		}
		defer svc.Stop() //nolint:errcheck // the connection closes next
		log.Info("nats service answering", zap.String("subject", cfg.ServeSubject()), zap.String("queue_group", cfg.Serve.QueueGroup))
	}
	// The model resumed, not model.learner: a promotion may have made a
	// challenger's configuration the model's (in partition scope, each
	// partition's model is resumed and logged when its shard opens).
	log.Info("worker starting", zap.String("model", cfg.Model.Name), zap.String("source", string(cfg.Source.Kind)),
		zap.String("algorithm", string(p.Resumed().Model.Config().Algorithm)))

	var g actors.Group
	{ // Signals: ctx ends on SIGTERM or SIGINT.
		stop := make(chan struct{})
		g.Add(func() error {
			select {
			case <-ctx.Done():
			case <-stop:
			}
			return nil
		}, func(error) { close(stop) })
	}
	// stopped is closed once the worker has stopped.
	stopped := make(chan struct{})
	{ // The worker: it stops reading, flushes and writes a last snapshot.
		wctx, stop := context.WithCancel(ctx)
		g.Add(func() error {
			defer close(stopped)
			return w.Run(wctx)
		}, func(error) { stop() })
	}
	if ln != nil {
		var predict *serve.Server
		if cfg.Serve.HTTP {
			predict = srv
		}
		front.set(handler(reg, stopping{w, ctx}, predict))
		g.Add(func() error {
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http: %w", err)
			}
			return nil
		}, func(error) {
			// Requests sent before the signal reached the load balancer
			// are still answered while the worker stops (/readyz says
			// it is stopping): the server closes once the worker has.
			<-stopped
			ctx, done := context.WithTimeout(context.Background(), httpShutdownTimeout)
			defer done()
			httpSrv.Shutdown(ctx) //nolint:errcheck // the listener is gone either way
		})
	}
	if err := g.Run(); err != nil {
		return err
	}
	var fields []zap.Field
	if m := w.Model(); m != nil {
		mt := m.Metrics()
		fields = append(fields, zap.Uint64("examples", mt.Examples), zap.Uint64("mistakes", mt.Mistakes))
	}
	log.Info("worker stopped", append(fields, zap.Any("positions", w.Positions()))...)
	return nil
}

// stopping is the worker's readiness, and once ctx, the worker's, is
// done (a signal), not ready because it stops.
type stopping struct {
	w   interface{ NotReady() []string }
	ctx context.Context
}

func (s stopping) NotReady() []string {
	if s.ctx.Err() != nil {
		return append([]string{"shutdown: the worker is stopping (a signal)"}, s.w.NotReady()...)
	}
	return s.w.NotReady()
}

// shardViews serves the models of partition scope, shard by shard.
type shardViews struct{ e *consumer.Engine }

func (v shardViews) View(shard shardid.ID) *learner.View { return v.e.ShardView(shard) }

func (v shardViews) Learns(shard shardid.ID) bool { return v.e.LearnsShard(shard) }
