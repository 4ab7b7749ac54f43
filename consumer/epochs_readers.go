package consumer

import (
	"context"
	"slices"
	"sync"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

// readers keeps each owned shard's reader open from one epoch to the next
// (docs/scale-out.md, section 3.8): a range that completes parks its
// reader, with the messages it read beyond the range's end, and the next
// range of the shard, which begins where that one ended, takes it back
// instead of opening another. A parked reader goes on reading ahead, up
// to the adapter's buffer, while the epoch waits at its barrier.
//
// Which reader a range reads changes nothing it learns: a range is
// delivered the shard's messages from its start to its end in order,
// whether they come from a new reader, a parked one or the messages one
// read beyond the previous end.
type readers struct {
	shards Shards

	mu     sync.Mutex
	parked map[shardid.ID]*parkedReader
	closed bool
}

// parkedReader is a shard's reader between two ranges: it has delivered
// every message up to end (a Resume), and carried holds, copied, those it
// read beyond.
type parkedReader struct {
	src     Source
	end     int64
	carried []Message
}

// open returns a reader of shard from position from whose Fetch stops
// nothing: the range around it bounds it, and done parks it.
func (rs *readers) open(ctx context.Context, shard shardid.ID, from int64) (*rangeReader, error) {
	rs.mu.Lock()
	p := rs.parked[shard]
	if p != nil && p.end == from {
		delete(rs.parked, shard)
		rs.mu.Unlock()
		return &rangeReader{Source: p.src, shard: shard, carried: p.carried}, nil
	}
	rs.mu.Unlock()
	src, err := rs.shards.Open(ctx, shard, from)
	if err != nil {
		return nil, err
	}
	return &rangeReader{Source: src, shard: shard}, nil
}

// park keeps r, which has delivered every message up to end, for the
// shard's next range. Of two readers of one shard it keeps the one
// further on (a range learned again for a damaged result reads an older
// one) and closes the other.
func (rs *readers) park(r *rangeReader, end int64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		r.Source.Close()
		return
	}
	if rs.parked == nil {
		rs.parked = map[shardid.ID]*parkedReader{}
	}
	if p := rs.parked[r.shard]; p != nil {
		if p.end > end {
			r.Source.Close()
			return
		}
		p.src.Close()
	}
	rs.parked[r.shard] = &parkedReader{src: r.Source, end: end, carried: r.carried}
}

// drop closes the parked readers of the shards keep rejects.
func (rs *readers) drop(keep func(shard shardid.ID) bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for shard, p := range rs.parked {
		if !keep(shard) {
			p.src.Close()
			delete(rs.parked, shard)
		}
	}
}

// close closes every parked reader, and those parked later. The readers
// are closed together, and close waits for them until ctx is done: a
// reader's Close may wait on its broker (a JetStream source deletes its
// consumer, up to 2 s), and one after the other they would hold the
// shutdown past shutdown.timeout on a broker that does not answer.
func (rs *readers) close(ctx context.Context) {
	rs.mu.Lock()
	rs.closed = true
	var wg sync.WaitGroup
	for shard, p := range rs.parked {
		wg.Go(func() { p.src.Close() })
		delete(rs.parked, shard)
	}
	rs.mu.Unlock()
	closed := make(chan struct{})
	go func() {
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
	}
}

// rangeReader is a shard's reader for one range. Fetch returns the
// messages carried over from the previous range first, then the
// Source's; it keeps a copy of those beyond the range's end (which the
// range drops) for the next range.
type rangeReader struct {
	Source
	shard shardid.ID
	// end places a message against the range's end (Range.End).
	end     func(m *Message) (in, last bool)
	carried []Message
}

// Fetch returns the next messages.
func (r *rangeReader) Fetch(ctx context.Context, max int) ([]Message, error) {
	var msgs []Message
	if len(r.carried) > 0 {
		n := min(max, len(r.carried))
		msgs, r.carried = r.carried[:n:n], r.carried[n:]
	} else {
		var err error
		if msgs, err = r.Source.Fetch(ctx, max); err != nil {
			return nil, err
		}
	}
	// Messages beyond the end come after every message within it: the
	// first one starts what the next range reads. The end is given each
	// message in place: a copy's address would escape, one allocation a
	// message.
	i := -1
	for n := range msgs {
		if in, _ := r.end(&msgs[n]); !in {
			i = n
			break
		}
	}
	if i >= 0 {
		beyond := make([]Message, 0, len(msgs)-i+len(r.carried))
		for _, m := range msgs[i:] {
			m.Value = slices.Clone(m.Value)
			beyond = append(beyond, m)
		}
		r.carried = append(beyond, r.carried...)
	}
	return msgs, nil
}
