package consumer_test

import (
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/consumer/memory"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/learner/synth"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// probabilityGauges are the names of the probability gauges and the
// metric each reads.
func probabilityGauges(mt learner.Metrics) map[string]float64 {
	return map[string]float64{
		"log_loss": mt.LogLoss, "rolling_log_loss": mt.RollingLogLoss,
		"brier": mt.Brier, "rolling_brier": mt.RollingBrier,
		"calibration_error": mt.CalibrationError, "rolling_calibration_error": mt.RollingCalibrationError,
		"auc": mt.AUC, "rolling_auc": mt.RollingAUC,
	}
}

// TestWorkerPublishesProbabilities: over a real JetStream, every
// prediction and misclassification event carries the probability the
// model published before learning the example, in [0, 1], bit for bit
// the learner's alone over the same examples (and, multiclass, every
// class's); the misclassification the same as its prediction; and the
// probability gauges read the model's metrics.
func TestWorkerPublishesProbabilities(t *testing.T) {
	for _, c := range []struct {
		name     string
		classes  []string
		encoding wire.Encoding
	}{
		{"binary json", nil, wire.EncodingJSON},
		{"multiclass msgpack", []string{"0", "1", "2"}, wire.EncodingMsgpack},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := synth.DefaultOptions()
			o.Vocab, o.Unlabeled, o.Features, o.Classes = 200, 0.2, 10, len(c.classes)
			s := synth.New(o)
			var msgs [][]byte
			for range 600 {
				b := synth.AppendJSON(nil, s.Next())
				msgs = append(msgs, b[:len(b)-1])
			}
			cfg := learner.DefaultConfig()
			cfg.HashBits, cfg.Classes = 12, c.classes
			model, err := learner.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := newBroker(t)
			b.publish(t, msgs)
			w, metrics := runWorker(t, b, consumer.WorkerConfig{
				Model:              "m",
				Predictions:        consumer.Destination{Topic: "t.PRED"},
				Misclassifications: consumer.Destination{Topic: "t.MIS"},
				Encoding:           c.encoding,
				Batch:              64,
			}, model, len(msgs))

			decode := func(raw []byte) map[string]any {
				var ev map[string]any
				var err error
				if c.encoding == wire.EncodingMsgpack {
					err = msgpack.Unmarshal(raw, &ev)
				} else {
					err = json.Unmarshal(raw, &ev)
				}
				if err != nil {
					t.Fatalf("%v: %q", err, raw)
				}
				return ev
			}
			preds, mis := b.read(t, "PRED"), b.read(t, "MIS")
			if len(preds) != len(msgs) || len(mis) == 0 {
				t.Fatalf("%d predictions, %d misclassifications for %d examples", len(preds), len(mis), len(msgs))
			}
			ref, err := learner.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			dec := wire.NewDecoder(cfg, wire.DecoderOptions{})
			var x learner.Example
			byID := map[any]map[string]any{}
			for i, raw := range preds {
				ev := decode(raw)
				byID[ev["event_id"]] = ev
				if _, err := dec.Decode(msgs[i], &x); err != nil {
					t.Fatal(err)
				}
				want := ref.Learn(&x)
				p, ok := ev["probability"].(float64)
				if !ok || p != want.Probability || !(p >= 0 && p <= 1) {
					t.Fatalf("prediction %d: probability %v, the learner's %v: %v", i, ev["probability"], want.Probability, ev)
				}
				ps, _ := ev["probabilities"].(map[string]any)
				if len(ps) != len(c.classes) {
					t.Fatalf("prediction %d: probabilities %v for classes %v", i, ev["probabilities"], c.classes)
				}
				for k, class := range c.classes {
					if ps[class] != want.Probabilities[k] {
						t.Fatalf("prediction %d: probabilities %v, the learner's %v", i, ps, want.Probabilities)
					}
				}
			}
			for _, raw := range mis {
				ev := decode(raw)
				pred := byID[ev["event_id"]]
				if ev["probability"] == nil || ev["probability"] != pred["probability"] {
					t.Fatalf("misclassification %v: probability %v, its prediction's %v", ev["event_id"], ev["probability"], pred["probability"])
				}
			}

			reg := prometheus.NewRegistry()
			reg.MustRegister(metricsCollectors(metrics)...)
			mt := w.Model().Metrics()
			if mt.LogLoss <= 0 || mt.RollingLogLoss <= 0 {
				t.Fatalf("the model measured no log-loss: %+v", mt)
			}
			for name, want := range probabilityGauges(mt) {
				if got, ok := gauge(t, reg, "hyperplane_"+name); !ok || got != want {
					t.Errorf("hyperplane_%s is %v (%v), the model's is %v", name, got, ok, want)
				}
			}
		})
	}
}

// metricsCollectors are the probability gauges of m, to gather.
func metricsCollectors(m *consumer.Metrics) []prometheus.Collector {
	g := m.Probability
	return []prometheus.Collector{g.LogLoss, g.RollingLogLoss, g.Brier, g.RollingBrier,
		g.CalibrationError, g.RollingCalibrationError, g.AUC, g.RollingAUC}
}

// TestProbabilityGaugesOfARestoredModel: a worker's probability gauges
// read its restored model's measures before any new example.
func TestProbabilityGaugesOfARestoredModel(t *testing.T) {
	model := newModel(t)
	msgs, _ := messages(400)
	d := wire.NewDecoder(model.Config(), wire.DecoderOptions{})
	var x learner.Example
	for _, m := range msgs {
		if _, err := d.Decode(m, &x); err == nil {
			model.Learn(&x)
		}
	}
	mt := model.Metrics()
	if mt.LogLoss == 0 || mt.AUC == 0 {
		t.Fatalf("the model measured nothing: %+v", mt)
	}
	reg := prometheus.NewRegistry()
	metrics := consumer.NewMetrics(reg)
	consumer.NewWorker(consumer.WorkerConfig{}, memory.NewSource(memory.NewLog("in", 1), nil), model, map[string]int64{"memory:in/0": 400}, metrics, zaptest.NewLogger(t))
	for name, want := range probabilityGauges(mt) {
		if got, ok := gauge(t, reg, "hyperplane_"+name); !ok || got != want {
			t.Errorf("hyperplane_%s is %v (%v), the model's is %v", name, got, ok, want)
		}
	}
}
