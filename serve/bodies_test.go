package serve_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/serve"
)

// TestHTTPBodiesInTransitBounded: the bodies received at once are bounded,
// four for each of serve.max_in_flight's tokens, so that slow clients
// cannot make the server hold serve.max_bytes for each of any number of
// connections. One more is refused with 503 while they arrive, and
// answered once they have.
func TestHTTPBodiesInTransitBounded(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const maxInFlight, bodies = 1, 4
	hs, reading := httpServerReading(t, serve.New(serve.Options{Model: modelName, MaxInFlight: maxInFlight, Timeout: time.Minute}, cfg, liveOf(m), nil, nil))
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	var slow []*slowRequest
	for range bodies {
		slow = append(slow, startSlowRequest(t, hs.Listener.Addr().String(), body, 10))
	}
	for range bodies {
		<-reading
	}
	post(t, hs.URL, "", raws[0]).refused(t, http.StatusServiceUnavailable, "request bodies are being received")
	<-reading // the refused request's
	for _, s := range slow {
		s.finish(t, true).ok(t, "application/json", m.Version())
	}
	post(t, hs.URL, "", raws[0]).ok(t, "application/json", m.Version())
}
