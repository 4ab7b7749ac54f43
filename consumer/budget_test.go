package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
	"go.uber.org/zap"
)

// budgetLedger counts what the workers of a budget test fetched and what
// their sink made durable, across workers.
type budgetLedger struct {
	mu        sync.Mutex
	cond      *sync.Cond
	fetched   int
	durable   int
	total     int // messages in all sources
	exhausted int // sources that returned their last message
	mostAhead int // the most fetched and not yet durable
	failing   bool
}

func newBudgetLedger(total int) *budgetLedger {
	l := &budgetLedger{total: total}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// budgetSource returns its messages one per Fetch, then waits for ctx.
type budgetSource struct {
	ledger *budgetLedger
	msgs   []Message
	next   int
}

func (s *budgetSource) Fetch(ctx context.Context, _ int) ([]Message, error) {
	if s.next == len(s.msgs) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	l := s.ledger
	l.mu.Lock()
	l.fetched++
	l.mostAhead = max(l.mostAhead, l.fetched-l.durable)
	s.next++
	if s.next == len(s.msgs) {
		l.exhausted++
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	return s.msgs[s.next-1 : s.next], nil
}

func (s *budgetSource) Commit(context.Context, map[string]int64) error { return nil }
func (s *budgetSource) Close() error                                   { return nil }

// budgetSink holds each publish until the workers have fetched as far
// ahead of the durable outputs as they can (until a source runs out), so
// that they run into their budget; while failing it fails every publish.
type budgetSink struct {
	ledger *budgetLedger
	ahead  int // how far the workers can get ahead
	mu     sync.Mutex
	keys   map[string]int
}

func (s *budgetSink) Publish(ctx context.Context, batch []Output) error {
	l := s.ledger
	l.mu.Lock()
	for !l.failing && l.exhausted == 0 && l.fetched < l.durable+s.ahead && ctx.Err() == nil {
		l.cond.Wait()
	}
	failing := l.failing
	l.mu.Unlock()
	if failing || ctx.Err() != nil {
		return errors.New("the sink is down")
	}
	s.mu.Lock()
	for _, o := range batch {
		s.keys[o.Topic+" "+string(o.Key)]++
	}
	s.mu.Unlock()
	l.mu.Lock()
	// A batch of one message has one prediction and perhaps a
	// misclassification: durable counts predictions.
	for _, o := range batch {
		if o.Topic == "pred" {
			l.durable++
		}
	}
	l.cond.Broadcast()
	l.mu.Unlock()
	return nil
}

func (s *budgetSink) Close() error { return nil }

func budgetMessages(source string, n int) []Message {
	o := synth.DefaultOptions()
	o.Vocab, o.Features = 100, 5
	s := synth.New(o)
	msgs := make([]Message, n)
	for i := range msgs {
		v := synth.AppendJSON(nil, s.Next())
		msgs[i] = Message{Position: wire.Position{Source: source, Offset: int64(i)}, Resume: int64(i + 1), Value: v[:len(v)-1]}
	}
	return msgs
}

// runBudgetWorkers starts len(errs) workers on wg that share budget and
// sink, worker i reading perWorker messages of its own and setting errs[i]
// as it stops.
func runBudgetWorkers(ctx context.Context, t *testing.T, wg *sync.WaitGroup, errs []error, sink *budgetSink, ledger *budgetLedger, budget outputBudget, perWorker int, shutdown time.Duration) {
	t.Helper()
	for i := range errs {
		model, err := learner.New(learner.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg := WorkerConfig{Model: "m", Batch: 1, Publish: wire.PublishAll,
			Predictions: Destination{Sink: sink, Topic: "pred"}, Misclassifications: Destination{Sink: sink, Topic: "mis"},
			ShutdownTimeout: shutdown, budget: budget}
		src := &budgetSource{ledger: ledger, msgs: budgetMessages(fmt.Sprintf("memory:in/%d", i), perWorker)}
		w := NewWorker(cfg, src, model, nil, nil, zap.NewNop())
		wg.Go(func() { errs[i] = w.Run(ctx) })
	}
}

// TestOutputBudgetShared runs workers that share a budget of batches, as
// the epochs' ranges do: together they never get further ahead of their
// durable outputs than the budget and one batch each, every output is
// published once, and every slot is returned, also by a shutdown that
// could not flush.
func TestOutputBudgetShared(t *testing.T) {
	const workers, slots, perWorker = 3, 2, 40
	ledger := newBudgetLedger(workers * perWorker)
	ahead := slots + workers // batches of one message
	sink := &budgetSink{ledger: ledger, ahead: ahead, keys: map[string]int{}}
	budget := newOutputBudget(slots)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	runBudgetWorkers(ctx, t, &wg, errs, sink, ledger, budget, perWorker, time.Second)
	ledger.mu.Lock()
	for ledger.durable < ledger.total {
		ledger.cond.Wait()
	}
	mostAhead := ledger.mostAhead
	ledger.mu.Unlock()
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	if mostAhead != ahead {
		t.Errorf("the workers got %d messages ahead of their durable outputs, want %d (the budget and a batch each)", mostAhead, ahead)
	}
	preds := 0
	for k, n := range sink.keys {
		if n != 1 {
			t.Errorf("%s published %d times", k, n)
		}
		if k[:5] == "pred " {
			preds++
		}
	}
	if preds != ledger.total {
		t.Errorf("%d predictions published, want %d", preds, ledger.total)
	}
	if len(budget.slots) != 0 {
		t.Errorf("%d slots of the budget still taken once every worker stopped", len(budget.slots))
	}

	// Shutdown while the sink fails: what was not flushed gives its slot
	// back.
	ledger = newBudgetLedger(workers * perWorker)
	ledger.failing = true
	sink = &budgetSink{ledger: ledger, ahead: ahead, keys: map[string]int{}}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	runBudgetWorkers(ctx, t, &wg, errs, sink, ledger, budget, perWorker, 50*time.Millisecond)
	ledger.mu.Lock()
	for ledger.fetched < ahead {
		ledger.cond.Wait()
	}
	ledger.mu.Unlock()
	cancel()
	wg.Wait()
	unflushed := 0
	for i, err := range errs {
		var shut *ShutdownError
		if !errors.As(err, &shut) {
			t.Errorf("worker %d: %v, want a ShutdownError", i, err)
			continue
		}
		unflushed += shut.Messages
	}
	if unflushed == 0 {
		t.Error("no worker had a batch left to flush")
	}
	if len(budget.slots) != 0 {
		t.Errorf("%d slots of the budget still taken after a shutdown that could not flush", len(budget.slots))
	}
}

// TestOutputBudgetSharesBatches: workers that share a budget take their
// batches from its pool, so that the batches of a worker that stopped (a
// range of an epoch that ended) serve the next ones rather than staying
// in a pool of the worker's own; a worker without a budget has its own.
func TestOutputBudgetSharesBatches(t *testing.T) {
	budget := newOutputBudget(2)
	newWorker := func(budget outputBudget) *Worker {
		model, err := learner.New(learner.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		cfg := WorkerConfig{Model: "m", Batch: 1, Publish: wire.PublishAll, budget: budget}
		return NewWorker(cfg, &budgetSource{ledger: newBudgetLedger(0)}, model, nil, nil, zap.NewNop())
	}
	a, b, alone := newWorker(budget), newWorker(budget), newWorker(outputBudget{})
	if a.batchPool != budget.batches || b.batchPool != budget.batches {
		t.Error("workers that share a budget do not take their batches from its pool")
	}
	if alone.batchPool == nil || alone.batchPool == budget.batches {
		t.Error("a worker without a budget has no pool of its own")
	}
}
