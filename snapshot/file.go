package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/internal/redact"
)

// WriteFile writes s to path as one snapshot file, through a temporary
// file in the same directory and a rename, so that a reader never sees
// half a model. Load reads it back.
func WriteFile(path string, s *Snapshot) error {
	data, err := Marshal(s)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write model %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write model %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write model: %w", err)
	}
	return nil
}

// Load loads the snapshot that where names, a path or a URL. where is
//
//   - one snapshot file, such as WriteFile writes;
//   - a model's directory in a file store (a directory OpenStore opens
//     as file://): its newest valid snapshot; or
//     <model directory>/<N>.msgpack, generation N;
//   - a file URL of either: file:///absolute/path, or a path relative to
//     the current directory written file://./path (gocloud's form) or
//     file://path (whose "host" is no directory, and would otherwise be
//     ignored, the path then read from the root);
//   - any other snapshot URL, for LoadURL: the store's URL
//     followed by the model's name.
//
// With no model there, the error names the absolute path searched and,
// when that path is a snapshot store or lies in one, the URLs of the
// models the store has; a missing file or directory is
// fs.ErrNotExist.
func Load(ctx context.Context, where string) (*Snapshot, error) {
	return LoadLogged(ctx, where, nil)
}

// LoadLogged is Load, logging to log (which may be nil) each damaged
// generation it skips on its way to a model's newest valid one, as the
// worker does at start-up: otherwise an older generation would be read as
// the newest without a word.
func LoadLogged(ctx context.Context, where string, log *zap.Logger) (*Snapshot, error) {
	if !strings.Contains(where, "://") && !strings.HasPrefix(where, "file:") {
		return readLocalModel(ctx, where, log)
	}
	u, err := url.Parse(where)
	if err != nil {
		return nil, fmt.Errorf("model URL %s does not parse", redact.URLs(where))
	}
	if u.Scheme != "file" {
		s, err := LoadURL(ctx, where, log)
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("%s: %w (a snapshot URL is the store's URL followed by the model's name: s3://bucket/prefix/MODEL)", redact.URLs(where), err)
		}
		return s, err
	}
	path, relative := fileURLPath(u)
	if u.RawQuery != "" {
		// A query (a key prefix, driver settings) is the store's to read.
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		s, err := LoadURL(ctx, (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: u.RawQuery}).String(), log)
		if errors.Is(err, ErrNotFound) {
			// Name the directory searched and the models there or
			// beside it, as for a file URL without a query: a store's
			// URL (snapshot.url, as a config has it) names no model.
			err = fmt.Errorf("no model in %s: %w (a snapshot URL is the store's URL followed by the model's name: file:///dir/MODEL)", abs, err)
			if models := modelsIn(ctx, abs); len(models) > 0 {
				return nil, fmt.Errorf("%w; %s is a snapshot store: name a model, %s", err, abs, modelURLs(abs, models))
			}
			return nil, withModelsNear(ctx, filepath.Dir(abs), err)
		}
		return s, err
	}
	s, err := readLocalModel(ctx, path, log)
	if err != nil && relative {
		return nil, fmt.Errorf("%w (%s is read as %s, relative to the current directory; an absolute path is file:///path)", err, where, path)
	}
	return s, err
}

// fileURLPath is the local path a file URL names, and whether it is
// relative: its path with no host or localhost; relative to the current
// directory for file://./path, file://path and file:path.
func fileURLPath(u *url.URL) (string, bool) {
	switch {
	case u.Opaque != "":
		p, err := url.PathUnescape(u.Opaque)
		if err != nil {
			p = u.Opaque
		}
		return filepath.FromSlash(p), true
	case u.Host == "" || u.Host == "localhost":
		return filepath.FromSlash(u.Path), false
	case u.Host == ".":
		return filepath.FromSlash("." + u.Path), true
	}
	return filepath.FromSlash(u.Host + u.Path), true
}

// readLocalModel is Load for a local path.
func readLocalModel(ctx context.Context, path string, log *zap.Logger) (*Snapshot, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s, ok, err := loadGenerationFile(ctx, abs); ok {
			return s, err
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		err = fmt.Errorf("no model file or snapshot directory %s: %w", abs, err)
		return nil, withModelsNear(ctx, filepath.Dir(abs), err)
	case err != nil:
		return nil, err
	case info.IsDir():
		return loadModelDir(ctx, abs, log)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	s, err := Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	return s, nil
}

// loadGenerationFile loads abs, which does not exist, as
// <model directory>/<N>.msgpack, generation N of the model (N in digits,
// not necessarily zero-padded, as LoadURL reads it), if it has
// that form (ok).
func loadGenerationFile(ctx context.Context, abs string) (s *Snapshot, ok bool, err error) {
	modelDir := filepath.Dir(abs)
	stem, isSnapshot := strings.CutSuffix(filepath.Base(abs), ".msgpack")
	gen, err := strconv.ParseUint(stem, 10, 64)
	if !isSnapshot || err != nil || gen == 0 {
		return nil, false, nil
	}
	if info, err := os.Stat(modelDir); err != nil || !info.IsDir() {
		return nil, false, nil
	}
	store, err := openFileStore(ctx, filepath.Dir(modelDir))
	if err != nil {
		return nil, true, err
	}
	defer store.Close()
	s, err = store.Load(ctx, filepath.Base(modelDir), gen)
	if err != nil {
		return nil, true, fmt.Errorf("generation %d in %s: %w", gen, modelDir, err)
	}
	return s, true, nil
}

// loadModelDir loads the newest valid snapshot in dir, a model's
// directory in a file store. A directory that is a store itself, or holds
// no snapshot, is an error naming it and the models found.
func loadModelDir(ctx context.Context, dir string, log *zap.Logger) (*Snapshot, error) {
	model := filepath.Base(dir)
	if model != string(filepath.Separator) {
		store, err := openFileStore(ctx, filepath.Dir(dir))
		if err != nil {
			return nil, err
		}
		defer store.Close()
		gens, err := store.Generations(ctx, model)
		if err != nil {
			return nil, err
		}
		if len(gens) > 0 {
			held, gen := newestReadable(dir, gens)
			switch {
			case held != nil && held.Model != model:
				return nil, fmt.Errorf("%s holds snapshots of model %s, and a model's directory is named after its model: rename it %s, or name one generation's file (%s)",
					dir, held.Model, held.Model, filepath.Join(dir, generationFile(gen)))
			case held != nil && held.Generation == gen && gen == gens[len(gens)-1]:
				return held, nil
			}
			s, err := store.Latest(ctx, model, log)
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("%s: %w (every generation there is damaged)", dir, err)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			return s, nil
		}
		if err := store.partitionScope(ctx, model, func(seg string) string {
			return fileURL(filepath.Join(dir, "partition", seg, model))
		}); err != nil {
			return nil, err
		}
	}
	if models := modelsIn(ctx, dir); len(models) > 0 {
		return nil, fmt.Errorf("%s is a snapshot store, not one model's directory: name a model, %s", dir, modelURLs(dir, models))
	}
	err := fmt.Errorf("no snapshot in %s (a model's directory holds <generation, 20 digits>.msgpack files)", dir)
	return nil, withModelsNear(ctx, filepath.Dir(dir), err)
}

// newestReadable is the newest generation of gens in dir that reads, and
// its number; nil if none does. A model's directory copied under another
// name holds snapshots that Store.Load refuses for naming another model
// than their key, and Store.Latest would warn of each as damaged; the
// newest generation, read whole and of the directory's model, is the one
// Store.Latest returns.
func newestReadable(dir string, gens []uint64) (*Snapshot, uint64) {
	for _, gen := range slices.Backward(gens) {
		data, err := os.ReadFile(filepath.Join(dir, generationFile(gen)))
		if err != nil {
			continue
		}
		if s, err := Unmarshal(data); err == nil {
			return s, gen
		}
	}
	return nil, 0
}

// generationFile is the name of generation gen's file in its model's
// directory of a file store.
func generationFile(gen uint64) string {
	return fmt.Sprintf("%0*d%s", generationDigits, gen, keyExt)
}

// withModelsNear adds to err, which says that a model is not where it was
// looked for, the models of the store dir, if it is one.
func withModelsNear(ctx context.Context, dir string, err error) error {
	if models := modelsIn(ctx, dir); len(models) > 0 {
		return fmt.Errorf("%w; the snapshot store %s holds %s", err, dir, modelURLs(dir, models))
	}
	return err
}

// modelsIn lists the models of the file store dir: its subdirectories
// that hold snapshots.
func modelsIn(ctx context.Context, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	store, err := openFileStore(ctx, dir)
	if err != nil {
		return nil
	}
	defer store.Close()
	var models []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if gens, err := store.Generations(ctx, e.Name()); err == nil && len(gens) > 0 {
			models = append(models, e.Name())
		}
	}
	return models
}

// modelURLs lists the URLs of models in the store dir, for an error.
func modelURLs(dir string, models []string) string {
	urls := make([]string, len(models))
	for i, m := range models {
		urls[i] = fileURL(filepath.Join(dir, m))
	}
	return strings.Join(urls, " or ")
}

// openFileStore opens the file store of the directory dir.
func openFileStore(ctx context.Context, dir string) (*Store, error) {
	return OpenStore(ctx, fileURL(dir))
}

// fileURL is the file URL of the absolute path abs.
func fileURL(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}
