package brokers_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/brokers"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestClients: a destination of none needs no broker, one sink is made
// per kind and shared, a source of no kind names the key, and Close
// closes what was opened, the deferred too.
func TestClients(t *testing.T) {
	cfg := config.Default()
	cfg.NATS.URL = testbroker.NATS(t).URL()
	b := brokers.New(cfg, "test", zaptest.NewLogger(t))
	if d, err := b.Destination("outputs.drift", config.Destination{}); err != nil || d.Sink != nil {
		t.Fatalf("a destination of none = %v, %v; want none", d, err)
	}
	first, err := b.Destination("outputs.predictions", config.Destination{Kind: config.KindNATS, Topic: "p"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Destination("outputs.misclassifications", config.Destination{Kind: config.KindNATS, Topic: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Sink != second.Sink || first.Topic != "p" || second.Topic != "m" {
		t.Errorf("two NATS destinations: sinks %p and %p, topics %q and %q; want one sink", first.Sink, second.Sink, first.Topic, second.Topic)
	}
	if _, err := b.Source(context.Background(), config.Source{}, "", nil); err == nil || !strings.Contains(err.Error(), "source.kind") {
		t.Errorf("a source of no kind: %v, want an error naming source.kind", err)
	}
	nc, err := b.NATSConn()
	if err != nil {
		t.Fatal(err)
	}
	deferred := errors.New("not closed")
	b.Defer(func() error { deferred = nil; return nil })
	b.Close()
	if deferred != nil || !nc.IsClosed() {
		t.Errorf("after Close: deferred %v, NATS connection closed %v; want both closed", deferred, nc.IsClosed())
	}
}
