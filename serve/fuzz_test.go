package serve_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/vmihailenco/msgpack/v5"
)

// fuzzTarget is a server of one model, with generation 1 stored, and what
// its replies must hold.
type fuzzTarget struct {
	srv  *serve.Server
	live *predictor // the live model
	gen1 *predictor // a model restored from generation 1
}

func newFuzzTarget(t testing.TB, cfg learner.Config) fuzzTarget {
	store := memStore(t)
	m := trained(t, cfg, 200)
	writeGeneration(t, store, 1, m.State())
	restored, err := learner.Restore(m.State())
	if err != nil {
		t.Fatal(err)
	}
	learn(t, m, stream(cfg, 11), 200)
	srv := serve.New(serve.Options{Model: modelName, MaxBytes: 1 << 16}, cfg, liveOf(m), loadFrom(store), nil)
	return fuzzTarget{srv, newPredictor(m), newPredictor(restored)}
}

// jsonExamples splits a JSON body as a client library would: the elements
// of one array, or the values end to end. ok is false if encoding/json
// does not read it so.
func jsonExamples(body []byte) (raws [][]byte, ok bool) {
	d := json.NewDecoder(bytes.NewReader(body))
	var vals []json.RawMessage
	for {
		var v json.RawMessage
		if err := d.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			return nil, false
		}
		vals = append(vals, v)
	}
	if len(vals) == 1 && vals[0][0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(vals[0], &elems) != nil {
			return nil, false
		}
		vals = elems
	}
	for _, v := range vals {
		raws = append(raws, v)
	}
	return raws, true
}

// msgpackExamples splits a msgpack body as a client library would: the
// elements of one array, or the values end to end. ok is false if the
// library does not read it so.
func msgpackExamples(body []byte) (raws [][]byte, ok bool) {
	if len(body) == 0 {
		return nil, false
	}
	d := msgpack.NewDecoder(bytes.NewReader(body))
	if c := body[0]; c&0xf0 == 0x90 || c == 0xdc || c == 0xdd {
		n, err := d.DecodeArrayLen()
		if err != nil {
			return nil, false
		}
		for range n {
			raw, err := d.DecodeRaw()
			if err != nil {
				return nil, false
			}
			raws = append(raws, raw)
		}
		if _, err := d.DecodeRaw(); !errors.Is(err, io.EOF) {
			return nil, false
		}
		return raws, true
	}
	for {
		raw, err := d.DecodeRaw()
		if errors.Is(err, io.EOF) {
			return raws, true
		}
		if err != nil {
			return nil, false
		}
		raws = append(raws, raw)
	}
}

// FuzzPredict sends any body, with any content type and generation, to
// the HTTP handler of a binary and of a multiclass model: every reply is
// a 200 that parses in the format asked for, with one prediction per
// example, each the model's own, or a 400, 404 or 413 that says why.
// Nothing panics, stalls or fails as the server's fault.
func FuzzPredict(f *testing.F) {
	targets := map[bool]fuzzTarget{
		false: newFuzzTarget(f, binaryConfig()),
		true:  newFuzzTarget(f, multiclassConfig()),
	}
	const mp = serve.ContentTypeMsgpack
	for _, multiclass := range []bool{false, true} {
		cfg := binaryConfig()
		if multiclass {
			cfg = multiclassConfig()
		}
		js, ms := encodeJSON(f, probes(cfg)), encodeMsgpack(f, probes(cfg))
		bad := `{"features":{"x":[1]}}`
		for _, seed := range []struct {
			body        []byte
			contentType string
			generation  string
		}{
			{js[0], "application/json", ""},
			{jsonArray(js), "", ""},
			{jsonLines(js), "application/x-ndjson", "1"},
			{[]byte("[]"), "application/json", ""},
			{[]byte(bad), "", ""},
			{[]byte(`[{"x":[1]},{"x":[2]},` + bad + `]`), "", ""},
			{[]byte(`{"features":{"f1":1}`), "", ""},
			{[]byte(`[{"id":1e400,"label":"green","weight":-1}]`), "", ""},
			{[]byte(`{"x":[1,2,3]} {"x":[]} 7 "s" null`), "text/plain", ""},
			{[]byte(strings.Repeat("[", 1100) + strings.Repeat("]", 1100)), "", ""},
			{[]byte(`[{"a":` + strings.Repeat(`{"b":`, 1001) + "1" + strings.Repeat("}", 1002) + `]`), "", ""},
			{js[1], "", "x"},
			{js[2], "", "0"},
			{js[3], "", "2"},
			{ms[0], mp, ""},
			{msgpackArray(ms), mp, "1"},
			{bytes.Join(ms, nil), "application/x-msgpack", ""},
			{[]byte{0x90}, mp, ""},
			{[]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, mp, ""},
			{ms[1][:len(ms[1])-2], mp, ""},
			{append(msgpackArray(ms[:2]), 0x81, 0xa1, 'x', 0x91, 0x01), mp, ""},
			{jsonArray(js), mp, ""},
			{ms[4], "application/json", ""},
			{nil, "", ""},
			{nil, mp, ""},
		} {
			f.Add(seed.body, seed.contentType, seed.generation, multiclass)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType, generation string, multiclass bool) {
		tg := targets[multiclass]
		req := httptest.NewRequest(http.MethodPost, serve.PredictPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(serve.GenerationHeader, generation)
		rec := httptest.NewRecorder()
		tg.srv.ServeHTTP(rec, req)
		got := rec.Body.Bytes()

		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			if len(bytes.TrimSpace(got)) == 0 {
				t.Fatalf("status %d says nothing", rec.Code)
			}
			return
		default:
			t.Fatalf("status %d: %s", rec.Code, got)
		}

		p := tg.live
		if generation != "" {
			p = tg.gen1
		}
		if v := rec.Header().Get(serve.VersionHeader); v != strconv.FormatUint(p.m.Version(), 10) {
			t.Fatalf("%s %q, want %d", serve.VersionHeader, v, p.m.Version())
		}
		var items []item
		var raws [][]byte
		var ok bool
		switch ct := rec.Header().Get("Content-Type"); {
		case ct == serve.ContentTypeMsgpack:
			shape := lines
			if c := got[0]; c&0xf0 == 0x90 || c == 0xdc || c == 0xdd {
				shape = array
			}
			items = msgpackItems(t, got, shape)
			raws, ok = msgpackExamples(body)
		case ct == "application/x-ndjson":
			items = jsonItems(t, got, lines)
			raws, ok = jsonExamples(body)
		case ct == "application/json" && got[0] == '[':
			items = jsonItems(t, got, array)
			raws, ok = jsonExamples(body)
		case ct == "application/json":
			items = jsonItems(t, got, one)
			raws, ok = jsonExamples(body)
		default:
			t.Fatalf("Content-Type %q", ct)
		}
		if !ok {
			// The body is one a client library does not read; the server
			// answered it, and the reply parsed.
			return
		}
		if len(items) != len(raws) {
			t.Fatalf("%d predictions for %d examples", len(items), len(raws))
		}
		sameItems(t, items, p.wantAll(t, raws))
	})
}
