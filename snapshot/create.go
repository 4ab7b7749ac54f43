package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ErrExists marks a create-if-absent that found its key taken.
var ErrExists = errors.New("the key exists")

// create writes data under key if, and only if, the key is absent, in
// one step that two writers cannot both pass: a taken key gives an error
// wrapping ErrExists. The blob drivers do it with a precondition on the
// upload (S3 and Azure If-None-Match: *, GCS DoesNotExist, memblob under
// its lock). fileblob's precondition is a stat before a rename, which two
// writers can pass together, so a store with a directory (see OpenStore)
// links instead (see link).
//
// The upload takes a seekable reader, not WriteAll: S3 then knows the
// length and sends an object under the 8 MiB part size in one PutObject;
// and WriteAll's Content-MD5 check fails with FailedPrecondition too,
// which would be taken for a taken key.
func (s *Store) create(ctx context.Context, key string, data []byte) error {
	if s.dir != "" {
		return s.link(ctx, key, data)
	}
	err := s.upload(ctx, key, data, &blob.WriterOptions{
		ContentType: "application/msgpack",
		IfNotExist:  true,
	})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%w (%v)", ErrExists, err)
	}
	return err
}

// tmpSuffix ends the temporary files link writes. It is fileblob's
// extension for its attribute files, which fileblob leaves out of
// listings and refuses as a key: a temporary file is never taken for an
// object, even when a crash strands it.
const tmpSuffix = ".tmp.attrs"

// link writes data to a temporary file beside key's file, then links it
// to key's path: link(2) fails with EEXIST when the path exists, so of
// two writers exactly one creates the key, which is never seen half
// written. The file is synced before it is linked. Objects written so
// have no fileblob attribute file, which fileblob reads as no
// attributes.
func (s *Store) link(ctx context.Context, key string, data []byte) error {
	path, err := s.filePath(key)
	if err != nil {
		return err
	}
	var f *os.File
	for attempt := 0; ; attempt++ {
		var random [8]byte
		rand.Read(random[:])
		f, err = os.OpenFile(path+"."+hex.EncodeToString(random[:])+tmpSuffix, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		// The key's directory is made when it is missing: the first
		// object under it, or retention removed the epoch directory it
		// emptied, maybe between MkdirAll and OpenFile.
		if errors.Is(err, fs.ErrNotExist) && attempt < 3 {
			if err := os.MkdirAll(filepath.Dir(path), s.dirMode); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err = os.Link(tmp, path)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w (%s)", ErrExists, path)
	}
	return err
}

// filePath is key's file in the store's directory, for the keys whose
// file fileblob finds without escaping them: segments that are not
// empty, not . or .. and do not end in "..", and no control character
// (nor, on Windows, a character Windows refuses in names).
func (s *Store) filePath(key string) (string, error) {
	if !plainFileKey(key) {
		return "", fmt.Errorf("snapshot: key %q cannot be created atomically in a file:// store (an empty, . or .. segment, or a character fileblob escapes)", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

func plainFileKey(key string) bool {
	if strings.HasSuffix(key, ".attrs") {
		return false
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || strings.HasSuffix(seg, "..") {
			return false
		}
		if strings.ContainsFunc(seg, func(r rune) bool {
			return r < 0x20 || os.PathSeparator == '\\' && strings.ContainsRune(`\<>:"|?*`, r)
		}) {
			return false
		}
	}
	return true
}

// fileDir is the directory fileblob opens for a file:// URL, made
// absolute as fileblob makes it, and the mode it makes directories with.
// It checks that the directory is the bucket's own.
func fileDir(u *url.URL, b *blob.Bucket) (string, os.FileMode, error) {
	path := u.Path
	if u.Host == "." || os.PathSeparator != '/' {
		path = strings.TrimPrefix(path, "/")
	}
	dir, err := filepath.Abs(filepath.FromSlash(path))
	if err != nil {
		return "", 0, err
	}
	mode := os.FileMode(0o777)
	if m := u.Query().Get("dir_file_mode"); m != "" {
		v, err := strconv.ParseUint(m, 0, 32)
		if err != nil {
			return "", 0, fmt.Errorf("dir_file_mode %q: %w", m, err)
		}
		mode = os.FileMode(v)
	}
	var root os.FileInfo
	found, err := os.Stat(dir)
	if err != nil || !b.As(&root) || !os.SameFile(root, found) {
		return "", 0, fmt.Errorf("cannot find the bucket's directory (%s)", dir)
	}
	return dir, mode, nil
}
