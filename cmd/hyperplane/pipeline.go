package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/serve"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// pipeline is what a worker runs on, built from a configuration in
// dependency order: the model resumed from snapshot.url, the source opened
// at the model's positions, the outputs' sinks, and the worker's
// configuration over them. run and replay build their worker from it;
// close releases it all.
type pipeline struct {
	resumed snapshot.Resumed
	source  consumer.Source
	config  consumer.WorkerConfig
	brokers *brokers
	store   *snapshot.Store // nil without snapshot.url
}

// openPipeline builds the pipeline of cfg, which is valid. The model comes
// first: a store that cannot be read, or holds an incompatible model, is
// reported before any broker is dialled.
func openPipeline(ctx context.Context, cfg config.Config, log *zap.Logger) (_ *pipeline, err error) {
	p := &pipeline{brokers: newBrokers(cfg, "hyperplane "+cfg.Model.Name, log)}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if cfg.Snapshot.URL != "" {
		if p.store, err = snapshot.OpenStore(ctx, cfg.Snapshot.URL); err != nil {
			return nil, fmt.Errorf("snapshot.url: %w (a file:// directory must exist, or add ?create_dir=1; an s3:// URL needs a bucket)", err)
		}
	}
	p.resumed, err = snapshot.Resume(ctx, p.store, cfg.Model.Name, cfg.Model.Learner, snapshot.ResumeOptions{
		Writer: cfg.Snapshot.Writer,
		Keep:   cfg.Snapshot.Keep,
		Reset:  cfg.Snapshot.Reset,
		Start:  cfg.Source.Start,
		Log:    log,
	})
	if err != nil {
		return nil, err
	}
	if p.source, err = p.brokers.source(ctx, cfg.Source, cfg.KafkaGroup(), p.resumed.Positions); err != nil {
		return nil, err
	}
	p.config = consumer.WorkerConfig{
		Model:            cfg.Model.Name,
		Publish:          cfg.Outputs.Publish,
		Encoding:         cfg.Outputs.Format,
		Batch:            cfg.Source.Batch,
		Decoder:          consumer.DecoderOptions{MaxFeatures: cfg.Source.MaxFeatures, MaxBytes: cfg.Source.MaxBytes},
		Format:           cfg.Source.Format,
		SnapshotEvery:    cfg.Snapshot.Every,
		SnapshotInterval: cfg.Snapshot.Interval,
		ShutdownTimeout:  cfg.Shutdown.Timeout,
		Views:            cfg.Serving(),
		ViewInterval:     cfg.Serve.Refresh,
	}
	for _, d := range []struct {
		key  string
		dest config.Destination
		to   *consumer.Destination
	}{
		{"outputs.predictions", cfg.Outputs.Predictions, &p.config.Predictions},
		{"outputs.misclassifications", cfg.Outputs.Misclassifications, &p.config.Misclassifications},
		{"outputs.dead_letter", cfg.Outputs.DeadLetter, &p.config.DeadLetter},
	} {
		if *d.to, err = p.brokers.destination(d.key, d.dest); err != nil {
			return nil, err
		}
	}
	if p.resumed.Snapshotter != nil {
		p.config.Snapshots = workerSnapshots{p.resumed.Snapshotter}
	}
	return p, nil
}

// worker is a worker over p that reads src: p's source, or one wrapped
// around it. metrics may be nil.
func (p *pipeline) worker(src consumer.Source, metrics *consumer.Metrics, log *zap.Logger) *consumer.Worker {
	return consumer.NewWorker(p.config, src, p.resumed.Model, p.resumed.Positions, metrics, log)
}

func (p *pipeline) close() {
	p.brokers.close()
	if p.store != nil {
		p.store.Close() //nolint:errcheck // best effort at shutdown
	}
}

// workerSnapshots hands the worker its snapshotter, marking the errors no
// retry mends (snapshot.Fatal) with consumer.ErrFatal, the worker's word
// for an error that stops it.
type workerSnapshots struct{ *snapshot.Snapshotter }

func (s workerSnapshots) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64) error {
	err := s.Snapshotter.Snapshot(ctx, st, positions)
	if snapshot.Fatal(err) {
		return fmt.Errorf("%w: %w", consumer.ErrFatal, err)
	}
	return err
}

// loadGeneration reads stored generations of model for requests that name
// one; nil without a store.
func (p *pipeline) loadGeneration(model string) serve.LoadGeneration {
	if p.store == nil {
		return nil
	}
	return func(ctx context.Context, gen uint64) (*learner.State, error) {
		snap, err := p.store.Load(ctx, model, gen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		if err != nil {
			return nil, err
		}
		return snap.State, nil
	}
}

// service starts the NATS micro service of srv on the pipeline's NATS
// connection.
func (p *pipeline) service(srv *serve.Server, cfg config.Config) (micro.Service, error) {
	nc, err := p.brokers.natsConn()
	if err != nil {
		return nil, fmt.Errorf("serve.nats: %w", err)
	}
	return srv.AddService(nc, serve.ServiceOptions{
		Subject:    cfg.ServeSubject(),
		QueueGroup: cfg.Serve.QueueGroup,
		Version:    semver(version),
	})
}
