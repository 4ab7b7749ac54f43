package consumer_test

import (
	"context"
	"sync"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// stateDigestLog stores every boundary as a release before chained base
// digests cut it: recording W_{e-1}'s state_sha256, taken from
// generation e-1, where the worker gave W_{e-1}'s base digest. Every
// epoch must have a generation.
type stateDigestLog struct {
	consumer.EpochLog

	mu        sync.Mutex
	written   map[uint64]chan struct{} // closed once generation g is handed to Write
	base      map[uint64][32]byte      // generation g's base digest
	state     map[uint64][32]byte      // and its state's digest
	rewritten int
}

func newStateDigestLog(l consumer.EpochLog) *stateDigestLog {
	return &stateDigestLog{EpochLog: l, written: map[uint64]chan struct{}{}, base: map[uint64][32]byte{}, state: map[uint64][32]byte{}}
}

// generation returns the channel closed once generation g is written.
func (l *stateDigestLog) generation(g uint64) chan struct{} {
	if l.written[g] == nil {
		l.written[g] = make(chan struct{})
	}
	return l.written[g]
}

func (l *stateDigestLog) Write(ctx context.Context, snap *snapshot.Snapshot) error {
	// The epochs change a generation's state only once it is written.
	state := snap.State.Digest()
	l.mu.Lock()
	if _, ok := l.state[snap.Generation]; !ok {
		l.base[snap.Generation], l.state[snap.Generation] = snap.BaseDigest, state
		close(l.generation(snap.Generation))
	}
	l.mu.Unlock()
	return l.EpochLog.Write(ctx, snap)
}

func (l *stateDigestLog) CreateBoundary(ctx context.Context, b *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	if b.Epoch > 1 {
		l.mu.Lock()
		written := l.generation(b.Epoch - 1)
		l.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return nil, [32]byte{}, ctx.Err()
		}
		l.mu.Lock()
		if base, state := l.base[b.Epoch-1], l.state[b.Epoch-1]; b.BaseStateSHA256 == base && base != state {
			old := *b
			old.BaseStateSHA256 = state
			b = &old
			l.rewritten++
		}
		l.mu.Unlock()
	}
	return l.EpochLog.CreateBoundary(ctx, b)
}

// TestEpochsContinueBoundariesOfStateDigests: boundaries cut by a release
// before chained base digests, which record W_{e-1}'s state_sha256, are
// continued (docs/scale-out.md, section 2.2): the chain begins again at
// each, and the model is the one a log of base digests gives.
func TestEpochsContinueBoundariesOfStateDigests(t *testing.T) {
	data := epochLog(600)
	chained := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, chained, memory.NewSink(), "new")
	cfg.SnapshotEvery = 1
	want := runEpochs(t, data, cfg, chained)

	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg = epochConfig(data, store, memory.NewSink(), "old")
	cfg.SnapshotEvery = 1
	old := newStateDigestLog(cfg.Log)
	cfg.Log = old
	if got := runEpochs(t, data, cfg, store); got != want {
		t.Fatalf("the model over boundaries of state digests is %x, over base digests %x", got, want)
	}
	old.mu.Lock()
	rewritten, state := old.rewritten, old.state[2]
	old.mu.Unlock()
	if rewritten < 3 {
		t.Fatalf("%d boundaries recorded a state digest: the test needs a chain to begin again several times", rewritten)
	}
	b, _, err := epochlog.New(store).Boundary(context.Background(), "mixed", 3)
	if err != nil || b.BaseStateSHA256 != state {
		t.Fatalf("epoch 3's boundary (%v) records %x, not generation 2's state digest %x", err, b.BaseStateSHA256, state)
	}
	// The chained log's boundary records a base digest, not a state's.
	c, _, err := epochlog.New(chained).Boundary(context.Background(), "mixed", 3)
	if err != nil || c.BaseStateSHA256 == state {
		t.Fatalf("the chained log's epoch 3 boundary (%v) records the state digest %x", err, c.BaseStateSHA256)
	}
}
