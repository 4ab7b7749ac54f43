package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hyperplane-ml/hyperplane/snapshot/s3test"
)

// createStores are the stores create runs on: each opens n stores on
// one bucket, as n workers do.
func createStores() map[string]func(t *testing.T, n int) []*Store {
	open := func(t *testing.T, url string) *Store {
		s, err := OpenStore(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	many := func(t *testing.T, n int, url string) []*Store {
		var out []*Store
		for range n {
			out = append(out, open(t, url))
		}
		return out
	}
	return map[string]func(t *testing.T, n int) []*Store{
		"mem": func(t *testing.T, n int) []*Store {
			b := memblob.OpenBucket(nil)
			t.Cleanup(func() { b.Close() })
			var out []*Store
			for range n {
				out = append(out, NewStore(b, "models"))
			}
			return out
		},
		"file": func(t *testing.T, n int) []*Store {
			return many(t, n, "file://"+t.TempDir()+"?prefix=models")
		},
		"s3": func(t *testing.T, n int) []*Store {
			srv := s3test.Start(t)
			return many(t, n, srv.URL(t))
		},
	}
}

// TestCreateOneWinsARace races creators of one key with no existence
// check before them: exactly one creates it, the others find it taken,
// and the key holds the winner's bytes. fileblob's own create-if-absent
// (a stat, then a rename) lets several through here; the file:// store
// links instead.
func TestCreateOneWinsARace(t *testing.T) {
	for name, stores := range createStores() {
		t.Run(name, func(t *testing.T) {
			const creators, rounds = 8, 10
			ss := stores(t, creators)
			for round := range rounds {
				key := fmt.Sprintf("models/clicks/race-%d", round)
				errs := make([]error, creators)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i, s := range ss {
					wg.Go(func() {
						<-start
						errs[i] = s.create(context.Background(), key, []byte(fmt.Sprint("creator ", i)))
					})
				}
				close(start)
				wg.Wait()
				won := -1
				for i, err := range errs {
					switch {
					case err == nil && won >= 0:
						t.Fatalf("%s: creators %d and %d both created it", key, won, i)
					case err == nil:
						won = i
					case !errors.Is(err, ErrExists):
						t.Fatalf("%s: creator %d: %v, want ErrExists", key, i, err)
					}
				}
				if won < 0 {
					t.Fatalf("%s: nobody created it", key)
				}
				got, err := ss[0].bucket.ReadAll(context.Background(), key)
				if err != nil || string(got) != fmt.Sprint("creator ", won) {
					t.Fatalf("%s holds %q (%v), want creator %d's bytes", key, got, err, won)
				}
			}
		})
	}
}

// fileStore is a file:// store in a directory of its own, with the
// directory; the test closes it.
func fileStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenStore(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// strand writes, in the file:// store in dir, a temporary file of key as
// a writer killed before its link leaves it, and returns its path.
func strand(t *testing.T, dir, key string) string {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(key)) + ".0123456789abcdef" + tmpSuffix
	if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("half"), 0o666); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFileCreateLeavesNothingVisible: a file:// create lists as its key
// alone, and a temporary file stranded by a crash is invisible to
// listings and generations.
func TestFileCreateLeavesNothingVisible(t *testing.T) {
	ctx := context.Background()
	s, dir := fileStore(t)
	key := Key("", "clicks", 1)
	if err := s.create(ctx, key, []byte("one")); err != nil {
		t.Fatal(err)
	}
	strand(t, dir, Key("", "clicks", 2))
	var keys []string
	it := s.bucket.List(&blob.ListOptions{})
	for {
		obj, err := it.Next(ctx)
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	if want := []string{key}; !slices.Equal(keys, want) {
		t.Fatalf("the bucket lists %q, want %q", keys, want)
	}
	if gens, err := s.Generations(ctx, "clicks"); err != nil || !slices.Equal(gens, []uint64{1}) {
		t.Fatalf("generations %v (%v), want [1]", gens, err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "clicks"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("the directory holds %v (%v), want the key and the stranded file", entries, err)
	}
	if err := s.create(ctx, key, []byte("two")); !errors.Is(err, ErrExists) {
		t.Fatalf("a second create: %v, want ErrExists", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "clicks", "00000000000000000001.msgpack")); string(got) != "one" {
		t.Fatalf("the key holds %q after a refused create", got)
	}
}

// TestOpenStoreFileDirectory: OpenStore finds the directory of every form
// of file:// URL, and refuses a prefix whose keys fileblob would escape
// (their files are not where a link would put them).
func TestOpenStoreFileDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.Mkdir("data", 0o777); err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs("data")
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"file://" + want, "file://localhost" + want, "file://./data", "file://" + want + "?dir_file_mode=0750&prefix=a/b"} {
		s, err := OpenStore(ctx, url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if s.dir != want {
			t.Errorf("%s: directory %q, want %q", url, s.dir, want)
		}
		s.Close()
	}
	s, err := OpenStore(ctx, "file://"+want+"?dir_file_mode=0750&create_dir=1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.dirMode != 0o750 {
		t.Errorf("dir_file_mode 0750 read as %o", s.dirMode)
	}
	for _, prefix := range []string{"a..", "a/b../c", "a/./b", "a%01b"} {
		if s, err := OpenStore(ctx, "file://"+want+"?prefix="+prefix); err == nil {
			s.Close()
			t.Errorf("prefix %q was accepted", prefix)
		}
	}
	for _, key := range []string{"a/b", "m/clicks/00000000000000000001.msgpack", "a.b/c..d/e"} {
		if !plainFileKey(key) {
			t.Errorf("key %q refused", key)
		}
	}
	for _, key := range []string{"a//b", "/a", "a/", "a/../b", "a../b", "./a", "a\x01", "a.attrs"} {
		if plainFileKey(key) {
			t.Errorf("key %q accepted", key)
		}
	}
}

// TestFileDeleteRemovesStrandedFiles: the temporary files a writer killed
// before its link left go with their key when it is deleted, and with
// every key under a prefix deleted, so that retention leaves no file and
// no directory of what it retired behind.
func TestFileDeleteRemovesStrandedFiles(t *testing.T) {
	ctx := context.Background()
	s, dir := fileStore(t)
	gen1, gen2 := Key("", "clicks", 1), Key("", "clicks", 2)
	for _, key := range []string{gen1, gen2} {
		if err := s.create(ctx, key, []byte("one")); err != nil {
			t.Fatal(err)
		}
	}
	beside1, beside2 := strand(t, dir, gen1), strand(t, dir, gen2)
	if err := s.Delete(ctx, gen1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(beside1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there after its key was deleted (%v)", beside1, err)
	}
	if _, err := os.Stat(beside2); err != nil {
		t.Errorf("%s, of a key not deleted, is gone: %v", beside2, err)
	}

	// A file that only begins like gen2's stranded ones is another key's.
	other := filepath.Join(dir, "clicks", "00000000000000000002.msgpack.x.0123456789abcdef"+tmpSuffix)
	if err := os.WriteFile(other, []byte("half"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := s.create(ctx, Key("", "clicks", 3), []byte("three")); err != nil {
		t.Fatal(err)
	}
	if err := s.Retain(ctx, "clicks", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(beside2); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s is still there after retention deleted its generation (%v)", beside2, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("%s, of another key, is gone: %v", other, err)
	}

	result := "clicks/epochs/00000000000000000007/shard/kafka.examples.1.msgpack"
	strand(t, dir, result)
	if err := s.DeleteAll(ctx, "clicks/epochs/00000000000000000007/"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "clicks", "epochs", "00000000000000000007")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the retired epoch's directory is still there (%v)", err)
	}
}

// TestStoreGivesUpOnAStoreThatHangs holds every request of an S3 server
// that stops answering, as a stopped MinIO's connections are held: each
// operation of the store fails once it has moved nothing for
// stallTimeout, with an error that says so and is not the caller's
// context's, rather than waiting for as long as the connection lives.
func TestStoreGivesUpOnAStoreThatHangs(t *testing.T) {
	srv, hang, held := s3test.StartHanging(t)
	s, err := OpenStore(context.Background(), srv.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateIfAbsent(ctx, "models/a", []byte("before")); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { stallTimeout = d }(stallTimeout)
	stallTimeout = 200 * time.Millisecond
	hang()
	for name, op := range map[string]func(context.Context) error{
		"create": func(ctx context.Context) error { return s.CreateIfAbsent(ctx, "models/b", []byte("x")) },
		"read":   func(ctx context.Context) error { _, err := s.ReadObject(ctx, "models/a"); return err },
		"exists": func(ctx context.Context) error { _, err := s.ObjectExists(ctx, "models/a"); return err },
		"list":   func(ctx context.Context) error { _, err := s.ListDirs(ctx, "models/"); return err },
		"delete": func(ctx context.Context) error { return s.Delete(ctx, "models/a") },
	} {
		// The caller's own bound, far beyond the store's: an operation
		// still waiting at it was never given up on.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := op(ctx)
		cancel()
		<-held
		if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
			!strings.Contains(err.Error(), "the store did not answer for 200") {
			t.Errorf("%s on a store that hangs: %v, want the store's failure to answer", name, err)
		}
	}
}
