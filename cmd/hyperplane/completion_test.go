package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCompletionScripts: each shell's script is produced, parses in its
// shell where the shell is installed (bash always is here), and offers
// every command and every key of the configuration reference.
func TestCompletionScripts(t *testing.T) {
	reference := mustRun(t, "", "config", "--defaults")
	keys := regexp.MustCompile(`(?m)^ *# HYPERPLANE_\w+, (--\S+)$`).FindAllStringSubmatch(reference, -1)
	if len(keys) < 50 {
		t.Fatalf("found %d keys in the reference", len(keys))
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			script := mustRun(t, "", "completion", shell)
			for _, c := range commands() {
				if !regexp.MustCompile(`\b` + c.name + `\b`).MatchString(script) {
					t.Errorf("the %s script does not offer the command %s", shell, c.name)
				}
			}
			for _, k := range keys {
				name := k[1]
				if shell == "fish" {
					name = "-l " + strings.TrimPrefix(name, "--") + " "
				}
				if !strings.Contains(script, name) {
					t.Errorf("the %s script does not offer the key %s", shell, k[1])
				}
			}
			for _, want := range []string{"-seed", "-publish", "--version", "defaults"} {
				if !strings.Contains(script, strings.TrimPrefix(want, "-")) {
					t.Errorf("the %s script does not offer %s", shell, want)
				}
			}
			path, err := exec.LookPath(shell)
			if errors.Is(err, exec.ErrNotFound) && shell != "bash" {
				t.Skipf("no %s to check the script's syntax", shell)
			}
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "hyperplane."+shell)
			if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(path, "-n", file).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}

// TestBashCompletes runs the bash script's function on command lines
// and checks what it offers.
func TestBashCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	file := filepath.Join(t.TempDir(), "hyperplane.bash")
	if err := os.WriteFile(file, []byte(mustRun(t, "", "completion", "bash")), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		line string // the words; the last is the one completed
		want string // COMPREPLY, space-separated
	}{
		{"hyperplane ve", "version"},
		{"hyperplane --v", "--version"},
		{"hyperplane run --serve.na", "--serve.nats"},
		{"hyperplane run --serve.nats ", "true false"},
		{"hyperplane gen -se", "-seed"},
		{"hyperplane gen --kafka.sasl.p", "--kafka.sasl.password"},
		{"hyperplane replay --pub", "--publish"},
		{"hyperplane replay -publish f", "false"},
		{"hyperplane config --def", "--defaults"},
		{"hyperplane train --serve.na", ""},
		{"hyperplane completion ", "bash zsh fish"},
		{"hyperplane completion z", "zsh"},
	}
	for _, c := range cases {
		t.Run(c.line, func(t *testing.T) {
			words := strings.Split(c.line, " ")
			var quoted []string
			for _, w := range words {
				quoted = append(quoted, "'"+w+"'")
			}
			script := "source " + file + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" +
				strconv.Itoa(len(words)-1) + "\n_hyperplane\necho \"${COMPREPLY[*]}\"\n"
			out, err := exec.Command(bash, "-c", script).CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != c.want {
				t.Errorf("offered %q, want %q", got, c.want)
			}
		})
	}
}

// TestCompletionNeedsAShell: no shell, or one it does not know, is a
// mistake on the command line.
func TestCompletionNeedsAShell(t *testing.T) {
	for _, args := range [][]string{{"completion"}, {"completion", "tcsh"}, {"completion", "bash", "zsh"}} {
		_, _, err := runCmd(t, "", args...)
		var u *usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

// TestVersionFlag: hyperplane --version (and -version, -v) prints what
// hyperplane version prints.
func TestVersionFlag(t *testing.T) {
	want := mustRun(t, "", "version")
	for _, flag := range []string{"--version", "-version", "-v"} {
		if got := mustRun(t, "", flag); got != want {
			t.Errorf("hyperplane %s printed %q, want %q", flag, got, want)
		}
	}
	if usage := mustRun(t, "", "help"); !strings.Contains(usage, "--version") || !strings.Contains(usage, "completion") {
		t.Errorf("the usage names neither --version nor completion:\n%s", usage)
	}
}
