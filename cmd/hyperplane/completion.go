package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/completion"
)

// completionShells are the shells runCompletion writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

func runCompletion(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet("completion", "bash|zsh|fish", e)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(e.stdout, `
Prints a script that completes hyperplane's commands and flags, the
configuration's keys included, in the shell named. To load it:
  bash  source <(hyperplane completion bash)         (in ~/.bashrc to keep it)
  zsh   source <(hyperplane completion zsh)          (in ~/.zshrc, after compinit)
  fish  hyperplane completion fish > ~/.config/fish/completions/hyperplane.fish
`)
	}
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if fs.NArg() != 1 {
		return usagef("completion: name one shell: bash, zsh or fish")
	}
	cmds, keys, err := completionSpecs(ctx)
	if err != nil {
		return err
	}
	switch shell := fs.Arg(0); shell {
	case "bash":
		completion.Bash(e.stdout, cmds, keys)
	case "zsh":
		completion.Zsh(e.stdout, cmds, keys)
	case "fish":
		completion.Fish(e.stdout, cmds, keys)
	default:
		return usagef("completion: unknown shell %q (want bash, zsh or fish)", shell)
	}
	return nil
}

// completionSpecs reads what to complete from the commands' help, so
// that a script never offers a flag the help does not list, nor leaves
// one out: each command is run with -h, its flags are those of the flag
// set it makes (but the long names of the model's keys, which its help
// leaves out too), and it takes the configuration's keys when its usage
// says "--key value". The keys are those run -h lists (config.Usage).
func completionSpecs(ctx context.Context) ([]completion.Command, []completion.Flag, error) {
	var cmds []completion.Command
	for _, c := range commands() {
		cc := completion.Command{Name: c.name, Summary: c.summary}
		if c.name == "completion" {
			cc.Words = completionShells
			cmds = append(cmds, cc)
			continue
		}
		var sets []*flag.FlagSet
		var help bytes.Buffer
		e := &env{
			getenv:  func(string) string { return "" },
			stdin:   strings.NewReader(""),
			stdout:  &help,
			stderr:  io.Discard,
			flagSet: func(fs *flag.FlagSet) { sets = append(sets, fs) },
		}
		if err := c.run(ctx, e, []string{"-h"}); err != nil {
			return nil, nil, fmt.Errorf("completion: %s -h: %w", c.name, err)
		}
		for _, fs := range sets {
			fs.VisitAll(func(f *flag.Flag) {
				if strings.Contains(f.Name, ".") {
					return
				}
				_, text := flag.UnquoteUsage(f)
				cc.Flags = append(cc.Flags, completion.Flag{Name: f.Name, Bool: config.IsBoolFlag(f), Help: text})
			})
		}
		cc.Keys = strings.Contains(help.String(), "--key value")
		cmds = append(cmds, cc)
	}
	var usage bytes.Buffer
	config.Usage(&usage)
	var keys []completion.Flag
	for _, m := range usageKeyLine.FindAllStringSubmatch(usage.String(), -1) {
		keys = append(keys, completion.Flag{Name: m[1], Bool: m[2] == "bool", Help: m[3]})
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("completion: no key in the configuration's usage")
	}
	return cmds, keys, nil
}

// usageKeyLine is a key's line of config.Usage: its flag, its type, its
// variable and its help.
var usageKeyLine = regexp.MustCompile(`(?m)^  --(\S+) +(\S+) +HYPERPLANE_\S+ +(.*)$`)
