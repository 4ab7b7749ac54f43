package serve

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a server's Prometheus metrics. The version of the live
// model it answers from is the worker's (consumer.Metrics.ServedVersion).
type Metrics struct {
	Requests *prometheus.CounterVec   // by interface (http, nats) and outcome
	Latency  *prometheus.HistogramVec // by interface
}

// NewMetrics creates the metrics and registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hyperplane_serve_requests_total",
			Help: "Prediction requests, by interface (http, nats) and outcome: ok, bad_request, not_found, timeout (also a reply the client did not read within serve.timeout), too_large, unavailable (over serve.max_in_flight, or over 4 × serve.max_in_flight HTTP bodies being received, no room among serve.generations for a stored generation, or no model yet), cancelled (the client left while a stored generation loaded, or before it took its reply) or error (a stored generation that could not be read).",
		}, []string{"interface", "outcome"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hyperplane_serve_request_seconds",
			Help:    "Time to answer a prediction request, from its arrival (HTTP: its headers) to its reply, by interface.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
		}, []string{"interface"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Latency)
	}
	return m
}
