package snapshot

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// The methods below are the store as a package that keeps objects of its
// own beside a model's generations uses it (package epochlog keeps the
// epoch log so): objects created only if absent, read, listed and
// deleted. Keys are whole keys, the store's prefix included (see Prefix
// and ModelDir). Their errors are the driver's, with the store's
// credentials hidden, for the caller to name the key in its own words;
// an error built on a key goes through Hide.

// Prefix is the key prefix the store keeps its models under, without a
// slash at either end: "" for none.
func (s *Store) Prefix() string { return s.prefix }

// Hide hides the credentials of the store's URL from err, as the store's
// own errors hide them: a caller's error that names a key may show them,
// since a password can parse as part of the key prefix.
func (s *Store) Hide(err error) error {
	return s.secrets.HideError(err)
}

// CreateIfAbsent writes data under key if, and only if, the key is
// absent, in one step that two writers cannot both pass (as Write
// creates a generation; see Write for the drivers and the exceptions). A
// taken key gives an error wrapping ErrExists. On any other error the key
// may or may not exist.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, data []byte) (err error) {
	defer s.hide(&err)
	return s.create(ctx, key, data)
}

// ReadObject reads the object at key. An absent one gives an error
// wrapping ErrNotFound and the driver's error.
func (s *Store) ReadObject(ctx context.Context, key string) (_ []byte, err error) {
	defer s.hide(&err)
	data, err := s.readAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return data, err
}

// ObjectExists reports whether an object is at key, with one HEAD
// request and without reading it.
func (s *Store) ObjectExists(ctx context.Context, key string) (_ bool, err error) {
	defer s.hide(&err)
	return s.exists(ctx, key)
}

// ListDirs lists, in the store's order, the directories directly under
// dir (a key prefix ending in "/"): the key prefixes, each ending in "/",
// that the keys below dir share up to their next slash.
func (s *Store) ListDirs(ctx context.Context, dir string) (_ []string, err error) {
	defer s.hide(&err)
	objs, err := s.list(ctx, &blob.ListOptions{Prefix: dir, Delimiter: "/"})
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, obj := range objs {
		if obj.IsDir {
			dirs = append(dirs, obj.Key)
		}
	}
	return dirs, nil
}

// listRestarts bounds how often list begins again after an object
// vanished from under its listing.
const listRestarts = 100

// list is every object the listing opts finds. A listing fails with
// NotFound when an object it found is deleted before it is read
// (fileblob reads a directory, then each file's attributes): another
// worker retaining the same model. That object is gone, and the listing
// begins again, so that two workers retaining at once do not fail each
// other.
func (s *Store) list(ctx context.Context, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	w := s.watch(ctx, 0)
	objs, err := s.listWatched(w, opts)
	if err = w.done(err); err != nil {
		return nil, fmt.Errorf("snapshot: list %s: %w", opts.Prefix, err)
	}
	return objs, nil
}

// listWatched is list under the watch w, each object listed its progress.
func (s *Store) listWatched(w *watch, opts *blob.ListOptions) ([]*blob.ListObject, error) {
	for restarts := 0; ; restarts++ {
		var objs []*blob.ListObject
		it := s.bucket.List(opts)
		for {
			obj, err := it.Next(w.ctx)
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			if err != nil {
				if gcerrors.Code(err) == gcerrors.NotFound && restarts < listRestarts && w.ctx.Err() == nil {
					break
				}
				return nil, err
			}
			w.progress()
			objs = append(objs, obj)
		}
	}
}

// ReplaceDamaged writes own over key, which held damaged, an object
// found not to read, if a second read finds the same bytes: the object is
// then damaged at rest, not one another writer is creating, and it is
// replaced in one write, which every store makes atomic, so that the key
// never stands empty. It is for an object whose content is a function of
// the log (an epoch's mixed model, a shard's result): whoever wrote it
// meant own's content, and a racing writer writes the same (docs/scale-
// out.md, section 3.9). replaced is false, with no error, when the second
// read finds other bytes; err is that of the read or of the write.
func (s *Store) ReplaceDamaged(ctx context.Context, key string, damaged, own []byte) (replaced bool, err error) {
	defer s.hide(&err)
	again, err := s.readAll(ctx, key)
	if err != nil || !bytes.Equal(again, damaged) {
		return false, err
	}
	if err := s.upload(ctx, key, own, &blob.WriterOptions{ContentType: "application/msgpack"}); err != nil {
		return false, err
	}
	return true, nil
}

// Delete deletes the object at key. An object already gone is not an
// error.
func (s *Store) Delete(ctx context.Context, key string) (err error) {
	defer s.hide(&err)
	return s.deleteKey(ctx, key)
}

// deleteKey deletes the object at key, already gone or not, and in a
// file:// store its stranded temporary files.
func (s *Store) deleteKey(ctx context.Context, key string) error {
	if err := s.delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	s.removeStranded(key)
	return nil
}

// removeStranded removes, in a file:// store, the temporary files of key
// that a writer killed before it linked them left beside its file (see
// link). A writer of key still at work finds its file gone and fails,
// and its caller tries again.
func (s *Store) removeStranded(key string) {
	if s.dir == "" {
		return
	}
	path, err := s.filePath(key)
	if err != nil {
		return
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	base := filepath.Base(path) + "."
	for _, e := range entries {
		if name := e.Name(); strandedOf(name, base) {
			os.Remove(filepath.Join(filepath.Dir(path), name))
		}
	}
}

// strandedOf reports whether name is a temporary file link wrote for
// the key whose file name is base without its final ".": base, 16
// hexadecimal digits, tmpSuffix.
func strandedOf(name, base string) bool {
	mid, ok := strings.CutPrefix(name, base)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, tmpSuffix)
	if !ok || len(mid) != 16 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}

// DeleteAll deletes every object whose key begins with prefix, and in a
// file:// store the temporary files a killed writer left under prefix
// (see link) and the directories under prefix that are then empty
// (fileblob leaves them behind). An object already gone is not an error,
// and a pass cut short is finished by the next. The error names the key
// it failed on.
func (s *Store) DeleteAll(ctx context.Context, prefix string) (err error) {
	defer s.hide(&err)
	objs, err := s.list(ctx, &blob.ListOptions{Prefix: prefix})
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := s.delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("snapshot %s: delete: %w", obj.Key, err)
		}
	}
	s.removeLeftovers(prefix)
	return nil
}

// removeLeftovers removes, in a file:// store, the temporary files a
// killed writer left under the directory that holds the keys under
// prefix, then, deepest first, the directories there that are empty, and
// that directory if it is. Anything else is left as it is.
func (s *Store) removeLeftovers(prefix string) {
	if s.dir == "" || !strings.HasSuffix(prefix, "/") {
		return
	}
	root, err := s.filePath(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return
	}
	var dirs []string
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error { //nolint:errcheck // best effort
		switch {
		case err != nil:
		case d.IsDir():
			dirs = append(dirs, path)
		case strings.HasSuffix(d.Name(), tmpSuffix):
			os.Remove(path)
		}
		return nil
	})
	for _, dir := range slices.Backward(dirs) {
		os.Remove(dir)
	}
}
