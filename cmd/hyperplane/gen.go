package main

import (
	"bufio"
	"context"

	"github.com/hyperplane-ml/hyperplane/learner/synth"
)

func runGen(ctx context.Context, e *env, args []string) error {
	o := synth.DefaultOptions()
	var n int
	var format string
	fs := newFlagSet("gen", "[flags]", e)
	fs.IntVar(&n, "examples", 1000, "number of examples")
	fs.IntVar(&o.Features, "features", o.Features, "non-zero features per example")
	fs.IntVar(&o.Vocab, "vocab", o.Vocab, "size of the feature-name vocabulary (f0, f1, ...)")
	fs.Float64Var(&o.Noise, "noise", o.Noise, "probability that a label is wrong")
	fs.Float64Var(&o.Unlabeled, "unlabeled", o.Unlabeled, "probability that an example has no label")
	fs.IntVar(&o.Classes, "classes", o.Classes, "0 for binary labels 1/-1, or the number of classes (labels 0..N-1)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed: the same flags give the same stream")
	fs.StringVar(&format, "format", "jsonl", "output format: jsonl or msgpack")
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if n < 0 {
		return usagef("-examples: must be 0 or more, got %d", n)
	}
	if err := o.Validate(); err != nil {
		return usagef("-%v", err)
	}
	appendRecord := synth.AppendJSON
	switch format {
	case "jsonl", "json":
	case "msgpack":
		appendRecord = synth.AppendMsgpack
	default:
		return usagef("-format: unknown format %q (want jsonl or msgpack)", format)
	}
	w := bufio.NewWriterSize(e.stdout, 1<<20)
	s := synth.New(o)
	var buf []byte
	for i := range n {
		if i%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		buf = appendRecord(buf[:0], s.Next())
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return w.Flush()
}
