package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
)

// TestChallengersLive: a worker learns two challengers beside its model;
// compare prints their verdicts from the store, inspect shows them, and
// replay of the log rebuilds the model, challengers included, to the
// bit.
func TestChallengersLive(t *testing.T) {
	t.Parallel()
	const n = 800
	srv := testbroker.NATS(t)
	testbroker.CreateStream(t, srv.JetStream(t), jetstream.StreamConfig{Name: "EXAMPLES", Subjects: []string{"examples"}})
	mustRun(t, "", "gen", "-examples", fmt.Sprint(n), "-seed", "5", "-to", "jetstream:examples", "-nats-url", srv.URL())
	storeDir := filepath.Join(t.TempDir(), "store")
	common := []string{"--model.name", "champ", "--nats.url", srv.URL(), "--source.kind", "jetstream", "--source.stream", "EXAMPLES",
		"--model.learner.hash_bits", "12", "--model.challengers", "perceptron:algorithm=perceptron;seed:hash_seed=7"}
	args := append([]string{"run", "--snapshot.url", "file://" + storeDir + "?create_dir=1", "--snapshot.interval", "100ms", "--http.addr", ""}, common...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	stopped := make(chan error, 1)
	go func() {
		stopped <- run(ctx, args, func(string) string { return "" }, strings.NewReader(""), io.Discard, &stderr)
	}()
	store := openStore(t, storeDir)
	waitRunning(t, time.Minute, "the log learned", stopped, &stderr, func() bool {
		newest, err := store.Latest(context.Background(), "champ", nil)
		return err == nil && newest.Positions["jetstream:EXAMPLES"] == n
	})
	cancel()
	if err := <-stopped; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	newest, err := store.Latest(context.Background(), "champ", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(newest.State.Challengers) != 2 {
		t.Fatalf("the generation holds %d challengers, want 2", len(newest.State.Challengers))
	}

	table := mustRun(t, "", append([]string{"compare", "--snapshot.url", "file://" + storeDir}, common...)...)
	for _, want := range []string{"champ", "perceptron", "seed", "log_loss_diff", "(model)"} {
		if !strings.Contains(table, want) {
			t.Errorf("compare printed no %q:\n%s", want, table)
		}
	}
	lines := mustRun(t, "", append([]string{"compare", "--json", "--snapshot.url", "file://" + storeDir}, common...)...)
	for i, l := range strings.Split(strings.TrimSpace(lines), "\n") {
		var line struct {
			Name      string
			Examples  int
			Low, High float64
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil || line.Name != newest.State.Challengers[i].Name ||
			line.Examples != int(newest.State.Labeled) || !(line.Low <= line.High) {
			t.Errorf("compare --json line %d: %s (%v)", i, l, err)
		}
	}
	inspected := mustRun(t, "", "inspect", "file://"+storeDir+"/champ")
	if !strings.Contains(inspected, `"challengers"`) || !strings.Contains(inspected, `"comparisons"`) {
		t.Errorf("inspect shows no challengers:\n%s", inspected)
	}

	out := mustRun(t, "", append([]string{"replay", "--from", "earliest"}, common...)...)
	var sum struct {
		StateSHA256 string `json:"state_sha256"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if want := newest.State.StateSHA256(); sum.StateSHA256 != want {
		t.Fatalf("replay: state_sha256 %s, the live model %s", sum.StateSHA256, want)
	}
}

// TestCompareNoGeneration: compare and promote on a store that holds no
// generation of the model (a new store, or a wrong model.name) say which
// store and which model, rather than only that there is no snapshot.
func TestCompareNoGeneration(t *testing.T) {
	store := "file://" + filepath.ToSlash(t.TempDir())
	common := []string{"--source.kind", "kafka", "--kafka.brokers", "127.0.0.1:9", "--source.topics", "examples",
		"--model.name", "clicks", "--model.challengers", "p:algorithm=perceptron", "--snapshot.url", store}
	for _, args := range [][]string{
		append([]string{"compare"}, common...),
		append([]string{"promote", "--challenger", "p"}, common...),
	} {
		_, _, err := runCmd(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), "snapshot.url "+store+" holds no generation of model clicks") {
			t.Errorf("%s on an empty store: %v, want an error naming the store and the model", args[0], err)
		}
	}
}
