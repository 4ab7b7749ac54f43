package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
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

// startingHandler is handler while the worker starts (it resumes its
// model, and waits for a store that does not answer): the process is
// alive, /readyz says it starts, /metrics has the process's metrics alone
// (the worker's appear once it has resumed the model they report on),
// and, if predicts, a prediction request is told to come back (503,
// Retry-After).
func startingHandler(predicts bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/", handler(reg, startingUp{}, nil))
	if predicts {
		mux.HandleFunc("POST "+serve.PredictPath, func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Retry-After", "1")
			// The body is not read: without Connection: close, net/http
			// would read the rest of it, with no deadline, before it
			// replies, and a client slow to send it would not hear why
			// it was refused.
			rw.Header().Set("Connection", "close")
			http.Error(rw, "the worker is starting: its model is being resumed", http.StatusServiceUnavailable)
		})
	}
	return mux
}

// startingUp is the readiness of a worker that has not started.
type startingUp struct{}

func (startingUp) NotReady() []string {
	return []string{"starting: the model is being resumed and its inputs opened (the log says what it waits for)"}
}

// swapHandler serves with the handler it was last set to: the server
// answers from its first moment, and the worker's routes once it is
// built.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(rw, r)
}
