package hyperplane_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/hyperplane-ml/hyperplane"

// mapEntry is one heading of ARCHITECTURE.md's code map: the packages it
// names and the rules under it.
type mapEntry struct {
	packages  []string // import paths
	forbidden []string // patterns, as go list takes them, made absolute
	testsOnly bool
}

var quoted = regexp.MustCompile("`([^`]+)`")

// codeMap reads the code map of ARCHITECTURE.md: a "### " heading names
// packages in backquotes, relative to the module; a "Must not import:"
// line lists patterns (./... for the whole module, ./x/... for x and
// below, a path for one package, external paths likewise); "Imported by
// tests only." says that no package outside tests depends on them.
func codeMap(t *testing.T) []mapEntry {
	t.Helper()
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	var entries []mapEntry
	inMap := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inMap = line == "## Code map"
		case !inMap:
		case strings.HasPrefix(line, "### "):
			var e mapEntry
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				e.packages = append(e.packages, module+"/"+m[1])
			}
			entries = append(entries, e)
		case len(entries) == 0:
		case strings.HasPrefix(line, "Must not import:"):
			e := &entries[len(entries)-1]
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				p := m[1]
				if rest, ok := strings.CutPrefix(p, "./"); ok {
					p = module + "/" + rest // ./... becomes module/...
				}
				e.forbidden = append(e.forbidden, p)
			}
		case line == "Imported by tests only.":
			entries[len(entries)-1].testsOnly = true
		}
	}
	if len(entries) == 0 {
		t.Fatal(`ARCHITECTURE.md has no "## Code map" with "### " headings`)
	}
	return entries
}

// matches reports whether the import path p is matched by pattern, as go
// list matches a pattern ending in /... (which also matches the path
// before it).
func matches(pattern, p string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// TestArchitectureCodeMap: ARCHITECTURE.md's code map names every package
// of the module and no other, no package imports what the map says it
// must not, and no package imports one the map keeps for tests outside
// its tests. Only the packages' own files count (go list's Imports), not
// their tests'.
func TestArchitectureCodeMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	entries := codeMap(t)

	mapped := map[string]bool{}
	testsOnly := map[string]bool{}
	for _, e := range entries {
		for _, p := range e.packages {
			if _, ok := imports[p]; !ok {
				t.Errorf("ARCHITECTURE.md's code map names %s, which go list does not know", p)
			}
			mapped[p] = true
			testsOnly[p] = e.testsOnly
		}
	}
	for p := range imports {
		// The module's root holds only this test.
		if !mapped[p] && p != module {
			t.Errorf("package %s is not on ARCHITECTURE.md's code map: add it, with what it must not import", p)
		}
	}

	for _, e := range entries {
		for _, p := range e.packages {
			for _, d := range imports[p] {
				if d == p {
					continue
				}
				for _, f := range e.forbidden {
					if matches(f, d) {
						t.Errorf("%s imports %s, which ARCHITECTURE.md says it must not import (%s)", p, d, f)
					}
				}
			}
		}
	}
	for p, ds := range imports {
		if testsOnly[p] {
			continue
		}
		for _, d := range ds {
			if testsOnly[d] {
				t.Errorf("%s imports %s, which ARCHITECTURE.md keeps for tests", p, d)
			}
		}
	}
	if !slices.ContainsFunc(entries, func(e mapEntry) bool { return len(e.forbidden) > 0 }) {
		t.Error(`ARCHITECTURE.md's code map has no "Must not import:" line`)
	}
}
