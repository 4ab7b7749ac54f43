package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeYAML feeds arbitrary bytes to the config file decoder: it must
// return an error or apply the file, never panic or loop (aliases that
// refer to themselves included).
func FuzzDecodeYAML(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "deploy", "examples", "*.yaml"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		"model:\n  name: m\n",
		"kafka:\n  brokers: &b [a:1]\nsource:\n  topics: *b\n",
		"a: &a\n  b: *a\n",
		"model: [1, 2]\n",
		"source:\n  batch: 0x10\n",
		"---\n---\n",
		"model:\n  learner:\n    classes: [~, 1]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		_ = decodeYAML("fuzz.yaml", data, &c)
		_ = c.String()
	})
}
