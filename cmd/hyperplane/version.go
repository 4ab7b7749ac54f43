package main

import (
	"context"
	"fmt"
	"runtime"
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
