package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/snapshot"
	"github.com/hyperplane-ml/hyperplane/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// modelName is the model every test serves.
const modelName = "m"

// liveModel is where a test publishes views of its model, as the worker
// does: the newest view behind an atomic pointer.
type liveModel struct{ view atomic.Pointer[learner.View] }

func (l *liveModel) View() *learner.View { return l.view.Load() }

// liveOf publishes a view of m as it is now.
func liveOf(m *learner.Model) *liveModel {
	l := &liveModel{}
	l.view.Store(m.View())
	return l
}

func binaryConfig() learner.Config {
	cfg := learner.DefaultConfig()
	cfg.HashBits = 12
	return cfg
}

func multiclassConfig() learner.Config {
	cfg := binaryConfig()
	cfg.Classes = []string{"red", "green", "blue"}
	return cfg
}

// algorithmConfigs are models whose views predict in different ways:
// named binary classes, averaged weights, a kernel's support set, and
// multiclass PA1 with normalised examples.
func algorithmConfigs() map[string]learner.Config {
	named := binaryConfig()
	named.Classes = []string{"ham", "spam"}
	averaged := binaryConfig()
	averaged.Algorithm, averaged.Batch = learner.Averaged, 3
	kernel := binaryConfig()
	kernel.Algorithm, kernel.Kernel, kernel.Gamma, kernel.Budget = learner.Kernel, learner.RBFKernel, 0.5, 50
	pa1 := multiclassConfig()
	pa1.Algorithm, pa1.Normalize = learner.PA1, true
	return map[string]learner.Config{
		"binary with class names": named,
		"averaged in batches":     averaged,
		"kernel":                  kernel,
		"multiclass pa1":          pa1,
	}
}

// newModel is an untrained model of cfg.
func newModel(t testing.TB, cfg learner.Config) *learner.Model {
	t.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// stream is a reproducible stream of examples for cfg's model, as JSON
// lines the decoder reads.
func stream(cfg learner.Config, seed uint64) *synth.Stream {
	o := synth.Options{Features: 8, Vocab: 200, Noise: 0.05, Seed: seed}
	if cfg.Multiclass() {
		o.Classes = len(cfg.Classes)
	}
	return synth.New(o)
}

// learn has m learn n examples of s, decoded as the worker decodes them.
func learn(t testing.TB, m *learner.Model, s *synth.Stream, n int) {
	t.Helper()
	dec := wire.NewDecoder(m.Config(), wire.DecoderOptions{})
	var x learner.Example
	var buf []byte
	for range n {
		buf = synth.AppendJSON(buf[:0], s.Next())
		if _, err := dec.Decode(buf, &x); err != nil {
			t.Fatalf("training example %s: %v", buf, err)
		}
		m.Learn(&x)
	}
}

// trained is a model of cfg that has learned n examples.
func trained(t testing.TB, cfg learner.Config, n int) *learner.Model {
	t.Helper()
	m := newModel(t, cfg)
	learn(t, m, stream(cfg, 1), n)
	if m.Version() == 0 {
		t.Fatal("the model never updated: the test would compare zeros")
	}
	return m
}

// probes are examples of every kind a request holds: string, integer,
// empty and no ids; sparse, categorical and dense features; a label,
// which predicting ignores; and unknown keys.
func probes(cfg learner.Config) []map[string]any {
	label := any(1)
	if cfg.Multiclass() {
		label = "green"
	}
	return []map[string]any{
		{"id": "a1", "features": map[string]any{"f1": 0.5, "f7": 0.25, "f19": -1.5}},
		{"id": 42, "features": map[string]any{"f3": 1, "color": "red"}},
		{"features": map[string]any{"f2": -0.75, "f9": 0.1, "f11": 2}},
		{"id": "", "x": []any{0.5, 0, 1, -2}},
		{"id": "lab", "label": label, "weight": 2, "features": map[string]any{"f5": 0.3}, "extra": []any{1, "two"}},
		{"id": "quote\"and\\slash", "features": map[string]any{"f100": 0.125, "f150": 0.875}},
	}
}

// encodeJSON is each example as a JSON object.
func encodeJSON(t testing.TB, xs []map[string]any) [][]byte {
	t.Helper()
	var out [][]byte
	for _, x := range xs {
		b, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// encodeMsgpack is each example as a msgpack map.
func encodeMsgpack(t testing.TB, xs []map[string]any) [][]byte {
	t.Helper()
	var out [][]byte
	for _, x := range xs {
		b, err := msgpack.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// Request bodies of each shape, from encoded examples.

func jsonArray(raws [][]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(raws, []byte{','})...), ']')
}

func jsonLines(raws [][]byte) []byte {
	return append(bytes.Join(raws, []byte{'\n'}), '\n')
}

func msgpackArray(raws [][]byte) []byte {
	return append(wire.AppendMsgpackArrayHeader(nil, len(raws)), bytes.Join(raws, nil)...)
}

// item is one prediction of a reply, in a form both formats decode to.
type item struct {
	id        *string
	predicted string            // the label: a class name or a number
	score     map[string]uint64 // the bits of the score: by class name, "" for a binary model
	// probability is the bits of the probability, probabilities those of
	// every class's by name (nil for a binary model).
	probability   uint64
	probabilities map[string]uint64
	name          string
	version       uint64
	// json says the item was read from JSON, whose strings hold U+FFFD
	// for each byte of an id that is not UTF-8.
	json bool
}

// jsonText is s as a JSON reply writes it: each byte that is not part of
// valid UTF-8 replaced by U+FFFD.
func jsonText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func (it item) String() string {
	id := "(none)"
	if it.id != nil {
		id = strconv.Quote(*it.id)
	}
	scores := map[string]float64{}
	for k, v := range it.score {
		scores[k] = math.Float64frombits(v)
	}
	probabilities := map[string]float64{}
	for k, v := range it.probabilities {
		probabilities[k] = math.Float64frombits(v)
	}
	return fmt.Sprintf("{id %s predicted %s score %v probability %v probabilities %v model %s@%d}", id, it.predicted, scores,
		math.Float64frombits(it.probability), probabilities, it.name, it.version)
}

func (it item) equal(o item) bool {
	if (it.id == nil) != (o.id == nil) {
		return false
	}
	if it.id != nil {
		a, b := *it.id, *o.id
		if it.json || o.json {
			a, b = jsonText(a), jsonText(b)
		}
		if a != b {
			return false
		}
	}
	if it.predicted != o.predicted || it.name != o.name || it.version != o.version || it.probability != o.probability {
		return false
	}
	return maps.Equal(it.score, o.score) && maps.Equal(it.probabilities, o.probabilities)
}

// predictor computes what a reply must hold: the model's own prediction
// for the example, decoded as the server decodes it.
type predictor struct {
	m   *learner.Model
	dec *wire.Decoder
	cfg learner.Config
}

func newPredictor(m *learner.Model) *predictor {
	return &predictor{m: m, dec: wire.NewDecoder(m.Config(), wire.DecoderOptions{}), cfg: m.Config()}
}

// want is the reply item for raw, one JSON object or msgpack map.
func (p *predictor) want(t testing.TB, raw []byte) item {
	t.Helper()
	var x learner.Example
	meta, err := p.dec.Decode(raw, &x)
	if err != nil {
		t.Fatalf("probe %q: %v", raw, err)
	}
	var id *string
	if meta.HasID {
		s := string(meta.ID)
		id = &s
	}
	return itemOf(p.cfg, id, p.m.Predict(&x), p.m.Version())
}

// itemOf is the reply item of prediction pr of an example with id, by a
// model of cfg at version.
func itemOf(cfg learner.Config, id *string, pr learner.Prediction, version uint64) item {
	it := item{id: id, name: modelName, version: version, score: map[string]uint64{}}
	labels := cfg.Labels()
	it.predicted = strconv.Itoa(pr.Label)
	if name, ok := labels.Class(pr.Label); ok {
		it.predicted = name
	}
	it.probability = math.Float64bits(pr.Probability)
	if labels.Multiclass() {
		it.probabilities = map[string]uint64{}
		for c, s := range pr.Scores {
			it.score[cfg.Classes[c]] = math.Float64bits(s)
			it.probabilities[cfg.Classes[c]] = math.Float64bits(pr.Probabilities[c])
		}
	} else {
		it.score[""] = math.Float64bits(pr.Score)
	}
	return it
}

func (p *predictor) wantAll(t testing.TB, raws [][]byte) []item {
	t.Helper()
	var out []item
	for _, raw := range raws {
		out = append(out, p.want(t, raw))
	}
	return out
}

// sameItems fails t unless got and want hold the same predictions, in
// order.
func sameItems(t testing.TB, got, want []item) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d predictions, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for i := range got {
		if !got[i].equal(want[i]) {
			t.Fatalf("prediction %d:\n got %v\nwant %v", i+1, got[i], want[i])
		}
	}
}

// The shapes of a reply, as a test expects them.
const (
	one = iota
	array
	lines
)

// jsonItems parses a JSON reply of the given shape.
func jsonItems(t testing.TB, body []byte, shape int) []item {
	t.Helper()
	if !bytes.HasSuffix(body, []byte{'\n'}) {
		t.Fatalf("reply %q does not end in a newline", body)
	}
	var objs []map[string]any
	switch shape {
	case one:
		if bytes.Count(body, []byte{'\n'}) != 1 {
			t.Fatalf("reply %q: want one line", body)
		}
		objs = append(objs, decodeJSON[map[string]any](t, body))
	case array:
		if bytes.Count(body, []byte{'\n'}) != 1 {
			t.Fatalf("reply %q: want one line", body)
		}
		objs = decodeJSON[[]map[string]any](t, body)
		if objs == nil {
			t.Fatalf("reply %q is not an array", body)
		}
	case lines:
		for _, line := range bytes.SplitAfter(body[:len(body)-1], []byte{'\n'}) {
			objs = append(objs, decodeJSON[map[string]any](t, line))
		}
	}
	var out []item
	for _, o := range objs {
		out = append(out, jsonItem(t, o))
	}
	return out
}

// decodeJSON decodes b, which must hold exactly one JSON value, with
// numbers kept as text.
func decodeJSON[T any](t testing.TB, b []byte) T {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v T
	if err := d.Decode(&v); err != nil {
		t.Fatalf("reply %q: %v", b, err)
	}
	if _, err := d.Token(); err != io.EOF {
		t.Fatalf("reply %q: more than one JSON value", b)
	}
	return v
}

func jsonItem(t testing.TB, o map[string]any) item {
	t.Helper()
	it := item{json: true}
	for k := range o {
		switch k {
		case "id", "predicted", "score", "probability", "probabilities", "model":
		default:
			t.Fatalf("reply %v: unexpected key %q", o, k)
		}
	}
	if id, ok := o["id"]; ok {
		s, ok := id.(string)
		if !ok {
			t.Fatalf("reply %v: id is not a string", o)
		}
		it.id = &s
	}
	switch p := o["predicted"].(type) {
	case json.Number:
		it.predicted = p.String()
	case string:
		it.predicted = p
	default:
		t.Fatalf("reply %v: predicted is %T", o, p)
	}
	it.score = map[string]uint64{}
	parse := func(v any) uint64 {
		n, ok := v.(json.Number)
		if !ok {
			t.Fatalf("reply %v: a score is %T", o, v)
		}
		f, err := strconv.ParseFloat(n.String(), 64)
		if err != nil {
			t.Fatalf("reply %v: score: %v", o, err)
		}
		return math.Float64bits(f)
	}
	switch s := o["score"].(type) {
	case map[string]any:
		for k, v := range s {
			it.score[k] = parse(v)
		}
	default:
		it.score[""] = parse(s)
	}
	it.probability, it.probabilities = probabilities(t, o, parse)
	model, ok := o["model"].(map[string]any)
	if !ok {
		t.Fatalf("reply %v: model is not an object", o)
	}
	it.name, _ = model["name"].(string)
	v, _ := model["version"].(json.Number)
	var err error
	if it.version, err = strconv.ParseUint(v.String(), 10, 64); err != nil {
		t.Fatalf("reply %v: model.version: %v", o, err)
	}
	return it
}

// msgpackItems parses a msgpack reply of the given shape.
func msgpackItems(t testing.TB, body []byte, shape int) []item {
	t.Helper()
	d := msgpack.NewDecoder(bytes.NewReader(body))
	var objs []map[string]any
	switch shape {
	case one:
		var o map[string]any
		if err := d.Decode(&o); err != nil {
			t.Fatalf("reply %x: %v", body, err)
		}
		objs = append(objs, o)
	case array:
		if err := d.Decode(&objs); err != nil {
			t.Fatalf("reply %x: %v", body, err)
		}
		if objs == nil {
			t.Fatalf("reply %x is not an array", body)
		}
	case lines:
		for {
			var o map[string]any
			err := d.Decode(&o)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("reply %x: %v", body, err)
			}
			objs = append(objs, o)
		}
	}
	if _, err := d.DecodeInterface(); err != io.EOF {
		t.Fatalf("reply %x: bytes follow the reply", body)
	}
	var out []item
	for _, o := range objs {
		out = append(out, msgpackItem(t, o))
	}
	return out
}

func msgpackItem(t testing.TB, o map[string]any) item {
	t.Helper()
	var it item
	for k := range o {
		switch k {
		case "id", "predicted", "score", "probability", "probabilities", "model":
		default:
			t.Fatalf("reply %v: unexpected key %q", o, k)
		}
	}
	if id, ok := o["id"]; ok {
		s, ok := id.(string)
		if !ok {
			t.Fatalf("reply %v: id is not a string", o)
		}
		it.id = &s
	}
	switch p := o["predicted"].(type) {
	case string:
		it.predicted = p
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		it.predicted = fmt.Sprint(p)
	default:
		t.Fatalf("reply %v: predicted is %T", o, p)
	}
	it.score = map[string]uint64{}
	parse := func(v any) uint64 {
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("reply %v: a score is %T, want a float64", o, v)
		}
		return math.Float64bits(f)
	}
	switch s := o["score"].(type) {
	case map[string]any:
		for k, v := range s {
			it.score[k] = parse(v)
		}
	default:
		it.score[""] = parse(s)
	}
	it.probability, it.probabilities = probabilities(t, o, parse)
	model, ok := o["model"].(map[string]any)
	if !ok {
		t.Fatalf("reply %v: model is not a map", o)
	}
	it.name, _ = model["name"].(string)
	var err error
	if it.version, err = strconv.ParseUint(fmt.Sprint(model["version"]), 10, 64); err != nil {
		t.Fatalf("reply %v: model.version: %v", o, err)
	}
	return it
}

// probabilities reads a reply's probability and, when it has a score
// per class, its probabilities, one per class; parse reads a number as
// bits. Each is a probability, in [0, 1].
func probabilities(t testing.TB, o map[string]any, parse func(any) uint64) (uint64, map[string]uint64) {
	t.Helper()
	check := func(what string, bits uint64) uint64 {
		if p := math.Float64frombits(bits); !(p >= 0 && p <= 1) {
			t.Fatalf("reply %v: %s %v is not in [0, 1]", o, what, p)
		}
		return bits
	}
	v, ok := o["probability"]
	if !ok {
		t.Fatalf("reply %v: no probability", o)
	}
	p := check("probability", parse(v))
	scores, multiclass := o["score"].(map[string]any)
	ps, ok := o["probabilities"].(map[string]any)
	switch {
	case !multiclass && o["probabilities"] != nil:
		t.Fatalf("reply %v: probabilities without a score per class", o)
	case !multiclass:
		return p, nil
	case !ok || len(ps) != len(scores):
		t.Fatalf("reply %v: want probabilities, one per class", o)
	}
	out := map[string]uint64{}
	for k, v := range ps {
		if _, ok := scores[k]; !ok {
			t.Fatalf("reply %v: probabilities: %q is not a class of score", o, k)
		}
		out[k] = check("probabilities."+k, parse(v))
	}
	return p, out
}

// memStore is a snapshot store in memory, closed when the test ends.
func memStore(t testing.TB) *snapshot.Store {
	t.Helper()
	st, err := snapshot.OpenStore(context.Background(), "mem://")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// writeGeneration stores state as generation gen of the model.
func writeGeneration(t testing.TB, store *snapshot.Store, gen uint64, state *learner.State) {
	t.Helper()
	err := store.Write(context.Background(), &snapshot.Snapshot{
		Model:      modelName,
		Generation: gen,
		Created:    time.Now(),
		Writer:     "test",
		Positions:  map[string]int64{"jetstream:examples": int64(gen)},
		State:      state,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// loadFrom reads generations of the model from store, as the worker does.
func loadFrom(store *snapshot.Store) serve.LoadGeneration {
	return func(ctx context.Context, gen uint64) (*learner.State, error) {
		snap, err := store.Load(ctx, modelName, gen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		if err != nil {
			return nil, err
		}
		return snap.State, nil
	}
}

// countLoads wraps load to count its calls by generation.
func countLoads(load serve.LoadGeneration) (serve.LoadGeneration, func(gen uint64) int) {
	var mu sync.Mutex
	counts := map[uint64]int{}
	return func(ctx context.Context, gen uint64) (*learner.State, error) {
			mu.Lock()
			counts[gen]++
			mu.Unlock()
			return load(ctx, gen)
		}, func(gen uint64) int {
			mu.Lock()
			defer mu.Unlock()
			return counts[gen]
		}
}

// httpServer serves srv's HTTP interface, registered on a mux as the
// worker does, until the test ends.
func httpServer(t testing.TB, srv *serve.Server) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv.Register(mux)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// reply is an HTTP reply, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
	closed bool // the server closes the connection after it
}

// post sends body to the predict path of the server at url, followed by
// the query url may have, with the given content type ("" for none) and
// headers.
func post(t testing.TB, url, contentType string, body []byte, header ...string) reply {
	t.Helper()
	r, err := tryPost(url, contentType, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tryPost is post for a goroutine other than the test's.
func tryPost(url, contentType string, body []byte, header ...string) (reply, error) {
	base, query, _ := strings.Cut(url, "?")
	if query != "" {
		query = "?" + query
	}
	req, err := http.NewRequest(http.MethodPost, base+serve.PredictPath+query, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, fmt.Errorf("POST %s: reading the reply: %w", url, err)
	}
	return reply{resp.StatusCode, resp.Header, b, resp.Close}, nil
}

// ok fails t unless r is a 200 with the content type and model version.
func (r reply) ok(t testing.TB, contentType string, version uint64) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", r.status, r.body)
	}
	if got := r.header.Get("Content-Type"); got != contentType {
		t.Errorf("Content-Type %q, want %q", got, contentType)
	}
	if got := r.header.Get(serve.VersionHeader); got != strconv.FormatUint(version, 10) {
		t.Errorf("%s %q, want %d", serve.VersionHeader, got, version)
	}
}

// TestPredictShapes sends one example, an array of them and lines of
// them, in JSON and in msgpack, to binary and multiclass models: the reply
// has the shape of the request and, for each example in order, the id it
// had (none when it had none), the label and score bits the model itself
// predicts for it, the model's name and the version of the view that
// answered, also in the version header.
func TestPredictShapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  learner.Config
	}{
		{"binary", binaryConfig()},
		{"multiclass", multiclassConfig()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := trained(t, tc.cfg, 500)
			srv := serve.New(serve.Options{Model: modelName}, tc.cfg, liveOf(m), nil, nil)
			hs := httpServer(t, srv)
			p := newPredictor(m)
			js, mp := encodeJSON(t, probes(tc.cfg)), encodeMsgpack(t, probes(tc.cfg))

			for _, sc := range []struct {
				name, contentType string
				body              []byte
				raws              [][]byte
				msgpack           bool
				shape             int
				replyType         string
			}{
				{"json object", "application/json", js[0], js[:1], false, one, "application/json"},
				{"json object without content type", "", js[1], js[1:2], false, one, "application/json"},
				{"json object in white space", "application/json", []byte("\n\t " + string(js[2]) + " \r\n"), js[2:3], false, one, "application/json"},
				{"json array", "application/json", jsonArray(js), js, false, array, "application/json"},
				{"json array of one", "application/json", jsonArray(js[3:4]), js[3:4], false, array, "application/json"},
				{"json lines", "application/x-ndjson", jsonLines(js), js, false, lines, "application/x-ndjson"},
				{"json lines without a last newline", "text/plain", bytes.Join(js, []byte("\r\n")), js, false, lines, "application/x-ndjson"},
				{"msgpack map", "application/msgpack", mp[0], mp[:1], true, one, serve.ContentTypeMsgpack},
				{"msgpack array", "application/msgpack", msgpackArray(mp), mp, true, array, serve.ContentTypeMsgpack},
				{"msgpack maps end to end", "application/msgpack", bytes.Join(mp, nil), mp, true, lines, serve.ContentTypeMsgpack},
				{"x-msgpack with parameters", "application/x-msgpack; charset=binary", msgpackArray(mp[1:3]), mp[1:3], true, array, serve.ContentTypeMsgpack},
				{"vnd.msgpack", "application/vnd.msgpack", mp[4], mp[4:5], true, one, serve.ContentTypeMsgpack},
				// Parameters that do not parse leave the media type what it is.
				{"msgpack with a parameter without a value", "application/msgpack; charset", mp[0], mp[:1], true, one, serve.ContentTypeMsgpack},
				{"msgpack with a parameter given twice", "Application/MsgPack; a=1; a=2", msgpackArray(mp), mp, true, array, serve.ContentTypeMsgpack},
				{"json with a parameter without a value", "application/json; charset", js[0], js[:1], false, one, "application/json"},
			} {
				t.Run(sc.name, func(t *testing.T) {
					r := post(t, hs.URL, sc.contentType, sc.body)
					r.ok(t, sc.replyType, m.Version())
					var got []item
					if sc.msgpack {
						got = msgpackItems(t, r.body, sc.shape)
					} else {
						got = jsonItems(t, r.body, sc.shape)
					}
					sameItems(t, got, p.wantAll(t, sc.raws))
				})
			}
		})
	}
}

// TestPredictAlgorithms answers from models of other algorithms and label
// rules, live and from a stored generation: each reply is the model's own
// prediction, to the bit.
func TestPredictAlgorithms(t *testing.T) {
	for name, cfg := range algorithmConfigs() {
		t.Run(name, func(t *testing.T) {
			store := memStore(t)
			m := trained(t, cfg, 300)
			writeGeneration(t, store, 1, m.State())
			stored := newPredictor(m)
			raws := encodeJSON(t, probes(cfg))
			wantStored := stored.wantAll(t, raws)
			learn(t, m, stream(cfg, 12), 300)
			hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil))

			r := post(t, hs.URL, "", jsonArray(raws))
			r.ok(t, "application/json", m.Version())
			sameItems(t, jsonItems(t, r.body, array), newPredictor(m).wantAll(t, raws))
			r = post(t, hs.URL+"?generation=1", "", jsonArray(raws))
			r.ok(t, "application/json", wantStored[0].version)
			sameItems(t, jsonItems(t, r.body, array), wantStored)
		})
	}
}

// TestDecoderOptions bounds examples by Options.Decoder, live and from a
// stored generation: an example over the bound is refused with the
// decoder's message, one within it is answered.
func TestDecoderOptions(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	store := memStore(t)
	writeGeneration(t, store, 1, m.State())
	opts := serve.Options{Model: modelName, Decoder: wire.DecoderOptions{MaxFeatures: 2}}
	hs := httpServer(t, serve.New(opts, cfg, liveOf(m), loadFrom(store), nil))
	for _, url := range []string{hs.URL, hs.URL + "?generation=1"} {
		post(t, url, "", []byte(`{"features":{"a":1,"b":2}}`)).ok(t, "application/json", m.Version())
		post(t, url, "", []byte(`[{"x":[1]},{"features":{"a":1,"b":2,"c":3}}]`)).refused(t, http.StatusBadRequest, "example 2", "features")
	}
}

// TestBadExampleInALongBody refuses a body whose third example does not
// scan, followed by more bytes of good examples than Decoder.MaxBytes
// allows one example: the reply names the third example's field and
// what is wrong with it, as it does in a short body, not the size of the
// rest of the body.
func TestBadExampleInALongBody(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	const maxBytes = 2000
	good := `{"features":{"f1":1}}`
	for _, tc := range []struct {
		name, contentType string
		bad, good         []byte
		parts             []string
	}{
		{"JSON lines", "application/json", []byte(`{"features":{"f1":NaN}}`), []byte(good + "\n"), []string{"example 3", "features.f1", "NaN"}},
		{"a JSON array", "application/json", []byte(`{"features":{"f1":NaN}}`), []byte(good + ","), []string{"example 3", "features.f1", "NaN"}},
		{"msgpack maps end to end", serve.ContentTypeMsgpack, append([]byte("\x81\xa8features\x81\xa2f1"), bytes.Repeat([]byte{0x91}, 1001)...), []byte("\x81\xa8features\x81\xa2f1\x01"), []string{"example 3", "features.f1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := serve.Options{Model: modelName, Decoder: wire.DecoderOptions{MaxBytes: maxBytes}}
			hs := httpServer(t, serve.New(opts, cfg, liveOf(m), nil, nil))
			rest := bytes.Repeat(tc.good, 2*maxBytes/len(tc.good))
			var body []byte
			if tc.contentType == "application/json" && tc.good[len(tc.good)-1] == ',' {
				body = []byte("[" + good + "," + good + "," + string(tc.bad) + "," + string(rest) + good + "]")
			} else {
				body = bytes.Join([][]byte{tc.good, tc.good, tc.bad, rest}, nil)
			}
			r := post(t, hs.URL, tc.contentType, body)
			r.refused(t, http.StatusBadRequest, tc.parts...)
			if bytes.Contains(r.body, []byte("exceed")) {
				t.Errorf("reply %q speaks of a size", r.body)
			}
		})
	}
}

// TestPredictIDs shows how ids come back: a string as it was, unescaped
// and escaped again, each byte that is not UTF-8 as U+FFFD; an integer as
// its digits; an empty string as an empty id; null and no id as no id at
// all.
func TestPredictIDs(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	for _, tc := range []struct {
		example, want string // want: the reply's "id" member, "" for none
	}{
		{`{"id":"a1","features":{"f1":1}}`, `"id":"a1"`},
		{`{"id":"t\u00e9\"st","features":{"f1":1}}`, `"id":"té\"st"`},
		{"{\"id\":\"a\x8fb\xff\",\"features\":{\"f1\":1}}", "\"id\":\"a\ufffdb\ufffd\""},
		{`{"id":1234567890123,"features":{"f1":1}}`, `"id":"1234567890123"`},
		{`{"id":-7,"features":{"f1":1}}`, `"id":"-7"`},
		{`{"id":"","features":{"f1":1}}`, `"id":""`},
		{`{"id":null,"features":{"f1":1}}`, ``},
		{`{"features":{"f1":1}}`, ``},
	} {
		r := post(t, hs.URL, "application/json", []byte(tc.example))
		r.ok(t, "application/json", m.Version())
		if tc.want == "" {
			if bytes.Contains(r.body, []byte(`"id"`)) {
				t.Errorf("%s: reply %s has an id", tc.example, r.body)
			}
			continue
		}
		if !bytes.HasPrefix(r.body, []byte("{"+tc.want+",")) {
			t.Errorf("%s: reply %s, want it to open with %s", tc.example, r.body, tc.want)
		}
	}
}

// TestPredictEmptyArray answers an empty array with an empty array, in
// both formats.
func TestPredictEmptyArray(t *testing.T) {
	cfg := binaryConfig()
	m := trained(t, cfg, 100)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	r := post(t, hs.URL, "application/json", []byte(" [ \n] \n"))
	r.ok(t, "application/json", m.Version())
	if string(r.body) != "[]\n" {
		t.Errorf("JSON reply %q, want %q", r.body, "[]\n")
	}
	r = post(t, hs.URL, serve.ContentTypeMsgpack, []byte{0x90})
	r.ok(t, serve.ContentTypeMsgpack, m.Version())
	if !bytes.Equal(r.body, []byte{0x90}) {
		t.Errorf("msgpack reply %x, want 90", r.body)
	}
}

// TestPredictLargeArray sends more examples than fit a msgpack fixarray
// header, so that the reply's array header takes three bytes.
func TestPredictLargeArray(t *testing.T) {
	cfg := multiclassConfig()
	m := trained(t, cfg, 300)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), nil, nil))
	s := stream(cfg, 9)
	var js, mp [][]byte
	for range 40 {
		rec := s.Next()
		js = append(js, bytes.TrimSpace(synth.AppendJSON(nil, rec)))
		mp = append(mp, synth.AppendMsgpack(nil, rec))
	}
	p := newPredictor(m)
	r := post(t, hs.URL, serve.ContentTypeMsgpack, msgpackArray(mp))
	r.ok(t, serve.ContentTypeMsgpack, m.Version())
	sameItems(t, msgpackItems(t, r.body, array), p.wantAll(t, mp))
	r = post(t, hs.URL, "application/json", jsonArray(js))
	r.ok(t, "application/json", m.Version())
	sameItems(t, jsonItems(t, r.body, array), p.wantAll(t, js))
}

// TestGenerations answers from stored generations, named by the query
// parameter or the header: the version is that generation's, the scores
// are those of a model restored from it, and the reply names the
// generation; the live model answers requests that name none.
func TestGenerations(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  learner.Config
	}{
		{"binary", binaryConfig()},
		{"multiclass", multiclassConfig()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := memStore(t)
			m := newModel(t, tc.cfg)
			s := stream(tc.cfg, 2)
			var states []*learner.State
			for gen := uint64(1); gen <= 3; gen++ {
				learn(t, m, s, 200)
				st := m.State()
				states = append(states, st)
				writeGeneration(t, store, gen, st)
			}
			learn(t, m, s, 200)
			srv := serve.New(serve.Options{Model: modelName}, tc.cfg, liveOf(m), loadFrom(store), nil)
			hs := httpServer(t, srv)
			raws := encodeJSON(t, probes(tc.cfg))
			body := jsonArray(raws)

			for gen, st := range states {
				restored, err := learner.Restore(st)
				if err != nil {
					t.Fatal(err)
				}
				if restored.Version() == m.Version() {
					t.Fatal("the generation has the live model's version: the test says nothing")
				}
				want := newPredictor(restored).wantAll(t, raws)
				n := strconv.Itoa(gen + 1)
				for _, r := range []reply{
					post(t, hs.URL+"?generation="+n, "", body),
					post(t, hs.URL, "", body, serve.GenerationHeader, n),
				} {
					r.ok(t, "application/json", restored.Version())
					if got := r.header.Get(serve.GenerationHeader); got != n {
						t.Errorf("%s %q, want %s", serve.GenerationHeader, got, n)
					}
					sameItems(t, jsonItems(t, r.body, array), want)
				}
				mp := encodeMsgpack(t, probes(tc.cfg))
				r := post(t, hs.URL+"?generation="+n, serve.ContentTypeMsgpack, bytes.Join(mp, nil))
				r.ok(t, serve.ContentTypeMsgpack, restored.Version())
				sameItems(t, msgpackItems(t, r.body, lines), newPredictor(restored).wantAll(t, mp))
			}
			r := post(t, hs.URL, "", body)
			r.ok(t, "application/json", m.Version())
			if got := r.header.Get(serve.GenerationHeader); got != "" {
				t.Errorf("the live model's reply has %s %q", serve.GenerationHeader, got)
			}
			sameItems(t, jsonItems(t, r.body, array), newPredictor(m).wantAll(t, raws))
		})
	}
}

// TestGenerationEviction keeps two generations loaded and asks for three
// in turn, twice: every answer is that generation's, and the one asked
// for least recently is loaded again. With room for all three, each is
// loaded once.
func TestGenerationEviction(t *testing.T) {
	cfg := binaryConfig()
	store := memStore(t)
	m := newModel(t, cfg)
	s := stream(cfg, 3)
	var wants [][]item
	raws := encodeJSON(t, probes(cfg))
	for gen := uint64(1); gen <= 3; gen++ {
		learn(t, m, s, 150)
		writeGeneration(t, store, gen, m.State())
		wants = append(wants, newPredictor(m).wantAll(t, raws))
	}
	for _, tc := range []struct {
		keep      int
		wantLoads int // of each generation
	}{
		{2, 2},
		{3, 1},
	} {
		t.Run(fmt.Sprintf("keep %d", tc.keep), func(t *testing.T) {
			load, loads := countLoads(loadFrom(store))
			srv := serve.New(serve.Options{Model: modelName, Generations: tc.keep}, cfg, liveOf(m), load, nil)
			hs := httpServer(t, srv)
			for range 2 {
				for gen := range 3 {
					r := post(t, hs.URL+"?generation="+strconv.Itoa(gen+1), "", jsonLines(raws))
					r.ok(t, "application/x-ndjson", wants[gen][0].version)
					sameItems(t, jsonItems(t, r.body, lines), wants[gen])
				}
			}
			for gen := uint64(1); gen <= 3; gen++ {
				if got := loads(gen); got != tc.wantLoads {
					t.Errorf("generation %d loaded %d times, want %d", gen, got, tc.wantLoads)
				}
			}
		})
	}
}

// TestGenerationLoadedOnce sends many requests at once for a generation
// that is not loaded yet, and lets the load finish only once every one of
// them waits for it: all are answered from it, and it is loaded once.
func TestGenerationLoadedOnce(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))
	states, wants := storedGenerations(t, cfg, 1, raws)
	live := trained(t, cfg, 300)
	body := jsonArray(raws)
	synctest.Test(t, func(t *testing.T) {
		gl := newGatedLoad(states, 1)
		srv := serve.New(serve.Options{Model: modelName}, cfg, liveOf(live), gl.load, nil)
		const n = 16
		replies := make(chan reply, n)
		for range n {
			go func() { replies <- serveDirect(context.Background(), srv, "1", body) }()
		}
		synctest.Wait()
		if len(replies) != 0 {
			t.Fatal("a request was answered before its generation was loaded")
		}
		close(gl.gates[1])
		synctest.Wait()
		for range n {
			r := answered(t, replies)
			r.ok(t, "application/json", wants[0][0].version)
			sameItems(t, jsonItems(t, r.body, array), wants[0])
		}
		if got := gl.count(1); got != 1 {
			t.Errorf("generation 1 loaded %d times, want 1", got)
		}
	})
}

// TestGenerationNotStoredIsRetried asks for a generation before it is
// written: 404, and once it is written the same request is answered from
// it, as a generation not found is not remembered.
func TestGenerationNotStoredIsRetried(t *testing.T) {
	cfg := binaryConfig()
	store := memStore(t)
	m := trained(t, cfg, 200)
	hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, liveOf(m), loadFrom(store), nil))
	body := encodeJSON(t, probes(cfg))[0]
	if r := post(t, hs.URL+"?generation=1", "", body); r.status != http.StatusNotFound {
		t.Fatalf("status %d (%s), want 404", r.status, r.body)
	}
	writeGeneration(t, store, 1, m.State())
	r := post(t, hs.URL+"?generation=1", "", body)
	r.ok(t, "application/json", m.Version())
	sameItems(t, jsonItems(t, r.body, one), newPredictor(m).wantAll(t, [][]byte{body}))
}

// TestRequestsNeverChangeTheModel sends many requests of every kind, good
// and bad, to the live model and to a stored generation: the model's
// state, the stored state the server restored and the view's predictions
// are the same bits afterwards.
func TestRequestsNeverChangeTheModel(t *testing.T) {
	for _, cfg := range []learner.Config{binaryConfig(), multiclassConfig()} {
		m := trained(t, cfg, 400)
		before := m.State().Digest()
		store := memStore(t)
		writeGeneration(t, store, 1, m.State())
		var loaded atomic.Pointer[learner.State]
		load := func(ctx context.Context, gen uint64) (*learner.State, error) {
			st, err := loadFrom(store)(ctx, gen)
			if err == nil {
				loaded.Store(st)
			}
			return st, err
		}
		live := liveOf(m)
		view := live.View()
		hs := httpServer(t, serve.New(serve.Options{Model: modelName}, cfg, live, load, nil))
		js, mp := encodeJSON(t, probes(cfg)), encodeMsgpack(t, probes(cfg))
		bodies := []struct {
			contentType string
			body        []byte
		}{
			{"", jsonArray(js)},
			{"", jsonLines(js)},
			{"", js[4]},
			{serve.ContentTypeMsgpack, msgpackArray(mp)},
			{serve.ContentTypeMsgpack, bytes.Join(mp, nil)},
			{"", []byte(`{"label":1,"features":{"f1":1e300}}`)},
			{"", []byte(`[{"label":1,"features":{"f1":1}},{"x":[1,2`)},
		}
		for range 20 {
			for _, b := range bodies {
				post(t, hs.URL, b.contentType, b.body)
				post(t, hs.URL+"?generation=1", b.contentType, b.body)
			}
		}
		if loaded.Load() == nil {
			t.Fatal("the stored generation was never loaded")
		}
		if m.State().Digest() != before {
			t.Error("the live model's state changed")
		}
		if loaded.Load().Digest() != before {
			t.Error("the stored state the server restored changed")
		}
		if live.View() != view {
			t.Error("the published view was replaced")
		}
		var x learner.Example
		var scratch learner.Scratch
		dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
		for _, raw := range js {
			if _, err := dec.Decode(raw, &x); err != nil {
				t.Fatal(err)
			}
			got, want := view.Predict(&x, &scratch), m.Predict(&x)
			if got.Label != want.Label || math.Float64bits(got.Score) != math.Float64bits(want.Score) {
				t.Errorf("the view predicts %+v for %s, the model %+v", got, raw, want)
			}
		}
	}
}

// TestConcurrentRequestsWhileLearning sends requests from many goroutines
// while another learns, until they are done, and publishes a new view
// after every update: each reply is what the model predicted at the
// version it names, and the versions a client sees never go back.
func TestConcurrentRequestsWhileLearning(t *testing.T) {
	cfg := multiclassConfig()
	m := trained(t, cfg, 50)
	live := liveOf(m)
	raws := encodeJSON(t, probes(cfg))
	body := jsonArray(raws)
	// The probes decoded, and their ids.
	xs := make([]learner.Example, len(raws))
	ids := make([]*string, len(raws))
	dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
	for i, raw := range raws {
		meta, err := dec.Decode(raw, &xs[i])
		if err != nil {
			t.Fatal(err)
		}
		if meta.HasID {
			id := string(meta.ID)
			ids[i] = &id
		}
	}
	// predicted holds, by version, what the model predicted for the
	// probes when it had that version.
	var predicted sync.Map
	predict := func() []learner.Prediction {
		out := make([]learner.Prediction, len(xs))
		for i := range xs {
			out[i] = m.Predict(&xs[i])
			out[i].Scores = slices.Clone(out[i].Scores)
			out[i].Probabilities = slices.Clone(out[i].Probabilities)
		}
		return out
	}
	predicted.Store(m.Version(), predict())
	srv := serve.New(serve.Options{Model: modelName, MaxInFlight: 1000}, cfg, live, nil, nil)
	hs := httpServer(t, srv)

	done := make(chan struct{})
	var learnErr error
	var learned sync.WaitGroup
	learned.Go(func() {
		s := stream(cfg, 5)
		dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
		var x learner.Example
		var buf []byte
		for {
			select {
			case <-done:
				return
			default:
			}
			buf = synth.AppendJSON(buf[:0], s.Next())
			if _, learnErr = dec.Decode(buf, &x); learnErr != nil {
				return
			}
			v := m.Version()
			m.Learn(&x)
			if m.Version() != v {
				predicted.Store(m.Version(), predict())
				live.view.Store(m.View())
			}
		}
	})

	// Each client's replies, in order.
	const clients, requests = 6, 40
	replies := make([][]reply, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for range requests {
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, serve.PredictPath, bytes.NewReader(body)))
				replies[c] = append(replies[c], reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()})
			}
		})
	}
	// Also over the network, through the in-flight limit.
	msgpackBody := msgpackArray(encodeMsgpack(t, probes(cfg)[:1]))
	netErrs := make([]error, 2)
	for c := range netErrs {
		wg.Go(func() {
			for range 20 {
				r, err := tryPost(hs.URL, serve.ContentTypeMsgpack, msgpackBody)
				if err == nil && r.status != http.StatusOK {
					err = fmt.Errorf("status %d: %s", r.status, r.body)
				}
				if err != nil {
					netErrs[c] = err
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	learned.Wait()
	if learnErr != nil {
		t.Fatal(learnErr)
	}
	for _, err := range netErrs {
		if err != nil {
			t.Error(err)
		}
	}

	seen := map[uint64]bool{}
	for c, rs := range replies {
		if len(rs) != requests {
			t.Fatalf("client %d: %d replies, want %d", c, len(rs), requests)
		}
		var last uint64
		for _, r := range rs {
			v, err := strconv.ParseUint(r.header.Get(serve.VersionHeader), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", serve.VersionHeader, err)
			}
			r.ok(t, "application/json", v)
			if v < last {
				t.Errorf("client %d: version %d after %d", c, v, last)
			}
			last = v
			seen[v] = true
			preds, ok := predicted.Load(v)
			if !ok {
				t.Fatalf("version %d was never published", v)
			}
			var want []item
			for i, pr := range preds.([]learner.Prediction) {
				want = append(want, itemOf(cfg, ids[i], pr, v))
			}
			sameItems(t, jsonItems(t, r.body, array), want)
		}
	}
	if len(seen) < 2 {
		t.Logf("every reply came from one version: learning did not overlap the requests")
	}
}
