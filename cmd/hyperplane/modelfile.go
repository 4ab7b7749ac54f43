package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// writeModelFile writes s to path through a temporary file and a rename,
// so that a reader never sees half a model.
func writeModelFile(path string, s *snapshot.Snapshot) error {
	data, err := snapshot.Marshal(s)
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

// readModelFile loads the model that where names, for predict and
// inspect alike. where is
//
//   - a model file written by train -out, or one snapshot file;
//   - a model's directory in a file store, such as the demo's
//     hyperplane-data/demo: its newest valid snapshot; or
//     <model directory>/<N>.msgpack, generation N;
//   - a file URL of either: file:///absolute/path, or a path relative to
//     the current directory written file://./path (gocloud's form) or
//     file://path (whose "host" is no directory, and would otherwise be
//     ignored, the path then read from the root);
//   - any other snapshot URL, for snapshot.LoadURL: the store's URL
//     followed by the model's name.
//
// With no model there, the error names the absolute path searched and,
// when that path is a snapshot store or lies in one, the URLs of the
// models the store has.
func readModelFile(where string) (*snapshot.Snapshot, error) {
	ctx := context.Background()
	if !strings.Contains(where, "://") && !strings.HasPrefix(where, "file:") {
		return readLocalModel(ctx, where)
	}
	u, err := url.Parse(where)
	if err != nil {
		return nil, fmt.Errorf("model URL %s does not parse", config.RedactURL(where))
	}
	if u.Scheme != "file" {
		s, err := snapshot.LoadURL(ctx, where, nil)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%s: %w (a snapshot URL is the store's URL followed by the model's name: s3://bucket/prefix/MODEL)", config.RedactURL(where), err)
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
		return snapshot.LoadURL(ctx, (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: u.RawQuery}).String(), nil)
	}
	s, err := readLocalModel(ctx, path)
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

// readLocalModel is readModelFile for a local path.
func readLocalModel(ctx context.Context, path string) (*snapshot.Snapshot, error) {
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
		return loadModelDir(ctx, abs)
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	s, err := snapshot.Unmarshal(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", abs, err)
	}
	return s, nil
}

// loadGenerationFile loads abs, which does not exist, as
// <model directory>/<N>.msgpack, generation N of the model (N in digits,
// not necessarily zero-padded, as snapshot.LoadURL reads it), if it has
// that form (ok).
func loadGenerationFile(ctx context.Context, abs string) (s *snapshot.Snapshot, ok bool, err error) {
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
func loadModelDir(ctx context.Context, dir string) (*snapshot.Snapshot, error) {
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
			s, err := store.Latest(ctx, model, nil)
			if err != nil {
				return nil, fmt.Errorf("%s: %w (every generation there is damaged)", dir, err)
			}
			return s, nil
		}
	}
	if models := modelsIn(ctx, dir); len(models) > 0 {
		return nil, fmt.Errorf("%s is a snapshot store, not one model's directory: name a model, %s", dir, modelURLs(dir, models))
	}
	err := fmt.Errorf("no snapshot in %s (a model's directory holds <generation, 20 digits>.msgpack files)", dir)
	return nil, withModelsNear(ctx, filepath.Dir(dir), err)
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

func openFileStore(ctx context.Context, dir string) (*snapshot.Store, error) {
	return snapshot.OpenStore(ctx, fileURL(dir))
}

// fileURL is the file URL of the absolute path abs.
func fileURL(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}
