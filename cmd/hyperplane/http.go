package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hyperplane-ml/hyperplane/serve"
)

// handler serves /metrics from reg, /healthz and /readyz for w, and, if
// predict is not nil, its prediction requests.
func handler(reg *prometheus.Registry, w interface{ NotReady() []string }, predict *serve.Server) http.Handler {
	mux := http.NewServeMux()
	if predict != nil {
		predict.Register(mux)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		// Each failing reason on a line of its own: source, outputs,
		// snapshots.
		if reasons := w.NotReady(); len(reasons) > 0 {
			http.Error(rw, "not ready:\n"+strings.Join(reasons, "\n"), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ready")
	})
	return mux
}
