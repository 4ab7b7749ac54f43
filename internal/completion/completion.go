// Package completion writes the shell scripts that complete hyperplane's
// commands, their flags and the configuration's keys, for bash, zsh and
// fish. What to complete comes from the caller, which reads it from the
// commands' own help.
package completion

import (
	"fmt"
	"io"
	"strings"
)

// Flag is a flag as a completion offers it: its name without dashes,
// whether it is a boolean (it takes no value, or true or false) and its
// help.
type Flag struct {
	Name string
	Bool bool
	Help string
}

// Command is what a completion offers after a command: its own flags,
// the configuration's keys if it takes them, and the words it takes as
// arguments.
type Command struct {
	Name, Summary string
	Flags         []Flag
	Keys          bool
	Words         []string
}

// names returns the flags' names, each after prefix, separated by
// spaces.
func names(flags []Flag, prefix string, only func(Flag) bool) string {
	var out []string
	for _, f := range flags {
		if only == nil || only(f) {
			out = append(out, prefix+f.Name)
		}
	}
	return strings.Join(out, " ")
}

func isBool(f Flag) bool { return f.Bool }

func commandNames(cmds []Command) string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Name)
	}
	return strings.Join(out, " ")
}

// The scripts offer a command's own flags with one dash, as its -h shows
// them, or two if the word begins with two; the keys with two, as run -h
// shows them. After a boolean they offer true and false; elsewhere, the
// shell's file names.

// Bash writes the bash script that completes cmds, and keys after a
// command whose Keys is set.
func Bash(w io.Writer, cmds []Command, keys []Flag) {
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
		fmt.Fprintf(w, "    %s)\n", c.Name)
		fmt.Fprintf(w, "        own=%q\n", names(c.Flags, "", nil))
		fmt.Fprintf(w, "        bools=%q\n", names(c.Flags, "", isBool))
		if c.Keys {
			fmt.Fprintf(w, "        keys=1\n")
		}
		fmt.Fprintf(w, "        words=%q\n", strings.Join(c.Words, " "))
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

// Zsh writes the zsh script that completes cmds and keys.
func Zsh(w io.Writer, cmds []Command, keys []Flag) {
	var described []string
	for _, c := range cmds {
		described = append(described, c.Name+":"+strings.ReplaceAll(c.Summary, ":", `\:`))
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
		fmt.Fprintf(w, "    %s)\n", c.Name)
		fmt.Fprintf(w, "      opts=(%s)\n", names(c.Flags, "", nil))
		fmt.Fprintf(w, "      optbools=(%s)\n", names(c.Flags, "", isBool))
		if c.Keys {
			fmt.Fprintf(w, "      haskeys=1\n")
		}
		fmt.Fprintf(w, "      values=(%s)\n", strings.Join(c.Words, " "))
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

// Fish writes the fish script that completes cmds and keys.
func Fish(w io.Writer, cmds []Command, keys []Flag) {
	fmt.Fprint(w, `# fish completion for hyperplane, printed by "hyperplane completion fish".
# Load it with: hyperplane completion fish | source
# or save it as ~/.config/fish/completions/hyperplane.fish
complete -c hyperplane -n __fish_use_subcommand -f -l version -d 'print the version'
complete -c hyperplane -n __fish_use_subcommand -f -l help -d 'list the commands'
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c hyperplane -n __fish_use_subcommand -f -a %s -d %s\n", c.Name, fishQuote(c.Summary))
	}
	for _, c := range cmds {
		cond := fishQuote("__fish_seen_subcommand_from " + c.Name)
		for _, f := range c.Flags {
			fmt.Fprintf(w, "complete -c hyperplane -n %s -o %s%s -d %s\n", cond, f.Name, fishArg(f), fishQuote(f.Help))
		}
		if c.Keys {
			for _, k := range keys {
				fmt.Fprintf(w, "complete -c hyperplane -n %s -l %s%s -d %s\n", cond, k.Name, fishArg(k), fishQuote(k.Help))
			}
		}
		if len(c.Words) > 0 {
			fmt.Fprintf(w, "complete -c hyperplane -n %s -f -a %s\n", cond, fishQuote(strings.Join(c.Words, " ")))
		}
	}
}

// fishArg marks a flag that takes a value: a boolean takes none.
func fishArg(f Flag) string {
	if f.Bool {
		return ""
	}
	return " -r"
}
