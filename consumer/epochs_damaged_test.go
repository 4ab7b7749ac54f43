package consumer_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// damage flips the last byte of generation gen of the model "mixed" in
// bucket, the bucket store keeps its objects in at no prefix.
func damage(t *testing.T, bucket *blob.Bucket, gen uint64) {
	t.Helper()
	damageKey(t, bucket, snapshot.Key("", "mixed", gen))
}

// damageKey flips the last byte of the object at key in bucket, and
// returns the damaged bytes.
func damageKey(t *testing.T, bucket *blob.Bucket, key string) []byte {
	t.Helper()
	ctx := context.Background()
	data, err := bucket.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := bucket.WriteAll(ctx, key, data, nil); err != nil {
		t.Fatal(err)
	}
	return data
}

// newestGeneration is the newest generation of "mixed" in store.
func newestGeneration(t *testing.T, store *snapshot.Store) uint64 {
	t.Helper()
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) == 0 {
		t.Fatalf("generations %v: %v", gens, err)
	}
	return gens[len(gens)-1]
}

// latestGeneration is the newest generation of "mixed" in store, 0 while
// there is none.
func latestGeneration(store *snapshot.Store) uint64 {
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) == 0 {
		return 0
	}
	return gens[len(gens)-1]
}

// ranStore is a store in which a worker learned every epoch of
// epochLog(600) with epochConfig, changed by edit if set: the log, the
// store's bucket, the store, the configuration and the model it ended at.
func ranStore(t *testing.T, edit func(*consumer.EpochConfig)) (*memory.Log, *blob.Bucket, *snapshot.Store, consumer.EpochConfig, [32]byte) {
	t.Helper()
	data := epochLog(600)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	if edit != nil {
		edit(&cfg)
	}
	return data, bucket, store, cfg, runEpochs(t, data, cfg, store)
}

// TestEpochsRebuildADamagedGeneration: when the newest generation is
// damaged and an older one reads, the epochs after the older one are
// learned again from their boundaries, which retention kept, and the
// damaged generation is written again, holding the model it held.
func TestEpochsRebuildADamagedGeneration(t *testing.T) {
	data, bucket, store, cfg, want := ranStore(t, nil)
	newest := newestGeneration(t, store)
	held, err := store.Load(context.Background(), "mixed", newest)
	if err != nil {
		t.Fatal(err)
	}
	damage(t, bucket, newest)

	cfg.Damaged = []uint64{newest}
	if got := runEpochs(t, data, cfg, store); got != want {
		t.Fatalf("rebuilt over a damaged generation: model %x, want %x", got, want)
	}
	again, err := store.Load(context.Background(), "mixed", newest)
	if err != nil {
		t.Fatalf("the damaged generation %d was not written again: %v", newest, err)
	}
	if again.State.Digest() != held.State.Digest() || again.Epoch != held.Epoch {
		t.Fatalf("generation %d written again holds epoch %d, %x; it held epoch %d, %x",
			newest, again.Epoch, again.State.Digest(), held.Epoch, held.State.Digest())
	}
}

// TestEpochsRebuildWritesOnlyTheDamaged: the epochs rebuilt between the
// generation held and a damaged one above it, which had no generation,
// get none; the damaged one is written again.
func TestEpochsRebuildWritesOnlyTheDamaged(t *testing.T) {
	data, bucket, store, cfg, want := ranStore(t, func(c *consumer.EpochConfig) { c.SnapshotEvery = 1500 })
	before, err := store.Generations(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	newest := before[len(before)-1]
	if len(before) < 2 || before[len(before)-2] >= newest-1 {
		t.Fatalf("generations %v: want epochs without a generation below the newest", before)
	}
	damage(t, bucket, newest)

	cfg.Damaged = []uint64{newest}
	if got := runEpochs(t, data, cfg, store); got != want {
		t.Fatalf("rebuilt over a damaged generation: model %x, want %x", got, want)
	}
	if after, err := store.Generations(context.Background(), "mixed"); err != nil || !slices.Equal(after, before) {
		t.Fatalf("generations %v after the rebuild (%v), want %v as before", after, err, before)
	}
	if _, err := store.Load(context.Background(), "mixed", newest); err != nil {
		t.Fatalf("the damaged generation %d was not written again: %v", newest, err)
	}
}

// TestEpochsRebuildUnderRetention: with more generations damaged above
// the one held than snapshot.keep, retention waits until the last of
// them is written again: counting the damaged ones among those it keeps,
// it would delete the generations and the log the rebuild still needs.
// The rebuild ends with the model of the run that wrote them, in
// readable generations.
func TestEpochsRebuildUnderRetention(t *testing.T) {
	data, bucket, store, cfg, want := ranStore(t, nil)
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) < 4 {
		t.Fatalf("generations %v (%v): want four at least", gens, err)
	}
	damaged := gens[len(gens)-3:]
	for _, g := range damaged {
		damage(t, bucket, g)
	}
	cfg.Damaged, cfg.Keep = damaged, 2
	if got := runEpochs(t, data, cfg, store); got != want {
		t.Fatalf("rebuilt under retention: model %x, want %x", got, want)
	}
	for _, g := range damaged[1:] {
		if _, err := store.Load(context.Background(), "mixed", g); err != nil {
			t.Errorf("generation %d does not read after the rebuild: %v", g, err)
		}
	}
}

// TestEpochsNewHistoryOverTheOnlyGenerationDamaged: with the only
// generation damaged and the log below it deleted by retention, nothing
// rebuilds the model: a new history learns every example again from the
// source's start, above the old log, and ends at the model of a run that
// had no damage (the same state: every example learned once). Two workers that start over the damaged store at once
// begin one history, not two.
func TestEpochsNewHistoryOverTheOnlyGenerationDamaged(t *testing.T) {
	data, bucket, store, _, want := ranStore(t, func(c *consumer.EpochConfig) { c.Keep = 1 })
	newest := newestGeneration(t, store)
	if _, _, err := epochlog.New(store).Boundary(context.Background(), "mixed", 1); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("the first boundary is still in the log (%v): retention was to delete it", err)
	}
	damage(t, bucket, newest)
	if _, err := store.Latest(context.Background(), "mixed", nil); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("a generation still reads (%v), want none", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers []*consumer.Epochs
	var stopped []<-chan error
	for _, writer := range []string{"a", "b"} {
		c := epochConfig(data, store, memory.NewSink(), writer)
		c.Keep, c.Damaged = 1, []uint64{newest}
		x, done := startEpochs(t, ctx, c, store)
		workers, stopped = append(workers, x), append(stopped, done)
	}
	newHistoryEnds(t, ctx, cancel, store, data, newest, workers, stopped, want)
}

// newHistoryEnds waits until a new history above epoch above covers the
// data and every worker has mixed its last epoch, stops them, and checks
// that each holds want, the model of a run without damage.
func newHistoryEnds(t *testing.T, ctx context.Context, cancel context.CancelFunc, store *snapshot.Store, data *memory.Log, above uint64, workers []*consumer.Epochs, stopped []<-chan error, want [32]byte) {
	t.Helper()
	var last uint64
	wait.For(t, time.Minute, 5*time.Millisecond, "the new history's last epoch", func() bool {
		e, ok := complete(ctx, store, data)
		last = e
		return ok && e > above
	})
	for i, x := range workers {
		wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("worker %d to mix epoch %d", i, last), func() bool { return x.Mixed() >= last })
	}
	cancel()
	for i, x := range workers {
		if err := <-stopped[i]; err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		if got := x.Model().State().Digest(); got != want {
			t.Fatalf("worker %d: the new history's model %x, want that of a run without damage %x", i, got, want)
		}
	}
}

// TestEpochsSnapshotEveryCutsEpochs: only a mixed model can be written as
// a generation, so an epoch ends where snapshot.every falls due, however
// large epoch_examples is: a generation for every snapshot.every labeled
// examples, each within an epoch of the least size (1,000 positions of
// each shard) of the multiple.
func TestEpochsSnapshotEveryCutsEpochs(t *testing.T) {
	const every, least = 6000, 6 * 1000
	data := epochLog(4000)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	cfg.EpochExamples, cfg.SnapshotEvery = 100000, every
	runEpochs(t, data, cfg, store)
	ctx := context.Background()
	gens, err := store.Generations(ctx, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	var labeled []uint64
	for _, g := range gens {
		snap, err := store.Load(ctx, "mixed", g)
		if err != nil {
			t.Fatal(err)
		}
		labeled = append(labeled, snap.State.Labeled)
	}
	total := labeled[len(labeled)-1]
	if want := int(total / every); len(gens) < want || want < 2 {
		t.Fatalf("%d generations of %d labeled examples (%v), want one per %d: at least %d", len(gens), total, labeled, every, want)
	}
	prev := uint64(0)
	for i, l := range labeled[:len(labeled)-1] {
		if l/every <= prev/every || l-prev > every+least {
			t.Fatalf("generation %d holds %d labeled examples, the one before %d: want the next multiple of %d, within %d (%v)", gens[i], l, prev, every, least, labeled)
		}
		prev = l
	}
}

// TestEpochsRebuildWithTwoWorkers: two workers, each owning half the
// shards, rebuild two damaged generations from the log, the second
// starting once the first has waited at its barrier for seconds. A
// damaged generation at or beyond the epoch a worker waits for is no
// overtaking: the first waits for the second's results, as at any
// barrier, and both end with the model of the run that wrote the
// generations, which read again.
func TestEpochsRebuildWithTwoWorkers(t *testing.T) {
	data := epochLog(600)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	want := runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "w"), store)
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) < 3 {
		t.Fatalf("generations %v (%v): want three at least", gens, err)
	}
	damaged := gens[len(gens)-2:]
	for _, g := range damaged {
		damage(t, bucket, g)
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var workers []*consumer.Epochs
		var stopped []<-chan error
		for i, writer := range []string{"a", "b"} {
			if i > 0 {
				// The first waits for the second's shards, long enough
				// to look for a generation that overtook it.
				time.Sleep(10 * time.Second)
				synctest.Wait()
			}
			cfg := epochConfig(data, store, memory.NewSink(), writer)
			cfg.Damaged = damaged
			var owned []string
			for p := 3 * i; p < 3*i+3; p++ {
				owned = append(owned, data.Key(p))
			}
			cfg.Owned = func() []shardid.ID { return shardIDs(owned) }
			x, done := startEpochs(t, ctx, cfg, store)
			workers, stopped = append(workers, x), append(stopped, done)
		}
		last := damaged[1]
		for i, x := range workers {
			wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("worker %d to mix epoch %d", i, last), func() bool { return x.Mixed() >= last })
		}
		cancel()
		for i, x := range workers {
			if err := <-stopped[i]; err != nil {
				t.Fatalf("worker %d: %v", i, err)
			}
			if got := x.Model().State().Digest(); got != want {
				t.Fatalf("worker %d rebuilt %x, the run that wrote the generations %x", i, got, want)
			}
		}
	})
	for _, g := range damaged {
		if _, err := store.Load(context.Background(), "mixed", g); err != nil {
			t.Errorf("generation %d was not written again: %v", g, err)
		}
	}
}

// TestEpochsRelearnADamagedShardResult: a shard's result damaged at rest,
// under a boundary that reads, is learned again from the range the
// boundary records and written over the damaged object: the epochs go
// on to the model of a run without damage, and do not stop.
func TestEpochsRelearnADamagedShardResult(t *testing.T) {
	ctx := context.Background()
	data := epochLog(600)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	want := runEpochs(t, data, cfg, store)
	newest := newestGeneration(t, store)
	var results []string
	iter := bucket.List(&blob.ListOptions{Prefix: fmt.Sprintf("mixed/epochs/%020d/shard/", newest)})
	for {
		obj, err := iter.Next(ctx)
		if err != nil {
			break
		}
		results = append(results, obj.Key)
	}
	if len(results) == 0 {
		t.Fatalf("epoch %d has no shard result left to damage", newest)
	}
	key := results[0]
	flipped := damageKey(t, bucket, key)
	// The generation above it damaged too, so that the epoch is mixed
	// again from its results.
	damage(t, bucket, newest)

	cfg.Damaged = []uint64{newest}
	if got := runEpochs(t, data, cfg, store); got != want {
		t.Fatalf("over a damaged shard result: model %x, want %x", got, want)
	}
	if again, err := bucket.ReadAll(ctx, key); err == nil && string(again) == string(flipped) {
		t.Fatalf("the damaged result %s is still there", key)
	}
}

// TestEpochsNewHistoryOverADamagedBoundary: a boundary above every
// readable generation that is damaged at rest, or was deleted, leaves
// nothing that records its ranges, so the history cannot be continued
// through it. Two workers that start over such a store at once learn the
// epochs below it from the log and begin one new history from the model
// mixed there, at its positions, above the old log: every example is
// learned once, and they hold the model of a run without damage.
func TestEpochsNewHistoryOverADamagedBoundary(t *testing.T) {
	for _, harm := range []string{"damaged", "deleted"} {
		t.Run(harm, func(t *testing.T) {
			data := epochLog(600)
			bucket := memblob.OpenBucket(nil)
			store := snapshot.NewStore(bucket, "")
			config := func(writer string) consumer.EpochConfig {
				cfg := epochConfig(data, store, memory.NewSink(), writer)
				// The epoch log alone holds the model: no generation is
				// written, and retention deletes nothing.
				cfg.Log = unwrittenLog{epochlog.New(store)}
				return cfg
			}
			want := runEpochs(t, data, config("w"), store)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if gens, err := store.Generations(ctx, "mixed"); err != nil || len(gens) > 0 {
				t.Fatalf("generations %v (%v), want none", gens, err)
			}
			old, err := epochlog.New(store).Epochs(ctx, "mixed")
			if err != nil || len(old) < 5 {
				t.Fatalf("the log holds epochs %v (%v), want at least 5", old, err)
			}
			const broken = 3
			held, _, err := epochlog.New(store).Boundary(ctx, "mixed", broken-1)
			if err != nil {
				t.Fatal(err)
			}
			key := epochlog.BoundaryKey("", "mixed", broken)
			if harm == "damaged" {
				damageKey(t, bucket, key)
			} else if err := bucket.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}

			var workers []*consumer.Epochs
			var stopped []<-chan error
			for _, writer := range []string{"a", "b"} {
				x, done := startEpochs(t, ctx, config(writer), store)
				workers, stopped = append(workers, x), append(stopped, done)
			}
			newHistoryEnds(t, ctx, cancel, store, data, old[len(old)-1], workers, stopped, want)
			// One new history: one boundary above the old log begins
			// where epoch 2 ended.
			lg := epochlog.New(store)
			epochs, err := lg.Epochs(context.Background(), "mixed")
			if err != nil {
				t.Fatal(err)
			}
			var firsts []uint64
			for _, e := range epochs {
				if e <= old[len(old)-1] {
					continue
				}
				b, _, err := lg.Boundary(context.Background(), "mixed", e)
				if err != nil {
					t.Fatalf("epoch %d: %v", e, err)
				}
				begins := true
				for i, r := range b.Shards {
					begins = begins && r.From == held.Shards[i].To
				}
				if begins {
					firsts = append(firsts, e)
				}
			}
			if len(firsts) != 1 {
				t.Fatalf("new histories begin at epochs %v, want one", firsts)
			}
			// A replay follows the log over the gap, into the new
			// history, to the live model: not to the model held below
			// the gap, as if that were the log's end.
			begin, err := consumer.FollowStart(context.Background(), lg, "mixed")
			if err != nil {
				t.Fatal(err)
			}
			out := snapshot.NewStore(memblob.OpenBucket(nil), "")
			f, err := consumer.Follow(context.Background(), epochConfig(data, out, memory.NewSink(), "replay"), lg, epochlog.New(out), begin,
				epochLearner(), nil, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			if got, last := f.Model.State().Digest(), epochs[len(epochs)-1]; got != want || f.Mixed != last {
				t.Fatalf("the replay ended at epoch %d with %x; the live log ends at %d, with %x", f.Mixed, got, last, want)
			}
		})
	}
}

// followedStore is a store of epochs learned over epochLog(1200) with a
// generation every other epoch or so, as snapshot.every writes them: its
// bucket, the model's digest and its generations, at least min.
func followedStore(t *testing.T, data *memory.Log, min int) (*blob.Bucket, *snapshot.Store, [32]byte, []uint64) {
	t.Helper()
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	cfg.SnapshotEvery = 1500
	want := runEpochs(t, data, cfg, store)
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil || len(gens) < min {
		t.Fatalf("generations %v (%v), want at least %d", gens, err, min)
	}
	return bucket, store, want, gens
}

// followStore replays store's epoch log over data into a store of its
// own, which it returns.
func followStore(t *testing.T, data *memory.Log, store *snapshot.Store) (*consumer.Followed, *snapshot.Store, error) {
	t.Helper()
	ctx := context.Background()
	lg := epochlog.New(store)
	begin, err := consumer.FollowStart(ctx, lg, "mixed")
	if err != nil {
		t.Fatal(err)
	}
	out := snapshot.NewStore(memblob.OpenBucket(nil), "")
	f, err := consumer.Follow(ctx, epochConfig(data, out, memory.NewSink(), "replay"), lg, epochlog.New(out), begin,
		epochLearner(), nil, zaptest.NewLogger(t))
	return f, out, err
}

// TestFollowOverADeletedBoundary: a boundary deleted from the live log
// below a generation that reads (an operator's rm, retention racing the
// replay) is no new history: the live workers went on from that
// generation. A replay goes on from the oldest generation at or above the
// deleted boundary, names the epochs it did not learn, checks the epochs
// above against their live generations, and ends at the live model,
// where it stopped at the gap on every try.
func TestFollowOverADeletedBoundary(t *testing.T) {
	for _, below := range []bool{false, true} {
		t.Run(fmt.Sprintf("below a generation %v", below), func(t *testing.T) {
			data := epochLog(1200)
			bucket, store, want, gens := followedStore(t, data, 4)
			ctx := context.Background()
			// A generation with an epoch that has none below it, above
			// the log's first epoch (retention deleted the boundaries
			// up to the oldest generation), and a generation above it
			// to check.
			var at uint64
			for i, g := range gens[2 : len(gens)-1] {
				if g > gens[i+1]+1 {
					at = g
					break
				}
			}
			if at == 0 {
				t.Fatalf("generations %v: none with an epoch without a generation below it", gens)
			}
			deleted := at
			if below {
				deleted = at - 1
			}
			if err := bucket.Delete(ctx, epochlog.BoundaryKey("", "mixed", deleted)); err != nil {
				t.Fatal(err)
			}

			f, _, err := followStore(t, data, store)
			if err != nil {
				t.Fatalf("Follow over epoch %d's deleted boundary, generation %d reading: %v", deleted, at, err)
			}
			newest := gens[len(gens)-1]
			if got := f.Model.State().Digest(); got != want || f.Mixed != newest {
				t.Fatalf("the replay ended at epoch %d with %x; the live model is at %d, with %x", f.Mixed, got, newest, want)
			}
			if want := []consumer.Gap{{From: deleted, To: at}}; !slices.Equal(f.Gaps, want) {
				t.Fatalf("gaps %v, want %v (began %d, checked %v, unchecked %v, gens %v)", f.Gaps, want, f.Began, f.Checked, f.Unchecked, gens)
			}
			if !slices.Contains(f.Checked, newest) {
				t.Fatalf("epochs checked %v: not the newest generation's, %d", f.Checked, newest)
			}
			for _, e := range append(slices.Clone(f.Checked), f.Unchecked...) {
				if e >= deleted && e <= at {
					t.Fatalf("epoch %d, in the gap %d-%d, is among those replayed: checked %v, unchecked %v", e, deleted, at, f.Checked, f.Unchecked)
				}
			}
			if got := f.NotChecked(gens); !strings.Contains(got, fmt.Sprintf("went on from live generation %d, as stored", at)) {
				t.Fatalf("NotChecked = %q, want the gap named", got)
			}
		})
	}
}

// TestFollowOverTheNewestDeletedBoundary: a replay whose last epoch's
// boundary is deleted goes on to the newest generation, as stored, and
// its output store holds that generation, the model it ends at, where
// it held only the epochs below.
func TestFollowOverTheNewestDeletedBoundary(t *testing.T) {
	data := epochLog(1200)
	bucket, store, want, gens := followedStore(t, data, 2)
	ctx := context.Background()
	newest := gens[len(gens)-1]
	if err := bucket.Delete(ctx, epochlog.BoundaryKey("", "mixed", newest)); err != nil {
		t.Fatal(err)
	}
	f, out, err := followStore(t, data, store)
	if err != nil {
		t.Fatal(err)
	}
	if f.Mixed != newest || f.Model.State().Digest() != want {
		t.Fatalf("the replay ended at epoch %d; the live model is generation %d", f.Mixed, newest)
	}
	held, err := out.Latest(ctx, "mixed", nil)
	if err != nil || held.Generation != newest || held.State.Digest() != want {
		t.Fatalf("the replay's store holds %v (%v), want generation %d, the model it ended at", held, err, newest)
	}
}

// TestFollowStopsAtABoundaryOfAnotherMix: a boundary that reads and
// learns from another model than the one the replay holds, below a
// generation that reads, stops the replay, naming the base digests: it
// may be the replay's divergence from the live workers, which a replay
// exists to show, and it does not go on from the generation above as
// over a damaged or deleted boundary.
func TestFollowStopsAtABoundaryOfAnotherMix(t *testing.T) {
	data := epochLog(1200)
	bucket, store, _, gens := followedStore(t, data, 4)
	ctx := context.Background()
	var at uint64 // an epoch with no generation, below one
	for i, g := range gens[2 : len(gens)-1] {
		if g > gens[i+1]+1 {
			at = g - 1
			break
		}
	}
	if at == 0 {
		t.Fatalf("generations %v: none with an epoch without a generation below it", gens)
	}
	lg := epochlog.New(store)
	b, _, err := lg.Boundary(ctx, "mixed", at)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Delete(ctx, epochlog.BoundaryKey("", "mixed", at)); err != nil {
		t.Fatal(err)
	}
	other := *b
	other.BaseStateSHA256 = sha256.Sum256([]byte("another mix"))
	if _, _, err := lg.CreateBoundary(ctx, &other); err != nil {
		t.Fatal(err)
	}

	f, _, err := followStore(t, data, store)
	if err == nil {
		t.Fatalf("Follow over epoch %d's boundary of another mix: went on (gaps %v, ended at %d)", at, f.Gaps, f.Mixed)
	}
	if !errors.Is(err, consumer.ErrFatal) || !strings.Contains(err.Error(), "base digest") {
		t.Fatalf("Follow over epoch %d's boundary of another mix: %v, want a fatal error naming the base digests", at, err)
	}
}

// unwrittenLog is a log whose generations are never written, as if each
// writer were killed just before: the epoch log alone holds the model.
type unwrittenLog struct{ *epochlog.Log }

func (unwrittenLog) Write(context.Context, *snapshot.Snapshot) error { return nil }
func (unwrittenLog) Retain(context.Context, string, int) error       { return nil }

// TestEpochsStartingBelowRetentionGoOn: a worker that starts at the
// first epoch while another has gone on and retention deleted the log
// below its generations finds the first boundary missing below later
// epochs. That is no damage: it continues from the newest generation,
// and ends at the model the other worker holds, beginning no history.
func TestEpochsStartingBelowRetentionGoOn(t *testing.T) {
	data := epochLog(600)
	store := snapshot.NewStore(memblob.OpenBucket(nil), "")
	cfg := epochConfig(data, store, memory.NewSink(), "ahead")
	cfg.Keep = 1
	want := runEpochs(t, data, cfg, store)
	lg := epochlog.New(store)
	if _, _, err := lg.Boundary(context.Background(), "mixed", 1); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("the first boundary is still in the log (%v): retention was to delete it", err)
	}
	before, err := lg.Epochs(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}

	m, err := learner.New(epochLearner())
	if err != nil {
		t.Fatal(err)
	}
	late := epochConfig(data, store, memory.NewSink(), "late")
	late.Keep = 1
	x := consumer.NewEpochs(late, m, 1, nil, nil, nil, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	last := newestGeneration(t, store)
	if got := finalDigest(t, x, done, cancel, last); got != want {
		t.Fatalf("the late worker holds %x, the other %x", got, want)
	}
	after, err := lg.Epochs(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) > 0 && len(before) > 0 && after[len(after)-1] > before[len(before)-1] {
		t.Fatalf("the late worker began epochs %v above the log's %v", after, before)
	}
}

// TestEpochsNoHistoryAboveTheLastEpoch: an object of the epoch log at the
// last epoch a key can number, above the model held, leaves no epoch to
// begin a new history at: the worker stops, naming it, where it began one
// at each epoch above the model held in turn, for ever, logging each.
func TestEpochsNoHistoryAboveTheLastEpoch(t *testing.T) {
	_, bucket, store, cfg, _ := ranStore(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := epochlog.BoundaryKey("", "mixed", math.MaxUint64)
	if err := bucket.WriteAll(ctx, key, []byte("garbage"), nil); err != nil {
		t.Fatal(err)
	}
	snap, err := store.Latest(ctx, "mixed", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Writer = "again"
	x := continueEpochs(t, snap, cfg, nil, zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		// It does not see ctx either: the test's end leaves it running.
		t.Fatal("Run did not return within a minute")
	}
	if !errors.Is(err, consumer.ErrFatal) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "no new history can begin above it") {
		t.Fatalf("Run: %v, want a fatal error naming %s", err, key)
	}
}

// TestEpochsNewHistoryOverABoundaryOfAnotherMix: a boundary above the
// newest generation that follows that generation's boundary but learns
// from another model (cut by a worker of another release, whose mix of
// the epoch before differs, in a rolling upgrade) stopped every worker at
// every start. A worker now begins a new history from the generation
// held, above it, and learns every example after it once: the model it
// ends at is that of the same runs without the boundary.
func TestEpochsNewHistoryOverABoundaryOfAnotherMix(t *testing.T) {
	run := func(craft bool) [32]byte {
		data := memory.NewLog("ex", 6)
		full := make([][][]byte, 6)
		for p := range full {
			full[p], _ = messages(600 + 7*p)
			data.Append(p, full[p][:len(full[p])/2]...)
		}
		store := snapshot.NewStore(memblob.OpenBucket(nil), "")
		runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "w"), store)
		ctx := context.Background()
		lg := epochlog.New(store)
		var held *epochlog.Boundary
		if craft {
			snap, err := store.Latest(ctx, "mixed", nil)
			if err != nil {
				t.Fatal(err)
			}
			epochs, err := lg.Epochs(ctx, "mixed")
			if err != nil || epochs[len(epochs)-1] != snap.Epoch {
				t.Fatalf("the log ends at %v (%v), the newest generation is of epoch %d", epochs, err, snap.Epoch)
			}
			if held, _, err = lg.Boundary(ctx, "mixed", snap.Epoch); err != nil {
				t.Fatal(err)
			}
			other := *held
			other.Epoch++
			other.BaseStateSHA256 = sha256.Sum256([]byte("another release's mix"))
			other.Cut = epochlog.Cut{Writer: "older", Created: time.Now(), Reason: epochlog.CutExamples}
			other.Shards = nil
			for _, r := range held.Shards {
				other.Shards = append(other.Shards, snapshot.Range{Shard: r.Shard, From: r.To, To: r.To + 10})
			}
			if _, _, err := lg.CreateBoundary(ctx, &other); err != nil {
				t.Fatal(err)
			}
		}
		for p := range full {
			data.Append(p, full[p][len(full[p])/2:]...)
		}
		got := runEpochs(t, data, epochConfig(data, store, memory.NewSink(), "w2"), store)
		if craft {
			epochs, err := lg.Epochs(ctx, "mixed")
			if err != nil {
				t.Fatal(err)
			}
			var begins []uint64
			for _, e := range epochs {
				if e <= held.Epoch+1 {
					continue
				}
				b, _, err := lg.Boundary(ctx, "mixed", e)
				if err != nil {
					t.Fatalf("epoch %d: %v", e, err)
				}
				if b.Shards[0].From == held.Shards[0].To {
					begins = append(begins, e)
				}
			}
			if len(begins) != 1 || begins[0] <= held.Epoch+1 {
				t.Fatalf("new histories begin at epochs %v, want one above epoch %d", begins, held.Epoch+1)
			}
			// A replay follows the log past the boundary into the new
			// history, to the live model.
			begin, err := consumer.FollowStart(ctx, lg, "mixed")
			if err != nil {
				t.Fatal(err)
			}
			out := snapshot.NewStore(memblob.OpenBucket(nil), "")
			f, err := consumer.Follow(ctx, epochConfig(data, out, memory.NewSink(), "replay"), lg, epochlog.New(out), begin,
				epochLearner(), nil, zaptest.NewLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			if d, last := f.Model.State().Digest(), epochs[len(epochs)-1]; d != got || f.Mixed != last {
				t.Fatalf("the replay ended at epoch %d with %x; the live log ends at %d, with %x", f.Mixed, d, last, got)
			}
		}
		return got
	}
	if got, want := run(true), run(false); got != want {
		t.Fatalf("the new history's model %x, want that of the same runs without the boundary %x", got, want)
	}
}

// TestEpochsRetainOverAStrayDamagedGeneration: a damaged generation far
// above every epoch in the log (a stray key: no worker wrote it) is not
// one the epochs rebuild. Continuing from a generation whose next
// boundary the log holds (the worker that cut it killed before its
// generation), they took it for one to rebuild and held retention until
// they reached it, so the store kept every generation and the whole log;
// now retention keeps snapshot.keep generations, the stray one among
// them, as the epochs go on.
func TestEpochsRetainOverAStrayDamagedGeneration(t *testing.T) {
	data, bucket, store, cfg, _ := ranStore(t, func(c *consumer.EpochConfig) { c.Keep = 3 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := bucket.Delete(ctx, snapshot.Key("", "mixed", newestGeneration(t, store))); err != nil {
		t.Fatal(err)
	}
	held := newestGeneration(t, store)
	if _, _, err := epochlog.New(store).Boundary(ctx, "mixed", held+1); err != nil {
		t.Fatalf("epoch %d's boundary: %v", held+1, err)
	}
	stray := held + 1_000_000
	if err := bucket.WriteAll(ctx, snapshot.Key("", "mixed", stray), []byte("garbage"), nil); err != nil {
		t.Fatal(err)
	}
	for p := range 6 {
		msgs, _ := messages(600)
		data.Append(p, msgs...)
	}

	cfg.Damaged = []uint64{stray}
	_, done := startEpochs(t, ctx, cfg, store)
	wait.For(t, time.Minute, 5*time.Millisecond, fmt.Sprintf("retention to delete generation %d and those below it", held), func() bool {
		gens, err := store.Generations(ctx, "mixed")
		return err == nil && len(gens) > 0 && gens[0] > held
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	gens, err := store.Generations(context.Background(), "mixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(gens) > 3 || gens[len(gens)-1] != stray {
		t.Fatalf("generations %v: want at most 3, the stray %d among them", gens, stray)
	}
}

// TestEpochsNewModelOverStrayDamagedGenerations: a new model whose store
// holds damaged keys no worker wrote (a stray generation, one at the
// highest number a generation takes) and no epoch log learns from its
// first epoch to the model one worker mixes, where it began a new history
// above the stray key (epochs from 1001) or, above the highest, retried
// an epoch 0 for ever.
func TestEpochsNewModelOverStrayDamagedGenerations(t *testing.T) {
	data := epochLog(600)
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	ctx := context.Background()
	strays := []uint64{1000, math.MaxUint64}
	for _, g := range strays {
		if err := bucket.WriteAll(ctx, snapshot.Key("", "mixed", g), []byte("garbage"), nil); err != nil {
			t.Fatal(err)
		}
	}
	cfg := epochConfig(data, store, memory.NewSink(), "w")
	cfg.Damaged = strays
	if got, want := runEpochs(t, data, cfg, store), oneWorkerDigest(t, data); got != want {
		t.Fatalf("the model over stray damaged generations %x, one worker's %x", got, want)
	}
	epochs, err := epochlog.New(store).Epochs(ctx, "mixed")
	if err != nil || len(epochs) == 0 || epochs[len(epochs)-1] >= strays[0] {
		t.Fatalf("the log's epochs %v (%v), want them counted from 1, below the stray generation %d", epochs, err, strays[0])
	}
}
