package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeConfigReference: the configuration reference in the README is
// what "hyperplane config --defaults" prints today. To refresh it, replace
// the block with that command's output.
func TestReadmeConfigReference(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- begin: hyperplane config --defaults -->\n```yaml\n", "```\n<!-- end: hyperplane config --defaults -->"
	_, rest, ok := strings.Cut(string(readme), begin)
	if !ok {
		t.Fatalf("README.md has no %q", begin)
	}
	block, _, ok := strings.Cut(rest, end)
	if !ok {
		t.Fatalf("README.md has no %q after the reference", end)
	}
	if want := mustRun(t, "", "config", "--defaults"); block != want {
		t.Fatalf("the README's configuration reference is out of date: replace it with the output of\n  go run ./cmd/hyperplane config --defaults")
	}
}
