package kafka_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hyperplane-ml/hyperplane/consumer/kafka"
	"github.com/hyperplane-ml/hyperplane/internal/testbroker"
	"github.com/hyperplane-ml/hyperplane/internal/wait"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// staticOptions are groupOptions for a static member named instance,
// with the default session of 30 s: a restart that waited for the old
// member's session to end would take that long.
func staticOptions(instance string) kafka.GroupOptions {
	o := groupOptions
	o.InstanceID = instance
	o.SessionTimeout, o.RebalanceTimeout = 30*time.Second, 15*time.Second
	return o
}

// countRequests counts the requests of key that c receives from now on.
func countRequests(c *testbroker.KafkaCluster, key kmsg.Key) *atomic.Int64 {
	var n atomic.Int64
	c.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// TestGroupStaticRestart: a static member that stops without leaving the
// group (as a process killed with SIGKILL does: its connections close,
// and no LeaveGroup is sent: Crash) keeps its partitions, owned by no one, and a
// new member with its instance id owns them again at once, far within the
// session timeout, with no rebalance: the other member's generation goes
// on untouched.
func TestGroupStaticRestart(t *testing.T) {
	c := groupCluster(t, 4)
	all := shardsOf("t", upTo(4)...)
	a := joinWith(t, c, staticOptions("worker-a"), "g", "a", "t")
	b := joinWith(t, c, staticOptions("worker-b"), "g", "b", "t")
	before, _ := settle(t, []*kafka.Group{a, b}, partitioned(all, 2))
	bChanged := b.Changed()
	leaves := countRequests(c, kmsg.LeaveGroup)

	kafka.Crash(a)
	start := time.Now()
	restarted := joinWith(t, c, staticOptions("worker-a"), "g", "a again", "t")
	after, took := settle(t, []*kafka.Group{restarted}, func(owned [][]shardid.ID) bool { return slices.Equal(owned[0], before[0]) })
	t.Logf("the restarted member owned %q %v after it started (session timeout %v)", after[0], took, staticOptions("").SessionTimeout)
	if limit := staticOptions("").SessionTimeout / 10; time.Since(start) > limit {
		t.Fatalf("the restarted member took %v to own its partitions back, want at most %v", time.Since(start), limit)
	}
	if n := leaves.Load(); n != 0 {
		t.Fatalf("a crashed member sent %d LeaveGroup requests, want none", n)
	}
	if closed(bChanged) || !slices.Equal(b.Owned(), before[1]) {
		t.Fatalf("the other member's assignment changed from %q to %q (Changed closed: %v): a rebalance",
			before[1], b.Owned(), closed(bChanged))
	}
}

// TestGroupStaticHandsOverAfterSession: a static member that stops
// without leaving the group and is not restarted loses its partitions to
// the others once its session has timed out.
func TestGroupStaticHandsOverAfterSession(t *testing.T) {
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	c.CreateTopic(t, "t", 4)
	all := shardsOf("t", upTo(4)...)
	opts := groupOptions
	opts.SessionTimeout, opts.RebalanceTimeout = 2*time.Second, time.Second
	aOpts, bOpts := opts, opts
	aOpts.InstanceID, bOpts.InstanceID = "worker-a", "worker-b"
	a := joinWith(t, c, aOpts, "g", "a", "t")
	b := joinWith(t, c, bOpts, "g", "b", "t")
	settle(t, []*kafka.Group{a, b}, partitioned(all, 2))
	kafka.Crash(a)
	start := time.Now()
	_, took := settle(t, []*kafka.Group{b}, partitioned(all, 4))
	t.Logf("the other member owned every partition %v after a static member stopped (session timeout %v)", took, opts.SessionTimeout)
	if since := time.Since(start); since < opts.SessionTimeout/2 {
		t.Fatalf("the other member owned every partition %v after a static member stopped: before its session of %v could time out", since, opts.SessionTimeout)
	}
}

// TestGroupStaticOrder: the range assignor takes static members in the
// order of their instance ids, whatever the order they joined in.
func TestGroupStaticOrder(t *testing.T) {
	c := groupCluster(t, 6)
	// Joined in reverse order.
	members := []*kafka.Group{
		joinWith(t, c, staticOptions("w2"), "g", "w2", "t"),
		joinWith(t, c, staticOptions("w1"), "g", "w1", "t"),
		joinWith(t, c, staticOptions("w0"), "g", "w0", "t"),
	}
	want := [][]shardid.ID{shardsOf("t", 4, 5), shardsOf("t", 2, 3), shardsOf("t", 0, 1)}
	settle(t, members, func(owned [][]shardid.ID) bool {
		for i := range owned {
			if !slices.Equal(owned[i], want[i]) {
				return false
			}
		}
		return true
	})
}

// TestGroupStaticFenced: a second live process with an instance id that a
// member holds takes it over; the first is fenced, goes on as a dynamic
// member, and both own partitions once the group has rebalanced.
func TestGroupStaticFenced(t *testing.T) {
	c := groupCluster(t, 6)
	all := shardsOf("t", upTo(6)...)
	log, logs := observed(t, zapcore.WarnLevel)
	first, err := kafka.NewGroupWith(config(c), "g", []string{"t"}, staticOptions("worker-a"), log.With(zap.String("name", "first")))
	if err != nil {
		t.Fatalf("NewGroupWith: %v", err)
	}
	t.Cleanup(func() { first.Close() })
	other := joinWith(t, c, staticOptions("worker-b"), "g", "b", "t")
	settle(t, []*kafka.Group{first, other}, partitioned(all, 3))

	second := joinWith(t, c, staticOptions("worker-a"), "g", "second", "t")
	owned, took := settle(t, []*kafka.Group{first, other, second}, partitioned(all, 2))
	t.Logf("three members owned %q %v after a second member joined with the first's instance id", owned, took)
	if n := logs.FilterMessageSnippet("another member joined with this instance id").Len(); n != 1 {
		t.Fatalf("%d warnings of the fenced member, want 1", n)
	}
}

// TestGroupDroppedMemberWarns: a member the coordinator no longer knows
// (its session ran out while the process was paused, say: the coordinator
// answers its next heartbeat with UNKNOWN_MEMBER_ID) says so once, as a
// warning, since its partitions went to others meanwhile, and joins again.
func TestGroupDroppedMemberWarns(t *testing.T) {
	// A short session, so that the member the coordinator still holds
	// (it answered one heartbeat as if it did not) leaves the next
	// generation's join soon.
	c := testbroker.Kafka(t, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	c.CreateTopic(t, "t", 2)
	opts := groupOptions
	opts.SessionTimeout, opts.RebalanceTimeout = 2*time.Second, time.Second
	log, logs := observed(t, zapcore.WarnLevel)
	g, err := kafka.NewGroupWith(config(c), "g", []string{"t"}, opts, log)
	if err != nil {
		t.Fatalf("NewGroupWith: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	settle(t, []*kafka.Group{g}, func(owned [][]shardid.ID) bool { return len(owned[0]) == 2 })
	ended := g.Changed()
	var dropped atomic.Bool
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if dropped.Swap(true) {
			return nil, nil, false
		}
		resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	wait.For(t, settleWithin, time.Millisecond, "the member in a generation again after it was dropped", func() bool {
		return closed(ended) && g.Settled() && len(g.Owned()) == 2
	})
	warned := logs.FilterMessageSnippet("the coordinator dropped this member")
	if warned.Len() != 1 {
		t.Fatalf("%d warnings of a dropped member, want 1 (all warnings: %v)", warned.Len(), logs.All())
	}
	if f := warned.All()[0].ContextMap(); f["kafka.session_timeout"] == nil || f["member"] == "" {
		t.Fatalf("the warning names neither the member nor the session timeout: %v", f)
	}
}
