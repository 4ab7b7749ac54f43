// Package storetest gives tests the snapshot stores they run on, one
// fixture to reach past a store to its bucket, and the small helpers
// the tests of a store, and of what is built on one, share: a trained
// generation to write, the keys of a bucket, and the credentials no
// error of a store may show.
//
// Every store runs on each Backend: memory, a directory (file://), and
// S3 through s3test, in-process or the server HYPERPLANE_TEST_S3_ENDPOINT
// names; a test that uses the S3 one must not run in parallel with
// others, for the reason s3test gives.
package storetest

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// Backend opens a store under a key prefix.
type Backend struct {
	Name string
	Open func(t testing.TB, prefix string) Fixture
}

// Fixture is a store with the bucket it writes to, for tests that reach
// past the store. The store's Prefix is the key prefix it writes under
// in that bucket.
type Fixture struct {
	*snapshot.Store
	// Raw is the store's bucket, opened apart from the store.
	Raw *blob.Bucket
	// Another opens one more store on the same bucket and prefix, as
	// another worker does.
	Another func() *snapshot.Store
	// Dir is the directory of a file:// store, empty for the others.
	Dir string
}

// Backends are every store that runs here: memory, a directory, and S3
// (in-process, or the server HYPERPLANE_TEST_S3_ENDPOINT names). The
// stores, and what they write on S3, go when the test ends.
func Backends() []Backend {
	return []Backend{
		{"mem", func(t testing.TB, prefix string) Fixture {
			b := memblob.OpenBucket(nil)
			s := snapshot.NewStore(b, prefix)
			t.Cleanup(func() { s.Close() })
			// The other stores share b, which the first one closes.
			another := func() *snapshot.Store { return snapshot.NewStore(b, prefix) }
			return Fixture{Store: s, Raw: b, Another: another}
		}},
		{"file", func(t testing.TB, prefix string) Fixture {
			dir := t.TempDir()
			url := "file://" + dir + "?prefix=" + prefix
			another := func() *snapshot.Store { return OpenStore(t, url) }
			return Fixture{Store: another(), Raw: OpenBucket(t, "file://"+dir), Another: another, Dir: dir}
		}},
		{"s3", func(t testing.TB, prefix string) Fixture {
			srv := s3test.Start(t)
			prefix = s3test.Prefix(t) + "/" + prefix
			raw := OpenBucket(t, "s3://"+srv.Bucket+"?"+srv.Query())
			t.Cleanup(func() { DeleteAll(t, raw, prefix+"/") })
			url := "s3://" + srv.Bucket + "/" + prefix + "?" + srv.Query()
			another := func() *snapshot.Store { return OpenStore(t, url) }
			return Fixture{Store: another(), Raw: raw, Another: another}
		}},
	}
}

// EachBackend runs test as a subtest named for each backend, on a store
// of it under the prefix "models".
func EachBackend(t *testing.T, test func(t *testing.T, s Fixture)) {
	for _, b := range Backends() {
		t.Run(b.Name, func(t *testing.T) { test(t, b.Open(t, "models")) })
	}
}

// OpenStore opens the store at url, closed when the test ends.
func OpenStore(t testing.TB, url string) *snapshot.Store {
	t.Helper()
	s, err := snapshot.OpenStore(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// OpenBucket opens the bucket at url, closed when the test ends.
func OpenBucket(t testing.TB, url string) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// ListKeys lists the keys of b under prefix, in the bucket's order,
// stopping at the first error.
func ListKeys(t testing.TB, b *blob.Bucket, prefix string) []string {
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

// DeleteAll deletes the keys of b under prefix, logging a key it cannot
// delete: it cleans up after a test, which has passed or failed by then.
func DeleteAll(t testing.TB, b *blob.Bucket, prefix string) {
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

// Digest is the SHA-256 of s, a stand-in for a digest of a
// configuration or a state.
func Digest(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// GenerationConfig is the configuration Generation trains under.
func GenerationConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 6
	return cfg
}

// Generation is a small trained snapshot of model at gen, written by
// worker-a at position 100×gen of one shard. The same arguments give the
// same snapshot; a later generation has learned more examples.
func Generation(t testing.TB, model string, gen uint64) *snapshot.Snapshot {
	t.Helper()
	cfg := GenerationConfig()
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

// Write writes the Generation of model at each of gens to s, failing
// the test if one is not written.
func Write(t testing.TB, s *snapshot.Store, model string, gens ...uint64) {
	t.Helper()
	for _, g := range gens {
		if err := s.Write(context.Background(), Generation(t, model, g)); err != nil {
			t.Fatal(err)
		}
	}
}

// Credentials as a user may put them in a store URL, though the store
// reads them from the environment. The secret key has '/' and '+' in it,
// as AWS secret keys do.
const (
	AccessKeyID  = "AKIAIOSFODNN7EXAMPLE"
	SecretKey    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	SessionToken = "FwoGZXIvYXdzEXAMPLETOKEN"
	Signature    = "SIGNATUREEXAMPLE0123"
	Password     = "ENDPOINTPASSWORD"
)

// CheckHidden fails t if err shows a credential: one of the constants
// above, or a piece of SecretKey between the characters URLs escape.
// what names the call that returned err.
func CheckHidden(t testing.TB, what string, err error) {
	t.Helper()
	for _, s := range []string{AccessKeyID, SecretKey, "wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY", SessionToken, Signature, Password} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%s: the error shows %q: %v", what, s, err)
		}
	}
}

// CredentialURL is a store URL with credentials in it.
type CredentialURL struct{ Name, URL string }

// CredentialURLs are URLs of stores on srv that open, with credentials
// in them where the store's errors could show them: in user info, one
// whose password parses as a port and a path, and in the endpoint. On a
// server that refuses every request (s3test.StartRefusing) none of the
// stores' calls succeeds.
func CredentialURLs(srv s3test.Server) []CredentialURL {
	host := strings.TrimPrefix(srv.Endpoint, "http://")
	return []CredentialURL{
		// The bucket takes the user info's host and port, and the key
		// prefix the rest of the password: the keys in the errors hold it.
		{"a password that parses as a port and a path", "s3://" + AccessKeyID + ":1234/" + url.PathEscape(SecretKey) + "@" + srv.Bucket + "?" + srv.Query()},
		{"user info", "s3://" + AccessKeyID + ":" + url.PathEscape(SecretKey) + "@" + srv.Bucket + "/prod?" + srv.Query()},
		{"a password in the endpoint", "s3://" + srv.Bucket + "/prod?region=us-east-1&use_path_style=true&endpoint=" +
			url.QueryEscape("http://alice:"+Password+"@"+host)},
	}
}
