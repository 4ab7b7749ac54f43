package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// groupOptions are short timings, so that rebalances take a fraction of a
// second, except for the session timeout: no test here lets a member die
// without leaving, and a short one would let a busy machine, late with a
// heartbeat, end a member's generation in the middle of a test.
var groupOptions = kafka.GroupOptions{
	HeartbeatInterval:      100 * time.Millisecond,
	SessionTimeout:         time.Minute,
	RebalanceTimeout:       30 * time.Second, // half the session, as SessionOptions says why
	PartitionWatchInterval: 200 * time.Millisecond,
	JoinGroupBackoff:       200 * time.Millisecond,
}

// settleWithin bounds every wait for an assignment in these tests: long,
// for a busy machine; a broken group never gets there.
const settleWithin = 2 * time.Minute

// groupCluster is a cluster with a topic "t" of partitions partitions.
func groupCluster(t *testing.T, partitions int) *testbroker.KafkaCluster {
	t.Helper()
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "t", partitions)
	return c
}

// join makes a member of group on c with groupOptions, closed when t
// ends.
func join(t *testing.T, c *testbroker.KafkaCluster, group, name string, topics ...string) *kafka.Group {
	t.Helper()
	return joinWith(t, c, groupOptions, group, name, topics...)
}

// joinWith is join with opts.
func joinWith(t *testing.T, c *testbroker.KafkaCluster, opts kafka.GroupOptions, group, name string, topics ...string) *kafka.Group {
	t.Helper()
	g, err := kafka.NewGroupWith(config(c), group, topics, opts, zaptest.NewLogger(t).With(zap.String("name", name)))
	if err != nil {
		t.Fatalf("NewGroupWith: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// shardsOf is "kafka:<topic>/<partition>" for the partitions ids.
func shardsOf(topic string, ids ...int) []shardid.ID {
	out := make([]shardid.ID, len(ids))
	for i, id := range ids {
		out[i] = shardid.Kafka(topic, id)
	}
	return out
}

// upTo is 0, 1, …, n-1.
func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// settle polls the members' assignments until ok accepts them, and returns
// them with the time that took. It fails the test, showing the last
// assignments, if that takes longer than settleWithin.
func settle(t *testing.T, members []*kafka.Group, ok func(owned [][]shardid.ID) bool) ([][]shardid.ID, time.Duration) {
	t.Helper()
	start := time.Now()
	var owned [][]shardid.ID
	defer func() {
		if t.Failed() {
			t.Logf("the last assignments: %q", owned)
		}
	}()
	wait.For(t, settleWithin, 10*time.Millisecond, "the assignments", func() bool {
		owned = owned[:0]
		for _, m := range members {
			owned = append(owned, m.Owned())
		}
		return ok(owned)
	})
	return owned, time.Since(start)
}

// partitioned accepts assignments that give each member per shards, no
// shard to two members, and every one of all to someone.
func partitioned(all []shardid.ID, per int) func([][]shardid.ID) bool {
	return func(owned [][]shardid.ID) bool {
		seen := map[shardid.ID]bool{}
		for _, o := range owned {
			if len(o) != per {
				return false
			}
			for _, s := range o {
				if seen[s] || !slices.Contains(all, s) {
					return false
				}
				seen[s] = true
			}
		}
		return len(seen) == len(all)
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// committedOffsets is the group's committed offsets of topic's partitions
// 0 to n-1, without the partitions that have none.
func committedOffsets(t *testing.T, cl *kgo.Client, group, topic string, n int) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range n {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("offset fetch: %v", err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("offset fetch of %s/%d: %v", topic, p.Partition, err)
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out
}

func TestGroupConfig(t *testing.T) {
	cfg := kafka.Config{Brokers: []string{"localhost:9092"}}
	for _, tc := range []struct {
		name   string
		cfg    kafka.Config
		group  string
		topics []string
		opts   kafka.GroupOptions
		want   string
	}{
		{"no brokers", kafka.Config{}, "g", []string{"t"}, kafka.GroupOptions{}, "no brokers"},
		{"no group id", cfg, "", []string{"t"}, kafka.GroupOptions{}, "no group id"},
		{"no topics", cfg, "g", []string{""}, kafka.GroupOptions{}, "no topics"},
		{"negative session timeout", cfg, "g", []string{"t"}, kafka.GroupOptions{SessionTimeout: -time.Second}, "SessionTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := kafka.NewGroupWith(tc.cfg, tc.group, tc.topics, tc.opts, zaptest.NewLogger(t))
			if err == nil {
				g.Close()
				t.Fatal("NewGroupWith succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewGroupWith: %v; want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestGroupOneMemberOwnsAll(t *testing.T) {
	c := groupCluster(t, 6)
	// A second topic with more than ten partitions: shard order sorts
	// partitions numerically, and topics bytewise.
	c.CreateTopic(t, "s", 12)
	g := join(t, c, "g", "a", "t", "s")
	changed := g.Changed()
	if got := g.Owned(); got == nil || len(got) != 0 {
		t.Fatalf("Owned before the first generation = %#v, want empty", got)
	}
	if g.Settled() {
		t.Fatal("Settled before the first generation")
	}
	want := append(shardsOf("s", upTo(12)...), shardsOf("t", upTo(6)...)...)
	_, took := settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], want) })
	t.Logf("one member owned every partition after %v", took)
	if !closed(changed) {
		t.Fatal("Changed not closed when the first generation began")
	}
	if !g.Settled() {
		t.Fatal("not Settled in a generation")
	}
	if !g.Alone() {
		t.Fatal("the only member of the group is not Alone")
	}
	// Owned is a copy.
	g.Owned()[0] = shardid.Kafka("changed", 0)
	if got := g.Owned(); !slices.Equal(got, want) {
		t.Fatalf("Owned after changing a returned slice = %q, want %q", got, want)
	}
}

// The range assignor splits each topic by itself: over two topics of one
// partition each, the first of two members owns both and the second
// none. The first owns every partition and is still not Alone, since the
// second follows the log and waits for its results.
func TestGroupNotAloneOverTopicsOfOnePartition(t *testing.T) {
	c := testbroker.Kafka(t)
	c.CreateTopic(t, "a", 1)
	c.CreateTopic(t, "b", 1)
	members := []*kafka.Group{join(t, c, "g", "m0", "a", "b"), join(t, c, "g", "m1", "a", "b")}
	all := []shardid.ID{shardid.Kafka("a", 0), shardid.Kafka("b", 0)}
	// Both settled: a generation with the member that owns nothing
	// includes the other, which had to join it.
	wait.For(t, settleWithin, 10*time.Millisecond, "both members in one generation", func() bool {
		a, b := members[0].Owned(), members[1].Owned()
		return members[0].Settled() && members[1].Settled() &&
			((slices.Equal(a, all) && len(b) == 0) || (slices.Equal(b, all) && len(a) == 0))
	})
	for i, m := range members {
		if m.Alone() {
			t.Fatalf("member %d of two is Alone, owning %q", i, m.Owned())
		}
	}
}

func TestGroupSplitsPartitions(t *testing.T) {
	c := groupCluster(t, 6)
	members := []*kafka.Group{join(t, c, "g", "a", "t"), join(t, c, "g", "b", "t"), join(t, c, "g", "c", "t")}
	all := shardsOf("t", upTo(6)...)
	owned, took := settle(t, members, partitioned(all, 2))
	t.Logf("three members split six partitions after %v: %q", took, owned)
	for i, m := range members {
		if m.Alone() {
			t.Fatalf("member %d of three is Alone", i)
		}
	}
	// The assignment is stable: no member rejoins while nothing changes,
	// over ten heartbeats of each.
	changed := make([]<-chan struct{}, len(members))
	for i, m := range members {
		changed[i] = m.Changed()
	}
	var mu sync.Mutex
	heartbeats := map[string]int{}
	joins := 0
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		heartbeats[req.(*kmsg.HeartbeatRequest).MemberID]++
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		joins++
		return nil, nil, false
	})
	wait.For(t, settleWithin, 10*time.Millisecond, "ten heartbeats of each member", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, beats := range heartbeats {
			if beats >= 10 {
				n++
			}
		}
		return n == len(members) || joins > 0
	})
	mu.Lock()
	if joins > 0 {
		t.Errorf("%d joins with no member joining or leaving", joins)
	}
	mu.Unlock()
	for i, m := range members {
		if closed(changed[i]) || !slices.Equal(m.Owned(), owned[i]) {
			t.Fatalf("member %d's assignment changed from %q to %q with no member joining or leaving", i, owned[i], m.Owned())
		}
	}
}

// TestGroupLeaveByBoundsClose: a worker's shutdown has shutdown.timeout
// from the signal on, leaving the group included. A coordinator that takes
// the LeaveGroup request and never answers holds Close until LeaveBy's
// time, not for the coordinator timeout (5 s) beyond it; once that time
// is up, Close does not leave at all.
func TestGroupLeaveByBoundsClose(t *testing.T) {
	c := groupCluster(t, 2)
	release := make(chan struct{})
	defer close(release)
	var hang atomic.Bool
	hang.Store(true)
	var mu sync.Mutex
	leaves := map[string]int{} // LeaveGroup requests, by group
	c.ControlKey(int16(kmsg.LeaveGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		leaves[req.(*kmsg.LeaveGroupRequest).Group]++
		mu.Unlock()
		if hang.Load() {
			c.SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	defer hang.Store(false)
	for i, left := range []time.Duration{200 * time.Millisecond, -time.Second} {
		group := fmt.Sprintf("g%d", i)
		g := join(t, c, group, "a", "t")
		settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return len(owned[0]) == 2 })
		g.LeaveBy(time.Now().Add(left))
		start := time.Now()
		g.Close()
		took := time.Since(start)
		if left <= 0 {
			// Close waits for the answer to a LeaveGroup it sends, which
			// the coordinator takes and holds: one sent is counted.
			mu.Lock()
			n := leaves[group]
			mu.Unlock()
			if n != 0 {
				t.Fatalf("with the time to leave the group up, Close sent %d LeaveGroup requests (it took %v)", n, took)
			}
			continue
		}
		// Without the bound Close waits the coordinator timeout for an
		// answer that never comes: that, not the 200 ms, is what a busy
		// machine's Close stays far below.
		if took >= kafka.CoordinatorTimeout {
			t.Fatalf("with %v left to leave the group, Close took %v, the coordinator timeout", left, took)
		}
	}
}

// TestGroupCloseHandsOver: a member that leaves (Close), dynamic or
// static, hands its partitions over at once.
func TestGroupCloseHandsOver(t *testing.T) {
	for _, static := range []bool{false, true} {
		t.Run(map[bool]string{false: "dynamic", true: "static"}[static], func(t *testing.T) {
			c := groupCluster(t, 6)
			var members []*kafka.Group
			for _, name := range []string{"a", "b", "c"} {
				opts := groupOptions
				if static {
					opts.InstanceID = "worker-" + name
				}
				members = append(members, joinWith(t, c, opts, "g", name, "t"))
			}
			all := shardsOf("t", upTo(6)...)
			before, _ := settle(t, members, partitioned(all, 2))

			leaving := members[0]
			changed := leaving.Changed()
			start := time.Now()
			if err := leaving.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			closing := time.Since(start)
			if got := leaving.Owned(); len(got) != 0 || leaving.Settled() {
				t.Fatalf("Owned after Close = %q, Settled %v: want empty, and no assignment", got, leaving.Settled())
			}
			if !closed(changed) {
				t.Fatal("Changed not closed by Close")
			}
			if closed(leaving.Changed()) {
				t.Fatal("Changed after Close returned a closed channel")
			}
			after, took := settle(t, members[1:], partitioned(all, 3))
			t.Logf("Close took %v; the other two owned %q, %q (before: %q) %v after Close began",
				closing, after[0], after[1], before, closing+took)
			// A member that stopped without leaving would hand over once its
			// session timed out.
			if limit := groupOptions.SessionTimeout / 2; closing+took > limit {
				t.Fatalf("hand-over took %v, want at most %v", closing+took, limit)
			}
			if err := leaving.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

func TestGroupCommit(t *testing.T) {
	c := groupCluster(t, 6)
	cl := c.Client(t)
	a, b := join(t, c, "g", "a", "t"), join(t, c, "g", "b", "t")
	all := shardsOf("t", upTo(6)...)
	owned, _ := settle(t, []*kafka.Group{a, b}, partitioned(all, 3))
	ctx := context.Background()

	// Positions of every partition, plus shards of other sources.
	positions := map[string]int64{"kafka:other/0": 7, "jetstream:s#0": 7}
	for p, s := range all {
		positions[s.String()] = int64(100 + p)
	}
	if err := a.Commit(ctx, positions); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	want := map[int32]int64{}
	for _, s := range owned[0] {
		k, _ := s.Partition()
		p := int32(k)
		want[p] = int64(100 + p)
	}
	if got := committedOffsets(t, cl, "g", "t", 6); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v after a member owning %q committed every partition; want %v", got, owned[0], want)
	}
	// The other member commits its own.
	if err := b.Commit(ctx, positions); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	for _, s := range owned[1] {
		k, _ := s.Partition()
		p := int32(k)
		want[p] = int64(100 + p)
	}
	if got := committedOffsets(t, cl, "g", "t", 6); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v after both members committed, want %v", got, want)
	}
	// Nothing owned, nothing sent.
	if err := a.Commit(ctx, map[string]int64{owned[1][0].String(): 1, "kafka:other/0": 1}); err != nil {
		t.Fatalf("Commit of shards not owned: %v", err)
	}
	if got := committedOffsets(t, cl, "g", "t", 6); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed %v after a commit of shards not owned, want %v unchanged", got, want)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := a.Commit(cancelled, positions); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with a cancelled context = %v, want context.Canceled", err)
	}

	a.Close()
	err := a.Commit(ctx, positions)
	if !errors.Is(err, kafka.ErrGenerationEnded) {
		t.Fatalf("Commit after Close = %v, want ErrGenerationEnded", err)
	}
	t.Logf("Commit after Close: %v", err)
}

func TestGroupPartitionsAdded(t *testing.T) {
	c := groupCluster(t, 2)
	g := join(t, c, "g", "a", "t")
	settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], shardsOf("t", 0, 1)) })
	changed := g.Changed()

	cl := c.Client(t)
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "t", 4
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create partitions: %v", err)
	}

	_, took := settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], shardsOf("t", upTo(4)...)) })
	t.Logf("the member owned the new partitions %v after they were created", took)
	if !closed(changed) {
		t.Fatal("Changed not closed when the partitions changed")
	}
}

func TestGroupCoordinatorOutage(t *testing.T) {
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond), kfake.DataDir(t.TempDir()))
	c.CreateTopic(t, "t", 6)
	// The restarted broker remembers the member of the old generation and
	// waits for its session to time out before the next one: a short one.
	opts := groupOptions
	opts.SessionTimeout, opts.RebalanceTimeout = time.Second, 500*time.Millisecond
	log, logs := observed(t, zapcore.DebugLevel)
	g, err := kafka.NewGroupWith(config(c), "g", []string{"t"}, opts, log)
	if err != nil {
		t.Fatalf("NewGroupWith: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	all := shardsOf("t", upTo(6)...)
	settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], all) })
	changed := g.Changed()

	// Without a coordinator the generation ends at the next heartbeat,
	// and none begins while the broker is down.
	c.Shutdown()
	_, took := settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return len(owned[0]) == 0 })
	t.Logf("the member owned nothing %v after the broker went down", took)
	if !closed(changed) {
		t.Fatal("Changed not closed when the generation ended")
	}
	// Each failed join is one Next that returned an error.
	failed := func() int { return logs.FilterMessage("kafka consumer group: no generation").Len() }
	before := failed()
	wait.For(t, settleWithin, 10*time.Millisecond, "three failed joins", func() bool { return failed() >= before+3 })
	if got := g.Owned(); len(got) != 0 {
		t.Fatalf("Owned while the broker is down = %q, want empty", got)
	}
	if err := g.Commit(context.Background(), map[string]int64{all[0].String(): 1}); !errors.Is(err, kafka.ErrGenerationEnded) {
		t.Fatalf("Commit between generations = %v, want ErrGenerationEnded", err)
	}

	c.Start()
	_, took = settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], all) })
	t.Logf("the member owned every partition again %v after the broker came back", took)
}

// TestGroupFailureInAGroupOfAnotherProtocol: a member whose group holds
// another application's consumers, which consume by another protocol,
// takes part in no generation and says why (Failure), naming the group
// and source.group, where it owned nothing without a word; once they
// leave, it joins, and Failure is nil again.
func TestGroupFailureInAGroupOfAnotherProtocol(t *testing.T) {
	c := groupCluster(t, 2)
	other := c.Client(t, kgo.ConsumerGroup("shared"), kgo.ConsumeTopics("t"))
	wait.For(t, settleWithin, 10*time.Millisecond, "the other application's consumer in the group", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		other.PollFetches(ctx)
		_, generation := other.GroupMetadata()
		return generation >= 0
	})

	g := join(t, c, "shared", "worker", "t")
	wait.For(t, settleWithin, 10*time.Millisecond, "the member's failure to join", func() bool { return g.Failure() != nil })
	err := g.Failure()
	for _, w := range []string{"consumer group shared", "another protocol", "source.group"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Failure in a group of another protocol: %v, want it to say %q", err, w)
		}
	}
	if !errors.Is(err, kerr.InconsistentGroupProtocol) && !strings.Contains(err.Error(), "Inconsistent Group Protocol") {
		t.Errorf("Failure in a group of another protocol: %v, want the coordinator's error", err)
	}
	if g.Settled() || len(g.Owned()) != 0 {
		t.Fatalf("a member of a group of another protocol is settled (%v) owning %q", g.Settled(), g.Owned())
	}

	other.LeaveGroup()
	settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return len(owned[0]) == 2 })
	if err := g.Failure(); err != nil {
		t.Fatalf("Failure of a member in a generation: %v", err)
	}
}

// TestGroupFailureNotReportedForOneRefusal: a heartbeat the coordinator
// refuses once (NOT_COORDINATOR, as while brokers restart) ends the
// generation and the member joins the next, with no Failure meanwhile:
// one failed attempt is no reason to say the worker takes part in none.
func TestGroupFailureNotReportedForOneRefusal(t *testing.T) {
	c := groupCluster(t, 2)
	g := join(t, c, "g", "a", "t")
	settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return len(owned[0]) == 2 })
	ended := g.Changed()
	var refused atomic.Bool
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if refused.Swap(true) {
			return nil, nil, false
		}
		resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp, nil, true
	})
	var failure error
	wait.For(t, settleWithin, time.Millisecond, "the member in a generation again after the refusal", func() bool {
		if err := g.Failure(); err != nil && failure == nil {
			failure = err
		}
		return closed(ended) && g.Settled() && len(g.Owned()) == 2
	})
	if failure != nil {
		t.Fatalf("Failure after one refused heartbeat: %v", failure)
	}
}
