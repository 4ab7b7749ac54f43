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
		writeBashCompletion(e.stdout, cmds, keys)
	case "zsh":
		writeZshCompletion(e.stdout, cmds, keys)
	case "fish":
		writeFishCompletion(e.stdout, cmds, keys)
	default:
		return usagef("completion: unknown shell %q (want bash, zsh or fish)", shell)
	}
	return nil
}

// completionFlag is a flag as a completion offers it: its name without
// dashes, whether it is a boolean (it takes no value, or true or false)
// and its help.
type completionFlag struct {
	name string
	bool bool
	help string
}

// completionCommand is what a completion offers after a command: its own
// flags, the configuration's keys if it takes them, and the words it
// takes as arguments.
type completionCommand struct {
	name, summary string
	flags         []completionFlag
	keys          bool
	words         []string
}

// completionSpecs reads what to complete from the commands' help, so
// that a script never offers a flag the help does not list, nor leaves
// one out: each command is run with -h, its flags are those of the flag
// set it makes (but the long names of the model's keys, which its help
// leaves out too), and it takes the configuration's keys when its usage
// says "--key value". The keys are those run -h lists (config.Usage).
func completionSpecs(ctx context.Context) ([]completionCommand, []completionFlag, error) {
	var cmds []completionCommand
	for _, c := range commands() {
		cc := completionCommand{name: c.name, summary: c.summary}
		if c.name == "completion" {
			cc.words = completionShells
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
				cc.flags = append(cc.flags, completionFlag{name: f.Name, bool: config.IsBoolFlag(f), help: text})
			})
		}
		cc.keys = strings.Contains(help.String(), "--key value")
		if c.name == "config" {
			// Not a flag of a flag set: runConfig looks for it itself.
			cc.flags = append(cc.flags, completionFlag{name: "defaults", bool: true, help: "every key at its default"})
		}
		cmds = append(cmds, cc)
	}
	var usage bytes.Buffer
	config.Usage(&usage)
	var keys []completionFlag
	for _, m := range usageKeyLine.FindAllStringSubmatch(usage.String(), -1) {
		keys = append(keys, completionFlag{name: m[1], bool: m[2] == "bool", help: m[3]})
	}
	if len(keys) == 0 {
		return nil, nil, fmt.Errorf("completion: no key in the configuration's usage")
	}
	return cmds, keys, nil
}

// usageKeyLine is a key's line of config.Usage: its flag, its type, its
// variable and its help.
var usageKeyLine = regexp.MustCompile(`(?m)^  --(\S+) +(\S+) +HYPERPLANE_\S+ +(.*)$`)

// names returns the flags' names, each after prefix, separated by
// spaces.
func names(flags []completionFlag, prefix string, only func(completionFlag) bool) string {
	var out []string
	for _, f := range flags {
		if only == nil || only(f) {
			out = append(out, prefix+f.name)
		}
	}
	return strings.Join(out, " ")
}

func isBool(f completionFlag) bool { return f.bool }

func commandNames(cmds []completionCommand) string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.name)
	}
	return strings.Join(out, " ")
}

// The scripts offer a command's own flags with one dash, as its -h shows
// them, or two if the word begins with two; the keys with two, as run -h
// shows them. After a boolean they offer true and false; elsewhere, the
// shell's file names.

func writeBashCompletion(w io.Writer, cmds []completionCommand, keys []completionFlag) {
	fmt.Fprintf(w, `# bash completion for hyperplane, printed by "hyperplane completion bash".
# Load it with: source <(hyperplane completion bash)
_hyperplane_keys=%q
_hyperplane_key_bools=%q
_hyperplane() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    if [[ $COMP_CWORD -eq 1 ]]; then
        COMPREPLY=($(compgen -W %q -- "$cur"))
        return
    fi
    local own="" bools="" keys="" words=""
    case "${COMP_WORDS[1]}" in
`, names(keys, "--", nil), names(keys, "", isBool), commandNames(cmds)+" --version --help")
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n", c.name)
		fmt.Fprintf(w, "        own=%q\n", names(c.flags, "", nil))
		fmt.Fprintf(w, "        bools=%q\n", names(c.flags, "", isBool))
		if c.keys {
			fmt.Fprintf(w, "        keys=1\n")
		}
		fmt.Fprintf(w, "        words=%q\n", strings.Join(c.words, " "))
		fmt.Fprintf(w, "        ;;\n")
	}
	fmt.Fprint(w, `    *)
        return
        ;;
    esac
    if [[ $cur == -* ]]; then
        local dash=- flags="" f
        [[ $cur == --* ]] && dash=--
        for f in $own; do flags+=" $dash$f"; done
        [[ -n $keys ]] && flags+=" $_hyperplane_keys"
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    local p="${prev#-}" b
    p="${p#-}"
    [[ -n $keys ]] && bools+=" $_hyperplane_key_bools"
    for b in $bools; do
        if [[ $p == "$b" ]]; then
            COMPREPLY=($(compgen -W "true false" -- "$cur"))
            return
        fi
    done
    if [[ -n $words ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
}
complete -o default -F _hyperplane hyperplane
`)
}

// zshWords is words as the elements of a zsh array, each single-quoted.
func zshWords(words []string) string {
	var out []string
	for _, s := range words {
		out = append(out, "'"+strings.ReplaceAll(s, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}

func writeZshCompletion(w io.Writer, cmds []completionCommand, keys []completionFlag) {
	var described []string
	for _, c := range cmds {
		described = append(described, c.name+":"+strings.ReplaceAll(c.summary, ":", `\:`))
	}
	fmt.Fprintf(w, `#compdef hyperplane
# zsh completion for hyperplane, printed by "hyperplane completion zsh".
# Load it with: source <(hyperplane completion zsh)
# or save it as _hyperplane in a directory of $fpath.
_hyperplane() {
  local -a keys keybools opts optbools values commands
  keys=(%s)
  keybools=(%s)
  commands=(%s)
  if (( CURRENT == 2 )); then
    if [[ $PREFIX == -* ]]; then
      compadd -- --version --help
    else
      _describe 'command' commands
    fi
    return
  fi
  local haskeys=0
  case ${words[2]} in
`, names(keys, "--", nil), names(keys, "", isBool), zshWords(described))
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n", c.name)
		fmt.Fprintf(w, "      opts=(%s)\n", names(c.flags, "", nil))
		fmt.Fprintf(w, "      optbools=(%s)\n", names(c.flags, "", isBool))
		if c.keys {
			fmt.Fprintf(w, "      haskeys=1\n")
		}
		fmt.Fprintf(w, "      values=(%s)\n", strings.Join(c.words, " "))
		fmt.Fprintf(w, "      ;;\n")
	}
	fmt.Fprint(w, `    *)
      return 1
      ;;
  esac
  if [[ $PREFIX == -* ]]; then
    local dash=-
    [[ $PREFIX == --* ]] && dash=--
    local -a flags
    flags=(${dash}${^opts})
    (( haskeys )) && flags+=($keys)
    compadd -- $flags
    return
  fi
  local p=${words[CURRENT-1]#-}
  p=${p#-}
  if (( ${optbools[(Ie)$p]} )) || (( haskeys && ${keybools[(Ie)$p]} )); then
    compadd -- true false
    return
  fi
  if (( $#values )); then
    compadd -- $values
    return
  fi
  _files
}
if [[ ${funcstack[1]} == _hyperplane ]]; then
  _hyperplane "$@"
else
  compdef _hyperplane hyperplane
fi
`)
}

// fishQuote is s as a fish single-quoted string.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFishCompletion(w io.Writer, cmds []completionCommand, keys []completionFlag) {
	fmt.Fprint(w, `# fish completion for hyperplane, printed by "hyperplane completion fish".
# Load it with: hyperplane completion fish | source
# or save it as ~/.config/fish/completions/hyperplane.fish
complete -c hyperplane -n __fish_use_subcommand -f -l version -d 'print the version'
complete -c hyperplane -n __fish_use_subcommand -f -l help -d 'list the commands'
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c hyperplane -n __fish_use_subcommand -f -a %s -d %s\n", c.name, fishQuote(c.summary))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.name)
		for _, f := range c.flags {
			fmt.Fprintf(w, "complete -c hyperplane -n %s -o %s%s -d %s\n", cond, f.name, fishArg(f), fishQuote(f.help))
		}
		if c.keys {
			for _, k := range keys {
				fmt.Fprintf(w, "complete -c hyperplane -n %s -l %s%s -d %s\n", cond, k.name, fishArg(k), fishQuote(k.help))
			}
		}
		if len(c.words) > 0 {
			fmt.Fprintf(w, "complete -c hyperplane -n %s -f -a %s\n", cond, fishQuote(strings.Join(c.words, " ")))
		}
	}
}

// fishArg marks a flag that takes a value: a boolean takes none.
func fishArg(f completionFlag) string {
	if f.bool {
		return ""
	}
	return " -r"
}
