package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

const (
	subject    = "hyperplane.m.predict"
	queueGroup = "predictors"
	version    = "1.2.3"
)

// startService starts srv's NATS service on nc, stopped before nc is
// closed, and waits until the server has its subscriptions.
func startService(t testing.TB, srv *serve.Server, nc *nats.Conn) micro.Service {
	t.Helper()
	svc, err := srv.AddService(nc, serve.ServiceOptions{Subject: subject, QueueGroup: queueGroup, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return svc
}

// request sends body to the service with the headers (name, value, ...)
// and returns its reply.
func request(t testing.TB, nc *nats.Conn, body []byte, header ...string) *nats.Msg {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = body
	for i := 0; i+1 < len(header); i += 2 {
		msg.Header.Set(header[i], header[i+1])
	}
	reply, err := nc.RequestMsgWithContext(t.Context(), msg)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	return reply
}

// TestNATSRepliesAsHTTP sends the same bodies over NATS and HTTP to one
// server: the replies are the same bytes, with the model version, the
// generation asked for and, for msgpack, the content type in the headers.
func TestNATSRepliesAsHTTP(t *testing.T) {
	cfg := multiclassConfig()
	store := memStore(t)
	m := trained(t, cfg, 300)
	writeGeneration(t, store, 1, m.State())
	genVersion := m.Version()
	learn(t, m, stream(cfg, 8), 300)
	srv := serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil)
	hs := httpServer(t, srv)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)

	js, mp := encodeJSON(t, probes(cfg)), encodeMsgpack(t, probes(cfg))
	for _, tc := range []struct {
		name, contentType, generation string
		body                          []byte
		wantVersion                   uint64
		lowerNames                    bool // the NATS request's header names in lower case
	}{
		{"json object", "", "", js[0], m.Version(), false},
		{"json array", "application/json", "", jsonArray(js), m.Version(), false},
		{"json lines", "", "", jsonLines(js), m.Version(), false},
		{"empty array", "", "", []byte("[]"), m.Version(), false},
		{"msgpack map", serve.ContentTypeMsgpack, "", mp[1], m.Version(), false},
		{"msgpack array", serve.ContentTypeMsgpack, "", msgpackArray(mp), m.Version(), false},
		{"msgpack maps end to end", "application/x-msgpack", "", bytes.Join(mp, nil), m.Version(), false},
		{"a stored generation", "", "1", jsonArray(js), genVersion, false},
		{"a stored generation in msgpack", serve.ContentTypeMsgpack, "1", msgpackArray(mp), genVersion, false},
		{"header names in lower case", serve.ContentTypeMsgpack, "1", msgpackArray(mp), genVersion, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var header []string
			if tc.contentType != "" {
				header = append(header, "Content-Type", tc.contentType)
			}
			if tc.generation != "" {
				header = append(header, serve.GenerationHeader, tc.generation)
			}
			want := post(t, hs.URL, tc.contentType, tc.body, header...)
			if want.status != http.StatusOK {
				t.Fatalf("HTTP status %d (%s)", want.status, want.body)
			}
			if tc.lowerNames {
				for i := 0; i < len(header); i += 2 {
					header[i] = strings.ToLower(header[i])
				}
			}
			got := request(t, nc, tc.body, header...)
			if code := got.Header.Get(micro.ErrorCodeHeader); code != "" {
				t.Fatalf("error reply %s: %s", code, got.Header.Get(micro.ErrorHeader))
			}
			if !bytes.Equal(got.Data, want.body) {
				t.Errorf("NATS reply\n%q\nHTTP reply\n%q", got.Data, want.body)
			}
			if v := got.Header.Get(serve.VersionHeader); v != strconv.FormatUint(tc.wantVersion, 10) {
				t.Errorf("%s %q, want %d", serve.VersionHeader, v, tc.wantVersion)
			}
			if g := got.Header.Get(serve.GenerationHeader); g != tc.generation {
				t.Errorf("%s %q, want %q", serve.GenerationHeader, g, tc.generation)
			}
			wantType := ""
			if strings.Contains(tc.contentType, "msgpack") {
				wantType = serve.ContentTypeMsgpack
			}
			if ct := got.Header.Get("Content-Type"); ct != wantType {
				t.Errorf("Content-Type %q, want %q", ct, wantType)
			}
		})
	}
}

// TestNATSErrors sends requests the server refuses: each gets a micro
// error reply whose code is the HTTP status and whose description is the
// HTTP reply's message, naming the field at fault.
func TestNATSErrors(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	live := liveOf(m)
	const max = 512
	srv := serve.New(serve.Options{Model: modelName, MaxBytes: max}, cfg, live, nil, nil)
	hs := httpServer(t, srv)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)
	good := `{"features":{"f1":1}}`
	badField := `{"features":{"x":[1]}}`
	badMsgpack := encodeMsgpack(t, []map[string]any{{"features": map[string]any{"x": []any{1}}}})[0]

	for _, tc := range []struct {
		name   string
		body   []byte
		header []string
		code   int
		parts  []string
	}{
		{"a field error", []byte(badField), nil, 400, []string{"features.x"}},
		{"the 3rd example of an array", []byte("[" + good + "," + good + "," + badField + "]"), nil, 400, []string{"example 3", "features.x"}},
		{"malformed JSON", []byte(`{"features":`), nil, 400, []string{"example 1"}},
		{"empty", nil, nil, 400, []string{"empty body"}},
		{"a msgpack field error", badMsgpack, []string{"Content-Type", serve.ContentTypeMsgpack}, 400, []string{"features.x"}},
		{"over max_bytes", []byte(strings.Repeat(" ", max) + good), nil, 413, []string{"exceed serve.max_bytes, 512"}},
		{"a bad generation", []byte(good), []string{serve.GenerationHeader, "x"}, 400, []string{"generation"}},
		{"no store", []byte(good), []string{serve.GenerationHeader, "3"}, 404, []string{"generation 3", "snapshot store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := request(t, nc, tc.body, tc.header...)
			if code := got.Header.Get(micro.ErrorCodeHeader); code != strconv.Itoa(tc.code) {
				t.Fatalf("%s %q (%s), want %d", micro.ErrorCodeHeader, code, got.Header.Get(micro.ErrorHeader), tc.code)
			}
			desc := got.Header.Get(micro.ErrorHeader)
			for _, p := range tc.parts {
				if !strings.Contains(desc, p) {
					t.Errorf("%s %q does not say %q", micro.ErrorHeader, desc, p)
				}
			}
			if len(got.Data) != 0 {
				t.Errorf("the error reply has a body: %q", got.Data)
			}
			ct := ""
			if len(tc.header) > 0 && tc.header[0] == "Content-Type" {
				ct = tc.header[1]
			}
			var hdr []string
			if len(tc.header) > 0 && tc.header[0] != "Content-Type" {
				hdr = tc.header
			}
			r := post(t, hs.URL, ct, tc.body, hdr...)
			if r.status != tc.code || strings.TrimSpace(string(r.body)) != desc {
				t.Errorf("HTTP says %d %q, NATS %d %q", r.status, r.body, tc.code, desc)
			}
		})
	}

	live.view.Store(nil)
	got := request(t, nc, []byte(good))
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "503" {
		t.Errorf("without a model: %s %q, want 503", micro.ErrorCodeHeader, code)
	}
}

// TestNATSModelNamedTwice: a request whose headers name the generation
// or the shard twice, with different values, under one spelling of the
// name or two, is refused with 400 naming both, as over HTTP; the same
// value twice is answered.
func TestNATSModelNamedTwice(t *testing.T) {
	cfg := binaryConfig()
	store := memStore(t)
	writeGeneration(t, store, 1, trained(t, cfg, 50).State())
	writeGeneration(t, store, 2, trained(t, cfg, 80).State())
	srv := serve.New(serve.Options{Model: modelName}, cfg, liveOf(trained(t, cfg, 100)), loadFrom(store), nil)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)
	body := encodeJSON(t, probes(cfg))[0]
	send := func(h nats.Header) *nats.Msg {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Data, msg.Header = body, h
		reply, err := nc.RequestMsgWithContext(t.Context(), msg)
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		return reply
	}
	for _, tc := range []struct {
		name   string
		header nats.Header
		parts  []string
	}{
		{"a generation twice", nats.Header{serve.GenerationHeader: {"2", "1"}}, []string{"generation", `"2" and "1"`}},
		{"a generation under two spellings", nats.Header{serve.GenerationHeader: {"2"}, strings.ToLower(serve.GenerationHeader): {"1"}}, []string{"generation", `"2" and "1"`}},
		{"a shard twice", nats.Header{serve.ShardHeader: {"a", "b"}}, []string{"shard", `"a" and "b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := send(tc.header)
			if code := got.Header.Get(micro.ErrorCodeHeader); code != "400" {
				t.Fatalf("%s %q (%s), want 400", micro.ErrorCodeHeader, code, got.Header.Get(micro.ErrorHeader))
			}
			desc := got.Header.Get(micro.ErrorHeader)
			for _, p := range tc.parts {
				if !strings.Contains(desc, p) {
					t.Errorf("%s %q does not say %q", micro.ErrorHeader, desc, p)
				}
			}
		})
	}
	got := send(nats.Header{serve.GenerationHeader: {"1"}, strings.ToLower(serve.GenerationHeader): {"1"}})
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("the same generation twice: error %s (%s)", code, got.Header.Get(micro.ErrorHeader))
	}
	if g := got.Header.Get(serve.GenerationHeader); g != "1" {
		t.Fatalf("the same generation twice answered from %q, want generation 1", g)
	}
}

// TestNATSReplyOverMaxPayload sends a request within the server's
// max_payload whose reply is not (each example's reply is longer than the
// example): it is refused with 413 naming max_payload, not left without a
// reply for the requester to time out on; a smaller one is answered.
func TestNATSReplyOverMaxPayload(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	srv := serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil)
	nc := testbroker.NATS(t, testbroker.MaxPayload(4096)).Conn(t)
	startService(t, srv, nc)
	body := func(n int) []byte {
		var b bytes.Buffer
		for i := range n {
			fmt.Fprintf(&b, "{\"id\":%d}\n", i)
		}
		return b.Bytes()
	}
	big := body(300)
	if len(big) >= 4096 {
		t.Fatalf("the request's %d bytes are over max_payload", len(big))
	}
	// Without a reply the request would wait for ever: it gets a bound.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	msg := nats.NewMsg(subject)
	msg.Data = big
	got, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("a request whose reply is over max_payload: %v", err)
	}
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "413" {
		t.Fatalf("%s %q (%s), %d bytes of reply; want 413", micro.ErrorCodeHeader, code, got.Header.Get(micro.ErrorHeader), len(got.Data))
	}
	if desc := got.Header.Get(micro.ErrorHeader); !strings.Contains(desc, "max_payload") {
		t.Errorf("%s %q does not name max_payload", micro.ErrorHeader, desc)
	}
	got = request(t, nc, body(10))
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "" || bytes.Count(got.Data, []byte("\n")) != 10 {
		t.Errorf("10 examples: %s %q, reply %q", micro.ErrorCodeHeader, code, got.Data)
	}
}

// TestNATSInFlightShared holds the only in-flight token with an HTTP
// request waiting for its generation to load: a NATS request is refused
// with 503, as the limit is over both interfaces.
func TestNATSInFlightShared(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	body := encodeJSON(t, probes(cfg))[0]
	states, wants := storedGenerations(t, cfg, 1, [][]byte{body})
	gl := newGatedLoad(states, 1)
	srv := serve.New(serve.Options{Model: modelName, MaxInFlight: 1, Timeout: time.Minute}, cfg, liveOf(m), gl.load, nil)
	hs := httpServer(t, srv)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)
	held := holdToken(t, hs, gl, body)

	got := request(t, nc, body)
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "503" {
		t.Fatalf("%s %q (%s), want 503", micro.ErrorCodeHeader, code, got.Header.Get(micro.ErrorHeader))
	}
	if desc := got.Header.Get(micro.ErrorHeader); !strings.Contains(desc, "serve.max_in_flight") {
		t.Errorf("%s %q does not name serve.max_in_flight", micro.ErrorHeader, desc)
	}
	close(gl.gates[1])
	(<-held).ok(t, "application/json", wants[0][0].version)
	if got := request(t, nc, body); got.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Errorf("after the slow request: error %s", got.Header.Get(micro.ErrorHeader))
	}
}

// TestNATSNotHeldBySlowBodies has HTTP clients send their bodies slowly,
// as many as may be received at once: another HTTP request is refused
// with 503, while a NATS request, whose body has arrived whole, is
// answered.
func TestNATSNotHeldBySlowBodies(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	const maxInFlight, bodiesPerToken = 1, 4
	met := serve.NewMetrics(nil)
	srv := serve.New(serve.Options{Model: modelName, MaxInFlight: maxInFlight, Timeout: time.Minute}, cfg, liveOf(m), nil, met)
	hs, reading := httpServerReading(t, srv)
	nc := testbroker.NATS(t).Conn(t)
	startService(t, srv, nc)
	var slow []*slowRequest
	for range maxInFlight * bodiesPerToken {
		slow = append(slow, startSlowRequest(t, hs.Listener.Addr().String(), body, 10))
	}
	for range slow {
		<-reading
	}
	post(t, hs.URL, "", raws[0]).refused(t, http.StatusServiceUnavailable, "request bodies are being received")

	got := request(t, nc, jsonArray(raws))
	if code := got.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("NATS: %s %s (%s), want an answer", micro.ErrorCodeHeader, code, got.Header.Get(micro.ErrorHeader))
	}
	sameItems(t, jsonItems(t, got.Data, array), newPredictor(m).wantAll(t, raws))
	// A request gives its in-flight token back just after its reply is
	// sent, and is counted then: each slow request is finished once the
	// one before it is counted, so that it finds the token free.
	answered := func(iface string, n int) {
		t.Helper()
		wait.For(t, time.Minute, time.Millisecond, fmt.Sprintf("%d %s requests counted", n, iface), func() bool {
			return testutil.ToFloat64(met.Requests.WithLabelValues(iface, "ok")) == float64(n)
		})
	}
	answered("nats", 1)
	for i, s := range slow {
		s.finish(t, true).ok(t, "application/json", m.Version())
		answered("http", i+1)
	}
}

// control asks the service's control subject for verb and decodes the
// answer into v.
func control(t testing.TB, nc *nats.Conn, verb micro.Verb, v any) {
	t.Helper()
	subj, err := micro.ControlSubject(verb, serve.ServiceName, "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.RequestWithContext(t.Context(), subj, nil)
	if err != nil {
		t.Fatalf("%s: %v", subj, err)
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		t.Fatalf("%s: %v in %s", subj, err, msg.Data)
	}
}

// TestNATSServiceDiscovery reads the service's INFO, PING and STATS as the
// micro conventions lay them out: INFO lists the endpoint with its subject
// and queue group, PING answers with the service's name and version, and
// STATS counts every request and, as errors, the refused ones.
func TestNATSServiceDiscovery(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	srv := serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil)
	nc := testbroker.NATS(t).Conn(t)
	svc := startService(t, srv, nc)

	var info micro.Info
	control(t, nc, micro.InfoVerb, &info)
	if info.Name != serve.ServiceName || info.Version != version || info.ID != svc.Info().ID {
		t.Errorf("INFO names %s %s %s, want %s %s %s", info.Name, info.Version, info.ID, serve.ServiceName, version, svc.Info().ID)
	}
	if info.Metadata["model"] != modelName {
		t.Errorf("INFO metadata %v does not name the model", info.Metadata)
	}
	if len(info.Endpoints) != 1 {
		t.Fatalf("INFO lists endpoints %+v, want one", info.Endpoints)
	}
	if ep := info.Endpoints[0]; ep.Name != serve.EndpointName || ep.Subject != subject || ep.QueueGroup != queueGroup {
		t.Errorf("INFO endpoint %+v, want %s on %s in %s", ep, serve.EndpointName, subject, queueGroup)
	}

	var ping micro.Ping
	control(t, nc, micro.PingVerb, &ping)
	if ping.Name != serve.ServiceName || ping.Version != version || ping.Type != micro.PingResponseType {
		t.Errorf("PING %+v", ping)
	}

	const good, bad = 5, 3
	for range good {
		if got := request(t, nc, []byte(`{"features":{"f1":1}}`)); got.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Fatalf("error reply: %s", got.Header.Get(micro.ErrorHeader))
		}
	}
	for range bad {
		if got := request(t, nc, []byte(`{"features":{"x":[1]}}`)); got.Header.Get(micro.ErrorCodeHeader) != "400" {
			t.Fatalf("reply %q, want an error", got.Data)
		}
	}
	// A request is counted once its handler has returned, which may be
	// just after its reply arrived.
	var stats micro.Stats
	wait.For(t, time.Minute, time.Millisecond, "every request counted", func() bool {
		control(t, nc, micro.StatsVerb, &stats)
		if len(stats.Endpoints) != 1 {
			t.Fatalf("STATS lists endpoints %+v, want one", stats.Endpoints)
		}
		return stats.Endpoints[0].NumRequests >= good+bad
	})
	ep := stats.Endpoints[0]
	if ep.Name != serve.EndpointName || ep.Subject != subject || ep.QueueGroup != queueGroup {
		t.Errorf("STATS endpoint %s on %s in %s", ep.Name, ep.Subject, ep.QueueGroup)
	}
	if ep.NumRequests != good+bad || ep.NumErrors != bad {
		t.Errorf("STATS counts %d requests, %d errors; want %d, %d", ep.NumRequests, ep.NumErrors, good+bad, bad)
	}
	if !strings.Contains(ep.LastError, "features.x") {
		t.Errorf("STATS last error %q does not name the field", ep.LastError)
	}
}

// TestNATSQueueGroup starts two services in one queue group on one
// subject: of 50 requests each answers some, and every request is
// answered exactly once.
func TestNATSQueueGroup(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	ns := testbroker.NATS(t)
	names := []string{"a", "b"}
	var services []micro.Service
	var conns []*nats.Conn
	for _, name := range names {
		srv := serve.New(serve.Options{Model: name}, cfg, liveOf(m), nil, nil)
		conn := ns.Conn(t)
		services = append(services, startService(t, srv, conn))
		conns = append(conns, conn)
	}
	nc := ns.Conn(t)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := nc.PublishRequest(subject, fmt.Sprintf("%s.%d", inbox, i), []byte(`{"features":{"f1":1}}`)); err != nil {
			t.Fatal(err)
		}
	}
	answers := map[string]int{}
	byName := map[string]int{}
	for range n {
		msg, err := sub.NextMsgWithContext(t.Context())
		if err != nil {
			t.Fatalf("after %d replies: %v", len(answers), err)
		}
		answers[msg.Subject]++
		it := jsonItems(t, msg.Data, one)[0]
		byName[it.name]++
	}
	// No request is answered twice: once the services have counted the
	// requests they handled, which they do after replying, they handled n
	// in all, and after a round trip on every connection, which delivers
	// every reply sent before it, no reply is left.
	handled := func() (sum int) {
		for _, svc := range services {
			sum += svc.Stats().Endpoints[0].NumRequests
		}
		return sum
	}
	wait.For(t, time.Minute, time.Millisecond, "every request counted", func() bool { return handled() >= n })
	if got := handled(); got != n {
		t.Errorf("the services handled %d requests, want %d", got, n)
	}
	for _, c := range append(conns, nc) {
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if msgs, _, err := sub.Pending(); err != nil || msgs != 0 {
		t.Errorf("%d replies too many (%v)", msgs, err)
	}
	for i := range n {
		if got := answers[fmt.Sprintf("%s.%d", inbox, i)]; got != 1 {
			t.Errorf("request %d answered %d times", i, got)
		}
	}
	for _, name := range names {
		if byName[name] == 0 {
			t.Errorf("service %s answered none of %d requests: %v", name, n, byName)
		}
	}
}

// TestNATSConcurrentRequests sends many requests at once over NATS while
// the live view is replaced: every reply is what the model predicted at
// the version it names.
func TestNATSConcurrentRequests(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 50)
	live := liveOf(m)
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	wants := map[uint64][]item{m.Version(): newPredictor(m).wantAll(t, raws)}
	// The views to publish, made before the requests.
	var views []*learner.View
	s := stream(cfg, 6)
	for len(views) < 20 {
		v := m.Version()
		learn(t, m, s, 1)
		if m.Version() != v {
			wants[m.Version()] = newPredictor(m).wantAll(t, raws)
			views = append(views, m.View())
		}
	}
	srv := serve.New(serve.Options{Model: modelName, MaxInFlight: 1000}, cfg, live, nil, nil)
	ns := testbroker.NATS(t)
	startService(t, srv, ns.Conn(t))
	nc := ns.Conn(t)

	const n = 100
	calls := make([]*nats.Msg, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, v := range views {
			live.view.Store(v)
			// Spread over the requests, not a wait: they see views change.
			time.Sleep(time.Millisecond)
		}
	}()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			msg, err := nc.RequestWithContext(t.Context(), subject, body)
			calls[i] = msg
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	<-done
	for i, msg := range calls {
		if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
			t.Fatalf("request %d: error %s %s", i, code, msg.Header.Get(micro.ErrorHeader))
		}
		got := jsonItems(t, msg.Data, array)
		want, ok := wants[got[0].version]
		if !ok {
			t.Fatalf("request %d: version %d was never published", i, got[0].version)
		}
		sameItems(t, got, want)
	}
}
