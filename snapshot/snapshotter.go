package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"go.uber.org/zap"
)

// Snapshotter writes the successive generations of one model to a
// Store and keeps the newest few.
type Snapshotter struct {
	store  *Store
	model  string
	writer string
	keep   int
	next   uint64
	log    *zap.Logger
}

// NewSnapshotter writes model's snapshots to store from generation next
// on, keeping the newest keep generations.
func NewSnapshotter(store *Store, model, writer string, next uint64, keep int, log *zap.Logger) *Snapshotter {
	return &Snapshotter{store: store, model: model, writer: writer, keep: keep, next: next, log: log}
}

// Snapshot writes st and the positions it includes as the next
// generation, then deletes the generations beyond the newest keep. An
// error wrapping ErrFenced means another worker wrote that generation
// first: it is writing this model, and this one must stop. An error
// wrapping ErrInvalidState means st is a state the loader would refuse:
// nothing was written or deleted, so the store keeps its good
// generations, but the model is broken and this one must stop too. After
// any other error the same generation is tried again on the next call.
//
// join, if not nil, is the state of the join of labels that come later
// as a msgpack value (Snapshot.Join).
func (c *Snapshotter) Snapshot(ctx context.Context, st *learner.State, positions map[string]int64, join []byte) error {
	if c.next == 0 {
		// The store holds a key at the last generation a key can
		// number (no worker counts that far): the next one wrapped.
		return fmt.Errorf("snapshot: model %s: %s is generation %d, the last a key can number, so no generation can follow it: %w; "+
			"delete it (no worker counts that far), or give the model a new model.name", c.model, Key(c.store.prefix, c.model, math.MaxUint64), uint64(math.MaxUint64), ErrNoNextGeneration)
	}
	s := &Snapshot{
		Join:       join,
		Model:      c.model,
		Generation: c.next,
		Created:    time.Now(),
		Writer:     c.writer,
		Positions:  maps.Clone(positions),
		State:      st,
	}
	if err := c.store.Write(ctx, s); err != nil {
		return err
	}
	c.log.Info("snapshot written", zap.String("model", c.model), zap.Uint64("generation", c.next), zap.Any("positions", positions))
	c.next++
	if err := c.store.Retain(ctx, c.model, c.keep); err != nil {
		c.log.Warn("snapshot retention failed", zap.String("model", c.model), zap.Error(err))
	}
	return nil
}

// ErrNoNextGeneration marks a snapshot that no key can number: the store
// holds the last generation a key can.
var ErrNoNextGeneration = errors.New("no generation after the last")

// Fatal reports whether err, from Snapshot or Store.Write, is one that
// no retry mends, so that the writer must stop: a fenced write
// (ErrFenced: another worker is writing the model), a state the loader
// would refuse (ErrInvalidState: written, it would replace a good
// generation with one no restart can load), or a generation no key
// numbers (ErrNoNextGeneration). epochlog.Fatal adds the epoch log's.
func Fatal(err error) bool {
	for _, target := range []error{ErrFenced, ErrInvalidState, ErrNoNextGeneration} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
