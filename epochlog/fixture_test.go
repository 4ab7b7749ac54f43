package epochlog_test

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// The stores the log is tested on, as package snapshot's tests open
// them.

// backend opens a log under a key prefix.
type backend struct {
	name string
	open func(t testing.TB, prefix string) fixture
}

// fixture is a log with the bucket it writes to, for tests that reach
// past the store, and the key prefix it writes under in that bucket.
type fixture struct {
	*epochlog.Log
	raw    *blob.Bucket
	prefix string
	// another opens one more log on the same bucket and prefix, as
	// another worker does.
	another func() *epochlog.Log
	// dir is the directory of a file:// store, empty for the others.
	dir string
}

// backends are every store that runs here: memory, a directory, and S3
// (in-process, or the server HYPERPLANE_TEST_S3_ENDPOINT names).
func backends() []backend {
	return []backend{
		{"mem", func(t testing.TB, prefix string) fixture {
			b := memblob.OpenBucket(nil)
			s := snapshot.NewStore(b, prefix)
			t.Cleanup(func() { s.Close() })
			// The other stores share b, which the first one closes.
			another := func() *epochlog.Log { return epochlog.New(snapshot.NewStore(b, prefix)) }
			return fixture{Log: epochlog.New(s), raw: b, prefix: prefix, another: another}
		}},
		{"file", func(t testing.TB, prefix string) fixture {
			dir := t.TempDir()
			url := "file://" + dir + "?prefix=" + prefix
			another := func() *epochlog.Log { return openLog(t, url) }
			return fixture{Log: another(), raw: openBucket(t, "file://"+dir), prefix: prefix, another: another, dir: dir}
		}},
		{"s3", func(t testing.TB, prefix string) fixture {
			srv := s3test.Start(t)
			prefix = s3test.Prefix(t) + "/" + prefix
			raw := openBucket(t, "s3://"+srv.Bucket+"?"+srv.Query())
			t.Cleanup(func() { deleteAll(t, raw, prefix+"/") })
			url := "s3://" + srv.Bucket + "/" + prefix + "?" + srv.Query()
			another := func() *epochlog.Log { return openLog(t, url) }
			return fixture{Log: another(), raw: raw, prefix: prefix, another: another}
		}},
	}
}

func eachBackend(t *testing.T, test func(t *testing.T, s fixture)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t, "models")) })
	}
}

func deleteAll(t testing.TB, b *blob.Bucket, prefix string) {
	ctx := context.Background()
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			return
		}
		if err := b.Delete(ctx, obj.Key); err != nil {
			t.Logf("clean up %s: %v", obj.Key, err)
		}
	}
}

func openLog(t testing.TB, url string) *epochlog.Log {
	t.Helper()
	s, err := snapshot.OpenStore(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return epochlog.New(s)
}

func openBucket(t testing.TB, url string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func listKeys(t testing.TB, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// generation is a small trained snapshot of model at gen.
func generation(t testing.TB, model string, gen uint64) *snapshot.Snapshot {
	t.Helper()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for e := range 20 + int(gen) {
		x := learner.Example{Labeled: e%5 != 0}
		var f float64
		for range 5 {
			i, v := r.IntN(cfg.Dimension()), float64(r.IntN(5)-2)
			x.Add(uint32(i), v)
			f += float64(i%3-1) * v
		}
		x.Label = -1
		if f >= 0 {
			x.Label = 1
		}
		m.Learn(&x)
	}
	return &snapshot.Snapshot{
		Model:      model,
		Generation: gen,
		Created:    time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC),
		Writer:     "worker-a",
		Positions:  map[string]int64{"kafka:examples/0": int64(100 * gen)},
		State:      m.State(),
	}
}

func write(t testing.TB, s *epochlog.Log, model string, gens ...uint64) {
	t.Helper()
	for _, g := range gens {
		if err := s.Write(context.Background(), generation(t, model, g)); err != nil {
			t.Fatal(err)
		}
	}
}
