package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is stamped at build time:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/hyperplane
// Left empty, the version is what the Go toolchain recorded in the
// binary (buildVersion).
var version string

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet("version", "", e)
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "hyperplane %s %s %s/%s\n", binaryVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// binaryVersion is the version of this binary: the stamp, else what the
// Go toolchain recorded (buildVersion). The version command and the NATS
// service say the same.
func binaryVersion() string {
	if version != "" {
		return version
	}
	info, _ := debug.ReadBuildInfo()
	return buildVersion(info)
}

// shortRevision is how many characters of a commit's hash buildVersion
// shows, as Go's pseudo-versions do.
const shortRevision = 12

// buildVersion is the version of a binary built without a stamp, from
// what the Go toolchain recorded in it (info, nil when it recorded
// nothing): the main module's version when it has one (go install
// module@version, or go build in a repository, which makes a
// pseudo-version of the commit), else the commit the build's VCS
// settings name, shortened, with "+dirty" when the work tree had local
// changes (go build -buildvcs), else "dev".
func buildVersion(info *debug.BuildInfo) string {
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		return "dev"
	}
	if len(revision) > shortRevision {
		revision = revision[:shortRevision]
	}
	if modified == "true" {
		revision += "+dirty"
	}
	return revision
}
