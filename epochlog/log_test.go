package epochlog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
	"github.com/vmihailenco/msgpack/v5"
)

// boundary is a boundary of epoch e of model with three shards, one of
// them empty, cut by writer.
func boundary(t testing.TB, model string, e uint64, writer string) *epochlog.Boundary {
	from, to := int64(100*(e-1)), int64(100*e)
	return &epochlog.Boundary{
		Model:           model,
		Epoch:           e,
		ConfigDigest:    storetest.Digest("history"),
		BaseStateSHA256: baseState(t, model, e).Digest(),
		Shards: []epochlog.Range{
			{Shard: shardid.Kafka("clicks", 0), From: from, To: to},
			{Shard: shardid.Kafka("clicks", 2), From: from / 2, To: to / 2},
			{Shard: shardid.Kafka("clicks", 10), From: 7, To: 7},
		},
		Cut: epochlog.Cut{
			Writer:        writer,
			Created:       time.Date(2026, 11, 21, 12, 0, int(e), 5, time.UTC),
			Reason:        epochlog.CutExamples,
			EpochExamples: 100,
			Interval:      5 * time.Second,
		},
	}
}

// shardResult is the result of shard's range in b, learned by writer.
func shardResult(t testing.TB, b *epochlog.Boundary, sha [32]byte, shard shardid.ID, writer string) *epochlog.ShardResult {
	rg, ok := b.ShardRange(shard)
	if !ok {
		t.Fatalf("no shard %s in the boundary", shard)
	}
	return &epochlog.ShardResult{
		Model: b.Model, Epoch: b.Epoch, Shard: shard, From: rg.From, To: rg.To,
		BoundarySHA256: sha, ConfigDigest: b.ConfigDigest, BaseStateSHA256: b.BaseStateSHA256,
		Messages: uint64(rg.To - rg.From), DeadLetters: 2, Last: rg.To,
		State:   storetest.Generation(t, b.Model, b.Epoch).State,
		Writer:  writer,
		Created: time.Date(2026, 11, 21, 12, 1, 0, 9, time.UTC),
	}
}

// createBoundary stores boundary(t, model, e, "worker-a").
func createBoundary(t testing.TB, s *epochlog.Log, model string, e uint64) (*epochlog.Boundary, [32]byte) {
	t.Helper()
	b, sha, err := s.CreateBoundary(context.Background(), boundary(t, model, e, "worker-a"))
	if err != nil {
		t.Fatal(err)
	}
	return b, sha
}

func TestEpochLogKeys(t *testing.T) {
	if got, want := epochlog.BoundaryKey("models", "clicks", 7), "models/clicks/epochs/00000000000000000007/boundary.msgpack"; got != want {
		t.Errorf("BoundaryKey = %q, want %q", got, want)
	}
	got, err := epochlog.ShardKey("", "clicks", 12, shardid.Kafka("in.v1", 3))
	if want := "clicks/epochs/00000000000000000012/shard/kafka.in.v1.3.msgpack"; err != nil || got != want {
		t.Errorf("ShardKey = %q, %v; want %q", got, err, want)
	}
	if _, err := epochlog.ShardKey("", "clicks", 1, shardid.Kafka("in/x", 3)); err == nil {
		t.Error("ShardKey of a shard whose name has a slash succeeded")
	}
	if _, err := epochlog.ShardKey("", "clicks", 1, shardid.ID{}); err == nil {
		t.Error("ShardKey of no shard succeeded")
	}
	l := epochlog.New(storetest.OpenStore(t, "mem://"))
	if _, err := l.ShardExists(context.Background(), "clicks", 1, shardid.Kafka("in/x", 3)); err == nil || !strings.Contains(err.Error(), `"kafka:in/x/3"`) {
		t.Errorf("ShardExists of topic in/x: %v, want an error that quotes the name", err)
	}
}

func TestBoundaryRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		want := boundary(t, "clicks", 3, "worker-a")
		stored, sha, err := s.CreateBoundary(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(stored, want) {
			t.Fatalf("CreateBoundary returned\n%+v\nwant\n%+v", stored, want)
		}
		key := epochlog.BoundaryKey(s.Prefix(), "clicks", 3)
		raw, err := s.raw.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if sha != sha256.Sum256(raw) {
			t.Fatal("the SHA-256 returned is not that of the stored bytes")
		}
		got, gotSHA, err := s.Boundary(ctx, "clicks", 3)
		if err != nil || !reflect.DeepEqual(got, want) || gotSHA != sha {
			t.Fatalf("Boundary: %+v, %x, %v; want %+v, %x", got, gotSHA, err, want, sha)
		}
		// The body is the documented map.
		var env struct {
			Format   int    `msgpack:"format"`
			Checksum uint32 `msgpack:"checksum"`
			Body     []byte `msgpack:"body"`
		}
		if err := msgpack.Unmarshal(raw, &env); err != nil || env.Format != snapshot.Format || env.Checksum != crc32.ChecksumIEEE(env.Body) {
			t.Fatalf("envelope %+v, %v", env, err)
		}
		var body map[string]any
		if err := msgpack.Unmarshal(env.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body["kind"] != "boundary" || body["model"] != "clicks" || fmt.Sprint(body["epoch"], body["prev"]) != "3 2" {
			t.Fatalf("body %v", body)
		}
		cut := body["cut"].(map[string]any)
		if cut["writer"] != "worker-a" || cut["reason"] != "examples" || cut["interval"] != "5s" || cut["created"] != "2026-11-21T12:00:03.000000005Z" {
			t.Fatalf("cut %v", cut)
		}
		if _, ok := body["promote"]; ok {
			t.Fatalf("a boundary without a request has a promote key: %v", body)
		}
	})
}

// TestBoundaryRecordsARequest: a boundary's promotion request is stored
// and read back; one without an id is refused before the store is
// touched.
func TestBoundaryRecordsARequest(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		want := boundary(t, "clicks", 4, "worker-a")
		want.Promote = &epochlog.Promote{Challenger: "arow", Request: "0123abcd"}
		if _, _, err := s.CreateBoundary(ctx, want); err != nil {
			t.Fatal(err)
		}
		got, _, err := s.Boundary(ctx, "clicks", 4)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Boundary: %+v, %v; want %+v", got, err, want)
		}
		bad := boundary(t, "clicks", 5, "worker-a")
		bad.Promote = &epochlog.Promote{Challenger: "arow"}
		if _, _, err := s.CreateBoundary(ctx, bad); err == nil {
			t.Fatal("a request without an id was recorded")
		}
		if _, _, err := s.Boundary(ctx, "clicks", 5); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("the refused boundary: %v, want not found", err)
		}
	})
}

// TestCreateBoundaryAdopts: a worker that finds the boundary cut adopts
// it, whatever its own cut was.
func TestCreateBoundaryAdopts(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		first, sha := createBoundary(t, s.Log, "clicks", 2)
		late := boundary(t, "clicks", 2, "worker-b")
		late.Shards[0].To += 50
		late.Cut.Reason = epochlog.CutInterval
		got, gotSHA, err := s.another().CreateBoundary(ctx, late)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, first) || gotSHA != sha {
			t.Fatalf("the late cutter got\n%+v\nwant the stored\n%+v", got, first)
		}
	})
}

// TestCreateBoundaryOtherHistory: a boundary cut under another config
// digest, or from another base state, stops the worker, naming both
// digests and the cutter, and stays as it was.
func TestCreateBoundaryOtherHistory(t *testing.T) {
	for name, spoil := range map[string]func(b *epochlog.Boundary){
		"config digest": func(b *epochlog.Boundary) { b.ConfigDigest = storetest.Digest("another history") },
		"base state":    func(b *epochlog.Boundary) { b.BaseStateSHA256 = storetest.Digest("other bits") },
	} {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, s fixture) {
				ctx := context.Background()
				first, sha := createBoundary(t, s.Log, "clicks", 4)
				other := boundary(t, "clicks", 4, "worker-b")
				spoil(other)
				got, _, err := s.CreateBoundary(ctx, other)
				if !errors.Is(err, epochlog.ErrOtherHistory) || !epochlog.Fatal(err) || got != nil {
					t.Fatalf("CreateBoundary: %v, %v; want a fatal ErrOtherHistory", got, err)
				}
				for _, want := range []string{
					"worker-a", epochlog.BoundaryKey(s.Prefix(), "clicks", 4),
					fmt.Sprintf("%x", first.ConfigDigest), fmt.Sprintf("%x", other.ConfigDigest),
					fmt.Sprintf("%x", first.BaseStateSHA256), fmt.Sprintf("%x", other.BaseStateSHA256),
				} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not name %s: %v", want, err)
					}
				}
				if b, bsha, err := s.Boundary(ctx, "clicks", 4); err != nil || bsha != sha || !reflect.DeepEqual(b, first) {
					t.Fatalf("the stored boundary changed: %v", err)
				}
			})
		})
	}
}

// TestCreateBoundaryRace: workers with stores of their own on one bucket
// cut the same epoch at once. Exactly one boundary is created, and every
// worker adopts it.
func TestCreateBoundaryRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		const workers, epochs = 8, 10
		stores := make([]*epochlog.Log, workers)
		for i := range stores {
			stores[i] = s.another()
		}
		for e := uint64(1); e <= epochs; e++ {
			got := make([]*epochlog.Boundary, workers)
			shas := make([][32]byte, workers)
			errs := make([]error, workers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range workers {
				b := boundary(t, "clicks", e, fmt.Sprint("worker-", i))
				b.Shards[0].To += int64(i) // every worker cuts elsewhere
				wg.Go(func() {
					<-start
					got[i], shas[i], errs[i] = stores[i].CreateBoundary(context.Background(), b)
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for i := range workers {
				if errs[i] != nil {
					t.Fatalf("epoch %d, worker %d: %v", e, i, errs[i])
				}
				if got[i].Cut.Writer == fmt.Sprint("worker-", i) {
					won++
				}
				if !reflect.DeepEqual(got[i], got[0]) || shas[i] != shas[0] {
					t.Fatalf("epoch %d: worker %d adopted\n%+v\nworker 0\n%+v", e, i, got[i], got[0])
				}
			}
			if won != 1 {
				t.Fatalf("epoch %d: %d workers cut the boundary they adopted, want 1", e, won)
			}
			stored, sha, err := s.Boundary(context.Background(), "clicks", e)
			if err != nil || sha != shas[0] || !reflect.DeepEqual(stored, got[0]) {
				t.Fatalf("epoch %d: the store holds %+v (%v), not what the workers adopted", e, stored, err)
			}
		}
	})
}

func TestCreateBoundaryRefuses(t *testing.T) {
	for name, spoil := range map[string]func(b *epochlog.Boundary){
		"epoch 0":             func(b *epochlog.Boundary) { b.Epoch = 0 },
		"no config digest":    func(b *epochlog.Boundary) { b.ConfigDigest = [32]byte{} },
		"no base state":       func(b *epochlog.Boundary) { b.BaseStateSHA256 = [32]byte{} },
		"shards out of order": func(b *epochlog.Boundary) { b.Shards[1], b.Shards[2] = b.Shards[2], b.Shards[1] },
		"shard twice":         func(b *epochlog.Boundary) { b.Shards[1] = b.Shards[0] },
		"backwards":           func(b *epochlog.Boundary) { b.Shards[0].From = b.Shards[0].To + 1 },
		"negative":            func(b *epochlog.Boundary) { b.Shards[2].From = -1 },
		"bad shard":           func(b *epochlog.Boundary) { b.Shards[2].Shard = shardid.Kafka("clicks/x", 10) },
		"no shard":            func(b *epochlog.Boundary) { b.Shards[2].Shard = shardid.ID{} },
		"bad model":           func(b *epochlog.Boundary) { b.Model = "a/b" },
	} {
		t.Run(name, func(t *testing.T) {
			s := newFixture(storetest.Backends()[0].Open(t, "models"))
			b := boundary(t, "clicks", 2, "worker-a")
			spoil(b)
			if _, _, err := s.CreateBoundary(context.Background(), b); err == nil {
				t.Fatal("the boundary was created")
			}
			if keys := storetest.ListKeys(t, s.raw, ""); len(keys) != 0 {
				t.Fatalf("the store holds %v", keys)
			}
		})
	}
}

func TestBoundaryFollows(t *testing.T) {
	prev := boundary(t, "clicks", 4, "worker-a")
	good := boundary(t, "clicks", 5, "worker-b")
	if err := good.Follows(prev); err != nil {
		t.Fatal(err)
	}
	joined := boundary(t, "clicks", 5, "worker-b")
	joined.Shards = append(joined.Shards, epochlog.Range{Shard: shardid.Kafka("clicks", 11), From: 0, To: 3})
	if err := joined.Follows(prev); err != nil {
		t.Fatalf("a shard that joins: %v", err)
	}
	for name, spoil := range map[string]func(b *epochlog.Boundary){
		"model":         func(b *epochlog.Boundary) { b.Model = "views" },
		"epoch":         func(b *epochlog.Boundary) { b.Epoch = 6 },
		"config digest": func(b *epochlog.Boundary) { b.ConfigDigest = storetest.Digest("other") },
		"shard left":    func(b *epochlog.Boundary) { b.Shards = b.Shards[:2] },
		"gap":           func(b *epochlog.Boundary) { b.Shards[1].From++ },
		"overlap":       func(b *epochlog.Boundary) { b.Shards[0].From-- },
	} {
		b := boundary(t, "clicks", 5, "worker-b")
		spoil(b)
		if err := b.Follows(prev); !errors.Is(err, epochlog.ErrDamagedLog) {
			t.Errorf("%s: Follows: %v, want ErrDamagedLog", name, err)
		}
	}
}

func TestShardResultRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		b, sha := createBoundary(t, s.Log, "clicks", 3)
		want := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a")
		if ok, err := s.ShardExists(ctx, "clicks", 3, want.Shard); ok || err != nil {
			t.Fatalf("ShardExists before the write: %v, %v", ok, err)
		}
		if _, err := s.Shard(ctx, "clicks", 3, want.Shard, baseOf(t, b)); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Shard before the write: %v, want ErrNotFound", err)
		}
		if err := s.WriteShard(ctx, want, baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, want.Shard)
		if ok, err := s.raw.Exists(ctx, key); !ok || err != nil {
			t.Fatalf("no object at %s (%v)", key, err)
		}
		if ok, err := s.ShardExists(ctx, "clicks", 3, want.Shard); !ok || err != nil {
			t.Fatalf("ShardExists after the write: %v, %v", ok, err)
		}
		got, err := s.Shard(ctx, "clicks", 3, want.Shard, baseOf(t, b))
		if err != nil {
			t.Fatal(err)
		}
		// Read, it names the coordinates of its stored changes.
		changedAt := got.Changed
		got.Changed = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Shard: %v\n got %+v\nwant %+v", err, got, want)
		}
		if err := got.Verify(b, sha); err != nil {
			t.Fatal(err)
		}
		if changedAt == nil || changedAt.All {
			t.Fatalf("the result read names the coordinates %+v, want those of its changes", changedAt)
		}
		for _, v := range [][2][]float64{{got.State.Weights, baseState(t, "clicks", 3).Weights}, {got.State.Variance, baseState(t, "clicks", 3).Variance}} {
			for i := range v[0] {
				_, named := slices.BinarySearch(changedAt.Index, uint32(i))
				if math.Float64bits(v[0][i]) != math.Float64bits(v[1][i]) && !named {
					t.Fatalf("coordinate %d changed, and the result read does not name it", i)
				}
			}
		}
		// The state is stored as the weights that changed from the base,
		// with the rest of the state as a snapshot encodes it.
		body := storedBody(t, s, key)
		st := body["state"].(map[string]any)
		if body["kind"] != "shard" || body["state_form"] != "changes" || st["weights"] != nil || st["config"] == nil || st["bias"] == nil {
			t.Fatalf("body %v", body)
		}
		changes := body["changes"].(map[string]any)["weights"].(map[string]any)
		base := baseState(t, "clicks", 3)
		var changed int
		for i, w := range want.State.Weights {
			if math.Float64bits(w) != math.Float64bits(base.Weights[i]) {
				changed++
			}
		}
		if changed == 0 || len(changes["index"].([]byte)) != 4*changed || len(changes["value"].([]byte)) != 8*changed {
			t.Fatalf("%d weights changed, the changes are %v", changed, changes)
		}
	})
}

// storedBody is the body of the log object at key, as a map.
func storedBody(t *testing.T, s fixture, key string) map[string]any {
	t.Helper()
	raw, err := s.raw.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Body []byte `msgpack:"body"`
	}
	var body map[string]any
	if err := msgpack.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(env.Body, &body); err != nil {
		t.Fatal(err)
	}
	return body
}

// TestWriteShardSame: a second worker that learned the same range writes
// the same result but for its provenance: success, and the first one
// stays.
func TestWriteShardSame(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		b, sha := createBoundary(t, s.Log, "clicks", 3)
		first := shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-a")
		if err := s.WriteShard(ctx, first, baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 3, first.Shard)
		before, _ := s.raw.ReadAll(ctx, key)
		second := shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-b")
		second.Created = second.Created.Add(time.Hour)
		if err := s.another().WriteShard(ctx, second, baseOf(t, b)); err != nil {
			t.Fatalf("the same result from another worker: %v", err)
		}
		if after, _ := s.raw.ReadAll(ctx, key); !bytes.Equal(before, after) {
			t.Fatal("the stored result changed")
		}
	})
}

// TestWriteShardDiffers: a result that differs from the stored one in
// anything but provenance stops the worker, naming what differs.
func TestWriteShardDiffers(t *testing.T) {
	for name, tc := range map[string]struct {
		spoil func(r *epochlog.ShardResult)
		named string
	}{
		"state":          {func(r *epochlog.ShardResult) { r.State.Weights[5] += 1 }, "state_sha256"},
		"state counters": {func(r *epochlog.ShardResult) { r.State.Examples++ }, "state_sha256"},
		"messages":       {func(r *epochlog.ShardResult) { r.Messages++ }, "messages"},
		"last":           {func(r *epochlog.ShardResult) { r.Last-- }, "last"},
		"boundary":       {func(r *epochlog.ShardResult) { r.BoundarySHA256 = storetest.Digest("another boundary") }, "boundary_sha256"},
		"config":         {func(r *epochlog.ShardResult) { r.ConfigDigest = storetest.Digest("another history") }, "config_digest"},
		// Learned from another W_{e-1}: its writer has that base.
		"base state": {nil, "base_state_sha256"},
		"range":      {func(r *epochlog.ShardResult) { r.To++ }, "range"},
	} {
		t.Run(name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, s fixture) {
				ctx := context.Background()
				b, sha := createBoundary(t, s.Log, "clicks", 3)
				if err := s.WriteShard(ctx, shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-a"), baseOf(t, b)); err != nil {
					t.Fatal(err)
				}
				other, base := shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-b"), baseOf(t, b)
				if tc.spoil != nil {
					tc.spoil(other)
				} else {
					st := baseState(t, "clicks", 9)
					other.BaseStateSHA256, base = st.Digest(), epochlog.NewBase(st)
				}
				err := s.WriteShard(ctx, other, base)
				if !errors.Is(err, epochlog.ErrOtherHistory) || !epochlog.Fatal(err) {
					t.Fatalf("WriteShard: %v, want a fatal ErrOtherHistory", err)
				}
				for _, want := range []string{tc.named, "worker-a"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("the error does not name %s: %v", want, err)
					}
				}
			})
		})
	}
}

func TestWriteShardRefuses(t *testing.T) {
	// A state the loader refuses (snapshot's tests hold the others).
	invalid := storetest.Generation(t, "clicks", 2).State
	invalid.Weights[3] = math.NaN()
	for name, tc := range map[string]struct {
		spoil func(r *epochlog.ShardResult)
		is    error
	}{
		"empty range":     {func(r *epochlog.ShardResult) { r.To = r.From }, nil},
		"backwards":       {func(r *epochlog.ShardResult) { r.To = r.From - 1 }, nil},
		"epoch 0":         {func(r *epochlog.ShardResult) { r.Epoch = 0 }, nil},
		"bad shard":       {func(r *epochlog.ShardResult) { r.Shard = shardid.Kafka("clicks/x", 0) }, nil},
		"no shard":        {func(r *epochlog.ShardResult) { r.Shard = shardid.ID{} }, nil},
		"no boundary sha": {func(r *epochlog.ShardResult) { r.BoundarySHA256 = [32]byte{} }, nil},
		"dead letters":    {func(r *epochlog.ShardResult) { r.DeadLetters = r.Messages + 1 }, nil},
		"no state":        {func(r *epochlog.ShardResult) { r.State = nil }, nil},
		"invalid state":   {func(r *epochlog.ShardResult) { r.State = invalid }, snapshot.ErrInvalidState},
		"bad model":       {func(r *epochlog.ShardResult) { r.Model = ".." }, nil},
	} {
		t.Run(name, func(t *testing.T) {
			s := newFixture(storetest.Backends()[0].Open(t, "models"))
			b := boundary(t, "clicks", 2, "worker-a")
			r := shardResult(t, b, storetest.Digest("B_2"), shardid.Kafka("clicks", 0), "worker-a")
			tc.spoil(r)
			err := s.WriteShard(context.Background(), r, baseOf(t, b))
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("WriteShard: %v, want an error (wrapping %v)", err, tc.is)
			}
			if keys := storetest.ListKeys(t, s.raw, ""); len(keys) != 0 {
				t.Fatalf("the store holds %v", keys)
			}
		})
	}
}

func TestShardResultVerify(t *testing.T) {
	b := boundary(t, "clicks", 5, "worker-a")
	sha := storetest.Digest("B_5")
	if err := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a").Verify(b, sha); err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func(r *epochlog.ShardResult){
		"model":        func(r *epochlog.ShardResult) { r.Model = "views" },
		"epoch":        func(r *epochlog.ShardResult) { r.Epoch = 4 },
		"no shard":     func(r *epochlog.ShardResult) { r.Shard = shardid.Kafka("clicks", 1) },
		"from":         func(r *epochlog.ShardResult) { r.From++ },
		"to":           func(r *epochlog.ShardResult) { r.To-- },
		"boundary sha": func(r *epochlog.ShardResult) { r.BoundarySHA256 = storetest.Digest("B_5'") },
		"config":       func(r *epochlog.ShardResult) { r.ConfigDigest = storetest.Digest("other") },
		"base state":   func(r *epochlog.ShardResult) { r.BaseStateSHA256 = storetest.Digest("other") },
	} {
		r := shardResult(t, b, sha, shardid.Kafka("clicks", 2), "worker-a")
		spoil(r)
		if err := r.Verify(b, sha); !errors.Is(err, epochlog.ErrOtherHistory) {
			t.Errorf("%s: Verify: %v, want ErrOtherHistory", name, err)
		}
	}
}

// TestDamagedLog: a log object that cannot be what its key says is
// refused with ErrDamagedLog, naming the key, and never taken for a
// corrupt generation to skip.
func TestDamagedLog(t *testing.T) {
	ctx := context.Background()
	// setUp stores boundaries of epochs 1 and 2 and a result for epoch 2,
	// and returns the stored bytes of each.
	setUp := func(t *testing.T, s fixture) (b1, b2, r2 []byte) {
		createBoundary(t, s.Log, "clicks", 1)
		b, sha := createBoundary(t, s.Log, "clicks", 2)
		if err := s.WriteShard(ctx, shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-a"), baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		key, _ := epochlog.ShardKey(s.Prefix(), "clicks", 2, shardid.Kafka("clicks", 0))
		b1, _ = s.raw.ReadAll(ctx, epochlog.BoundaryKey(s.Prefix(), "clicks", 1))
		b2, _ = s.raw.ReadAll(ctx, epochlog.BoundaryKey(s.Prefix(), "clicks", 2))
		r2, _ = s.raw.ReadAll(ctx, key)
		return b1, b2, r2
	}
	seal := func(body map[string]any, format int) []byte {
		raw, err := msgpack.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		out, err := msgpack.Marshal(map[string]any{"format": format, "checksum": crc32.ChecksumIEEE(raw), "body": raw})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	flip := func(b []byte) []byte {
		b = slices.Clone(b)
		b[len(b)-3] ^= 0x40
		return b
	}
	cases := []struct {
		name  string
		shard bool // damage the result, not the boundary of epoch 2
		data  func(b1, b2, r2 []byte) []byte
	}{
		{"flipped byte", false, func(_, b2, _ []byte) []byte { return flip(b2) }},
		{"flipped byte", true, func(_, _, r2 []byte) []byte { return flip(r2) }},
		{"garbage", false, func(_, _, _ []byte) []byte { return []byte("not a log object") }},
		{"truncated", true, func(_, _, r2 []byte) []byte { return r2[:len(r2)/2] }},
		{"newer format", false, func(_, _, _ []byte) []byte { return seal(map[string]any{"kind": "boundary"}, 2) }},
		{"unknown kind", false, func(_, _, _ []byte) []byte { return seal(map[string]any{"kind": "mixed"}, 1) }},
		{"no kind", true, func(_, _, _ []byte) []byte { return seal(map[string]any{"model": "clicks"}, 1) }},
		{"result at a boundary key", false, func(_, _, r2 []byte) []byte { return r2 }},
		{"boundary at a result key", true, func(_, b2, _ []byte) []byte { return b2 }},
		{"another epoch's boundary", false, func(b1, _, _ []byte) []byte { return b1 }},
		{"short digest", false, func(_, _, _ []byte) []byte {
			return seal(map[string]any{"kind": "boundary", "model": "clicks", "epoch": 2, "prev": 1, "config_digest": []byte{1},
				"base_state_sha256": make([]byte, 32), "shards": []any{}, "cut": map[string]any{"created": "2026-01-01T00:00:00Z", "interval": "1s"}}, 1)
		}},
	}
	for _, b := range storetest.Backends() {
		for _, c := range cases {
			what := "boundary"
			if c.shard {
				what = "result"
			}
			t.Run(b.Name+"/"+what+"/"+c.name, func(t *testing.T) {
				s := newFixture(b.Open(t, "models"))
				b1, b2, r2 := setUp(t, s)
				key := epochlog.BoundaryKey(s.Prefix(), "clicks", 2)
				read := func() error { _, _, err := s.Boundary(ctx, "clicks", 2); return err }
				if c.shard {
					key, _ = epochlog.ShardKey(s.Prefix(), "clicks", 2, shardid.Kafka("clicks", 0))
					read = func() error {
						_, err := s.Shard(ctx, "clicks", 2, shardid.Kafka("clicks", 0), epochlog.NewBase(baseState(t, "clicks", 2)))
						return err
					}
				}
				if err := s.raw.Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
				if err := s.raw.WriteAll(ctx, key, c.data(b1, b2, r2), nil); err != nil {
					t.Fatal(err)
				}
				err := read()
				if !errors.Is(err, epochlog.ErrDamagedLog) || errors.Is(err, snapshot.ErrCorrupt) || !epochlog.Fatal(err) {
					t.Fatalf("reading the damaged %s: %v, want ErrDamagedLog and not ErrCorrupt", what, err)
				}
				if !strings.Contains(err.Error(), key) {
					t.Fatalf("the error does not name %s: %v", key, err)
				}
				// Whoever meets a damaged boundary while writing stops too;
				// a damaged result is written over by the one learned
				// again (docs/scale-out.md, section 3.9), and reads.
				bd, sha := boundary(t, "clicks", 2, "worker-b"), storetest.Digest("B_2")
				if !c.shard {
					if _, _, err = s.CreateBoundary(ctx, bd); !errors.Is(err, epochlog.ErrDamagedLog) {
						t.Fatalf("writing over the damaged %s: %v, want ErrDamagedLog", what, err)
					}
					return
				}
				if err := s.WriteShard(ctx, shardResult(t, bd, sha, shardid.Kafka("clicks", 0), "worker-b"), baseOf(t, bd)); err != nil {
					t.Fatalf("writing over the damaged %s: %v", what, err)
				}
				if _, err := s.Shard(ctx, "clicks", 2, shardid.Kafka("clicks", 0), baseOf(t, bd)); err != nil {
					t.Fatalf("the %s written again does not read: %v", what, err)
				}
			})
		}
	}
}

func TestBoundaryNotFound(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		if _, _, err := s.Boundary(context.Background(), "clicks", 1); !errors.Is(err, snapshot.ErrNotFound) || epochlog.Fatal(err) {
			t.Fatalf("Boundary: %v, want ErrNotFound", err)
		}
	})
}

// TestEpochs lists the epochs with log objects, in numeric order; the
// generations beside them stay invisible to it, and it to Generations
// and Latest.
func TestEpochs(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		storetest.Write(t, s.Store, "clicks", 1, 2, 3)
		for _, e := range []uint64{12, 3, 1, 9} {
			createBoundary(t, s.Log, "clicks", e)
		}
		// A result without its boundary lists too: the caller judges it.
		b := boundary(t, "clicks", 13, "worker-a")
		if err := s.WriteShard(ctx, shardResult(t, b, storetest.Digest("B_13"), shardid.Kafka("clicks", 0), "worker-a"), baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		// A probe a crash left behind, and a stray object.
		for _, key := range []string{"clicks/epochs/probe/worker-a-0123", "clicks/epochs/notes.txt", "clicks/epochs/7/boundary.msgpack"} {
			if err := s.raw.WriteAll(ctx, s.Prefix()+"/"+key, []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Epochs(ctx, "clicks")
		if want := []uint64{1, 3, 9, 12, 13}; err != nil || !slices.Equal(got, want) {
			t.Fatalf("Epochs: %v (%v), want %v", got, err, want)
		}
		if gens, err := s.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{1, 2, 3}) {
			t.Fatalf("Generations: %v (%v), want [1 2 3]", gens, err)
		}
		if latest, err := s.Latest(ctx, "clicks", nil); err != nil || latest.Generation != 3 {
			t.Fatalf("Latest: %v, %v", latest, err)
		}
		if epochs, err := s.Epochs(ctx, "views"); err != nil || len(epochs) != 0 {
			t.Fatalf("Epochs of a model without a log: %v, %v", epochs, err)
		}
	})
}

// logFixture stores generations gens of clicks and, for every epoch in
// epochs, a boundary and the results of its two non-empty shards.
func logFixture(t *testing.T, s fixture, gens []uint64, epochs []uint64) {
	t.Helper()
	storetest.Write(t, s.Store, "clicks", gens...)
	for _, e := range epochs {
		b, sha := createBoundary(t, s.Log, "clicks", e)
		for _, shard := range []shardid.ID{shardid.Kafka("clicks", 0), shardid.Kafka("clicks", 2)} {
			if err := s.WriteShard(context.Background(), shardResult(t, b, sha, shard, "worker-a"), baseOf(t, b)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// logLeft is, for every epoch with objects, whether its boundary and its
// results are still there.
func logLeft(t *testing.T, s fixture) map[uint64]string {
	t.Helper()
	ctx := context.Background()
	epochs, err := s.Epochs(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	left := map[uint64]string{}
	for _, e := range epochs {
		var has []string
		if _, _, err := s.Boundary(ctx, "clicks", e); err == nil {
			has = append(has, "B")
		}
		for _, shard := range []shardid.ID{shardid.Kafka("clicks", 0), shardid.Kafka("clicks", 2)} {
			if ok, _ := s.ShardExists(ctx, "clicks", e, shard); ok {
				has = append(has, "R")
			}
		}
		left[e] = strings.Join(has, "")
	}
	return left
}

// TestRetainLog deletes results below the newest generation (workers may
// still be at its own epoch's barrier) and boundaries up to the oldest
// retained one, nothing else (I7).
func TestRetainLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		logFixture(t, s, []uint64{3, 4, 5}, []uint64{1, 2, 3, 4, 5, 6, 7})
		if err := s.RetainLog(ctx, "clicks", 6, 3); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("RetainLog below generation 6, which is not stored: %v, want ErrNotFound", err)
		}
		if err := s.RetainLog(ctx, "clicks", 4, 5); err == nil {
			t.Fatal("RetainLog with the oldest retained generation above the newest succeeded")
		}
		if got := logLeft(t, s); len(got) != 7 || got[1] != "BRR" {
			t.Fatalf("a refused RetainLog deleted something: %v", got)
		}
		if err := s.RetainLog(ctx, "clicks", 5, 3); err != nil {
			t.Fatal(err)
		}
		want := map[uint64]string{4: "B", 5: "BRR", 6: "BRR", 7: "BRR"}
		if got := logLeft(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("after RetainLog(5, 3): %v, want %v", got, want)
		}
		if gens, _ := s.Generations(ctx, "clicks"); !slices.Equal(gens, []uint64{3, 4, 5}) {
			t.Fatalf("RetainLog touched the generations: %v", gens)
		}
		if err := s.RetainLog(ctx, "clicks", 5, 3); err != nil {
			t.Fatalf("a second pass: %v", err)
		}
		if s.dir != "" {
			// fileblob leaves emptied directories behind; RetainLog does not.
			epochs, err := os.ReadDir(filepath.Join(s.dir, s.Prefix(), "clicks", "epochs"))
			var names []string
			for _, e := range epochs {
				names = append(names, e.Name())
			}
			if want := []string{"00000000000000000004", "00000000000000000005", "00000000000000000006", "00000000000000000007"}; err != nil || !slices.Equal(names, want) {
				t.Fatalf("epoch directories %v (%v), want %v", names, err, want)
			}
			if _, err := os.Stat(filepath.Join(s.dir, s.Prefix(), "clicks", "epochs", "00000000000000000004", "shard")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the emptied shard directory of epoch 4: %v", err)
			}
		}
	})
}

// TestRetainDeletesTheLog: retention of generations deletes the log that
// the generations it keeps make unnecessary.
func TestRetainDeletesTheLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		logFixture(t, s, []uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 3, 4, 5, 6})
		if err := s.Retain(ctx, "clicks", 2); err != nil {
			t.Fatal(err)
		}
		if gens, _ := s.Generations(ctx, "clicks"); !slices.Equal(gens, []uint64{4, 5}) {
			t.Fatalf("generations %v, want [4 5]", gens)
		}
		want := map[uint64]string{5: "BRR", 6: "BRR"}
		if got := logLeft(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("after Retain(2): %v, want %v", got, want)
		}
		// A new epoch, written after the generation, survives retention.
		b, sha := createBoundary(t, s.Log, "clicks", 7)
		if err := s.WriteShard(ctx, shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-a"), baseOf(t, b)); err != nil {
			t.Fatal(err)
		}
		if err := s.Retain(ctx, "clicks", 2); err != nil {
			t.Fatal(err)
		}
		want[7] = "BR"
		if got := logLeft(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a second Retain(2): %v, want %v", got, want)
		}
	})
}

// TestProbeConditionalCreate passes on every store here and leaves
// nothing behind.
func TestProbeConditionalCreate(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		if err := s.ProbeConditionalCreate(context.Background(), "clicks", "worker/a b"); err != nil {
			t.Fatal(err)
		}
		if keys := storetest.ListKeys(t, s.raw, s.Prefix()+"/"); len(keys) != 0 {
			t.Fatalf("the probe left %v", keys)
		}
	})
}

// TestProbeRefusesUnconditionalStore: an S3 server that ignores
// If-None-Match fails the probe, fatally, and the probe cleans up.
func TestProbeRefusesUnconditionalStore(t *testing.T) {
	srv := s3test.StartIgnoringConditions(t)
	s := epochlog.New(storetest.OpenStore(t, srv.URL(t)))
	err := s.ProbeConditionalCreate(context.Background(), "clicks", "worker-a")
	if !errors.Is(err, epochlog.ErrNoConditionalCreate) || !epochlog.Fatal(err) {
		t.Fatalf("probe: %v, want a fatal ErrNoConditionalCreate", err)
	}
	raw := storetest.OpenBucket(t, "s3://"+srv.Bucket+"?"+srv.Query())
	if keys := storetest.ListKeys(t, raw, ""); len(keys) != 0 {
		t.Fatalf("the probe left %v", keys)
	}
}

// TestWrittenDigest: an epoch's generation names its own history, an
// older one the history of the boundary after it, and without such a
// boundary none is said.
func TestWrittenDigest(t *testing.T) {
	eachBackend(t, func(t *testing.T, s fixture) {
		ctx := context.Background()
		createBoundary(t, s.Log, "clicks", 1)
		for name, c := range map[string]struct {
			snap *snapshot.Snapshot
			want [32]byte
			ok   bool
		}{
			"no generation":       {nil, storetest.Digest("history"), true},
			"an epoch's":          {&snapshot.Snapshot{Epoch: 4, ConfigDigest: storetest.Digest("own")}, storetest.Digest("own"), true},
			"before the boundary": {&snapshot.Snapshot{Generation: 0}, storetest.Digest("history"), true},
			"no boundary after":   {&snapshot.Snapshot{Generation: 7}, [32]byte{}, false},
		} {
			got, ok, err := s.WrittenDigest(ctx, "clicks", c.snap)
			if err != nil || got != c.want || ok != c.ok {
				t.Errorf("%s: %x %v %v, want %x %v", name, got, ok, err, c.want, c.ok)
			}
		}
	})
}

// TestKind: a boundary and a shard's result as stored are known as what
// they are; a generation and bytes of no object are neither.
func TestKind(t *testing.T) {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	store := snapshot.NewStore(bucket, "")
	defer store.Close()
	lg := epochlog.New(store)
	b, sha := createBoundary(t, lg, "clicks", 1)
	r := shardResult(t, b, sha, shardid.Kafka("clicks", 0), "worker-a")
	if err := lg.WriteShard(ctx, r, baseOf(t, b)); err != nil {
		t.Fatal(err)
	}
	shardKey, err := epochlog.ShardKey("", "clicks", 1, shardid.Kafka("clicks", 0))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := snapshot.Marshal(storetest.Generation(t, "clicks", 1))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{epochlog.BoundaryKey("", "clicks", 1): "boundary", shardKey: "shard"} {
		data, err := bucket.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if got := epochlog.Kind(data); got != want {
			t.Errorf("Kind of %s = %q, want %q", key, got, want)
		}
	}
	for name, data := range map[string][]byte{"a generation": gen, "no object": []byte("not msgpack")} {
		if got := epochlog.Kind(data); got != "" {
			t.Errorf("Kind of %s = %q, want none", name, got)
		}
	}
}
