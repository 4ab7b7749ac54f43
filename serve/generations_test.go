package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
)

// storedGenerations are n states of one model, each after more learning
// than the one before, as generations 1 to n of a store hold them, and
// for each what the model predicts for raws.
func storedGenerations(t testing.TB, cfg learner.Config, n int, raws [][]byte) ([]*learner.State, [][]item) {
	t.Helper()
	m := newModel(t, cfg)
	s := stream(cfg, 9)
	var states []*learner.State
	var wants [][]item
	for range n {
		v := m.Version()
		for m.Version() == v {
			learn(t, m, s, 20)
		}
		states = append(states, m.State())
		wants = append(wants, newPredictor(m).wantAll(t, raws))
	}
	return states, wants
}

// serveDirect has srv answer a request for generation gen ("" for the
// live model) with body, in the caller's goroutine and without a
// network, as a test in a synctest bubble needs. ctx is the request's.
func serveDirect(ctx context.Context, srv *serve.Server, gen string, body []byte) reply {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, serve.PredictPath+"?generation="+gen, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b, resp.Close}
}

// answered returns the reply a request sent on replies, failing t if
// there is none yet.
func answered(t testing.TB, replies <-chan reply) reply {
	t.Helper()
	select {
	case r := <-replies:
		return r
	default:
		t.Fatal("the request is not answered")
		return reply{}
	}
}

// TestGenerationsBounded has 64 clients cycle over 10 stored generations,
// with room for 4, while loads take time and some clients give up before
// their load is done. The loads running at once never exceed 4 (a load
// keeps its place until it returns, and no other is started for it);
// every request is answered from the generation it names, or refused with
// 503 and Retry-After when the room is all in use, or with 408; and once
// the clients are done, every generation is answered again: no place is
// left taken.
func TestGenerationsBounded(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))[:1]
	const (
		room    = 4
		stored  = 10
		clients = 64
		rounds  = 30
	)
	states, wants := storedGenerations(t, cfg, stored, raws)
	live := trained(t, cfg, 100)

	synctest.Test(t, func(t *testing.T) {
		var loading, most atomic.Int64
		load := func(ctx context.Context, gen uint64) (*learner.State, error) {
			n := loading.Add(1)
			defer loading.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			// A store that takes longer for later generations.
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(gen) * time.Millisecond):
			}
			return states[gen-1], nil
		}
		srv := serve.New(serve.Options{Model: modelName, Generations: room, Timeout: time.Second}, cfg, liveOf(live), load, nil)

		type result struct {
			gen int
			r   reply
		}
		results := make([][]result, clients)
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				for i := range rounds {
					gen := (c+i)%stored + 1
					ctx, cancel := context.Background(), func() {}
					if (c+i)%5 == 0 {
						// A client that gives up before most loads are done.
						ctx, cancel = context.WithTimeout(ctx, 3*time.Millisecond)
					}
					r := serveDirect(ctx, srv, strconv.Itoa(gen), raws[0])
					cancel()
					results[c] = append(results[c], result{gen, r})
					// Jitter, so that the clients' requests interleave.
					time.Sleep(time.Duration((c*7+i)%4) * time.Millisecond)
				}
			})
		}
		wg.Wait()
		synctest.Wait()

		if got := most.Load(); got > room {
			t.Errorf("%d generations were being loaded at once, more than serve.generations, %d", got, room)
		}
		if got := loading.Load(); got != 0 {
			t.Errorf("%d loads still running after every request was answered", got)
		}
		counts := map[int]int{}
		for _, rs := range results {
			for _, res := range rs {
				r := res.r
				counts[r.status]++
				switch r.status {
				case http.StatusOK:
					r.ok(t, "application/json", wants[res.gen-1][0].version)
					sameItems(t, jsonItems(t, r.body, one), wants[res.gen-1])
				case http.StatusServiceUnavailable:
					r.refused(t, r.status, fmt.Sprintf("generation %d", res.gen), "serve.generations allows 4 generations")
					if got := r.header.Get("Retry-After"); got != "1" {
						t.Errorf("Retry-After %q, want 1", got)
					}
				case http.StatusRequestTimeout:
					r.refused(t, r.status, fmt.Sprintf("generation %d", res.gen), "still loading")
				default:
					t.Fatalf("generation %d: status %d (%s)", res.gen, r.status, r.body)
				}
			}
		}
		t.Logf("replies by status: %v", counts)
		if counts[http.StatusOK] == 0 || counts[http.StatusServiceUnavailable] == 0 {
			t.Errorf("replies by status %v: want some answered and some refused for room", counts)
		}
		for gen := 1; gen <= stored; gen++ {
			r := serveDirect(context.Background(), srv, strconv.Itoa(gen), raws[0])
			r.ok(t, "application/json", wants[gen-1][0].version)
		}
	})
}

// gatedLoad is a LoadGeneration of states whose loads of the generations
// in gates wait until their gate is closed or their context is done. It
// counts the loads of each generation, sends the generation of each load
// that starts waiting at a gate on started, and the error of each context
// that ended a load on cancelled.
type gatedLoad struct {
	states    []*learner.State
	gates     map[uint64]chan struct{}
	started   chan uint64
	cancelled chan error

	mu    sync.Mutex
	loads map[uint64]int
}

func newGatedLoad(states []*learner.State, gated ...uint64) *gatedLoad {
	g := &gatedLoad{states: states, gates: map[uint64]chan struct{}{}, started: make(chan uint64, 100), cancelled: make(chan error, 100), loads: map[uint64]int{}}
	for _, gen := range gated {
		g.gates[gen] = make(chan struct{})
	}
	return g
}

func (g *gatedLoad) load(ctx context.Context, gen uint64) (*learner.State, error) {
	g.mu.Lock()
	g.loads[gen]++
	g.mu.Unlock()
	if gate := g.gates[gen]; gate != nil {
		g.started <- gen
		select {
		case <-gate:
		case <-ctx.Done():
			g.cancelled <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	return g.states[gen-1], nil
}

func (g *gatedLoad) count(gen uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.loads[gen]
}

// TestGenerationsFull keeps two generations and has both being loaded: a
// request for a third is refused at once with 503 and Retry-After; once
// one of the two is loaded and answered, it makes room for the third.
func TestGenerationsFull(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))[:1]
	states, wants := storedGenerations(t, cfg, 3, raws)
	live := trained(t, cfg, 100)
	synctest.Test(t, func(t *testing.T) {
		gl := newGatedLoad(states, 1, 2)
		srv := serve.New(serve.Options{Model: modelName, Generations: 2, Timeout: time.Minute}, cfg, liveOf(live), gl.load, nil)
		first, second := make(chan reply, 1), make(chan reply, 1)
		go func() { first <- serveDirect(context.Background(), srv, "1", raws[0]) }()
		go func() { second <- serveDirect(context.Background(), srv, "2", raws[0]) }()
		synctest.Wait()

		r := serveDirect(context.Background(), srv, "3", raws[0])
		r.refused(t, http.StatusServiceUnavailable, "generation 3", "serve.generations allows 2 generations loaded at once", "try again")
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Errorf("Retry-After %q, want 1", got)
		}
		if gl.count(3) != 0 {
			t.Error("generation 3 was loaded without room for it")
		}

		close(gl.gates[1])
		synctest.Wait()
		answered(t, first).ok(t, "application/json", wants[0][0].version)
		// Generation 1 is loaded and no request uses it: it makes room.
		serveDirect(context.Background(), srv, "3", raws[0]).ok(t, "application/json", wants[2][0].version)
		serveDirect(context.Background(), srv, "1", raws[0]).ok(t, "application/json", wants[0][0].version)
		if got := gl.count(1); got != 2 {
			t.Errorf("generation 1 loaded %d times, want 2: once, then again after it made room for 3", got)
		}

		close(gl.gates[2])
		synctest.Wait()
		answered(t, second).ok(t, "application/json", wants[1][0].version)
	})
}

// TestGenerationLoadCancelled has the requests waiting for a load go
// away: the load is cancelled once the last of them has gone, not
// before, and its place is then free for another generation.
func TestGenerationLoadCancelled(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))[:1]
	states, wants := storedGenerations(t, cfg, 2, raws)
	live := trained(t, cfg, 100)
	t.Run("its only request", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			gl := newGatedLoad(states, 1)
			srv := serve.New(serve.Options{Model: modelName, Generations: 1, Timeout: time.Minute}, cfg, liveOf(live), gl.load, nil)
			ctx, leave := context.WithCancel(context.Background())
			left := make(chan reply, 1)
			go func() { left <- serveDirect(ctx, srv, "1", raws[0]) }()
			synctest.Wait()
			leave()
			if err := <-gl.cancelled; err != context.Canceled {
				t.Errorf("the load ended with %v, want %v", err, context.Canceled)
			}
			if r := <-left; r.status == http.StatusRequestTimeout {
				t.Errorf("a request whose client left is answered %d (%s), as if serve.timeout had passed", r.status, r.body)
			}
			synctest.Wait()
			serveDirect(context.Background(), srv, "2", raws[0]).ok(t, "application/json", wants[1][0].version)
		})
	})
	t.Run("one of two", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			gl := newGatedLoad(states, 1)
			srv := serve.New(serve.Options{Model: modelName, Generations: 1, Timeout: time.Minute}, cfg, liveOf(live), gl.load, nil)
			ctx, leave := context.WithCancel(context.Background())
			go serveDirect(ctx, srv, "1", raws[0])
			stays := make(chan reply, 1)
			go func() { stays <- serveDirect(context.Background(), srv, "1", raws[0]) }()
			synctest.Wait()
			leave()
			synctest.Wait()
			select {
			case err := <-gl.cancelled:
				t.Fatalf("the load ended with %v while a request waits for it", err)
			default:
			}
			close(gl.gates[1])
			synctest.Wait()
			answered(t, stays).ok(t, "application/json", wants[0][0].version)
			if got := gl.count(1); got != 1 {
				t.Errorf("generation 1 loaded %d times, want 1", got)
			}
		})
	})
}

// TestGenerationLoadKeepsItsPlace has a load that goes on although its
// request timed out (a store that does not heed its context): until it
// returns, its place is taken and another generation is refused with 503;
// then the other is answered, and the generation whose request timed out
// is loaded anew, its late result having been dropped.
func TestGenerationLoadKeepsItsPlace(t *testing.T) {
	cfg := binaryConfig()
	raws := encodeJSON(t, probes(cfg))[:1]
	states, wants := storedGenerations(t, cfg, 2, raws)
	live := trained(t, cfg, 100)
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var mu sync.Mutex
		loads := map[uint64]int{}
		load := func(ctx context.Context, gen uint64) (*learner.State, error) {
			mu.Lock()
			loads[gen]++
			first := loads[gen] == 1
			mu.Unlock()
			if gen == 1 && first {
				<-gate
			}
			return states[gen-1], nil
		}
		const timeout = time.Second
		srv := serve.New(serve.Options{Model: modelName, Generations: 1, Timeout: timeout}, cfg, liveOf(live), load, nil)
		start := time.Now()
		serveDirect(context.Background(), srv, "1", raws[0]).refused(t, http.StatusRequestTimeout, "generation 1", "still loading")
		if took := time.Since(start); took != timeout {
			t.Errorf("refused after %v, want serve.timeout, %v", took, timeout)
		}
		serveDirect(context.Background(), srv, "2", raws[0]).refused(t, http.StatusServiceUnavailable, "generation 2", "serve.generations allows 1 generations")

		close(gate)
		synctest.Wait()
		serveDirect(context.Background(), srv, "2", raws[0]).ok(t, "application/json", wants[1][0].version)
		serveDirect(context.Background(), srv, "1", raws[0]).ok(t, "application/json", wants[0][0].version)
		mu.Lock()
		defer mu.Unlock()
		if loads[1] != 2 {
			t.Errorf("generation 1 loaded %d times, want 2", loads[1])
		}
	})
}
