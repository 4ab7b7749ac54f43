package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// benchLive is a Live holding one view.
type benchLive struct{ v *learner.View }

func (l benchLive) View() *learner.View { return l.v }

// benchServer is a server of a default model (arow, 2^18 weights)
// that learned 4096 labeled synth examples of 40 features.
func benchServer(b *testing.B) *Server {
	b.Helper()
	cfg := learner.DefaultConfig()
	model, err := learner.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
	o := synth.DefaultOptions()
	o.Seed = 1
	s := synth.New(o)
	var x learner.Example
	for range 4096 {
		if _, err := dec.Decode(synth.AppendJSON(nil, s.Next()), &x); err != nil {
			b.Fatal(err)
		}
		model.Learn(&x)
	}
	return New(Options{Model: "bench"}, cfg, benchLive{model.View()}, nil, nil)
}

// benchBodies are request bodies of per examples each, 40 features and
// unlabeled, as a client sends them: JSON (one object, or an array) or
// msgpack (one map, or an array of maps).
func benchBodies(n, per int, msgpack bool) [][]byte {
	o := synth.DefaultOptions()
	o.Seed, o.Unlabeled = 2, 1
	s := synth.New(o)
	bodies := make([][]byte, n)
	for i := range bodies {
		var b []byte
		if per > 1 {
			if msgpack {
				b = wire.AppendMsgpackArrayHeader(b, per)
			} else {
				b = append(b, '[')
			}
		}
		for j := range per {
			if msgpack {
				b = synth.AppendMsgpack(b, s.Next())
				continue
			}
			if j > 0 {
				b = append(b, ',')
			}
			line := synth.AppendJSON(b, s.Next())
			b = line[:len(line)-1] // no newline
		}
		if per > 1 && !msgpack {
			b = append(b, ']')
		}
		bodies[i] = b
	}
	return bodies
}

// benchWriter is a ResponseWriter that keeps nothing but the status and
// the length of the body: the network's side of a reply is not measured.
// It takes deadlines, as net/http's does, so that ServeHTTP does not pay
// for the error of a writer that does not.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

func (w *benchWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}

// benchNATSRequest is a micro.Request whose reply is only counted.
type benchNATSRequest struct {
	data []byte
	h    micro.Headers
	done chan bool // true for a reply, false for an error
}

func (r *benchNATSRequest) Respond([]byte, ...micro.RespondOpt) error  { r.done <- true; return nil }
func (r *benchNATSRequest) RespondJSON(any, ...micro.RespondOpt) error { r.done <- true; return nil }
func (r *benchNATSRequest) Error(string, string, []byte, ...micro.RespondOpt) error {
	r.done <- false
	return nil
}
func (r *benchNATSRequest) Data() []byte           { return r.data }
func (r *benchNATSRequest) Headers() micro.Headers { return r.h }
func (r *benchNATSRequest) Subject() string        { return "hyperplane.bench.predict" }
func (r *benchNATSRequest) Reply() string          { return "_INBOX.bench" }

// BenchmarkPredict is the server-side cost of one prediction request of
// examples with 40 features, from a model of 2^18 weights, without the
// network: one op is one request, decoded, predicted and its reply
// encoded, through ServeHTTP with a request and a writer reused (http-*),
// the NATS handler with a request whose reply is only counted (nats-json:
// it answers on a goroutine of its own, which the op waits for), or the
// answer alone (answer-json: no in-flight token, timeout, metrics or
// headers). The *-64 requests hold an array of 64 examples; ns/example is
// their cost per example.
func BenchmarkPredict(b *testing.B) {
	s := benchServer(b)
	for _, c := range []struct {
		name    string
		per     int
		msgpack bool
	}{
		{"http-json", 1, false},
		{"http-msgpack", 1, true},
		{"http-json-64", 64, false},
		{"http-msgpack-64", 64, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			bodies := benchBodies(256, c.per, c.msgpack)
			var body bytes.Reader
			r := httptest.NewRequest(http.MethodPost, PredictPath, nil)
			r.Body = io.NopCloser(&body)
			if c.msgpack {
				r.Header.Set("Content-Type", ContentTypeMsgpack)
			} else {
				r.Header.Set("Content-Type", "application/json")
			}
			w := &benchWriter{h: http.Header{}}
			op := func(i int) {
				raw := bodies[i%len(bodies)]
				body.Reset(raw)
				r.ContentLength = int64(len(raw))
				w.status, w.n = 0, 0
				s.ServeHTTP(w, r)
			}
			op(0)
			if w.status != http.StatusOK || w.n == 0 {
				b.Fatalf("status %d, %d bytes", w.status, w.n)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				op(i)
			}
			if c.per > 1 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.per), "ns/example")
			}
		})
	}
	b.Run("nats-json", func(b *testing.B) {
		bodies := benchBodies(256, 1, false)
		r := &benchNATSRequest{h: micro.Headers{"Content-Type": []string{"application/json"}}, done: make(chan bool, 1)}
		op := func(i int) bool {
			r.data = bodies[i%len(bodies)]
			s.serveNATS(r, 0)
			return <-r.done
		}
		if !op(0) {
			b.Fatal("an error reply")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			op(i)
		}
	})
	b.Run("answer-json", func(b *testing.B) {
		bodies := benchBodies(256, 1, false)
		st := new(state)
		ctx := context.Background()
		if _, err := s.answer(ctx, request{body: bodies[0]}, st); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			s.answer(ctx, request{body: bodies[i%len(bodies)]}, st) //nolint:errcheck // checked once above
		}
	})
}
