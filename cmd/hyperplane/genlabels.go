package main

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// genLabels is gen's -labels-to: the examples go out without their
// labels, and each label follows on a destination of its own after a
// delay, as clicks or chargebacks do (docs/labels.md). The delay is real:
// a label is published when it falls due, so that its record time, which
// the broker gives it, is its example's plus the delay.
type genLabels struct {
	to      config.Destination
	delay   time.Duration
	missing float64
	format  string
	seed    uint64

	rng       *rand.Rand
	send      consumer.Sink
	due       labelHeap
	sent      int
	unlabeled int
}

func (l *genLabels) enabled() bool { return !l.to.IsZero() }

func (l *genLabels) validate(examples genTarget) error {
	switch {
	case l.to.Kind != config.KindKafka && l.to.Kind != config.KindJetStream:
		return usagef("-labels-to: kafka:<topic> or jetstream:<subject> (core NATS has no replay: a join over it could not be replayed)")
	case l.to.Kind != examples.Kind:
		return usagef("-labels-to: the labels go to the examples' kind of broker (%s)", examples.Kind)
	case l.delay < 0:
		return usagef("-label-delay: must be 0s or more, got %s", l.delay)
	case l.missing < 0 || l.missing > 1:
		return usagef("-label-missing: a fraction between 0 and 1, got %v", l.missing)
	}
	return nil
}

func (l *genLabels) open(b *brokers, kind config.Kind) error {
	sink, err := b.sink(kind)
	if err != nil {
		return err
	}
	l.send = sink
	l.rng = newLabelRand(l.seed)
	return nil
}

// newLabelRand draws which labels are missing and their delays, apart
// from the stream's own draws.
func newLabelRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x1abe1)) }

// hold takes rec's label off it and keeps it to publish after its delay,
// keyed as its example is (key), so that a Kafka topic of labels puts it in
// the partition of its example.
func (l *genLabels) hold(rec *synth.Record, key []byte) {
	labeled := rec.Labeled
	rec.Labeled = false
	if !labeled || l.rng.Float64() < l.missing {
		l.unlabeled++
		return
	}
	id := strconv.FormatUint(rec.Seq, 10)
	format := wire.FormatJSON
	if l.format == "msgpack" {
		format = wire.FormatMsgpack
	}
	v := wire.AppendLabel(nil, format, id, rec.Label)
	d := time.Duration(l.rng.ExpFloat64() * float64(l.delay))
	out := consumer.Output{Topic: l.to.Topic, Key: key, Value: v}
	if len(key) == 0 {
		out.Key = []byte("label-" + id)
	}
	heap.Push(&l.due, pendingLabel{at: time.Now().Add(d), out: out})
}

// sendDue publishes the labels due by now.
func (l *genLabels) sendDue(ctx context.Context, log *zap.Logger, now time.Time) error {
	var batch []consumer.Output
	for l.due.Len() > 0 && !l.due[0].at.After(now) {
		batch = append(batch, heap.Pop(&l.due).(pendingLabel).out)
	}
	if len(batch) == 0 {
		return nil
	}
	l.sent += len(batch)
	return sendAll(ctx, log, l.send, batch, l.to, l.sent)
}

// drain publishes the labels still held, each when it falls due.
func (l *genLabels) drain(ctx context.Context, log *zap.Logger) error {
	for l.due.Len() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(l.due[0].at)):
		}
		if err := l.sendDue(ctx, log, time.Now()); err != nil {
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
