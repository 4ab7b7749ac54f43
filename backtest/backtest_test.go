package backtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// stream is n synthetic examples in the format given.
func stream(n int, msgpack bool) []byte {
	o := synth.DefaultOptions()
	o.Seed = 3
	s := synth.New(o)
	var b []byte
	for range n {
		if msgpack {
			b = synth.AppendMsgpack(b, s.Next())
		} else {
			b = synth.AppendJSON(b, s.Next())
		}
	}
	return b
}

// alone learns data with one configuration by itself, as train would.
func alone(t *testing.T, data []byte, cfg learner.Config) learner.Metrics {
	t.Helper()
	m, err := learner.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = wire.ReadExamples(context.Background(), bytes.NewReader(data), func() *wire.Decoder { return wire.NewDecoder(cfg, wire.DecoderOptions{}) },
		wire.ReadOptions{Workers: 2}, func(rec *wire.Record) error {
			if rec.Err != nil {
				t.Fatalf("record %d: %v", rec.N, rec.Err)
			}
			m.Learn(rec.Example)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return m.Metrics()
}

// TestOnePassLearnsAsSeparateRuns: every entrant of a backtest, whether
// it shares the model's hashing or decodes with its own, learns the
// model a run of its own would, bit for bit, in JSON lines and in
// msgpack.
func TestOnePassLearnsAsSeparateRuns(t *testing.T) {
	model := learner.DefaultConfig()
	perceptron := model
	perceptron.Algorithm = learner.Perceptron
	seed := model
	seed.HashSeed = 11
	small := model
	small.HashBits = 12
	challengers := []compare.Entrant{{Name: "perceptron", Config: perceptron}, {Name: "seed", Config: seed}, {Name: "small", Config: small}}
	for _, msgpack := range []bool{false, true} {
		data := stream(3000, msgpack)
		c, err := backtest.Run(context.Background(), bytes.NewReader(data), backtest.Options{
			Model: compare.Entrant{Name: "arow", Config: model}, Challengers: challengers, Alpha: 0.05, Read: wire.ReadOptions{Workers: 2},
			Invalid: func(rec *wire.Record) { t.Errorf("record %d: %v", rec.N, rec.Err) },
		})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(c.Hashings()); n != 3 {
			t.Errorf("%d hashings, want 3 (the model's, seed's and small's)", n)
		}
		for i, e := range c.Entrants() {
			want := alone(t, data, e.Config)
			got := c.Model(i).Metrics()
			if got.Labeled != 3000 || got.Mistakes != want.Mistakes || got.LogLoss != want.LogLoss || c.Model(i).State().Digest() != mustModel(t, data, e.Config) {
				t.Errorf("msgpack %v: %s learned %d examples, %d mistakes, log-loss %v; alone %d, %d, %v (or its state differs)",
					msgpack, e.Name, got.Labeled, got.Mistakes, got.LogLoss, want.Labeled, want.Mistakes, want.LogLoss)
			}
		}
	}
}

// mustModel is the digest of the state of cfg's model learned alone.
func mustModel(t *testing.T, data []byte, cfg learner.Config) [32]byte {
	t.Helper()
	m, _ := learner.New(cfg)
	_ = wire.ReadExamples(context.Background(), bytes.NewReader(data), func() *wire.Decoder { return wire.NewDecoder(cfg, wire.DecoderOptions{}) },
		wire.ReadOptions{Workers: 1}, func(rec *wire.Record) error { m.Learn(rec.Example); return nil })
	return m.State().Digest()
}

// TestARecordOneHashingRefusesIsLearnedByNone: a dense example longer
// than a challenger's dimension decodes for the model only; it is
// reported, and no entrant learns it, so the pairs stay paired.
func TestARecordOneHashingRefusesIsLearnedByNone(t *testing.T) {
	model := learner.DefaultConfig()
	tiny := model
	tiny.HashBits = 2 // 4 dense positions
	data := []byte(`{"label":1,"x":[1,0,0,0,1]}` + "\n" + `{"label":-1,"x":[0,1]}` + "\n")
	var invalid []int
	c, err := backtest.Run(context.Background(), bytes.NewReader(data), backtest.Options{
		Model: compare.Entrant{Name: "m", Config: model}, Challengers: []compare.Entrant{{Name: "tiny", Config: tiny}}, Alpha: 0.05,
		Invalid: func(rec *wire.Record) { invalid = append(invalid, rec.N) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(invalid) != 1 || invalid[0] != 1 {
		t.Errorf("records reported invalid: %v, want [1]", invalid)
	}
	st := c.Standings()
	if st[0].Examples != 1 || st[1].Examples != 1 || st[1].Result.Examples != 1 {
		t.Errorf("standings %+v: want one example learned by each and compared", st)
	}
}

func TestWriteJSONAndTable(t *testing.T) {
	model := learner.DefaultConfig()
	perceptron := model
	perceptron.Algorithm = learner.Perceptron
	c, err := backtest.Run(context.Background(), bytes.NewReader(stream(30000, false)), backtest.Options{
		Model: compare.Entrant{Name: "arow", Config: model}, Challengers: []compare.Entrant{{Name: "perceptron", Config: perceptron}}, Alpha: 0.05,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := backtest.WriteJSON(&out, c.Standings()); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, k := range []string{"name", "accuracy", "log_loss", "log_loss_diff", "low", "high"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON line %s lacks %q", out.String(), k)
		}
	}
	st := c.Standings()
	if got["name"] != "perceptron" || abs(got["log_loss_diff"].(float64)-(st[0].LogLoss-st[1].LogLoss)) > 1e-12 {
		t.Errorf("JSON line %s: want perceptron, log_loss_diff the model's log-loss %v minus the challenger's %v", out.String(), st[0].LogLoss, st[1].LogLoss)
	}
	if !(got["low"].(float64) <= got["log_loss_diff"].(float64) && got["log_loss_diff"].(float64) <= got["high"].(float64)) {
		t.Errorf("JSON line %s: the difference is outside its band", out.String())
	}
	out.Reset()
	if err := backtest.WriteTable(&out, c.Standings(), 0.05); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "log_loss_diff") || !strings.Contains(lines[1], "arow") || !strings.Contains(lines[2], "perceptron") || !strings.Contains(lines[2], string(compare.ModelBetter)) {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestWriteTableSeveralChallengers: a table of several challengers says
// that each verdict is at level alpha on its own, and the chance that
// any is wrong; one of a single challenger does not.
func TestWriteTableSeveralChallengers(t *testing.T) {
	model := learner.DefaultConfig()
	seed, perceptron := model, model
	seed.HashSeed = 7
	perceptron.Algorithm = learner.Perceptron
	challengers := []compare.Entrant{{Name: "seed", Config: seed}, {Name: "perceptron", Config: perceptron}, {Name: "same", Config: model}}
	for _, tc := range []struct {
		challengers int
		want        string
	}{
		{1, ""},
		{3, "with 3 challengers, the chance that any of them is wrong is up to 15%"},
	} {
		c, err := backtest.Run(context.Background(), bytes.NewReader(stream(2000, false)), backtest.Options{
			Model: compare.Entrant{Name: "arow", Config: model}, Challengers: challengers[:tc.challengers], Alpha: 0.05,
		})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := backtest.WriteTable(&out, c.Standings(), 0.05); err != nil {
			t.Fatal(err)
		}
		said := strings.Contains(out.String(), "any of them is wrong")
		if tc.want == "" && said || tc.want != "" && !strings.Contains(out.String(), tc.want) {
			t.Errorf("%d challengers, table:\n%s\nwant %q", tc.challengers, out.String(), tc.want)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestRunSourceIsRun: a source's log, learned a fetch at a time, gives
// the standings and traces of the same records read from a file, to the
// bit, records that do not decode included, with challengers of other
// hashings.
func TestRunSourceIsRun(t *testing.T) {
	model := learner.DefaultConfig()
	model.HashBits = 14
	seed, bits, perceptron := model, model, model
	seed.HashSeed = 7
	bits.HashBits = 12
	perceptron.Algorithm = learner.Perceptron
	opts := backtest.Options{
		Model: compare.Entrant{Name: "arow", Config: model}, Alpha: 0.05,
		Challengers: []compare.Entrant{{Name: "seed", Config: seed}, {Name: "bits", Config: bits}, {Name: "perceptron", Config: perceptron}},
	}
	lines := bytes.SplitAfter(stream(4000, false), []byte("\n"))
	lines = lines[:len(lines)-1]
	lines = slices.Insert(lines, 2500, []byte("garbage\n"))
	lines = slices.Insert(lines, 10, []byte("{\"label\":1,\"features\":[\n"))
	log := memory.NewLog("examples", 1)
	log.Append(0, lines...)

	var fileInvalid, logInvalid []int
	opts.Invalid = func(rec *wire.Record) { fileInvalid = append(fileInvalid, rec.N) }
	want, err := backtest.Run(context.Background(), bytes.NewReader(bytes.Join(lines, nil)), opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Invalid = func(rec *wire.Record) { logInvalid = append(logInvalid, rec.N) }
	src := &consumer.Range{Source: memory.NewSource(log, nil), End: consumer.OffsetBefore(int64(len(lines)))}
	got, err := backtest.RunSource(context.Background(), src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fileInvalid, []int{11, 2502}) || !slices.Equal(logInvalid, fileInvalid) {
		t.Errorf("records reported invalid: %v from the log, %v from the file; want [11 2502]", logInvalid, fileInvalid)
	}
	if g, w := got.Standings(), want.Standings(); !reflect.DeepEqual(g, w) || w[0].Examples != 4000 {
		t.Errorf("standings from the log\n%+v\nfrom the file\n%+v", g, w)
	}
	for i, tr := range want.Traces() {
		if g, w := got.Traces()[i].Points(), tr.Points(); !reflect.DeepEqual(g, w) {
			t.Errorf("challenger %d: trace of %d points from the log, %d from the file, not the same", i+1, len(g), len(w))
		}
	}
}
