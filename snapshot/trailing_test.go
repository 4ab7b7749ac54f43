package snapshot

import (
	"bytes"
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"gocloud.dev/blob/fileblob"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestTrailingBytesAreDamage: a generation whose envelope, or whose body
// under a checksum that matches it, is followed by more bytes (two
// objects written into one file) is damaged: the newest one is skipped
// for the one before it, with a warning naming what follows, as any
// damaged generation is. Both used to load as the value they begin with.
func TestTrailingBytesAreDamage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket, err := fileblob.OpenBucket(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := NewStore(bucket, "")
	defer store.Close()
	cfg := learner.DefaultConfig()
	cfg.HashBits = 8
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for g := uint64(1); g <= 2; g++ {
		s := &Snapshot{Model: "clicks", Generation: g, Created: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Writer: "w", State: m.State()}
		if err := store.Write(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "clicks", "00000000000000000002.msgpack")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body, err := Unseal(good)
	if err != nil {
		t.Fatal(err)
	}
	var resealed bytes.Buffer
	long := append(append([]byte(nil), body...), body...)
	if err := encodeInto(&resealed, &envelope{Format: Format, Checksum: crc32.ChecksumIEEE(long), Body: long}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"envelope", "bytes follow the envelope", append(append([]byte(nil), good...), good...)},
		{"body", "bytes follow the body", resealed.Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Unmarshal(tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Unmarshal = %v, want an error saying %s", err, tc.want)
			}
			core, logs := observer.New(zapcore.WarnLevel)
			s, err := LoadLogged(ctx, "file://"+dir+"/clicks", zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			if s.Generation != 1 {
				t.Errorf("loaded generation %d, want 1: the damaged generation 2 was read", s.Generation)
			}
			if n := logs.FilterMessageSnippet("skipping").FilterField(zap.String("key", "clicks/00000000000000000002.msgpack")).Len(); n != 1 {
				t.Errorf("%d warnings naming the damaged generation, want 1: %v", n, logs.All())
			}
		})
	}
}
