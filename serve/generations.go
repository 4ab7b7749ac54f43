package serve

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// generations holds the stored generations requests name, in at most
// room places, so that their memory is bounded whatever the traffic:
//
//   - A place is taken by a generation being loaded or loaded. A load
//     keeps its place until the load function returns, even once no
//     request wants it, so that no load runs outside the count.
//   - One load per generation: requests for a generation being loaded
//     wait for that load, and a loaded one answers them all.
//   - A generation is in use while a request waits for it or answers
//     from it. Only a loaded generation not in use is evicted, the least
//     recently asked for first, and only to make room for another.
//   - A request for a generation not held, when every place is taken by
//     one in use or by a load, is refused at once with StatusUnavailable:
//     waiting for room would only queue requests behind slow loads.
//   - A load is cancelled, through its context, when the last request
//     waiting for it gives up (its timeout passed, its client left). It is
//     then no longer shared, its result is dropped, and its place is free
//     once the load function returns. A failed load is forgotten, as is a
//     generation not found, so that the next request tries again.
//   - A load is also given timeout, so that a store that does not answer
//     cannot keep a place while new requests keep joining the load.
type generations struct {
	load    loadNamed
	room    int
	timeout time.Duration
	decoder wire.DecoderOptions

	mu sync.Mutex
	// held are the generations loaded or being loaded that requests can
	// share, the most recently asked for first; dropped counts the loads
	// cancelled that have not returned yet. len(held)+dropped <= room.
	held    []*generation
	dropped int
}

// generation is a stored generation of a shard's model, once loaded.
type generation struct {
	shard string
	n     uint64
	// ready is closed when the load has returned: then view and decoders,
	// or err, are set.
	ready    chan struct{}
	view     *learner.View
	decoders *decoders
	err      error

	// Guarded by generations.mu.
	users   int  // requests waiting for it or answering from it
	loaded  bool // the load returned
	dropped bool // cancelled while loading, for want of users
	cancel  context.CancelFunc
}

// get returns generation n of shard, loaded, and holds it in use until
// the caller calls put: it is not evicted meanwhile. It waits for the
// generation's load at most until ctx is done.
func (c *generations) get(ctx context.Context, shard string, n uint64) (*generation, error) {
	c.mu.Lock()
	g := c.find(shard, n)
	if g == nil {
		if !c.makeRoom() {
			c.mu.Unlock()
			return nil, errorf(StatusUnavailable, "generation %d: serve.generations allows %d generations loaded at once, and each is being loaded or answering a request: try again", n, c.room)
		}
		var lctx context.Context
		g = &generation{shard: shard, n: n, ready: make(chan struct{})}
		lctx, g.cancel = context.WithTimeout(context.Background(), c.timeout)
		c.held = append([]*generation{g}, c.held...)
		go c.fill(lctx, g)
	}
	g.users++
	c.mu.Unlock()

	select {
	case <-g.ready:
	case <-ctx.Done():
		select {
		case <-g.ready:
		default:
			c.put(g)
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, fmt.Errorf("generation %d: the request was cancelled while it loaded: %w", n, ctx.Err())
			}
			return nil, errorf(StatusTimeout, "generation %d: still loading after serve.timeout, %s", n, c.timeout)
		}
	}
	if g.err != nil {
		c.put(g)
		return nil, g.err
	}
	return g, nil
}

// put gives back a generation get returned, or one whose load a request
// stopped waiting for: the last request to stop waiting for a load
// cancels it.
func (c *generations) put(g *generation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g.users--
	if g.users > 0 || g.loaded {
		return
	}
	g.cancel()
	g.dropped = true
	c.remove(g)
	c.dropped++
}

// find returns the held generation n of shard, the most recently asked
// for from now on, or nil. c.mu is held.
func (c *generations) find(shard string, n uint64) *generation {
	for i, g := range c.held {
		if g.n == n && g.shard == shard {
			copy(c.held[1:i+1], c.held[:i])
			c.held[0] = g
			return g
		}
	}
	return nil
}

// makeRoom reports whether there is a place for one more generation,
// evicting the least recently asked for that is loaded and not in use if
// that is what it takes. c.mu is held.
func (c *generations) makeRoom() bool {
	if len(c.held)+c.dropped < c.room {
		return true
	}
	for i := len(c.held) - 1; i >= 0; i-- {
		if g := c.held[i]; g.loaded && g.users == 0 {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return true
		}
	}
	return false
}

// remove drops g from the held generations. c.mu is held.
func (c *generations) remove(g *generation) {
	for i, h := range c.held {
		if h == g {
			c.held = append(c.held[:i], c.held[i+1:]...)
			return
		}
	}
}

// fill loads g and gives its place back if the load failed or was
// cancelled.
func (c *generations) fill(ctx context.Context, g *generation) {
	st, err := c.load(ctx, g.shard, g.n)
	var view *learner.View
	var decs *decoders
	if err == nil {
		var m *learner.Model
		if m, err = learner.Restore(st); err == nil {
			view, decs = m.View(), newDecoders(st.Config, c.decoder)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g.cancel()
	g.loaded = true
	switch {
	case g.dropped:
		// No request waits: the place was kept for the load alone.
		c.dropped--
	case err != nil:
		c.remove(g)
	}
	switch {
	case err == nil:
		g.view, g.decoders = view, decs
	case errors.As(err, new(*Error)):
		// The load said what is wrong, and with which status: a shard
		// that names no partition.
		g.err = err
	case errors.Is(err, ErrNotFound) && g.shard != "":
		g.err = errorf(StatusNotFound, "shard %s: generation %d: not stored", g.shard, g.n)
	case errors.Is(err, ErrNotFound):
		g.err = errorf(StatusNotFound, "generation %d: not stored", g.n)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		g.err = errorf(StatusTimeout, "generation %d: still loading after serve.timeout, %s", g.n, c.timeout)
	default:
		g.err = fmt.Errorf("generation %d: %w", g.n, err)
	}
	close(g.ready)
}
