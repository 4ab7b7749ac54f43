package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
)

// refused fails t unless r is an error reply with the status, as text
// that holds every one of parts.
func (r reply) refused(t testing.TB, status int, parts ...string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d (%s), want %d", r.status, r.body, status)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text", ct)
	}
	msg := strings.TrimSpace(string(r.body))
	if msg == "" {
		t.Error("the reply says nothing")
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("reply %q does not say %q", msg, p)
		}
	}
}

// TestHTTPBadRequests sends bodies the server cannot answer: each gets a
// 400 whose message is the decoder's or the splitter's, with the field at
// fault, and the example's number when the body holds several.
func TestHTTPBadRequests(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	good := `{"id":"g","features":{"f1":1}}`
	badField := `{"features":{"x":[1]}}`
	js := encodeJSON(t, probes(cfg))
	mp := encodeMsgpack(t, probes(cfg))
	badMsgpack := encodeMsgpack(t, []map[string]any{{"features": map[string]any{"x": []any{1}}}})[0]

	for _, tc := range []struct {
		name, contentType string
		body              []byte
		parts             []string // what the message must say
	}{
		{"empty body", "", nil, []string{"empty body"}},
		{"white space", "", []byte(" \n\t"), []string{"empty body"}},
		{"malformed JSON", "", []byte(`{"features":{"f1":1`), []string{"example 1", "end of input"}},
		{"not JSON", "", []byte(`hello`), []string{"example 1"}},
		{"a field error", "", []byte(badField), []string{"features.x"}},
		{"a value out of range", "", []byte(`{"features":{"f1":1e300}}`), []string{"features.f1"}},
		{"a label that is not one", "", []byte(`{"label":7,"features":{"f1":1}}`), []string{"label"}},
		{"a dense index past the dimension", "", []byte(`{"x":[` + strings.Repeat("0,", 1<<cfg.HashBits) + `1]}`), []string{"x"}},
		{"a duplicate key", "", []byte(`{"id":"a","id":"b"}`), []string{"id"}},
		{"the 3rd example of an array", "", []byte("[" + good + "," + good + "," + badField + "," + good + "]"), []string{"example 3", "features.x"}},
		{"the 3rd example of lines", "application/x-ndjson", []byte(good + "\n" + good + "\n" + badField + "\n"), []string{"example 3", "features.x"}},
		{"a malformed 3rd example of lines", "", []byte(good + "\n" + good + "\n{\"id\":]\n"), []string{"example 3"}},
		{"an array of numbers", "", []byte(`[1,2]`), []string{"example 1", "not a JSON object"}},
		{"an array not closed", "", jsonArray(js)[:len(jsonArray(js))-1], []string{"not closed"}},
		{"an array without commas", "", []byte("[" + good + " " + good + "]"), []string{"after example 1"}},
		{"bytes after the array", "", append(jsonArray(js), " []"...), []string{"follow the array"}},
		// A body of the other format than its content type says: the
		// message names the content type to send.
		{"JSON sent as msgpack", serve.ContentTypeMsgpack, []byte(good), []string{"as JSON does", "Content-Type: application/json"}},
		{"a JSON array sent as msgpack", serve.ContentTypeMsgpack, append([]byte("\n "), jsonArray(js)...), []string{"'['", "Content-Type: application/json"}},
		{"msgpack sent as JSON", "", mp[0], []string{"msgpack map", "Content-Type: application/msgpack"}},
		{"a msgpack array sent as JSON", "application/json", msgpackArray(mp), []string{"msgpack array", "Content-Type: application/msgpack"}},
		{"empty msgpack", serve.ContentTypeMsgpack, nil, []string{"empty body"}},
		{"a msgpack field error", serve.ContentTypeMsgpack, badMsgpack, []string{"features.x"}},
		{"the 3rd map of a msgpack array", serve.ContentTypeMsgpack, msgpackArray([][]byte{mp[0], mp[1], badMsgpack}), []string{"example 3", "features.x"}},
		{"the 3rd of msgpack maps end to end", serve.ContentTypeMsgpack, bytes.Join([][]byte{mp[0], mp[1], badMsgpack, mp[2]}, nil), []string{"example 3", "features.x"}},
		{"a truncated msgpack map", serve.ContentTypeMsgpack, mp[0][:len(mp[0])-1], []string{"example 1", "end of data"}},
		// Bodies the splitter stops at, inside a field: the field is named,
		// as a worker's dead letter names it.
		{"NaN", "", []byte(`{"features":{"f1":NaN}}`), []string{"example 1", "features.f1", "NaN"}},
		{"NaN in the 2nd example of an array", "", []byte("[" + good + `,{"features":{"f1":Infinity}}]`), []string{"example 2", "features.f1", "Infinity"}},
		{"a malformed number in the 3rd of lines", "", []byte(good + "\n" + good + "\n" + `{"features":{"f1":01}}`), []string{"example 3", "features.f1"}},
		{"an unknown key nested too deep", "", []byte(`{"z":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`), []string{"example 1", "z:", "deeper"}},
		{"a msgpack unknown key nested too deep", serve.ContentTypeMsgpack, append([]byte("\x81\xa1z"), bytes.Repeat([]byte{0x91}, 1001)...), []string{"example 1", "z:", "deeper"}},
		{"a msgpack map cut short in a feature", serve.ContentTypeMsgpack, []byte("\x81\xa8features\x81\xa2f1"), []string{"example 1", "features.f1"}},
		{"a msgpack array longer than its body", serve.ContentTypeMsgpack, []byte{0xdd, 0x7f, 0xff, 0xff, 0xff, 0x80}, []string{"array", "truncated"}},
		{"a msgpack array header cut short", serve.ContentTypeMsgpack, []byte{0xdc, 0x00}, []string{"array", "truncated"}},
		{"a msgpack array holding more than its bytes", serve.ContentTypeMsgpack, []byte{0xdc, 0x00, 0x09, 0x80, 0x80}, []string{"9 examples", "only 2 bytes follow"}},
		{"bytes after a msgpack array", serve.ContentTypeMsgpack, append(msgpackArray(mp[:1]), 0xc0), []string{"follow the array"}},
		{"a msgpack string", serve.ContentTypeMsgpack, []byte{0xa1, 'x'}, []string{"want a msgpack map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			post(t, hs.URL, tc.contentType, tc.body).refused(t, http.StatusBadRequest, tc.parts...)
		})
	}
}

// TestHTTPGenerationErrors names generations that cannot answer: a
// generation that is not a number or is 0 is a bad request, one not
// stored is not found, and so is any when the worker has no store.
func TestHTTPGenerationErrors(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, m.State())
	withStore := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil))
	noStore := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	body := encodeJSON(t, probes(cfg))[0]

	for _, tc := range []struct {
		name       string
		url        string
		generation string
		status     int
		parts      []string
	}{
		{"a word", withStore.URL, "latest", http.StatusBadRequest, []string{"generation", `"latest"`}},
		{"zero", withStore.URL, "0", http.StatusBadRequest, []string{"generation", `"0"`}},
		{"negative", withStore.URL, "-1", http.StatusBadRequest, []string{"generation"}},
		{"past uint64", withStore.URL, "18446744073709551616", http.StatusBadRequest, []string{"generation"}},
		{"not stored", withStore.URL, "2", http.StatusNotFound, []string{"generation 2", "not stored"}},
		{"no store", noStore.URL, "1", http.StatusNotFound, []string{"generation 1", "snapshot store"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			post(t, tc.url+"?generation="+tc.generation, "", body).refused(t, tc.status, tc.parts...)
			post(t, tc.url, "", body, serve.GenerationHeader, tc.generation).refused(t, tc.status, tc.parts...)
		})
	}
	// The query parameter and the header may name one generation, not
	// two: a client would not know which answered.
	r := post(t, withStore.URL+"?generation=1", "", body, serve.GenerationHeader, "1")
	r.ok(t, "application/json", m.Version())
	if got := r.header.Get(serve.GenerationHeader); got != "1" {
		t.Errorf("%s %q, want 1", serve.GenerationHeader, got)
	}
	post(t, withStore.URL+"?generation=1", "", body, serve.GenerationHeader, "2").refused(t, http.StatusBadRequest, "generation", `"1"`, `"2"`)
}

// TestHTTPShardInGlobalScope names a shard of a worker that learns one
// model over every partition: the request is refused with 400, whether it
// asks for the live model or a stored generation, and the store is not
// read.
func TestHTTPShardInGlobalScope(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, m.State())
	load, loads := countLoads(loadFrom(store))
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), load, nil))
	body := encodeJSON(t, probes(cfg))[0]
	for _, query := range []string{"?shard=kafka:clicks/0", "?shard=kafka:clicks/0&generation=1", "?generation=1&shard=x"} {
		post(t, hs.URL+query, "", body).refused(t, http.StatusBadRequest, "shard", "leave shard out")
	}
	post(t, hs.URL, "", body, serve.ShardHeader, "kafka:clicks/0", serve.GenerationHeader, "1").refused(t, http.StatusBadRequest, "leave shard out")
	if n := loads(1); n != 0 {
		t.Errorf("generation 1 loaded %d times for requests naming a shard", n)
	}
	post(t, hs.URL+"?generation=1", "", body).ok(t, "application/json", m.Version())
}

// TestHTTPModelNamedTwice gives the header naming a generation, or a
// shard, twice with different values: each is refused with 400, as a
// query string naming either twice is, rather than answered by one of
// the two; the same value given twice is answered.
func TestHTTPModelNamedTwice(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, trained(t, cfg, 50).State())
	writeGeneration(t, store, 2, trained(t, cfg, 80).State())
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil))
	body := encodeJSON(t, probes(cfg))[0]
	postTwice := func(header, first, second string) reply {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, hs.URL+serve.PredictPath, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Add(header, first)
		req.Header.Add(header, second)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, b, resp.Close}
	}
	postTwice(serve.GenerationHeader, "2", "1").refused(t, http.StatusBadRequest, "generation", `"2" and "1"`)
	postTwice(serve.ShardHeader, "a", "b").refused(t, http.StatusBadRequest, "shard", `"a" and "b"`)
	postTwice(serve.GenerationHeader, "1", "1").ok(t, "application/json", 50)
}

// TestHTTPMalformedQuery sends query strings that do not parse, or name
// generation or shard twice: each is refused with 400, not answered by a
// model other than the one asked for.
func TestHTTPMalformedQuery(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, trained(t, cfg, 50).State())
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil))
	body := encodeJSON(t, probes(cfg))[0]
	for query, parts := range map[string][]string{
		"?generation=1;x=2":          {"query string", "semicolon"},
		"?generation=%zz":            {"query string", "escape"},
		"?generation=1&x=%":          {"query string", "escape"},
		"?generation=1&generation=1": {"generation", "2 times"},
		"?shard=a&shard=b":           {"shard", "2 times"},
	} {
		post(t, hs.URL+query, "", body).refused(t, http.StatusBadRequest, parts...)
	}
	post(t, hs.URL+"?generation=1&other=x", "", body).ok(t, "application/json", 50)
}

// TestHTTPGenerationLoadFails has the store fail once: that request is an
// error of the server, and the next one loads the generation again and is
// answered.
func TestHTTPGenerationLoadFails(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, m.State())
	var failed atomic.Bool
	load := func(ctx context.Context, gen uint64) (*learner.State, error) {
		if !failed.Swap(true) {
			return nil, errors.New("the store is unreachable")
		}
		return loadFrom(store)(ctx, gen)
	}
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), load, nil))
	body := encodeJSON(t, probes(cfg))[0]
	post(t, hs.URL+"?generation=1", "", body).refused(t, http.StatusInternalServerError, "generation 1", "unreachable")
	r := post(t, hs.URL+"?generation=1", "", body)
	r.ok(t, "application/json", m.Version())
	sameItems(t, jsonItems(t, r.body, one), newPredictor(m).wantAll(t, [][]byte{body}))
}

// TestHTTPGenerationStillLoading has a generation load for longer than
// the timeout: the request is refused with 408, its load is cancelled as
// no request waits for it any more, and the next request loads the
// generation again and is answered.
func TestHTTPGenerationStillLoading(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, m.State())
	var calls atomic.Int32
	ended := make(chan error, 1)
	load := func(ctx context.Context, gen uint64) (*learner.State, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
		return loadFrom(store)(ctx, gen)
	}
	hs := httpServer(t, serve.New(serve.Options{Model: modelName, Timeout: time.Second}, cfg, liveOf(m), load, nil))
	body := encodeJSON(t, probes(cfg))[0]
	post(t, hs.URL+"?generation=1", "", body).refused(t, http.StatusRequestTimeout, "generation 1", "still loading")
	if err := <-ended; err == nil {
		t.Error("the load's context ended without an error")
	}
	post(t, hs.URL+"?generation=1", "", body).ok(t, "application/json", m.Version())
	if got := calls.Load(); got != 2 {
		t.Errorf("generation 1 loaded %d times, want 2", got)
	}
}

// TestHTTPNoModelYet refuses requests with 503 and Retry-After until a
// view is published.
func TestHTTPNoModelYet(t *testing.T) {
	cfg := binaryConfig()
	live := &liveModel{}
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, live, nil, nil))
	body := encodeJSON(t, probes(cfg))[0]
	r := post(t, hs.URL, "", body)
	r.refused(t, http.StatusServiceUnavailable, "not loaded")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	m := trained(t, cfg, 100)
	live.view.Store(m.View())
	post(t, hs.URL, "", body).ok(t, "application/json", m.Version())
}

// chunked is a body whose length the client does not know, so that it is
// sent with chunked transfer encoding.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestHTTPTooLarge sends bodies over and at serve.max_bytes, with their
// length in Content-Length and without (chunked): a body over the limit
// is refused with 413 and the connection closed; one at the limit is
// answered.
func TestHTTPTooLarge(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const max = 256
	hs := httpServer(t, serve.New(serve.Options{Model: modelName, MaxBytes: max}, cfg, liveOf(m), nil, nil))
	example := []byte(`{"id":"a","features":{"f1":1}}`)
	// pad is example in white space to n bytes.
	pad := func(n int) []byte {
		return append(bytes.Repeat([]byte{' '}, n-len(example)), example...)
	}
	send := func(body []byte, known bool) reply {
		t.Helper()
		var rd io.Reader = bytes.NewReader(body)
		if !known {
			rd = chunked{rd}
		}
		req, err := http.NewRequest(http.MethodPost, hs.URL+serve.PredictPath, rd)
		if err != nil {
			t.Fatal(err)
		}
		if known != (req.ContentLength == int64(len(body))) {
			t.Errorf("Content-Length %d: the request does not send the body as the test means", req.ContentLength)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{resp.StatusCode, resp.Header, b, resp.Close}
	}
	for _, tc := range []struct {
		name  string
		known bool
		size  int
		parts []string // of the refusal; none: answered
	}{
		{"at the limit", true, max, nil},
		{"one over", true, max + 1, []string{fmt.Sprintf("the body's %d bytes exceed serve.max_bytes, %d", max+1, max)}},
		{"far over", true, 100 * max, []string{fmt.Sprintf("the body's %d bytes exceed serve.max_bytes, %d", 100*max, max)}},
		{"chunked at the limit", false, max, nil},
		{"chunked one over", false, max + 1, []string{fmt.Sprintf("the body exceeds serve.max_bytes, %d", max)}},
		{"chunked far over", false, 100 * max, []string{fmt.Sprintf("the body exceeds serve.max_bytes, %d", max)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := send(pad(tc.size), tc.known)
			if tc.parts == nil {
				r.ok(t, "application/json", m.Version())
				return
			}
			r.refused(t, http.StatusRequestEntityTooLarge, tc.parts...)
			if !r.closed {
				t.Error("the connection is kept open with the rest of the body unread")
			}
		})
	}
	// The server goes on answering.
	send(pad(max), true).ok(t, "application/json", m.Version())
}

// TestHTTPTooManyExamples: a body within serve.max_bytes that holds more
// examples than serve.max_examples is refused with 413, as JSON lines, a
// JSON array or a msgpack array, before any is predicted; at the limit it
// is answered. At the defaults, a megabyte of empty examples (about
// 350,000, whose replies would take some 40 MB) is refused.
func TestHTTPTooManyExamples(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const max = 3
	hs := httpServer(t, serve.New(serve.Options{Model: modelName, MaxExamples: max}, cfg, liveOf(m), nil, nil))
	example := `{"id":"a","features":{"f1":1}}`
	lines := func(n int) []byte { return []byte(strings.Repeat(example+"\n", n)) }
	array := func(n int) []byte { return []byte("[" + strings.TrimSuffix(strings.Repeat(example+",", n), ",") + "]") }
	msgpackArray := func(n int) []byte {
		one := []byte("\x82\xa2id\xa1a\xa8features\x81\xa2f1\x01")
		return append([]byte{0x90 | byte(n)}, bytes.Repeat(one, n)...)
	}
	for _, tc := range []struct {
		name        string
		contentType string
		body        func(int) []byte
		answered    string
	}{
		{"JSON lines", "application/json", lines, "application/x-ndjson"},
		{"a JSON array", "application/json", array, "application/json"},
		{"a msgpack array", "application/msgpack", msgpackArray, "application/msgpack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			post(t, hs.URL, tc.contentType, tc.body(max)).ok(t, tc.answered, m.Version())
			post(t, hs.URL, tc.contentType, tc.body(max+1)).refused(t, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("the body's %d examples exceed serve.max_examples, %d", max+1, max))
		})
	}

	defaults := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	empties := bytes.Repeat([]byte("{}\n"), (serve.DefaultMaxBytes-1)/3)
	post(t, defaults.URL, "application/json", empties).refused(t, http.StatusRequestEntityTooLarge,
		fmt.Sprintf("the body's %d examples exceed serve.max_examples, %d", len(empties)/3, serve.DefaultMaxExamples))
	post(t, defaults.URL, "application/json", empties[:3*serve.DefaultMaxExamples]).ok(t, "application/x-ndjson", m.Version())
}

// TestHTTPTooManyExamplesInLittleMemory refuses bodies of a megabyte of
// empty examples, hundreds of thousands of them, in every shape: each is
// refused with 413 and its count, and refusing it takes memory of the
// order of the body, not a record of every example it holds (16 bytes
// each, 16 MB for a megabyte of empty msgpack maps, held by each request
// in flight).
func TestHTTPTooManyExamplesInLittleMemory(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const max = 10
	srv := serve.New(serve.Options{Model: modelName, MaxExamples: max}, cfg, liveOf(m), nil, nil)
	size := serve.DefaultMaxBytes - 8
	n := size / 3
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		examples          int
	}{
		{"msgpack maps end to end", serve.ContentTypeMsgpack, bytes.Repeat([]byte{0x80}, size), size},
		{"a msgpack array", serve.ContentTypeMsgpack, append([]byte{0xdd, byte(size >> 24), byte(size >> 16), byte(size >> 8), byte(size)}, bytes.Repeat([]byte{0x80}, size)...), size},
		{"JSON lines", "application/json", bytes.Repeat([]byte("{}\n"), n), n},
		{"a JSON array", "application/json", []byte("[" + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]"), n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, serve.PredictPath, bytes.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			rec := httptest.NewRecorder()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			srv.ServeHTTP(rec, req)
			runtime.ReadMemStats(&after)
			if rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d (%s), want 413", rec.Code, rec.Body)
			}
			if want := fmt.Sprintf("the body's %d examples exceed serve.max_examples, %d", tc.examples, max); !strings.Contains(rec.Body.String(), want) {
				t.Errorf("reply %q does not say %q", rec.Body, want)
			}
			// The body's buffer grows by steps as it is read: some five
			// times the body in all.
			if got := after.TotalAlloc - before.TotalAlloc; got > 8*uint64(len(tc.body)) {
				t.Errorf("refusing a body of %d bytes allocated %d bytes", len(tc.body), got)
			}
		})
	}
}

// slowRequest starts a request on its own connection to hs and sends its
// headers and the first bytes of its body, keeping the rest back.
type slowRequest struct {
	conn net.Conn
	rest []byte
}

func startSlowRequest(t testing.TB, addr string, body []byte, sent int) *slowRequest {
	t.Helper()
	return startSlowRequestTo(t, addr, serve.PredictPath, body, sent)
}

// startSlowRequestTo is startSlowRequest to target, a path and query.
func startSlowRequestTo(t testing.TB, addr, target string, body []byte, sent int) *slowRequest {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", target, len(body))
	if _, err := conn.Write(append([]byte(head), body[:sent]...)); err != nil {
		t.Fatal(err)
	}
	return &slowRequest{conn, body[sent:]}
}

// finish sends the rest of the body, if send, and reads the reply.
func (s *slowRequest) finish(t testing.TB, send bool) reply {
	t.Helper()
	if send {
		if _, err := s.conn.Write(s.rest); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(s.conn), nil)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b, resp.Close}
}

// holdToken starts a request to hs for generation 1, which gl holds at
// its gate, and returns once the request waits there: it then holds an
// in-flight token until the gate is closed. The request's reply, or the
// error of sending it, comes on the channel returned.
func holdToken(t testing.TB, hs *httptest.Server, gl *gatedLoad, body []byte) <-chan reply {
	t.Helper()
	replies := make(chan reply, 1)
	go func() {
		r, err := tryPost(hs.URL+"?generation=1", "", body)
		if err != nil {
			r = reply{status: -1, body: []byte(err.Error())}
		}
		replies <- r
	}()
	<-gl.started
	return replies
}

// TestHTTPInFlightLimit holds the only in-flight token with a request
// waiting for its generation to load: another request is refused with 503
// and Retry-After; the waiting one is answered once its generation is
// loaded, and then the next request is answered again.
func TestHTTPInFlightLimit(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	states, wants := storedGenerations(t, cfg, 1, raws)
	gl := newGatedLoad(states, 1)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName, MaxInFlight: 1, Timeout: time.Minute}, cfg, liveOf(m), gl.load, nil))
	held := holdToken(t, hs, gl, body)

	r := post(t, hs.URL, "", raws[0])
	r.refused(t, http.StatusServiceUnavailable, "1 requests are being answered", "serve.max_in_flight")
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}

	close(gl.gates[1])
	got := <-held
	got.ok(t, "application/json", wants[0][0].version)
	sameItems(t, jsonItems(t, got.body, array), wants[0])
	post(t, hs.URL, "", raws[0]).ok(t, "application/json", m.Version())
}

// httpServerReading is httpServer whose requests each send once on the
// channel returned: when the server first reads their body, or when it
// has answered without reading it.
func httpServerReading(t testing.TB, srv *serve.Server) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	reading := make(chan struct{}, 1000)
	mux := http.NewServeMux()
	srv.Register(mux)
	hs := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body := &firstRead{ReadCloser: r.Body, signal: reading}
		r.Body = body
		mux.ServeHTTP(rw, r)
		body.once.Do(func() { reading <- struct{}{} })
	}))
	t.Cleanup(hs.Close)
	return hs, reading
}

// firstRead sends on signal at its first Read.
type firstRead struct {
	io.ReadCloser
	signal chan<- struct{}
	once   sync.Once
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { f.signal <- struct{}{} })
	return f.ReadCloser.Read(p)
}

// TestHTTPSlowBodies has more clients than serve.max_in_flight send their
// bodies slowly: while the server reads them, another request is
// answered, as a request takes a token only once its body is read; and
// each slow one is answered once its body is complete.
func TestHTTPSlowBodies(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const maxInFlight, slowClients = 2, 5
	hs, reading := httpServerReading(t, serve.New(serve.Options{Model: modelName, MaxInFlight: maxInFlight, Timeout: time.Minute}, cfg, liveOf(m), nil, nil))
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	var slow []*slowRequest
	for range slowClients {
		slow = append(slow, startSlowRequest(t, hs.Listener.Addr().String(), body, 10))
	}
	for range slowClients {
		<-reading
	}
	post(t, hs.URL, "", raws[0]).ok(t, "application/json", m.Version())
	want := newPredictor(m).wantAll(t, raws)
	for _, s := range slow {
		got := s.finish(t, true)
		got.ok(t, "application/json", m.Version())
		sameItems(t, jsonItems(t, got.body, array), want)
	}
}

// TestHTTPBodyTimeout has bodies stop half way, more of them than
// serve.max_in_flight: each is refused with 408 once serve.timeout has
// passed, and meanwhile another request is answered.
func TestHTTPBodyTimeout(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const timeout = time.Second
	hs, reading := httpServerReading(t, serve.New(serve.Options{Model: modelName, MaxInFlight: 1, Timeout: timeout}, cfg, liveOf(m), nil, nil))
	body := jsonArray(encodeJSON(t, probes(cfg)))
	start := time.Now()
	var slow []*slowRequest
	for range 3 {
		slow = append(slow, startSlowRequest(t, hs.Listener.Addr().String(), body, 10))
	}
	for range slow {
		<-reading
	}
	post(t, hs.URL, "", body).ok(t, "application/json", m.Version())
	for _, s := range slow {
		r := s.finish(t, false)
		if took := time.Since(start); took < timeout {
			t.Errorf("refused after %v, before the timeout of %v", took, timeout)
		}
		r.refused(t, http.StatusRequestTimeout, "did not arrive within serve.timeout")
	}
}

// TestHTTPMethods answers POST only on the predict path, through
// Register: other methods get 405.
func TestHTTPMethods(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	for _, method := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		req, err := http.NewRequest(method, hs.URL+serve.PredictPath, strings.NewReader(`{"x":[1]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: status %d, want 405", method, resp.StatusCode)
		}
		if allow := resp.Header.Get("Allow"); !strings.Contains(allow, http.MethodPost) {
			t.Errorf("%s: Allow %q does not name POST", method, allow)
		}
	}
	r := post(t, hs.URL, "", []byte(`{"x":[1]}`))
	r.ok(t, "application/json", m.Version())
	if n, err := strconv.Atoi(r.header.Get("Content-Length")); err != nil || n != len(r.body) {
		t.Errorf("Content-Length %q for a body of %d bytes", r.header.Get("Content-Length"), len(r.body))
	}
}
