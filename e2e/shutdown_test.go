package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/wait"
)

// readyz returns /readyz's status and body.
func (p *proc) readyz() (int, string) {
	resp, err := http.Get("http://" + p.httpAddr() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestSIGTERMDuringOutputOutage: the predictions go to a subject whose
// stream is deleted once the worker has started (run refuses to start
// without it), so every publish fails. /readyz says so, and SIGTERM ends
// the process within shutdown.timeout, with an error that says what was
// not flushed, instead of waiting for outputs that never come back.
func TestSIGTERMDuringOutputOutage(t *testing.T) {
	ctx := testContext(t)
	ns := startNATS(t)
	prefix := uniquePrefix("TERM")
	js, _ := ns.streams(ctx, prefix)
	nowhere := prefix + "_NOWHERE"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: nowhere, Subjects: []string{prefix + ".NOWHERE"}}); err != nil {
		t.Fatalf("create %s: %v", nowhere, err)
	}
	in := makeInput(3000, 5, 0)

	cfg := jetStreamConfig(ns.url, prefix) + `
shutdown:
  timeout: 2s
snapshot:
  url: file://` + t.TempDir() + `
  every: 100
`
	cfg = strings.Replace(cfg, "predictions: jetstream:"+prefix+".PRED", "predictions: jetstream:"+prefix+".NOWHERE", 1)
	p := start(t, "run", "--config", writeConfig(t, cfg))
	wait.For(t, time.Minute, 50*time.Millisecond, "/readyz ready", func() bool {
		code, _ := p.readyz()
		return code == http.StatusOK
	})
	if err := js.DeleteStream(ctx, nowhere); err != nil {
		t.Fatal(err)
	}
	publishAll(t, ctx, js, prefix+".IN", in.messages)
	wait.For(t, time.Minute, 50*time.Millisecond, "/readyz naming the outputs", func() bool {
		code, body := p.readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, "outputs: ")
	})
	if _, body := p.readyz(); strings.Contains(body, "source: ") {
		t.Fatalf("/readyz blames the source, which works: %q", body)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	var err error
	select {
	case err = <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("hyperplane did not exit within 30s of SIGTERM with shutdown.timeout 2s")
	}
	took := time.Since(signalled)
	if took > 10*time.Second {
		t.Errorf("exit took %s after SIGTERM with shutdown.timeout 2s", took)
	}
	if err == nil {
		t.Fatal("a shutdown that could not flush its outputs exited 0")
	}
	log := p.log()
	for _, want := range []string{"were not published", "reads them again"} {
		if !strings.Contains(log, want) {
			t.Errorf("the exit does not say %q:\n%s", want, log)
		}
	}
	if n := count(t, context.Background(), js, prefix+"_PRED"); n != 0 {
		t.Fatalf("%d predictions in a stream the worker was not publishing to", n)
	}
	t.Logf("exited %s after SIGTERM: %v", took, err)
}
