package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hyperplane-ml/hyperplane/internal/train"
)

// BenchmarkTrain is hyperplane train end to end over a 1,000,000-example
// file from hyperplane gen with 40 features per example: one op is one
// whole run. The files are generated once into the temporary directory and
// kept for later runs.
func BenchmarkTrain(b *testing.B) {
	for _, format := range []string{"jsonl", "msgpack"} {
		b.Run(format, func(b *testing.B) {
			path := benchInput(b, format, 1_000_000)
			var examples float64
			for b.Loop() {
				var out bytes.Buffer
				err := run(context.Background(), []string{"train", "-input", path, "-format", format}, os.Getenv, nil, &out, io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				var res train.Result
				if err := json.Unmarshal(out.Bytes(), &res); err != nil {
					b.Fatal(err)
				}
				examples += float64(res.Examples)
			}
			b.ReportMetric(examples/b.Elapsed().Seconds(), "examples/s")
		})
	}
}

func benchInput(b *testing.B, format string, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("hyperplane-bench-%d.%s", n, format))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		b.Fatal(err)
	}
	err = run(context.Background(), []string{"gen", "-examples", fmt.Sprint(n), "-features", "40", "-format", format, "-seed", "1"}, os.Getenv, nil, f, io.Discard)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err != nil {
		b.Fatal(err)
	}
	return path
}
