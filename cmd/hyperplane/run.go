package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
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
		return &usageError{msg: "config: " + err.Error()}
	}
	log, err := newLogger(cfg.Log, e.stderr)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush at exit
	return serve(ctx, cfg, log, nil)
}

// newLogger builds the process's logger: JSON in containers, console on a
// terminal, unless the config says which.
func newLogger(c config.Log, w io.Writer) (*zap.Logger, error) {
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	format := c.Format
	if format == "auto" || format == "" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var enc zapcore.Encoder
	if format == "console" {
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeLevel = zapcore.CapitalColorLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}

// worker is a running worker with what it was built from.
type worker struct {
	*consumer.Worker
	source  consumer.Source
	closers []func() error
	reg     *prometheus.Registry
	metrics *consumer.Metrics
	config  consumer.WorkerConfig
}

func (w *worker) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]() //nolint:errcheck // best effort at shutdown
	}
}

// serve runs the worker of cfg and its HTTP server until ctx is done or
// one of them fails. started, if not nil, receives the worker once it is
// running.
func serve(ctx context.Context, cfg config.Config, log *zap.Logger, started chan<- *worker) error {
	// The port first: a taken one is the quickest start-up error to report.
	var ln net.Listener
	if cfg.HTTP.Addr != "" {
		var err error
		if ln, err = net.Listen("tcp", cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("http.addr: %w (choose a free address, or set http.addr empty to run without /metrics and the probes)", err)
		}
		defer ln.Close()
	}
	w, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer w.close()
	log.Info("worker starting", zap.String("model", cfg.Model.Name), zap.String("source", cfg.Source.Kind),
		zap.String("algorithm", string(cfg.Model.Learner.Algorithm)))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 3)
	go func() { errc <- w.Run(ctx) }()
	var srv *http.Server
	if ln != nil {
		srv = &http.Server{Handler: w.handler(), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("http: %w", err)
			}
		}()
		log.Info("http listening", zap.String("addr", ln.Addr().String()))
	}
	go w.reportLag(ctx)
	if started != nil {
		started <- w
	}
	// The first to stop stops the others.
	err = <-errc
	cancel()
	if srv != nil {
		shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(shutdownCtx) //nolint:errcheck // the listener is gone either way
		done()
	}
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		m := w.Model().Metrics()
		log.Info("worker stopped", zap.Uint64("examples", m.Examples), zap.Uint64("mistakes", m.Mistakes), zap.Any("positions", w.Positions()))
		return nil
	}
	return err
}

// build connects to the brokers and assembles the worker.
func build(ctx context.Context, cfg config.Config, log *zap.Logger) (*worker, error) {
	w := &worker{reg: prometheus.NewRegistry()}
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w.metrics = consumer.NewMetrics(w.reg)
	ok := false
	defer func() {
		if !ok {
			w.close()
		}
	}()

	model, positions, checkpoints, restored, err := loadModel(ctx, cfg, log, w)
	if err != nil {
		return nil, err
	}

	var nc *natsgo.Conn
	natsConn := func() (*natsgo.Conn, error) {
		if nc != nil {
			return nc, nil
		}
		tc, err := tlsConfig(cfg.NATS.TLS)
		if err != nil {
			return nil, fmt.Errorf("nats.tls: %w", err)
		}
		nc, err = natsio.Connect(natsio.Config{URL: cfg.NATS.URL, CredentialsFile: cfg.NATS.CredentialsFile, NKeyFile: cfg.NATS.NKeyFile, TLS: tc, Name: "hyperplane " + cfg.Model.Name}, log)
		if err != nil {
			return nil, fmt.Errorf("nats: %w (check nats.url, the credentials and that the server is up)", err)
		}
		w.closers = append(w.closers, func() error { nc.Close(); return nil })
		return nc, nil
	}
	kafkaConfig := func() (kafkaio.Config, error) {
		tc, err := tlsConfig(cfg.Kafka.TLS)
		if err != nil {
			return kafkaio.Config{}, fmt.Errorf("kafka.tls: %w", err)
		}
		mech, err := kafkaio.ParseSASL(cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.Username, cfg.Kafka.SASL.Password)
		if err != nil {
			return kafkaio.Config{}, fmt.Errorf("kafka.sasl: %w", err)
		}
		return kafkaio.Config{Brokers: cfg.Kafka.Brokers, ClientID: cfg.Kafka.ClientID, TLS: tc, SASL: mech}, nil
	}

	start, err := config.ParseStart(cfg.Source.Start)
	if err != nil {
		return nil, fmt.Errorf("source.start: %w", err)
	}
	switch cfg.Source.Kind {
	case "kafka":
		kc, err := kafkaConfig()
		if err != nil {
			return nil, err
		}
		src, err := kafkaio.NewSource(ctx, kc, cfg.Source.Topics, cfg.KafkaGroup(), positions, kafkaio.Start(start), log)
		if err != nil {
			return nil, fmt.Errorf("source: %w (check kafka.brokers, that the brokers are up, and that every topic of source.topics exists)", err)
		}
		w.source = src
	case "jetstream", "nats":
		conn, err := natsConn()
		if err != nil {
			return nil, err
		}
		if cfg.Source.Kind == "jetstream" {
			w.source, err = natsio.NewJetStreamSource(ctx, conn, cfg.Source.Stream, cfg.Source.Subject, positions, natsio.Start(start), log)
			if err != nil {
				return nil, fmt.Errorf("source: %w (check that the stream of source.stream exists and that source.subject is one of its subjects)", err)
			}
		} else {
			w.source, err = natsio.NewCoreSource(conn, cfg.Source.Subject, log)
			if err != nil {
				return nil, fmt.Errorf("source: %w", err)
			}
		}
	}
	w.closers = append(w.closers, w.source.Close)

	sinks := map[string]consumer.Sink{}
	destination := func(key, dest string) (consumer.Destination, error) {
		if dest == "" {
			return consumer.Destination{}, nil
		}
		kind, topic, err := config.ParseDestination(dest)
		if err != nil {
			return consumer.Destination{}, fmt.Errorf("%s: %w", key, err)
		}
		if s, ok := sinks[kind]; ok {
			return consumer.Destination{Sink: s, Topic: topic}, nil
		}
		var s consumer.Sink
		switch kind {
		case "kafka":
			kc, err := kafkaConfig()
			if err != nil {
				return consumer.Destination{}, err
			}
			s, err = kafkaio.NewSink(kc, log)
			if err != nil {
				return consumer.Destination{}, fmt.Errorf("%s: %w", key, err)
			}
		default:
			conn, err := natsConn()
			if err != nil {
				return consumer.Destination{}, err
			}
			s, err = natsio.NewSink(conn, kind == "jetstream", log)
			if err != nil {
				return consumer.Destination{}, fmt.Errorf("%s: %w", key, err)
			}
		}
		sinks[kind] = s
		w.closers = append(w.closers, s.Close)
		return consumer.Destination{Sink: s, Topic: topic}, nil
	}
	wc := consumer.WorkerConfig{
		Model:              cfg.Model.Name,
		CheckpointEvery:    cfg.Snapshot.Every,
		CheckpointInterval: cfg.SnapshotInterval(),
		ShutdownTimeout:    cfg.ShutdownTimeout(),
		Publish:            consumer.Publish(cfg.Outputs.Publish),
		Encoding:           consumer.Encoding(cfg.Outputs.Format),
		Batch:              cfg.Source.Batch,
		Decoder:            consumer.DecoderOptions{MaxFeatures: cfg.Source.MaxFeatures, MaxBytes: cfg.Source.MaxBytes},
	}
	if wc.Format, err = consumer.ParseFormat(cfg.Source.Format); err != nil {
		return nil, fmt.Errorf("source.format: %w", err)
	}
	if wc.Predictions, err = destination("outputs.predictions", cfg.Outputs.Predictions); err != nil {
		return nil, err
	}
	if wc.Misclassifications, err = destination("outputs.misclassifications", cfg.Outputs.Misclassifications); err != nil {
		return nil, err
	}
	if wc.DeadLetter, err = destination("outputs.dead_letter", cfg.Outputs.DeadLetter); err != nil {
		return nil, err
	}
	if checkpoints != nil {
		wc.Checkpoints = checkpoints
	}
	w.config = wc
	w.Worker = consumer.NewWorker(wc, w.source, model, positions, w.metrics, log)
	if !restored.IsZero() {
		w.metrics.LastCheckpoint.Set(float64(restored.UnixNano()) / 1e9)
	}
	ok = true
	return w, nil
}

// loadModel returns the model to continue: the newest valid snapshot in
// snapshot.url, or a new model when there is none (or no store). An
// incompatible snapshot stops start-up with the field named, unless
// snapshot.reset is set. The checkpointer writes the generations after
// the loaded one; it is nil without a store. restored is when the loaded
// snapshot was written, zero for a new model.
func loadModel(ctx context.Context, cfg config.Config, log *zap.Logger, w *worker) (m *learner.Model, positions map[string]int64, ck consumer.Checkpointer, restored time.Time, err error) {
	if cfg.Snapshot.URL == "" {
		log.Warn("no snapshot.url: the model is not saved and is lost when the worker stops; a restart begins again at source.start",
			zap.String("start", cfg.Source.Start))
		m, err := learner.New(cfg.Model.Learner)
		if err != nil {
			return nil, nil, nil, time.Time{}, fmt.Errorf("model.learner: %w", err)
		}
		return m, nil, nil, time.Time{}, nil
	}
	store, err := snapshot.OpenStore(ctx, cfg.Snapshot.URL)
	if err != nil {
		return nil, nil, nil, time.Time{}, fmt.Errorf("snapshot.url: %w (a file:// directory must exist, or add ?create_dir=1; an s3:// URL needs a bucket)", err)
	}
	w.closers = append(w.closers, store.Close)
	writer := cfg.Snapshot.Writer
	if writer == "" {
		writer, _ = os.Hostname()
	}
	// The next generation follows every key there is, corrupt ones
	// included: keys are never written twice.
	gens, err := store.Generations(ctx, cfg.Model.Name)
	if err != nil {
		return nil, nil, nil, time.Time{}, fmt.Errorf("snapshot.url: %w (check that the bucket or directory exists and that the credentials may list, read and write it)", err)
	}
	latest, err := store.Latest(ctx, cfg.Model.Name, log)
	var next uint64 = 1
	if len(gens) > 0 {
		next = gens[len(gens)-1] + 1
	}
	switch {
	case errors.Is(err, snapshot.ErrNotFound):
		log.Info("no snapshot: a new model", zap.String("model", cfg.Model.Name), zap.String("start", cfg.Source.Start))
	case err != nil:
		return nil, nil, nil, time.Time{}, fmt.Errorf("snapshot: %w", err)
	default:
		if err := latest.Compatible(cfg.Model.Learner); err != nil {
			if !cfg.Snapshot.Reset {
				return nil, nil, nil, time.Time{}, fmt.Errorf("model %s generation %d: %w (set snapshot.reset to start a new model)", cfg.Model.Name, latest.Generation, err)
			}
			log.Warn("snapshot incompatible: starting a new model (snapshot.reset)", zap.Error(err))
			latest = nil
		}
	}
	checkpointer := fatalFencing{snapshot.NewCheckpointer(store, cfg.Model.Name, writer, next, cfg.Snapshot.Keep, log)}
	if latest == nil {
		m, err := learner.New(cfg.Model.Learner)
		if err != nil {
			return nil, nil, nil, time.Time{}, fmt.Errorf("model.learner: %w", err)
		}
		return m, nil, checkpointer, time.Time{}, nil
	}
	m, err = learner.Restore(latest.State)
	if err != nil {
		return nil, nil, nil, time.Time{}, fmt.Errorf("snapshot generation %d: %w", latest.Generation, err)
	}
	log.Info("resuming from snapshot", zap.String("model", cfg.Model.Name), zap.Uint64("generation", latest.Generation),
		zap.Any("positions", latest.Positions), zap.Uint64("examples", m.Metrics().Examples))
	return m, latest.Positions, checkpointer, latest.Created, nil
}

// fatalFencing makes the snapshot errors that no retry can mend stop the
// worker: a fenced write (another worker is writing the model) and a
// state the loader would refuse (written, it would replace a good
// generation with one no restart can load).
type fatalFencing struct{ *snapshot.Checkpointer }

func (f fatalFencing) Checkpoint(ctx context.Context, st *learner.State, positions map[string]int64) error {
	err := f.Checkpointer.Checkpoint(ctx, st, positions)
	if errors.Is(err, snapshot.ErrFenced) || errors.Is(err, snapshot.ErrInvalidState) {
		return fmt.Errorf("%w: %w", consumer.ErrFatal, err)
	}
	return err
}

// handler serves /metrics, /healthz and /readyz.
func (w *worker) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.reg, promhttp.HandlerOpts{Registry: w.reg}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		// Each failing reason on a line of its own: source, outputs,
		// snapshots.
		if reasons := w.NotReady(); len(reasons) > 0 {
			http.Error(rw, "not ready:\n"+strings.Join(reasons, "\n"), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ready")
	})
	return mux
}

// lagReporter is a source that knows the broker's view of its lag.
type lagReporter interface{ Lag() map[string]int64 }

func (w *worker) reportLag(ctx context.Context) {
	lr, ok := w.source.(lagReporter)
	if !ok {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.metrics.SetLag(lr.Lag())
		}
	}
}

// tlsConfig builds a client TLS configuration, or nil when TLS is off.
func tlsConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // opt-in, documented as testing only
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s: no PEM certificates", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
