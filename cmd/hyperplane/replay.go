package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// runReplay rebuilds a model from a range of the source: a new model,
// trained from --from to --to, written to --out if given. The live model's
// snapshots are never read or written, and events are published only with
// --publish.
func runReplay(ctx context.Context, e *env, args []string) error {
	from := consumer.Start{Kind: consumer.StartEarliest}
	to := consumer.Start{Kind: consumer.StartLatest}
	var out string
	var publish bool
	fs := newFlagSet("replay", "--config FILE --from START [--to END] [--out URL] [--publish] [--key value ...]", e)
	fs.TextVar(&from, "from", from, "where to begin, `START`: earliest, offset:N or time:RFC3339")
	fs.TextVar(&to, "to", to, "where to end, `END`: latest (until the source has nothing more) or offset:N (exclusive)")
	fs.StringVar(&out, "out", "", "snapshot store URL for the rebuilt model (default: none, only the summary)")
	fs.BoolVar(&publish, "publish", false, "publish the events as the live worker would")
	own, cfgArgs := splitOwnFlags(fs, args)
	if err := parseFlags(fs, own); err != nil {
		return ignoreHelp(err)
	}
	cfg, err := loadConfig(e, cfgArgs)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil
	}
	if err != nil {
		return &usageError{msg: err.Error()}
	}
	if from.Kind == consumer.StartLatest {
		return usagef("-from: latest would replay nothing (want earliest, offset:N or time:RFC3339)")
	}
	var end int64 = -1
	switch to.Kind {
	case consumer.StartLatest:
	case consumer.StartOffset:
		end = to.Offset
	default:
		return usagef("-to: want latest or offset:N, got %q", to)
	}
	cfg.Source.Start = from
	if !publish {
		cfg.Outputs = config.Outputs{Publish: consumer.PublishNone, Format: cfg.Outputs.Format}
	}
	cfg.Snapshot = config.Default().Snapshot
	cfg.Snapshot.URL = out
	cfg.HTTP.Addr = ""
	if err := cfg.Validate(); err != nil {
		return &usageError{msg: "config: " + err.Error()}
	}
	log := newLogger(config.Log{Level: config.LevelWarn, Format: cfg.Log.Format}, e.stderr)
	if out != "" {
		if _, err := snapshot.LoadURL(ctx, strings.TrimSuffix(out, "/")+"/"+cfg.Model.Name, log); err == nil {
			return usagef("-out: %s already holds model %s; replay writes a new model, so give another store or model.name", out, cfg.Model.Name)
		}
	}

	p, err := openPipeline(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer p.close()
	// Only the final snapshot: nothing periodic.
	p.config.SnapshotEvery, p.config.SnapshotInterval = 0, 0
	bounded := &boundedSource{Source: p.source, end: end, done: make(chan struct{})}
	if lr, ok := p.source.(lagReporter); ok && end < 0 {
		bounded.lag = lr
	}
	worker := p.worker(bounded, nil, log)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- worker.Run(runCtx) }()
	bar := newProgress(e.stderr, 0, nil)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
loop:
	for {
		select {
		case err := <-done:
			bar.end()
			return fmt.Errorf("replay stopped: %w", err)
		case <-bounded.done:
			break loop
		case <-tick.C:
			m := worker.Metrics()
			bar.show(fmt.Sprintf("%d examples  %.0f/s  mistakes %d  rolling accuracy %.4f", m.Examples, float64(m.Examples)/time.Since(start).Seconds(), m.Mistakes, m.RollingAccuracy))
		}
	}
	cancel()
	if err := <-done; err != nil {
		bar.end()
		return err
	}
	bar.done()
	m := worker.Model().Metrics()
	fmt.Fprintf(e.stdout, `{"examples":%d,"labeled":%d,"mistakes":%d,"accuracy":%v,"updates":%d,"seconds":%v,"positions":%s}`+"\n",
		m.Examples, m.Labeled, m.Mistakes, m.Accuracy, m.Updates, time.Since(start).Seconds(), positionsJSON(worker.Positions()))
	return nil
}

func positionsJSON(p map[string]int64) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for k, v := range p {
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%d", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

// boundedSource ends a replay: it drops the messages at or after end (by
// offset or sequence) and closes done once every partition has reached
// it, or, with no end, once the broker reports nothing left to read.
type boundedSource struct {
	consumer.Source
	end  int64
	lag  lagReporter
	once sync.Once
	done chan struct{}

	mu      sync.Mutex
	reached map[string]bool
	kept    []consumer.Message
}

func (b *boundedSource) finish() { b.once.Do(func() { close(b.done) }) }

func (b *boundedSource) Fetch(ctx context.Context, max int) ([]consumer.Message, error) {
	for {
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		msgs, err := b.Source.Fetch(fctx, max)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// Idle: with no end given, the replay is over when the
				// broker has nothing more.
				if b.end < 0 && b.lag != nil && allZero(b.lag.Lag()) {
					b.finish()
				}
				continue
			}
			return nil, err
		}
		if b.end < 0 {
			if b.lag != nil && allZero(b.lag.Lag()) {
				defer b.finish()
			}
			return msgs, nil
		}
		b.mu.Lock()
		if b.reached == nil {
			b.reached = map[string]bool{}
		}
		b.kept = b.kept[:0]
		for _, m := range msgs {
			if m.Position.Offset >= b.end {
				b.reached[m.Position.Source] = true
				continue
			}
			if m.Resume >= b.end {
				b.reached[m.Position.Source] = true
			}
			b.kept = append(b.kept, m)
		}
		all := b.allReached()
		b.mu.Unlock()
		if all {
			defer b.finish()
		}
		if len(b.kept) > 0 {
			return b.kept, nil
		}
	}
}

func (b *boundedSource) allReached() bool {
	lr, ok := b.Source.(lagReporter)
	if !ok {
		return len(b.reached) > 0
	}
	for src := range lr.Lag() {
		if !b.reached[src] {
			return false
		}
	}
	return true
}

func allZero(lag map[string]int64) bool {
	for _, n := range lag {
		if n > 0 {
			return false
		}
	}
	return len(lag) > 0
}
