package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
)

func TestStoreWriteThenLatest(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		want := storetest.Generation(t, "clicks", 1)
		if err := s.Write(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, err := s.Latest(ctx, "clicks", zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Latest returned another snapshot than was written:\n got %+v\nwant %+v", got, want)
		}
		loaded, err := s.Load(ctx, "clicks", 1)
		if err != nil || !reflect.DeepEqual(loaded, want) {
			t.Fatalf("Load: %v, equal %v", err, reflect.DeepEqual(loaded, want))
		}
	})
}

// TestStoreGenerationsInOrder writes more than ten generations out of
// order: the store lists them in numeric order, because zero-padded keys
// sort like their numbers ("10" < "9" otherwise).
func TestStoreGenerationsInOrder(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		want := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
		shuffled := slices.Clone(want)
		rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		storetest.Write(t, s.Store, "clicks", shuffled...)

		got, err := s.Generations(ctx, "clicks")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("generations %v, want %v", got, want)
		}
		// The bucket itself lists the keys in generation order.
		var listed []string
		it := s.Raw.List(&blob.ListOptions{Prefix: s.Prefix() + "/clicks/"})
		for {
			obj, err := it.Next(ctx)
			if err != nil {
				break
			}
			listed = append(listed, obj.Key)
		}
		var keys []string
		for _, g := range want {
			keys = append(keys, snapshot.Key(s.Prefix(), "clicks", g))
		}
		if !slices.Equal(listed, keys) {
			t.Fatalf("bucket lists\n%v\nwant\n%v", listed, keys)
		}
		latest, err := s.Latest(ctx, "clicks", nil)
		if err != nil || latest.Generation != 12 {
			t.Fatalf("Latest: generation %v, error %v; want 12", latest, err)
		}
	})
}

func TestStoreKey(t *testing.T) {
	tests := []struct {
		prefix, model string
		gen           uint64
		want          string
	}{
		{"models", "clicks", 7, "models/clicks/00000000000000000007.msgpack"},
		{"a/b/", "clicks", 12, "a/b/clicks/00000000000000000012.msgpack"},
		{"", "clicks", 1, "clicks/00000000000000000001.msgpack"},
		{"m", "x", ^uint64(0), "m/x/18446744073709551615.msgpack"},
	}
	for _, tt := range tests {
		if got := snapshot.Key(tt.prefix, tt.model, tt.gen); got != tt.want {
			t.Errorf("Key(%q, %q, %d) = %q, want %q", tt.prefix, tt.model, tt.gen, got, tt.want)
		}
	}
}

func TestStoreSecondWriterIsFenced(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		first := storetest.Generation(t, "clicks", 3)
		if err := s.Write(ctx, first); err != nil {
			t.Fatal(err)
		}
		second := storetest.Generation(t, "clicks", 3)
		second.Writer, second.Positions = "worker-b", map[string]int64{"kafka:examples/0": 1}
		err := s.Write(ctx, second)
		if !errors.Is(err, snapshot.ErrFenced) {
			t.Fatalf("second write of generation 3: %v, want ErrFenced", err)
		}
		for _, want := range []string{"another worker wrote it first", "clicks", "generation 3", snapshot.Key(s.Prefix(), "clicks", 3)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		got, err := s.Load(ctx, "clicks", 3)
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("the fenced write changed the snapshot (load error %v)", err)
		}
	})
}

// TestStoreConcurrentWritersOneWins races writers of one generation, each
// with its own store on one bucket as separate workers have, past the
// existence check: the atomic create-if-absent lets exactly one through.
// On file:// that is the store's link, since fileblob's own precondition
// is a stat before a rename, which several writers can pass together.
func TestStoreConcurrentWritersOneWins(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		const writers, rounds = 8, 20
		stores := make([]*snapshot.Store, writers)
		for i := range stores {
			stores[i] = s.Another()
		}
		for gen := uint64(1); gen <= rounds; gen++ {
			snaps := make([]*snapshot.Snapshot, writers)
			for i := range snaps {
				snaps[i] = storetest.Generation(t, "clicks", gen)
				snaps[i].Writer = fmt.Sprintf("worker-%d", i)
			}
			errs := make([]error, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					<-start
					errs[i] = stores[i].Write(context.Background(), snaps[i])
				})
			}
			close(start)
			wg.Wait()
			won := -1
			for i, err := range errs {
				switch {
				case err == nil && won >= 0:
					t.Fatalf("generation %d: workers %d and %d both wrote it", gen, won, i)
				case err == nil:
					won = i
				case !errors.Is(err, snapshot.ErrFenced):
					t.Errorf("a losing writer failed with %v, want ErrFenced", err)
				}
			}
			if won < 0 {
				t.Fatalf("no writer of generation %d succeeded", gen)
			}
			got, err := s.Load(context.Background(), "clicks", gen)
			if err != nil || got.Writer != snaps[won].Writer {
				t.Fatalf("generation %d holds %v (%v), want the winner's %s", gen, got, err, snaps[won].Writer)
			}
		}
	})
}

func TestStoreSkipsCorruptNewest(t *testing.T) {
	ctx := context.Background()
	valid2, err := snapshot.Marshal(storetest.Generation(t, "clicks", 2))
	if err != nil {
		t.Fatal(err)
	}
	valid3, err := snapshot.Marshal(storetest.Generation(t, "clicks", 3))
	if err != nil {
		t.Fatal(err)
	}
	damaged := slices.Clone(valid3)
	damaged[len(damaged)-10] ^= 0xff
	corruptions := []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("this is not a snapshot")},
		{"empty", nil},
		{"truncated", valid3[:len(valid3)/2]},
		{"flipped byte", damaged},
		{"another generation's content", valid2},
	}
	for _, b := range storetest.Backends() {
		for _, c := range corruptions {
			t.Run(b.Name+"/"+c.name, func(t *testing.T) {
				s := b.Open(t, "models")
				storetest.Write(t, s.Store, "clicks", 1, 2, 3)
				key := snapshot.Key(s.Prefix(), "clicks", 3)
				if err := s.Raw.Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
				if err := s.Raw.WriteAll(ctx, key, c.data, nil); err != nil {
					t.Fatal(err)
				}
				core, logs := observer.New(zapcore.WarnLevel)
				got, err := s.Latest(ctx, "clicks", zap.New(core))
				if err != nil {
					t.Fatal(err)
				}
				if got.Generation != 2 {
					t.Fatalf("Latest returned generation %d, want 2 (3 is corrupt)", got.Generation)
				}
				warned := logs.FilterField(zap.String("key", key)).All()
				if len(warned) != 1 || !strings.Contains(warned[0].Message, "previous") {
					t.Fatalf("want one warning naming %s, logged %v", key, logs.All())
				}
				if _, err := s.Load(ctx, "clicks", 3); !errors.Is(err, snapshot.ErrCorrupt) {
					t.Fatalf("Load of the corrupt generation: %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

func TestStoreAllCorruptIsNotFound(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		storetest.Write(t, s.Store, "clicks", 1)
		key := snapshot.Key(s.Prefix(), "clicks", 1)
		if err := s.Raw.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := s.Raw.WriteAll(ctx, key, []byte{0xc1}, nil); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.WarnLevel)
		if _, err := s.Latest(ctx, "clicks", zap.New(core)); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Latest: %v, want ErrNotFound", err)
		}
		if logs.Len() != 1 {
			t.Fatalf("%d warnings, want 1", logs.Len())
		}
	})
}

func TestStoreEmptyModel(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		if _, err := s.Latest(ctx, "clicks", nil); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Latest: %v, want ErrNotFound", err)
		}
		if _, err := s.Load(ctx, "clicks", 1); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Load: %v, want ErrNotFound", err)
		}
		gens, err := s.Generations(ctx, "clicks")
		if err != nil || len(gens) != 0 {
			t.Fatalf("Generations: %v, %v; want none", gens, err)
		}
	})
}

func TestStoreRetain(t *testing.T) {
	tests := []struct {
		keep int
		want []uint64
	}{
		{1, []uint64{5}},
		{3, []uint64{3, 4, 5}},
		{5, []uint64{1, 2, 3, 4, 5}},
		{9, []uint64{1, 2, 3, 4, 5}},
	}
	for _, b := range storetest.Backends() {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/keep %d", b.Name, tt.keep), func(t *testing.T) {
				ctx := context.Background()
				s := b.Open(t, "models")
				storetest.Write(t, s.Store, "clicks", 1, 2, 3, 4, 5)
				storetest.Write(t, s.Store, "views", 1, 2)
				if err := s.Retain(ctx, "clicks", tt.keep); err != nil {
					t.Fatal(err)
				}
				got, err := s.Generations(ctx, "clicks")
				if err != nil || !slices.Equal(got, tt.want) {
					t.Fatalf("after Retain(%d): %v (%v), want %v", tt.keep, got, err, tt.want)
				}
				if views, _ := s.Generations(ctx, "views"); len(views) != 2 {
					t.Fatalf("Retain of clicks touched views: %v", views)
				}
				if err := s.Retain(ctx, "clicks", 0); err == nil {
					t.Fatal("Retain(0) deleted every snapshot")
				}
			})
		}
	}
}

// TestStoreModelsApart: models under one prefix do not see each other,
// even when one name starts with the other.
func TestStoreModelsApart(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		storetest.Write(t, s.Store, "clicks", 1, 2, 3)
		storetest.Write(t, s.Store, "clicks2", 7)
		storetest.Write(t, s.Store, "views", 4)
		want := map[string][]uint64{"clicks": {1, 2, 3}, "clicks2": {7}, "views": {4}, "click": nil}
		for model, gens := range want {
			got, err := s.Generations(ctx, model)
			if err != nil || !slices.Equal(got, gens) {
				t.Errorf("%s: %v (%v), want %v", model, got, err, gens)
			}
		}
		latest, err := s.Latest(ctx, "clicks", nil)
		if err != nil || latest.Model != "clicks" || latest.Generation != 3 {
			t.Fatalf("Latest of clicks: %+v, %v", latest, err)
		}
	})
}

func TestStoreRefusesBadNames(t *testing.T) {
	s := snapshot.NewStore(memblob.OpenBucket(nil), "")
	defer s.Close()
	ctx := context.Background()
	for _, model := range []string{"", ".", "..", "a/b"} {
		if err := s.Write(ctx, storetest.Generation(t, model, 1)); err == nil {
			t.Errorf("model %q was written", model)
		}
	}
	if err := s.Write(ctx, storetest.Generation(t, "clicks", 0)); err == nil {
		t.Error("generation 0 was written")
	}
}

// TestOpenStoreURL checks where keys land for each form of URL, S3 with
// its endpoint and path-style options included.
func TestOpenStoreURL(t *testing.T) {
	ctx := context.Background()
	t.Run("file", func(t *testing.T) {
		tests := []struct{ query, want string }{
			{"", ""},
			{"?prefix=models", "models/"},
			{"?prefix=/a/b/", "a/b/"},
		}
		for _, tt := range tests {
			dir := t.TempDir()
			s := storetest.OpenStore(t, "file://"+dir+tt.query)
			storetest.Write(t, s, "clicks", 1)
			want := filepath.Join(dir, filepath.FromSlash(tt.want+"clicks/00000000000000000001.msgpack"))
			if _, err := os.Stat(want); err != nil {
				t.Errorf("file://%s%s: %v", dir, tt.query, err)
			}
		}
	})
	t.Run("s3", func(t *testing.T) {
		srv := s3test.Start(t)
		bucket, query, base := srv.Bucket, srv.Query(), s3test.Prefix(t)
		raw := storetest.OpenBucket(t, "s3://"+bucket+"?"+query)
		t.Cleanup(func() { storetest.DeleteAll(t, raw, base+"/") })
		tests := []struct{ path, query, want string }{
			{"/" + base + "/team/models", "", base + "/team/models/"},
			{"/" + base + "/team/", "&prefix=models", base + "/team/models/"},
			{"", "&prefix=" + base + "/p", base + "/p/"},
		}
		for _, tt := range tests {
			url := "s3://" + bucket + tt.path + "?" + query + tt.query
			s := storetest.OpenStore(t, url)
			storetest.Write(t, s, "clicks", 1)
			key := tt.want + "clicks/00000000000000000001.msgpack"
			if ok, err := raw.Exists(ctx, key); !ok {
				t.Errorf("%s: no %s (%v)", url, key, err)
			}
			if err := raw.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("unknown scheme", func(t *testing.T) {
		if _, err := snapshot.OpenStore(ctx, "ftp://host/x"); err == nil {
			t.Fatal("ftp:// opened")
		}
	})
}

// BenchmarkStoreRoundTrip writes a model of 2^20 weights and reads it
// back; MB/s counts the snapshot's bytes once per round trip.
func BenchmarkStoreRoundTrip(b *testing.B) {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 20
	m, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	st := m.State()
	r := rand.New(rand.NewPCG(5, 6))
	for i := range st.Weights {
		st.Weights[i] = r.NormFloat64()
	}
	s := snap(st)
	data, err := snapshot.Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	for _, be := range storetest.Backends() {
		if be.Name == "mem" {
			continue
		}
		b.Run(be.Name, func(b *testing.B) {
			ctx := context.Background()
			store := be.Open(b, "bench")
			for gen := uint64(1); b.Loop(); gen++ {
				s.Generation = gen
				if err := store.Write(ctx, s); err != nil {
					b.Fatal(err)
				}
				if _, err := store.Load(ctx, s.Model, gen); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := store.Retain(ctx, s.Model, 1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(len(data))*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
		})
	}
}

// TestSnapshotterRefusesAnInvalidState feeds the snapshotter a state the
// loader would skip as corrupt: it must refuse it before it writes or
// deletes anything, so that retention never rotates out the good
// generations in favour of one that cannot load, and write the next good
// state under the generation it refused.
func TestSnapshotterRefusesAnInvalidState(t *testing.T) {
	for name, tc := range invalidStates(t) {
		if tc.field != "r2" && tc.field != "weights" {
			continue // the format test has the rest; here, the pills
		}
		t.Run(name, func(t *testing.T) {
			storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
				ctx := context.Background()
				c := snapshot.NewSnapshotter(s.Store, "clicks", "worker-a", 1, 2, zap.NewNop())
				good := storetest.Generation(t, "clicks", 1).State
				for range 3 {
					if err := c.Snapshot(ctx, good, map[string]int64{"kafka:examples/0": 10}, nil); err != nil {
						t.Fatal(err)
					}
				}
				err := c.Snapshot(ctx, tc.state, map[string]int64{"kafka:examples/0": 20}, nil)
				if !errors.Is(err, snapshot.ErrInvalidState) || !strings.Contains(err.Error(), "state "+tc.field) {
					t.Fatalf("Snapshot of the invalid state: %v, want ErrInvalidState naming %s", err, tc.field)
				}
				if gens, err := s.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{2, 3}) {
					t.Fatalf("generations %v (%v) after the refused write, want [2 3]", gens, err)
				}
				if exists, err := s.Raw.Exists(ctx, snapshot.Key(s.Prefix(), "clicks", 4)); err != nil || exists {
					t.Fatalf("key of generation 4 exists: %v (%v)", exists, err)
				}
				if latest, err := s.Latest(ctx, "clicks", nil); err != nil || latest.Generation != 3 {
					t.Fatalf("Latest: %v, want generation 3", err)
				}
				if err := c.Snapshot(ctx, good, map[string]int64{"kafka:examples/0": 30}, nil); err != nil {
					t.Fatal(err)
				}
				if gens, _ := s.Generations(ctx, "clicks"); !slices.Equal(gens, []uint64{3, 4}) {
					t.Fatalf("generations %v after the next good write, want [3 4]", gens)
				}
			})
		})
	}
}

// TestStoreRetryOfALandedWrite: a write whose response was lost is retried
// by the same writer with a new creation time; finding its own snapshot
// under the key, the retry succeeds instead of reporting a second worker.
// The same writer with another state or other positions is still fenced.
func TestStoreRetryOfALandedWrite(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		first := storetest.Generation(t, "clicks", 3)
		if err := s.Write(ctx, first); err != nil {
			t.Fatal(err)
		}
		retry := storetest.Generation(t, "clicks", 3)
		retry.Created = first.Created.Add(time.Second)
		if err := s.Write(ctx, retry); err != nil {
			t.Fatalf("the retry of a write that landed: %v", err)
		}
		other := storetest.Generation(t, "clicks", 3)
		other.Positions = map[string]int64{"kafka:examples/0": 1}
		if err := s.Write(ctx, other); !errors.Is(err, snapshot.ErrFenced) {
			t.Fatalf("the same writer with other positions: %v, want ErrFenced", err)
		}
		changed := storetest.Generation(t, "clicks", 3)
		changed.State.Weights[0] += 1
		if err := s.Write(ctx, changed); !errors.Is(err, snapshot.ErrFenced) {
			t.Fatalf("the same writer with another state: %v, want ErrFenced", err)
		}
		got, err := s.Load(ctx, "clicks", 3)
		if err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("the generation changed (load error %v)", err)
		}
	})
}

// TestStoreEpochGenerationFromAnotherWriter: the mixed model of an epoch
// is the same whoever computes it, so a second worker writing the same
// generation succeeds; one with other content is still fenced.
func TestStoreEpochGenerationFromAnotherWriter(t *testing.T) {
	storetest.EachBackend(t, func(t *testing.T, s storetest.Fixture) {
		ctx := context.Background()
		mixed := func(writer string) *snapshot.Snapshot {
			g := storetest.Generation(t, "clicks", 3)
			g.Writer, g.Epoch, g.Scope = writer, 3, "global"
			g.ConfigDigest, g.BoundarySHA256 = storetest.Digest("history"), storetest.Digest("B_3")
			g.Boundary = []snapshot.Range{{Shard: shardid.Kafka("examples", 0), From: 200, To: 300}}
			return g
		}
		first := mixed("worker-a")
		if err := s.Write(ctx, first); err != nil {
			t.Fatal(err)
		}
		same := mixed("worker-b")
		same.Created = first.Created.Add(time.Minute)
		if err := s.Another().Write(ctx, same); err != nil {
			t.Fatalf("the same mixed model from another worker: %v", err)
		}
		for name, spoil := range map[string]func(g *snapshot.Snapshot){
			"positions":     func(g *snapshot.Snapshot) { g.Positions = map[string]int64{"kafka:examples/0": 301} },
			"boundary sha":  func(g *snapshot.Snapshot) { g.BoundarySHA256 = storetest.Digest("B_3'") },
			"boundary":      func(g *snapshot.Snapshot) { g.Boundary[0].To = 301 },
			"config digest": func(g *snapshot.Snapshot) { g.ConfigDigest = storetest.Digest("other") },
			"state":         func(g *snapshot.Snapshot) { g.State.Weights[1] += 1 },
			"not an epoch's": func(g *snapshot.Snapshot) {
				g.Epoch, g.ConfigDigest, g.Boundary, g.BoundarySHA256, g.Scope = 0, [32]byte{}, nil, [32]byte{}, ""
			},
		} {
			other := mixed("worker-b")
			spoil(other)
			if err := s.Write(ctx, other); !errors.Is(err, snapshot.ErrFenced) {
				t.Errorf("%s: %v, want ErrFenced", name, err)
			}
		}
		if got, err := s.Load(ctx, "clicks", 3); err != nil || !reflect.DeepEqual(got, first) {
			t.Fatalf("the generation changed (load error %v)", err)
		}
	})
}
