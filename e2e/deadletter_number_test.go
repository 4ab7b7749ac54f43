package e2e

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// TestKafkaDeadLetterOfAHugeNumber: an example whose feature value,
// label or weight is a number of hundreds of thousands of digits goes to
// the dead letters whole, its error naming the field in a few dozen
// bytes. The error used to repeat the number, which left the payload no
// room: it was cut, or, for a message near source.max_bytes, the dead
// letter was dropped.
func TestKafkaDeadLetterOfAHugeNumber(t *testing.T) {
	ctx := testContext(t)
	c := kafkaCluster(t)
	digits := strings.Repeat("9", 300_000)
	msgs := [][]byte{
		[]byte(`{"label":1,"features":{"a":` + digits + `}}`),
		[]byte(`{"label":` + digits + `,"features":{"a":1}}`),
		[]byte(`{"label":1,"weight":` + digits + `,"features":{"a":1}}`),
		[]byte(`{"id":"after","label":1,"features":{"a":1}}`),
	}
	cl := c.Client(t)
	defer cl.Close()
	for _, m := range msgs {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "examples", Partition: 0, Value: m}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	preds, dead := readTopic(t, c, "predictions"), readTopic(t, c, "dead")
	p := start(t, "run", "--config", writeConfig(t, kafkaConfig(c)))
	wait.For(t, time.Minute, 50*time.Millisecond, "three dead letters and the prediction after them", func() bool {
		return dead.count() == 3 && preds.count() == 1
	})
	p.stop()
	for i, r := range dead.records() {
		var e struct {
			Error     string `json:"error"`
			Payload   string `json:"payload"`
			Truncated bool   `json:"truncated"`
		}
		if err := json.Unmarshal(r.Value, &e); err != nil {
			t.Fatal(err)
		}
		if len(e.Error) > 200 || !strings.Contains(e.Error, "...") {
			t.Errorf("dead letter %d: error of %d bytes (%.80s...), want the number cut", i, len(e.Error), e.Error)
		}
		payload, err := base64.StdEncoding.DecodeString(e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if e.Truncated || string(payload) != string(msgs[i]) {
			t.Errorf("dead letter %d: payload of %d bytes, truncated %v, want the message's %d", i, len(payload), e.Truncated, len(msgs[i]))
		}
	}
}
