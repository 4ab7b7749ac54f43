package consumer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

// TestSetShardLag: each shard learned has its end less its position, a
// shard the ends leave out (it holds nothing) has none left, positions
// shared by several partitions (spread) are divided by them and rounded
// up, so that a lag is 0 only when nothing is left; and the series of a
// shard no longer learned is removed.
func TestSetShardLag(t *testing.T) {
	m := NewMetrics(nil)
	a, b, c := shardid.Kafka("ex", 0), shardid.Kafka("ex", 1), shardid.Kafka("ex", 2)
	lag := func(s shardid.ID) float64 { return testutil.ToFloat64(m.Lag.WithLabelValues(s.String())) }

	reported := setShardLag(m, map[shardid.ID]int64{a: 100, b: 50}, map[shardid.ID]int64{a: 40, b: 50, c: 7}, 1, nil)
	if lag(a) != 60 || lag(b) != 0 || lag(c) != 0 {
		t.Errorf("lags %v %v %v, want 60 0 0 (c holds nothing the ends know of)", lag(a), lag(b), lag(c))
	}
	if len(reported) != 3 {
		t.Errorf("reported %v, want the 3 shards learned", reported)
	}

	// A partitioned stream: sequences 41..100 of the stream, over 4
	// partitions, are about 15 of this one's; one sequence is still 1.
	reported = setShardLag(m, map[shardid.ID]int64{a: 100, b: 51}, map[shardid.ID]int64{a: 40, b: 50}, 4, reported)
	if lag(a) != 15 || lag(b) != 1 {
		t.Errorf("lags %v %v with spread 4, want 15 and 1", lag(a), lag(b))
	}
	if n := testutil.CollectAndCount(m.Lag); n != 2 {
		t.Errorf("%d lag series, want 2: the shard no longer learned keeps none", n)
	}
	if reported[c.String()] {
		t.Errorf("reported %v still holds %s", reported, c)
	}
}
