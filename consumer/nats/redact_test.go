package nats

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A failed connection names its servers without their credentials, a
// token or a password, in the error and in the log.
func TestConnectHidesCredentials(t *testing.T) {
	for _, url := range []string{"nats://tok3n-s3cret@127.0.0.1:1", "nats://alice:s3cret-pw@127.0.0.1:1,nats://127.0.0.1:2"} {
		core, logs := observer.New(zap.DebugLevel)
		_, err := Connect(Config{URL: url}, zap.New(core))
		if err == nil {
			t.Fatalf("connected to %s", url)
		}
		shown := err.Error()
		for _, e := range logs.All() {
			shown += "\n" + e.Message
			for _, f := range e.Context {
				shown += " " + f.String
			}
		}
		if strings.Contains(shown, "s3cret") || !strings.Contains(shown, "127.0.0.1:1") {
			t.Errorf("%s shown as:\n%s", url, shown)
		}
	}
}
