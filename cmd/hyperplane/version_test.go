package main

import (
	"runtime/debug"
	"testing"
)

// TestBuildVersion: a binary built without -ldflags names the version the
// Go toolchain recorded: the main module's, else the commit of the
// build's VCS settings (shortened, +dirty for local changes), else dev.
func TestBuildVersion(t *testing.T) {
	const commit = "4d5a8bc0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
	vcs := func(settings ...string) []debug.BuildSetting {
		var out []debug.BuildSetting
		for i := 0; i+1 < len(settings); i += 2 {
			out = append(out, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return out
	}
	cases := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build information", nil, "dev"},
		{"go install module@version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"pseudo-version of a commit", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20250101120000-4d5a8bc0e1f2+dirty"},
			Settings: vcs("vcs.revision", commit)}, "v0.0.0-20250101120000-4d5a8bc0e1f2+dirty"},
		{"a clean commit", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", commit, "vcs.modified", "false")}, "4d5a8bc0e1f2"},
		{"local changes", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", commit, "vcs.modified", "true")}, "4d5a8bc0e1f2+dirty"},
		{"a short revision", &debug.BuildInfo{Settings: vcs("vcs.revision", "4d5a8bc")}, "4d5a8bc"},
		{"no VCS settings (-buildvcs=false)", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("-trimpath", "true", "GOOS", "linux")}, "dev"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := buildVersion(c.info); got != c.want {
				t.Errorf("buildVersion = %q, want %q", got, c.want)
			}
		})
	}
}
