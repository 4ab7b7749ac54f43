package main

import (
	"context"
	"fmt"
	"regexp"
	"runtime"
	"strings"
)

// version is stamped at build time:
// go build -ldflags "-X main.version=v1.2.3" ./cmd/hyperplane
var version = "dev"

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet("version", "", e)
	if err := parseFlags(fs, args); err != nil {
		return ignoreHelp(err)
	}
	_, err := fmt.Fprintf(e.stdout, "hyperplane %s %s %s/%s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// semver is v as a SemVer version, for those that need one (the NATS
// micro service): "v1.2.3" is 1.2.3, anything else, such as "dev", is
// 0.0.0-dev.
func semver(v string) string {
	if s, ok := strings.CutPrefix(v, "v"); ok && semverRE.MatchString(s) {
		return s
	}
	if semverRE.MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}

// semverRE is the SemVer 2.0.0 grammar.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
