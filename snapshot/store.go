package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// The drivers register their URL schemes with gocloud's default mux:
	// importing them is how a store URL can name them.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// ErrFenced marks a write refused because the snapshot's key already
// exists: another worker has written that generation of the model, so
// this one must stop writing it.
var ErrFenced = errors.New("fenced off")

// ErrNotFound marks a model with no readable snapshot in the store.
var ErrNotFound = errors.New("no snapshot")

// ErrUnavailable marks a resume that failed because the store did not
// answer a read (it is down, throttling, or cut off): unlike the refusal
// of what it holds, the same resume may succeed once the store is back.
var ErrUnavailable = errors.New("the store did not answer")

// unavailable is ErrUnavailable with the words of its error alone: a
// refusal, which says what it is rather than that the store did not
// answer.
type unavailable struct{ error }

func (u unavailable) Is(target error) bool { return target == ErrUnavailable }

func (u unavailable) Unwrap() error { return u.error }

// Refused reports whether err, from the store, is its refusal of the
// request itself rather than a failure to answer it: credentials it does
// not accept or that may not use the bucket, a bucket or container that
// does not exist, a request it calls invalid (an HTTP status 4xx other
// than 408 and 429). Another attempt is refused alike, where a store that
// is down, throttles or fails (5xx) may answer the next.
func Refused(err error) bool {
	switch gcerrors.Code(err) {
	case gcerrors.PermissionDenied, gcerrors.NotFound, gcerrors.InvalidArgument:
		return true
	}
	// S3 servers name their refusals in codes the driver does not map
	// (InvalidAccessKeyId, SignatureDoesNotMatch): their status says.
	var resp interface{ HTTPStatusCode() int }
	if errors.As(err, &resp) {
		c := resp.HTTPStatusCode()
		return c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests
	}
	return false
}

// keyExt ends every snapshot key.
const keyExt = ".msgpack"

// generationDigits pads generations in keys so that their lexical order
// (the order object stores list in) is their numeric order.
const generationDigits = 20

// Key is where generation gen of model is kept under prefix:
// "<prefix>/<model>/<gen, zero-padded to 20 digits>.msgpack", or without
// "<prefix>/" when prefix is empty. Twenty digits hold every uint64.
func Key(prefix, model string, gen uint64) string {
	return ModelDir(prefix, model) + fmt.Sprintf("%0*d", generationDigits, gen) + keyExt
}

// ModelDir is the key prefix, ending in "/", of model's objects under
// prefix: "<prefix>/<model>/", or "<model>/" when prefix is empty. Its
// generations are there (Key), and beside them whatever else is kept of
// the model, such as its epoch log (package epochlog).
func ModelDir(prefix, model string) string {
	if prefix = strings.Trim(prefix, "/"); prefix == "" {
		return model + "/"
	}
	return prefix + "/" + model + "/"
}

// Store keeps the snapshots of models in a blob bucket, one immutable
// object per generation (see Key). Other objects may be kept beside them
// (package epochlog keeps the epoch log so, with CreateIfAbsent and the
// methods beside it). It is safe for concurrent use.
type Store struct {
	bucket *blob.Bucket
	prefix string
	// dir is the directory of a file:// bucket opened by OpenStore, where
	// objects are created by link; empty for any other store.
	dir     string
	dirMode os.FileMode
	// shared marks a Sub, whose bucket its parent owns and closes.
	shared bool
	// secrets are the credentials in the URL the store was opened with,
	// hidden from every error it returns (see hide).
	secrets *redact.Secrets
}

// hide hides the credentials of the store's URL from *err. Every exported
// method that returns an error defers it: the drivers' errors, and the
// keys the store names, may quote the URL or pieces of it.
func (s *Store) hide(err *error) {
	*err = s.secrets.HideError(*err)
}

// OpenStore opens the store a URL names:
//
//	file:///var/lib/hyperplane          a directory (it must exist; add ?create_dir=1 to create it)
//	s3://bucket/prefix?region=us-east-1 AWS S3, or with endpoint=http://host:9000&use_path_style=true MinIO and other S3 servers
//	gs://bucket/prefix                  Google Cloud Storage
//	azblob://container/prefix           Azure Blob Storage
//	mem://                              memory, empty at every open: for tests
//
// The key prefix is the URL's path after the bucket, followed by the
// value of an optional prefix query parameter; for file:// the path is
// the directory, so only the prefix parameter sets a key prefix. Every
// other query parameter goes to the driver (gocloud.dev/blob/s3blob and
// the others document theirs). S3 credentials come from the standard AWS
// environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...
//
// A file:// store creates objects by linking a finished temporary file to
// the key (see Store.Write), which is atomic on a local POSIX filesystem:
// the directory must be on a filesystem with hard links, and several
// processes may share it.
//
// Credentials in the URL (user info, or a query parameter such as
// access_key_id, which no driver reads) are hidden from the errors of
// OpenStore and of the store, as redact.URLs hides them; the store shows
// its URL as redact.URLs writes it.
func OpenStore(ctx context.Context, rawURL string) (_ *Store, err error) {
	secrets := redact.SecretsIn(rawURL)
	defer func() { err = secrets.HideError(err) }()
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", redact.URLs(rawURL), err)
	}
	q := u.Query()
	var parts []string
	if u.Scheme != "file" {
		parts = append(parts, u.Path)
		u.Path, u.RawPath = "", ""
	}
	parts = append(parts, q.Get("prefix"))
	q.Del("prefix")
	u.RawQuery = q.Encode()
	var prefix []string
	for _, p := range parts {
		for seg := range strings.SplitSeq(p, "/") {
			if seg != "" {
				prefix = append(prefix, seg)
			}
		}
	}
	secrets = redact.SecretsIn(rawURL, u.String())
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", redact.URLs(rawURL), err)
	}
	s := NewStore(b, strings.Join(prefix, "/"))
	s.secrets = secrets
	if u.Scheme == "file" {
		if s.dir, s.dirMode, err = fileDir(u, b); err == nil && s.prefix != "" && !plainFileKey(s.prefix) {
			err = fmt.Errorf("prefix %q: a segment is empty, . or .., ends in .., or has a character fileblob escapes", s.prefix)
		}
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("snapshot store %s: %w", redact.URLs(rawURL), err)
		}
	}
	return s, nil
}

// NewStore keeps snapshots in b under the key prefix (which may be
// empty). The store owns b: Close closes it. It creates keys with the
// driver's create-if-absent, which fileblob does not make atomic: a
// file:// store shared by several processes is opened by OpenStore.
func NewStore(b *blob.Bucket, prefix string) *Store {
	return &Store{bucket: b, prefix: strings.Trim(prefix, "/")}
}

// Close releases the bucket.
func (s *Store) Close() (err error) {
	defer s.hide(&err)
	if s.shared {
		return nil // a Sub: the parent owns the bucket
	}
	return s.bucket.Close()
}

// CheckModel is nil when model can be a model's name: a key segment,
// not empty, . or .., without a slash.
func CheckModel(model string) error {
	if model == "" || model == "." || model == ".." || strings.ContainsAny(model, "/\\") {
		return fmt.Errorf("snapshot: model name %q cannot be a key segment (empty, . or .., or has a slash)", model)
	}
	return nil
}

// Write stores snap under Key(prefix, snap.Model, snap.Generation).
// Keys are immutable: the key is created only if absent, never
// overwritten. If it exists, another worker wrote that generation and the
// error wraps ErrFenced. Existence is checked first, which catches a
// worker that started after another, and the write itself creates the
// key only if absent, atomically (S3 If-None-Match: *, GCS DoesNotExist,
// Azure If-None-Match: *, a link on file://), which catches two writes at
// the same time. Two exceptions: a file:// bucket given to NewStore
// rather than opened by OpenStore falls back to fileblob's stat before a
// rename, so two processes writing the same key in the same instant can
// both succeed, the last one winning; and an S3-compatible server that
// ignores If-None-Match (on PutObject, or on CompleteMultipartUpload for
// snapshots over the 8 MiB part size) overwrites in that case too.
//
// A state the loader would refuse is refused first, with an error
// wrapping ErrInvalidState, before the store is touched.
//
// On any other error the key may or may not exist. A retry of the same
// generation that finds the key holding what it writes (the same writer,
// positions, epoch keys and model state: an earlier attempt whose
// response was lost) succeeds; only a key that holds anything else is
// fencing. For the mixed model of an epoch (snap.Epoch > 0) the writer
// does not count: any worker computes the same model from the log, so
// another worker's generation with the same content is success too
// (docs/scale-out.md, section 2.2).
func (s *Store) Write(ctx context.Context, snap *Snapshot) (err error) {
	defer s.hide(&err)
	if err := CheckModel(snap.Model); err != nil {
		return err
	}
	if snap.Generation == 0 {
		return fmt.Errorf("snapshot: model %s: generation 0 (generations count from 1)", snap.Model)
	}
	key := Key(s.prefix, snap.Model, snap.Generation)
	data, release, err := marshalTemporary(snap)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", key, err)
	}
	// data is written and compared here, and kept nowhere.
	defer release()
	err = s.create(ctx, key, data)
	if errors.Is(err, ErrExists) {
		return s.fencedUnlessOwn(ctx, snap, key, data)
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", key, err)
	}
	return nil
}

// fencedUnlessOwn is nil when key, which exists, holds snap as far as it
// matters (see differs), and the fencing error, naming what differs,
// otherwise. A read that fails, or finds less than a whole snapshot, is
// no answer: it returns an error that is not ErrFenced, to be retried.
// The exception is the mixed model of an epoch found damaged at rest:
// see replaceDamaged. own is snap marshalled.
func (s *Store) fencedUnlessOwn(ctx context.Context, snap *Snapshot, key string, own []byte) error {
	data, err := s.readAll(ctx, key)
	if err != nil {
		// Not an answer: a store may serve a key that another writer
		// is creating at this moment unreadably. The caller tries again.
		return fmt.Errorf("snapshot %s exists, and reading it to compare failed: %w", key, err)
	}
	had, err := Unmarshal(data)
	if errors.Is(err, ErrCorrupt) {
		if snap.Epoch > 0 {
			return s.replaceDamaged(ctx, key, data, own, err)
		}
		// Not ErrCorrupt itself: what was read may be another writer's
		// object half written, and the next read whole.
		return fmt.Errorf("snapshot %s exists, and what was read of it to compare is not a whole snapshot: %v", key, err)
	}
	if err != nil {
		return fenced(snap, key, err)
	}
	if snap.Epoch > 0 && (had.Model != snap.Model || had.Generation != snap.Generation) {
		// Damaged as Load finds it: no writer puts another model's or
		// generation's snapshot under this key (an older generation's
		// bytes or another model's copied over it).
		return s.replaceDamaged(ctx, key, data, own, fmt.Errorf("%w: it holds generation %d of model %s", ErrCorrupt, had.Generation, had.Model))
	}
	if field := differs(had, snap); field != "" {
		return fenced(snap, key, fmt.Errorf("it holds another %s", field))
	}
	return nil
}

// replaceDamaged writes own, the mixed model of an epoch, over key, which
// holds damaged, an object that fails to unmarshal with cause
// (ReplaceDamaged). Anything else is an error to retry.
func (s *Store) replaceDamaged(ctx context.Context, key string, damaged, own []byte, cause error) error {
	replaced, err := s.ReplaceDamaged(ctx, key, damaged, own)
	switch {
	case err != nil:
		return fmt.Errorf("snapshot %s is damaged (%v), and writing it again failed: %w", key, cause, err)
	case !replaced:
		return fmt.Errorf("snapshot %s exists, and what was read of it to compare is not a whole snapshot: %v", key, cause)
	}
	return nil
}

// differs names the first field in which had, a stored snapshot, is not
// snap as far as it matters (the writer unless snap is an epoch's,
// positions, epoch keys, model state; not the creation time), or "" when
// they agree.
func differs(had, snap *Snapshot) string {
	switch {
	case had.Writer != snap.Writer && snap.Epoch == 0:
		return fmt.Sprintf("writer (%s)", had.Writer)
	case had.Model != snap.Model || had.Generation != snap.Generation:
		return "model or generation"
	case !maps.Equal(had.Positions, snap.Positions):
		return "positions"
	case had.Epoch != snap.Epoch:
		return "epoch"
	case had.ConfigDigest != snap.ConfigDigest:
		return "config digest"
	case !slices.EqualFunc(had.Boundary, snap.Boundary, Range.Equal) || had.BoundarySHA256 != snap.BoundarySHA256:
		return "boundary"
	case had.Scope != snap.Scope || had.Shard != snap.Shard:
		return "scope or shard"
	case !maps.EqualFunc(had.Joins, snap.Joins, func(a, b msgpack.RawMessage) bool { return bytes.Equal(a, b) }):
		return "joins"
	case had.State.Digest() != snap.State.Digest():
		return "model state"
	}
	return ""
}

func fenced(snap *Snapshot, key string, cause error) error {
	msg := fmt.Sprintf("snapshot %s: generation %d of model %s already exists: another worker wrote it first "+
		"(replicas of one model take turns and each goes on from the newest generation; a worker of another model needs a model.name of its own)",
		key, snap.Generation, snap.Model)
	if cause != nil {
		return fmt.Errorf("%s (%v): %w", msg, cause, ErrFenced)
	}
	return fmt.Errorf("%s: %w", msg, ErrFenced)
}

// Latest returns the newest valid snapshot of model: the one of highest
// generation that reads, passes its checksum and fits its configuration.
// A generation that is corrupt (errors.Is(err, ErrCorrupt)) or that
// vanished between listing and reading is skipped with a warning on log
// naming its key, and the one before it is tried. Any other error
// (storage unreachable, a format newer than this hyperplane reads) is
// returned: skipping it could resume from an older state than the store
// holds. With no snapshot left, the error is ErrNotFound.
//
// Latest does not check that the snapshot fits the configuration it will
// be trained under: the caller refuses an incompatible one with
// Snapshot.Compatible (unless asked to start afresh). log may be nil.
func (s *Store) Latest(ctx context.Context, model string, log *zap.Logger) (_ *Snapshot, err error) {
	defer s.hide(&err)
	if log == nil {
		log = zap.NewNop()
	}
	gens, err := s.Generations(ctx, model)
	if err != nil {
		return nil, err
	}
	for _, gen := range slices.Backward(gens) {
		snap, err := s.Load(ctx, model, gen)
		switch {
		case err == nil:
			return snap, nil
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrNotFound):
			log.Warn("skipping unreadable snapshot, trying the previous generation",
				zap.String("key", s.secrets.Hide(Key(s.prefix, model, gen))), zap.String("model", model),
				zap.Uint64("generation", gen), zap.Error(err))
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("snapshot: model %s under %q: %w", model, s.prefix, ErrNotFound)
}

// Load reads generation gen of model. An absent key gives an error
// wrapping ErrNotFound; a damaged one, or one whose content names another
// model or generation than its key, an error wrapping ErrCorrupt.
func (s *Store) Load(ctx context.Context, model string, gen uint64) (_ *Snapshot, err error) {
	defer s.hide(&err)
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	key := Key(s.prefix, model, gen)
	data, err := s.readAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, fmt.Errorf("snapshot %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	snap, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", key, err)
	}
	if snap.Model != model || snap.Generation != gen {
		return nil, fmt.Errorf("snapshot %s: %w: it holds generation %d of model %s",
			key, ErrCorrupt, snap.Generation, snap.Model)
	}
	return snap, nil
}

// Generations lists the generations of model in the store, ascending.
// Keys in the model's directory that are not snapshot keys are ignored,
// and so is everything below it, the epoch log included.
func (s *Store) Generations(ctx context.Context, model string) (_ []uint64, err error) {
	defer s.hide(&err)
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	dir := ModelDir(s.prefix, model)
	objs, err := s.list(ctx, &blob.ListOptions{Prefix: dir, Delimiter: "/"})
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, obj := range objs {
		if gen, ok := parseGeneration(strings.TrimPrefix(obj.Key, dir)); ok && !obj.IsDir {
			gens = append(gens, gen)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// parseGeneration reads the generation from a key's base name, accepting
// only what Key writes.
func parseGeneration(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, keyExt)
	if !ok {
		return 0, false
	}
	return parseNumber(digits)
}

// parseNumber reads a generation as keys write it: zero-padded to 20
// digits.
func parseNumber(digits string) (uint64, bool) {
	if len(digits) != generationDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// Retain deletes all but the newest keep generations of model, oldest
// first. keep must be at least 1: a store never deletes the last
// snapshot. A generation already gone (another worker retaining too) is
// not an error. A model's epoch log is not touched: epochlog.Log.Retain
// retains it after the generations.
func (s *Store) Retain(ctx context.Context, model string, keep int) (err error) {
	defer s.hide(&err)
	if keep < 1 {
		return fmt.Errorf("snapshot: retain %d generations of model %s: keep at least 1", keep, model)
	}
	gens, err := s.Generations(ctx, model)
	if err != nil {
		return err
	}
	if len(gens) == 0 {
		return nil
	}
	kept := max(len(gens)-keep, 0)
	for _, gen := range gens[:kept] {
		key := Key(s.prefix, model, gen)
		if err := s.deleteKey(ctx, key); err != nil {
			return fmt.Errorf("snapshot %s: delete: %w", key, err)
		}
	}
	return nil
}
