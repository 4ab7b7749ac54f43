package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/train"
)

// BenchmarkTrain is hyperplane train end to end over a 1,000,000-example
// file from hyperplane gen with 40 features per example: one op is one
// whole run. Beside the wall time it reports the process's CPU time per
// run (user and system), which a machine shared with other work disturbs
// less. The files are generated once into the temporary directory and
// kept for later runs.
func BenchmarkTrain(b *testing.B) { benchTrain(b, false) }

// BenchmarkTrainFromPipe is BenchmarkTrain with the file piped to
// standard input (cat FILE | hyperplane train -input -): a pipe's reads
// return at most what its buffer holds, not a whole chunk of input.
func BenchmarkTrainFromPipe(b *testing.B) { benchTrain(b, true) }

// benchTrain runs BenchmarkTrain's ops, over each format's file named by
// -input or, piped, on standard input.
func benchTrain(b *testing.B, piped bool) {
	for _, format := range []string{"jsonl", "msgpack"} {
		b.Run(format, func(b *testing.B) {
			path := benchInput(b, format, 1_000_000)
			var examples float64
			before := cpuTime(b)
			for b.Loop() {
				examples += float64(trainOnce(b, path, format, piped).Examples)
			}
			b.ReportMetric(examples/b.Elapsed().Seconds(), "examples/s")
			b.ReportMetric((cpuTime(b)-before).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// trainOnce is one whole train over path, named by -input or, piped, on
// standard input, and its result.
func trainOnce(b *testing.B, path, format string, piped bool) train.Result {
	input := path
	var stdin io.Reader
	copied := make(chan error, 1)
	if piped {
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		go func() {
			f, err := os.Open(path)
			if err == nil {
				_, err = io.Copy(w, f)
				f.Close()
			}
			w.Close()
			copied <- err
		}()
		input, stdin = "-", r
	} else {
		copied <- nil
	}
	var out bytes.Buffer
	err := run(context.Background(), []string{"train", "-input", input, "-format", format}, os.Getenv, stdin, &out, io.Discard)
	if cerr := <-copied; err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	var res train.Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		b.Fatal(err)
	}
	return res
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

// BenchmarkBacktest is hyperplane backtest of the default model and
// three challengers over the 1,000,000-example file of BenchmarkTrain,
// beside train of the model alone over the same file, one whole run per
// op each: "shared" challengers hash as the model does (the perceptron,
// pa1, and AROW with r = 1), "seed" replaces the last with the model under
// another hash seed, whose examples are decoded a second time. Beside the
// wall time it reports the process's CPU time per run (user and system),
// which a machine shared with other work disturbs less.
func BenchmarkBacktest(b *testing.B) {
	challengers := map[string]string{
		"shared": "perceptron:algorithm=perceptron;pa1:algorithm=pa1;r1:arow_r=1",
		"seed":   "perceptron:algorithm=perceptron;pa1:algorithm=pa1;seed:hash_seed=7",
	}
	for _, format := range []string{"jsonl", "msgpack"} {
		path := benchInput(b, format, 1_000_000)
		for _, name := range []string{"train", "shared", "seed"} {
			b.Run(format+"/"+name, func(b *testing.B) {
				args := []string{"train", "-input", path, "-format", format}
				if name != "train" {
					args = []string{"backtest", "--input", path, "--format", format, "--json", "--model.challengers", challengers[name]}
				}
				before := cpuTime(b)
				for b.Loop() {
					if err := run(context.Background(), args, os.Getenv, nil, io.Discard, io.Discard); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)*1e6/b.Elapsed().Seconds(), "examples/s")
				b.ReportMetric((cpuTime(b)-before).Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
