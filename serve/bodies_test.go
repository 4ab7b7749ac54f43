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

// TestHTTPRefusedBeforeItsBody: a request refused before its body is
// read, for want of room to receive it or for its query string, gets its
// reply while its client still holds the rest of the body back, and the
// connection is closed after it, rather than held until the body
// arrives, without a deadline.
func TestHTTPRefusedBeforeItsBody(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const maxInFlight, bodies = 1, 4
	hs, reading := httpServerReading(t, serve.New(serve.Options{Model: modelName, MaxInFlight: maxInFlight, Timeout: time.Minute}, cfg, liveOf(m), nil, nil))
	addr := hs.Listener.Addr().String()
	body := jsonArray(encodeJSON(t, probes(cfg)))
	refused := func(s *slowRequest, status int, parts ...string) {
		t.Helper()
		// A guard, not a wait: the reply comes at once, or never.
		s.conn.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // a failed read says so
		r := s.finish(t, false)
		r.refused(t, status, parts...)
		if !r.closed {
			t.Error("the connection is kept open, with the rest of the body unread")
		}
	}
	var slow []*slowRequest
	for range bodies {
		slow = append(slow, startSlowRequest(t, addr, body, 10))
	}
	for range bodies {
		<-reading
	}
	refused(startSlowRequest(t, addr, body, 10), http.StatusServiceUnavailable, "request bodies are being received")
	<-reading // the refused request's
	for _, s := range slow {
		s.finish(t, true).ok(t, "application/json", m.Version())
	}
	refused(startSlowRequestTo(t, addr, serve.PredictPath+"?generation=1&generation=2", body, 10), http.StatusBadRequest, "generation: given 2 times")
}
