// Package feed publishes generated example streams through a
// consumer.Sink, as hyperplane gen and the demo do: in batches, at a pace,
// each batch retried after a failure, and, with labels that come later,
// each example without its label and the label published on a
// destination of its own once its delay has passed.
package feed

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// Attempts is how many times a batch is tried before the feed fails.
const Attempts = 8

// Feeder publishes a stream through Sink in batches of Batch, at Rate
// examples a second if it is not 0. With Labels, the examples' own are
// held back and published as they fall due, the last after the examples.
type Feeder struct {
	Sink   consumer.Sink
	To     fmt.Stringer // where the examples go, for errors and logs
	Batch  int
	Rate   float64
	Labels *Labels
	Log    *zap.Logger
}

// Run publishes the outputs out gives for 0 to n-1, in order.
func (f *Feeder) Run(ctx context.Context, n int, out func(i int) consumer.Output) error {
	began := time.Now()
	batch := make([]consumer.Output, 0, f.Batch)
	for i := 0; i < n; {
		batch = batch[:0]
		for ; i < n && len(batch) < f.Batch; i++ {
			batch = append(batch, out(i))
		}
		if err := SendAll(ctx, f.Log, f.Sink, batch, f.To, i); err != nil {
			return err
		}
		if f.Labels != nil {
			if err := f.Labels.SendDue(ctx, f.Log, time.Now()); err != nil {
				return err
			}
		}
		if f.Rate > 0 {
			due := began.Add(time.Duration(float64(i) / f.Rate * float64(time.Second)))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(due)):
			}
		}
	}
	if f.Labels != nil {
		return f.Labels.Drain(ctx, f.Log)
	}
	return nil
}

// SendAll publishes batch through sink, trying it again after a failure
// up to Attempts times in all. i counts the examples published with it.
func SendAll(ctx context.Context, log *zap.Logger, sink consumer.Sink, batch []consumer.Output, to fmt.Stringer, i int) error {
	attempt := 0
	bo := retry.Backoff{Min: 100 * time.Millisecond, Max: 800 * time.Millisecond}
	err := retry.Do(ctx, &bo, func(ctx context.Context) error {
		attempt++
		err := sink.Publish(ctx, batch)
		if err != nil && attempt == Attempts {
			return retry.Permanent(err)
		}
		return err
	}, func(err error) {
		log.Warn("publish failed; retrying", zap.Stringer("to", to), zap.Int("attempt", attempt), zap.Int("messages", len(batch)), zap.Error(err))
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("-to %s: %d messages published, then %d attempts failed: %w (check that the topic or stream exists and the broker is up)",
		to, i-len(batch), attempt, err)
}

// Labels are the labels of a stream that come later: the examples go out
// without them, and each follows on a destination of its own after a delay, as clicks or
// chargebacks do (docs/labels.md). The delay is real: a label is published
// when it falls due, so that its record time, which the broker gives it,
// is its example's plus the delay.
type Labels struct {
	sink    consumer.Sink
	to      config.Destination
	delay   time.Duration
	missing float64
	format  wire.Format

	rng *rand.Rand
	due labelHeap
	// Sent counts the labels published, Unlabeled the examples left
	// without one.
	Sent, Unlabeled int
}

// NewLabels holds labels back for to, published through sink, each after a delay drawn from an exponential distribution of mean
// delay, a fraction missing of them never sent; seed draws both, apart
// from the stream's own draws. format is the label records'.
func NewLabels(sink consumer.Sink, to config.Destination, delay time.Duration, missing float64, format wire.Format, seed uint64) *Labels {
	return &Labels{sink: sink, to: to, delay: delay, missing: missing, format: format,
		rng: rand.New(rand.NewPCG(seed, 0x1abe1))}
}

// Hold takes rec's label off it and keeps it to publish after its delay,
// keyed as its example is (key), so that a Kafka topic of labels puts it
// in the partition of its example, on subject ("": the labels' topic),
// which a NATS subject of labels keyed as its example's makes the
// partition of its example in a stream partitioned by that token.
func (l *Labels) Hold(rec *synth.Record, key []byte, subject string) {
	labeled := rec.Labeled
	rec.Labeled = false
	if !labeled || l.rng.Float64() < l.missing {
		l.Unlabeled++
		return
	}
	id := strconv.FormatUint(rec.Seq, 10)
	v := wire.AppendLabel(nil, l.format, id, rec.Label)
	d := time.Duration(l.rng.ExpFloat64() * float64(l.delay))
	if subject == "" {
		subject = l.to.Topic
	}
	out := consumer.Output{Topic: subject, Key: key, Value: v}
	if len(key) == 0 {
		out.Key = []byte("label-" + id)
	}
	heap.Push(&l.due, pendingLabel{at: time.Now().Add(d), out: out})
}

// SendDue publishes the labels due by now.
func (l *Labels) SendDue(ctx context.Context, log *zap.Logger, now time.Time) error {
	var batch []consumer.Output
	for l.due.Len() > 0 && !l.due[0].at.After(now) {
		batch = append(batch, heap.Pop(&l.due).(pendingLabel).out)
	}
	if len(batch) == 0 {
		return nil
	}
	l.Sent += len(batch)
	return SendAll(ctx, log, l.sink, batch, l.to, l.Sent)
}

// Drain publishes the labels still held, each when it falls due.
func (l *Labels) Drain(ctx context.Context, log *zap.Logger) error {
	for l.due.Len() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(l.due[0].at)):
		}
		if err := l.SendDue(ctx, log, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

type pendingLabel struct {
	at  time.Time
	out consumer.Output
}

// labelHeap orders the held labels by when they fall due.
type labelHeap []pendingLabel

func (h labelHeap) Len() int           { return len(h) }
func (h labelHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h labelHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *labelHeap) Push(x any)        { *h = append(*h, x.(pendingLabel)) }
func (h *labelHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
