package serve_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// shardViews are the live views of partition scope, by shard: a shard
// with a nil model is learned here and not loaded yet.
type shardViews map[shardid.ID]*learner.Model

func (v shardViews) Learns(shard shardid.ID) bool {
	_, ok := v[shard]
	return ok
}

func (v shardViews) View(shard shardid.ID) *learner.View {
	if m := v[shard]; m != nil {
		return m.View()
	}
	return nil
}

// TestShardedNamesTheShard: a server of partition scope answers a request
// from the model of the shard it names, live or from a stored generation
// of that shard's chain, which it is given as a shardid.ID; a request
// that names no shard is refused with 400, live or stored, one that names a shard
// this worker does not learn, or a name no shard has, with 404, and one
// that names a shard it learns whose model is not loaded yet with 503.
func TestShardedNamesTheShard(t *testing.T) {
	cfg := binaryConfig()
	a, b, opening := shardid.Kafka("clicks", 0), shardid.Kafka("clicks", 1), shardid.Kafka("clicks", 3)
	views := shardViews{a: trained(t, cfg, 100), b: trained(t, cfg, 300), opening: nil}
	raws := encodeJSON(t, probes(cfg))
	stored := trained(t, cfg, 200)
	var asked []shardid.ID
	load := func(_ context.Context, shard shardid.ID, gen uint64) (*learner.State, error) {
		asked = append(asked, shard)
		if shard != b || gen != 1 {
			return nil, fmt.Errorf("%w: shard %s, generation %d", serve.ErrNotFound, shard, gen)
		}
		return stored.State(), nil
	}
	hs := httpServer(t, serve.NewSharded(serve.Options{Model: modelName}, cfg, views, load, nil))
	query := func(shard string) string { return hs.URL + "?shard=" + url.QueryEscape(shard) }

	post(t, query(opening.String()), "", raws[0]).refused(t, http.StatusServiceUnavailable, "shard "+opening.String()+": its model is not loaded yet")
	for _, shard := range []shardid.ID{a, b} {
		m := views[shard]
		r := post(t, query(shard.String()), "", jsonArray(raws))
		r.ok(t, "application/json", m.Version())
		sameItems(t, jsonItems(t, r.body, array), newPredictor(m).wantAll(t, raws))
		r = post(t, hs.URL, "", jsonArray(raws), serve.ShardHeader, shard.String())
		r.ok(t, "application/json", m.Version())
	}
	r := post(t, query(b.String())+"&generation=1", "", jsonArray(raws))
	r.ok(t, "application/json", stored.Version())
	sameItems(t, jsonItems(t, r.body, array), newPredictor(stored).wantAll(t, raws))
	if len(asked) != 1 || asked[0] != b {
		t.Errorf("the generation was loaded for shards %v, want [%v]", asked, b)
	}

	post(t, hs.URL, "", raws[0]).refused(t, http.StatusBadRequest, "?shard=")
	post(t, hs.URL+"?generation=1", "", raws[0]).refused(t, http.StatusBadRequest, "?shard=")
	post(t, hs.URL, "", raws[0], serve.GenerationHeader, "1").refused(t, http.StatusBadRequest, "?shard=")
	for _, shard := range []string{"kafka:clicks/2", "kafka:clicks/01", "clicks"} {
		post(t, query(shard), "", raws[0]).refused(t, http.StatusNotFound, "shard "+shard)
	}
	post(t, query("kafka:clicks/01")+"&generation=1", "", raws[0]).refused(t, http.StatusNotFound, "generation 1")
	if len(asked) != 1 {
		t.Errorf("a name no shard has was loaded: %v", asked[1:])
	}
	post(t, query(a.String())+"&generation=1", "", raws[0]).refused(t, http.StatusNotFound, "generation 1")
}

// TestShardedGenerationNamesTheShard: a stored generation asked of a
// shard whose chain does not hold it is refused with 404 naming the
// shard, and one asked of a name no shard has with 404 saying why the
// name is none, as the live model's refusal does: "generation 1: not
// stored" alone left the client to guess which was wrong.
func TestShardedGenerationNamesTheShard(t *testing.T) {
	ctx := context.Background()
	cfg := binaryConfig()
	a, b := shardid.Kafka("clicks", 0), shardid.Kafka("clicks", 1)
	store := memStore(t)
	chain, err := store.PartitionChain(modelName, b)
	if err != nil {
		t.Fatal(err)
	}
	stored := trained(t, cfg, 200)
	if err := chain.Write(ctx, &snapshot.Snapshot{
		Model: modelName, Generation: 1, Created: time.Now(), Writer: "test",
		Positions: map[string]int64{b.String(): 200}, State: stored.State(),
	}); err != nil {
		t.Fatal(err)
	}
	load := func(ctx context.Context, shard shardid.ID, gen uint64) (*learner.State, error) {
		snap, err := store.LoadPartition(ctx, modelName, shard, gen)
		if errors.Is(err, snapshot.ErrNotFound) {
			return nil, fmt.Errorf("%w: %w", serve.ErrNotFound, err)
		}
		if err != nil {
			return nil, err
		}
		return snap.State, nil
	}
	views := shardViews{a: trained(t, cfg, 100)}
	hs := httpServer(t, serve.NewSharded(serve.Options{Model: modelName}, cfg, views, load, nil))
	raw := encodeJSON(t, probes(cfg))[0]
	query := func(shard string, gen int) string {
		return fmt.Sprintf("%s?shard=%s&generation=%d", hs.URL, url.QueryEscape(shard), gen)
	}

	post(t, query(b.String(), 1), "", raw).ok(t, "application/json", stored.Version())
	for _, shard := range []string{a.String(), "kafka:clicks/2"} {
		post(t, query(shard, 1), "", raw).refused(t, http.StatusNotFound, "shard "+shard, "generation 1", "not stored")
	}
	post(t, query(b.String(), 2), "", raw).refused(t, http.StatusNotFound, "shard "+b.String(), "generation 2", "not stored")
	post(t, query("kafka:clicks/01", 1), "", raw).refused(t, http.StatusNotFound, `"kafka:clicks/01"`, "leading zeros")
	post(t, query("clicks", 1), "", raw).refused(t, http.StatusNotFound, `"clicks"`, "kafka:<topic>/<partition>")
}
