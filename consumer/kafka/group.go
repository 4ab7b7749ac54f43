package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hyperplane-ml/hyperplane/shardid"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/segmentio/kafka-go/protocol/consumer"
	"github.com/segmentio/kafka-go/protocol/syncgroup"
	"go.uber.org/zap"
)

// ErrGenerationEnded is wrapped by Commit's error when there is no
// generation to commit in: the last one ended and the next has not begun
// (a rebalance), none has begun yet, or the group is closed; or when the
// generation ended, or the coordinator moved on to another one, while the
// commit was on its way. Commits only feed lag monitoring, so this error
// is worth a debug line at most: the next owner commits the partition.
var ErrGenerationEnded = errors.New("no current generation of the consumer group")

// GroupOptions are the identity and timings of a Group's membership. A zero
// timing takes the default written beside it (kafka-go's, v0.4.51), which
// is the one to use in production.
type GroupOptions struct {
	// InstanceID, if not empty, makes the member static (Kafka's
	// group.instance.id, KIP-345): a member that joins with the instance
	// id of one the coordinator still holds (one that stopped without
	// Close, killed say, less than SessionTimeout ago) replaces it at
	// once, taking over its assignment without a rebalance. Every live
	// member must have its own: the coordinator fences the older of two
	// members with one instance id, which then goes on as a dynamic
	// member (see Group). Empty: a dynamic member.
	InstanceID string
	// HeartbeatInterval is how often the member tells the coordinator it
	// is alive. It is also how soon it learns of a rebalance, which the
	// coordinator answers a heartbeat with. Default 3 s.
	HeartbeatInterval time.Duration
	// SessionTimeout is how long the coordinator waits for a heartbeat
	// before it drops the member and gives its partitions to the others:
	// how long a stalled worker keeps its partitions. The broker bounds
	// it (group.min.session.timeout.ms, 6 s by default, and
	// group.max.session.timeout.ms). Default 30 s.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the coordinator waits for the members
	// to rejoin in a rebalance before it goes on without the ones that
	// did not. Default 30 s.
	RebalanceTimeout time.Duration
	// PartitionWatchInterval is how often the member looks up the
	// topics' partition counts; a change ends the generation, so that the
	// next one assigns the new partitions. Default 5 s.
	PartitionWatchInterval time.Duration
	// JoinGroupBackoff is how long the member waits before it joins again
	// after a failed join (the coordinator unreachable, say). Default 5 s.
	JoinGroupBackoff time.Duration
}

// withDefaults is o with its zero timings set to their defaults, or an
// error naming the first negative one.
func (o GroupOptions) withDefaults() (GroupOptions, error) {
	for _, f := range []struct {
		name string
		d    *time.Duration
		def  time.Duration
	}{
		{"HeartbeatInterval", &o.HeartbeatInterval, 3 * time.Second},
		{"SessionTimeout", &o.SessionTimeout, 30 * time.Second},
		{"RebalanceTimeout", &o.RebalanceTimeout, 30 * time.Second},
		{"PartitionWatchInterval", &o.PartitionWatchInterval, 5 * time.Second},
		{"JoinGroupBackoff", &o.JoinGroupBackoff, 5 * time.Second},
	} {
		if *f.d < 0 {
			return o, fmt.Errorf("%s is negative: %v", f.name, *f.d)
		}
		if *f.d == 0 {
			*f.d = f.def
		}
	}
	return o, nil
}

// SessionOptions are the timings of a member whose session lasts session:
// a heartbeat every tenth of it (at most 3 s), and a rebalance timeout of
// half of it. The rebalance timeout must stay well below the session
// timeout less a heartbeat: a coordinator that expires members waiting in
// JoinGroup by their session (kfake does), or restarts the rebalance's
// deadline on every join, otherwise drops the live members that wait, whose
// clients then time out ("Failed to join group ... i/o timeout") and join
// again as new members, abandoning joins that hold partitions until the
// next rebalance. Members rejoin within a heartbeat, so half the session
// is plenty on any broker.
func SessionOptions(session time.Duration) GroupOptions {
	return GroupOptions{
		SessionTimeout:    session,
		HeartbeatInterval: min(3*time.Second, session/10),
		RebalanceTimeout:  session / 2,
	}
}

// Group is this worker's membership in a Kafka consumer group, which
// decides the partitions it owns: the shards it learns in the epoch
// protocol (docs/scale-out.md, section 3.5). Ownership only avoids
// duplicate work; nothing in the protocol depends on it being exclusive or
// current.
//
// The member speaks the classic consumer group protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup) through kafka-go's Client, offering
// the range and round-robin assignors, in that order, as kafka-go's
// ConsumerGroup does, so the range assignor assigns the partitions (it is
// the first that every member supports). Both split each topic on its
// own, among the members in order: the static members first, sorted by
// instance id, then the dynamic ones, sorted by member id (as Kafka's own
// assignors order them); and each topic's partitions by id. Six
// partitions and three members give each member two, while several topics
// with fewer partitions than members all go to the same members. Each
// generation's assignment comes from the member the coordinator elects
// leader, which reads the partitions when the generation begins; every
// member watches the partition counts, so partitions added to a topic are
// assigned within about PartitionWatchInterval.
//
// A Group learns of a rebalance at its next heartbeat, ends its generation
// and joins the next one on its own; Owned is empty in between. A member
// that leaves (Close) or stops heartbeating for SessionTimeout loses its
// partitions to the others. Until the
// coordinator has dropped a stalled member, its partitions are owned by
// no one else; a member that was dropped while paused still reports its
// old assignment until its own next heartbeat (a zombie, harmless in the
// epoch protocol).
//
// A static member (GroupOptions.InstanceID) keeps its partitions across a
// restart that did not Close it (a process killed, or stopped by a crash):
// a process that joins with the same instance id, before the session of
// the old one has timed out, replaces it and is given its assignment at
// once, without a rebalance (the coordinator's KIP-345 replacement). The
// other members see nothing. Close leaves the group all the same, unlike
// Kafka's Java consumer, which keeps a static member's place on a clean
// shutdown too: a worker that stops cleanly is most often not coming back
// under its name (a Deployment's rollout or scale-down gives new pods new
// names), and its partitions would otherwise wait a whole session for an
// owner.
// Two live processes with one instance id fence each other: the
// coordinator answers the older one's next request with FENCED_INSTANCE_ID;
// that one logs a warning and joins again as a dynamic member, which
// rebalances the group, so that both own partitions from then on and the
// newer one keeps the instance id.
//
// A Group is safe for concurrent use.
type Group struct {
	id      string
	topics  []string
	opts    GroupOptions
	log     *zap.Logger
	errLog  *errorLog
	client  *kafkago.Client
	trans   *kafkago.Transport
	stop    context.CancelFunc // ends the generation loop
	stopTr  context.CancelFunc // ends the transport's background work
	done    chan struct{}      // closed when the generation loop has returned
	once    sync.Once
	crashed atomic.Bool  // set by crash: Close does not leave the group
	leaveBy atomic.Int64 // LeaveBy's time, in Unix nanoseconds; 0: none

	mu      sync.Mutex
	cur     *generation   // the current generation; nil between generations
	changed chan struct{} // closed, and replaced, when cur changes
	closed  bool
	// failed is why the attempts to take part in a generation fail, once
	// they fail in a way that lasts, until one begins (Failure); failures
	// counts the attempts that failed in a row.
	failed   error
	failures int
}

// generation is one generation of the group as this member sees it.
type generation struct {
	id     int32
	member membership
	owned  []shardid.ID              // the assigned shards, in shard order
	parts  map[string]topicPartition // the assigned partitions, by shard
	counts map[string]int            // the topics' partition counts when it began
	// others is whether the join showed another member in the
	// generation: a leader other than this member, or more members
	// than this one in the leader's answer.
	others bool
	ended  chan struct{} // closed when the generation has ended
}

// membership is who this member is to the coordinator: the member id it
// was given ("" before the first join, and after the coordinator forgot
// it) and its instance id ("" for a dynamic member).
type membership struct {
	id       string
	instance string
}

// NewGroup joins the consumer group groupID, over topics, on the cluster
// cfg reaches, as a dynamic member with the default timings
// (GroupOptions). See NewGroupWith.
func NewGroup(cfg Config, groupID string, topics []string, log *zap.Logger) (*Group, error) {
	return NewGroupWith(cfg, groupID, topics, GroupOptions{}, log)
}

// NewGroupWith joins the consumer group groupID, over topics, on the
// cluster cfg reaches, with the identity and timings of opts. It returns
// at once and joins on its own goroutine, which also joins every later
// generation: a failed join is logged and retried (after
// opts.JoinGroupBackoff, unless the coordinator answered that a rebalance
// is in progress), and Owned is empty until the first generation begins.
// It fails only on an invalid configuration. Close ends the membership.
//
// Every member of a group should name the same topics: a topic that only
// some members name is split among those.
func NewGroupWith(cfg Config, groupID string, topics []string, opts GroupOptions, log *zap.Logger) (*Group, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if groupID == "" {
		return nil, errors.New("kafka: consumer group: no group id")
	}
	topics = unique(topics)
	if len(topics) == 0 {
		return nil, fmt.Errorf("kafka: consumer group %s: no topics", groupID)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", groupID, err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("group", groupID))
	if opts.InstanceID != "" {
		log = log.With(zap.String("instance", opts.InstanceID))
	}
	trans := &kafkago.Transport{
		ClientID: cfg.ClientID,
		TLS:      cfg.TLS,
		SASL:     cfg.SASL,
		// The partition counts are read from the transport's cache of
		// the metadata: it must be no older than a watch interval.
		MetadataTTL:    opts.PartitionWatchInterval,
		MetadataTopics: topics,
		DialTimeout:    dialTimeout,
	}
	// The transport's background work ends once the member has left.
	tctx, stopTransport := context.WithCancel(context.Background())
	trans.Context = tctx
	ctx, stop := context.WithCancel(context.Background())
	g := &Group{
		id:      groupID,
		topics:  topics,
		opts:    opts,
		log:     log,
		errLog:  newErrorLog(log),
		client:  &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Transport: trans},
		trans:   trans,
		stop:    stop,
		stopTr:  stopTransport,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	go g.run(ctx)
	return g, nil
}

// coordinatorTimeout bounds a request to the coordinator beyond the time
// the coordinator may hold it on purpose (a join until the rebalance
// completes, a sync until the leader has assigned): the 5 s kafka-go's
// ConsumerGroup allows.
const coordinatorTimeout = 5 * time.Second

// run takes part in every generation of the group until ctx ends, then
// leaves the group (unless Crash stopped it).
func (g *Group) run(ctx context.Context) {
	defer close(g.done)
	m := membership{instance: g.opts.InstanceID}
	defer func() { g.leave(m) }()
	for ctx.Err() == nil {
		err := g.generation(ctx, &m)
		if ctx.Err() != nil {
			return
		}
		var backoff time.Duration
		switch {
		case err == nil:
			// The generation ended; the next join is the rebalance.
			continue
		case errors.Is(err, kafkago.RebalanceInProgress), errors.Is(err, kafkago.IllegalGeneration):
			// The member is known, in another generation than the one
			// it asked about: it joins the next at once, which the
			// coordinator throttles by the rebalance timeout.
		case errors.Is(err, kafkago.FencedInstanceID):
			g.log.Warn("kafka consumer group: another member joined with this instance id, which the coordinator gave to it: this one goes on as a dynamic member (give each member its own instance id)",
				zap.String("member", m.id), zap.Error(err))
			m = membership{}
		case errors.Is(err, kafkago.UnknownMemberId):
			// The coordinator dropped the member: join again as what
			// it is (a static member's instance id finds its
			// assignment if the coordinator still holds it).
			if m.id != "" {
				g.log.Warn("kafka consumer group: the coordinator dropped this member, whose heartbeats it missed for kafka.session_timeout (the process paused, or could not reach the coordinator): its partitions went to other members, and it joins the group again",
					zap.String("member", m.id), zap.Duration("kafka.session_timeout", g.opts.SessionTimeout))
			}
			m.id = ""
		default:
			// Not worth a second try at once (the coordinator is
			// unreachable, say): a dynamic member leaves, so that its
			// old member id waits for no session; a static member keeps
			// its place for the next try.
			g.fail(err)
			if m.instance == "" {
				g.leave(m)
				m.id = ""
			}
			backoff = g.opts.JoinGroupBackoff
		}
		g.log.Debug("kafka consumer group: no generation", zap.Error(err))
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

// generation joins the group as m, which it updates with the member id the
// coordinator gives, takes the assignment of the generation, and returns
// when the generation is over: nil at a rebalance or a change of the
// partition counts, the error that ended it otherwise.
func (g *Group) generation(ctx context.Context, m *membership) error {
	joined, err := g.join(ctx, m)
	if err != nil {
		g.errorf("Failed to join group %s: %v", g.id, err)
		return err
	}
	var assignments map[string]map[string][]int
	var counts map[string]int
	if joined.LeaderID == m.id {
		assignments, counts, err = g.assign(ctx, joined)
		if err != nil {
			g.errorf("Failed to assign the partitions of group %s: %v", g.id, err)
			return err
		}
	}
	assigned, err := g.sync(ctx, *m, joined, assignments)
	if err != nil {
		g.errorf("Failed to sync group %s: %v", g.id, err)
		return err
	}
	if counts == nil {
		if counts, err = g.partitionCounts(ctx); err != nil {
			g.errorf("Failed to read the partitions of group %s's topics: %v", g.id, err)
			return err
		}
	}
	coord, err := g.coordinator(ctx)
	if err != nil {
		g.errorf("Failed to find the coordinator of group %s: %v", g.id, err)
		return err
	}
	others := joined.LeaderID != m.id || len(joined.Members) > 1
	cur := g.begin(int32(joined.GenerationID), *m, assigned, counts, others)
	defer g.end(cur)
	return g.hold(ctx, cur, coord)
}

// coordinator is the address of the group's coordinator. kafka-go's
// transport routes the other requests of the group protocol to it on its
// own, but not Heartbeat, which must name it.
func (g *Group) coordinator(ctx context.Context) (net.Addr, error) {
	fctx, cancel := context.WithTimeout(ctx, coordinatorTimeout)
	defer cancel()
	res, err := g.client.FindCoordinator(fctx, &kafkago.FindCoordinatorRequest{Key: g.id, KeyType: kafkago.CoordinatorKeyTypeConsumer})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		return nil, err
	}
	if res.Coordinator == nil {
		return nil, errors.New("no coordinator in the answer")
	}
	return kafkago.TCP(net.JoinHostPort(res.Coordinator.Host, strconv.Itoa(res.Coordinator.Port))), nil
}

// join sends JoinGroup until the coordinator answers with a generation:
// a dynamic member's first join is answered with its member id only
// (MEMBER_ID_REQUIRED), and joined again with it.
func (g *Group) join(ctx context.Context, m *membership) (*kafkago.JoinGroupResponse, error) {
	for {
		jctx, cancel := context.WithTimeout(ctx, g.opts.RebalanceTimeout+coordinatorTimeout)
		res, err := g.client.JoinGroup(jctx, &kafkago.JoinGroupRequest{
			GroupID:          g.id,
			SessionTimeout:   g.opts.SessionTimeout,
			RebalanceTimeout: g.opts.RebalanceTimeout,
			MemberID:         m.id,
			GroupInstanceID:  m.instance,
			ProtocolType:     "consumer",
			Protocols: []kafkago.GroupProtocol{
				{Name: kafkago.RangeGroupBalancer{}.ProtocolName(), Metadata: kafkago.GroupProtocolSubscription{Topics: g.topics}},
				{Name: kafkago.RoundRobinGroupBalancer{}.ProtocolName(), Metadata: kafkago.GroupProtocolSubscription{Topics: g.topics}},
			},
		})
		cancel()
		if err != nil {
			return nil, err
		}
		if errors.Is(res.Error, kafkago.MemberIDRequired) && res.MemberID != "" && m.id == "" {
			m.id = res.MemberID
			continue
		}
		if res.Error != nil {
			return nil, res.Error
		}
		m.id = res.MemberID
		g.debugf("Joined group %s as member %s in generation %d", g.id, m.id, res.GenerationID)
		return res, nil
	}
}

// assign is the leader's assignment of joined's members, by member id,
// and the partition counts it is made of. The members are ordered for the
// assignor by a key that puts static members first, by instance id, and
// then the dynamic ones, by member id.
func (g *Group) assign(ctx context.Context, joined *kafkago.JoinGroupResponse) (map[string]map[string][]int, map[string]int, error) {
	g.debugf("selected as leader for group, %s", g.id)
	var balancer kafkago.GroupBalancer
	switch joined.ProtocolName {
	case kafkago.RangeGroupBalancer{}.ProtocolName():
		balancer = kafkago.RangeGroupBalancer{}
	case kafkago.RoundRobinGroupBalancer{}.ProtocolName():
		balancer = kafkago.RoundRobinGroupBalancer{}
	default:
		return nil, nil, fmt.Errorf("the coordinator chose assignor %q, which this member did not offer", joined.ProtocolName)
	}
	byKey := make(map[string]string, len(joined.Members))
	members := make([]kafkago.GroupMember, 0, len(joined.Members))
	topics := slices.Clone(g.topics)
	for _, jm := range joined.Members {
		key := "1" + jm.ID
		if jm.GroupInstanceID != "" {
			key = "0" + jm.GroupInstanceID
		}
		byKey[key] = jm.ID
		members = append(members, kafkago.GroupMember{ID: key, Topics: jm.Metadata.Topics})
		topics = append(topics, jm.Metadata.Topics...)
	}
	topics = unique(topics)
	parts, counts, err := g.partitions(ctx, topics)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]map[string][]int, len(members))
	for key, assigned := range balancer.AssignGroups(members, parts) {
		out[byKey[key]] = assigned
	}
	// A member assigned nothing is sent an empty assignment.
	for _, id := range byKey {
		if out[id] == nil {
			out[id] = map[string][]int{}
		}
	}
	// The counts to watch are of this member's topics.
	own := make(map[string]int, len(g.topics))
	for _, t := range g.topics {
		own[t] = counts[t]
	}
	return out, own, nil
}

// sync sends SyncGroup as m in joined's generation, with the leader's
// assignments (nil from the others), and returns m's assignment.
func (g *Group) sync(ctx context.Context, m membership, joined *kafkago.JoinGroupResponse, assignments map[string]map[string][]int) (map[string][]int, error) {
	req := &kafkago.SyncGroupRequest{
		GroupID:         g.id,
		GenerationID:    joined.GenerationID,
		MemberID:        m.id,
		GroupInstanceID: m.instance,
		ProtocolType:    "consumer",
		ProtocolName:    joined.ProtocolName,
	}
	ids := make([]string, 0, len(assignments))
	for id := range assignments {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		req.Assignments = append(req.Assignments, kafkago.SyncGroupRequestAssignment{
			MemberID:   id,
			Assignment: kafkago.GroupProtocolAssignment{AssignedPartitions: assignments[id]},
		})
	}
	sctx, cancel := context.WithTimeout(ctx, g.opts.SessionTimeout+coordinatorTimeout)
	defer cancel()
	return syncGroup(sctx, g.client, req)
}

// partitionCounts is how many partitions each of the member's topics has.
func (g *Group) partitionCounts(ctx context.Context) (map[string]int, error) {
	_, counts, err := g.partitions(ctx, g.topics)
	return counts, err
}

// partitions lists the partitions of topics, each topic's by id, and
// counts them. A topic that does not exist has none.
func (g *Group) partitions(ctx context.Context, topics []string) ([]kafkago.Partition, map[string]int, error) {
	mctx, cancel := context.WithTimeout(ctx, coordinatorTimeout)
	defer cancel()
	res, err := g.client.Metadata(mctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, nil, err
	}
	var parts []kafkago.Partition
	counts := make(map[string]int, len(topics))
	for _, t := range res.Topics {
		switch {
		case t.Error == nil:
		case errors.Is(t.Error, kafkago.UnknownTopicOrPartition):
			continue
		default:
			return nil, nil, fmt.Errorf("topic %s: %w", t.Name, t.Error)
		}
		counts[t.Name] = len(t.Partitions)
		for _, p := range t.Partitions {
			parts = append(parts, kafkago.Partition{Topic: t.Name, ID: p.ID})
		}
	}
	slices.SortFunc(parts, func(a, b kafkago.Partition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.ID, b.ID))
	})
	return parts, counts, nil
}

// hold keeps cur's membership alive, heartbeating to coord, until the generation
// ends: nil at a rebalance or a change of the partition counts, the error
// of the heartbeat or metadata lookup that ended it otherwise.
func (g *Group) hold(ctx context.Context, cur *generation, coord net.Addr) error {
	beat := time.NewTicker(g.opts.HeartbeatInterval)
	defer beat.Stop()
	watch := time.NewTicker(g.opts.PartitionWatchInterval)
	defer watch.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-beat.C:
			hctx, cancel := context.WithTimeout(ctx, coordinatorTimeout)
			res, err := g.client.Heartbeat(hctx, &kafkago.HeartbeatRequest{
				Addr:            coord,
				GroupID:         g.id,
				GenerationID:    cur.id,
				MemberID:        cur.member.id,
				GroupInstanceID: cur.member.instance,
			})
			cancel()
			if err == nil {
				err = heartbeatError(res)
			}
			if errors.Is(err, kafkago.RebalanceInProgress) {
				g.debugf("the coordinator of group %s is rebalancing it", g.id)
				return nil
			}
			if err != nil {
				return fmt.Errorf("heartbeat: %w", err)
			}
		case <-watch.C:
			counts, err := g.partitionCounts(ctx)
			if err != nil {
				// The coordinator's heartbeats say whether the member is
				// still in the group; the next lookup tries again.
				g.errorf("Problem getting partitions while checking for changes, %v", err)
				continue
			}
			if !maps.Equal(counts, cur.counts) {
				g.debugf("Partition changes found, rebalancing group: %v.", g.id)
				return nil
			}
		}
	}
}

// heartbeatError is the coordinator's error in res, nil if none.
// kafka-go v0.4.51 decodes the answers of Heartbeat v1 and later (which
// it asks for from any broker since Kafka 0.11) with their two fields
// swapped (segmentio/kafka-go#1371): the error code it reads is the high
// half of the throttle time, and the throttle time it reads ends with the
// error code. Without throttling, which a broker applies to heartbeats
// only under a request quota, the error code is the throttle time's low
// 16 bits; an answer to v0, which has no throttle time, is decoded right.
func heartbeatError(res *kafkago.HeartbeatResponse) error {
	if res.Error != nil {
		return res.Error
	}
	if code := int16(uint16(res.Throttle / time.Millisecond)); code != 0 {
		return kafkago.Error(code)
	}
	return nil
}

// begin records an assignment as the current generation's, and returns
// the generation; others is whether the join showed another member.
func (g *Group) begin(id int32, m membership, assigned map[string][]int, counts map[string]int, others bool) *generation {
	var tps []topicPartition
	for topic, parts := range assigned {
		for _, p := range parts {
			tps = append(tps, topicPartition{topic: topic, id: p})
		}
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id))
	})
	cur := &generation{
		id:     id,
		member: m,
		owned:  make([]shardid.ID, 0, len(tps)),
		parts:  make(map[string]topicPartition, len(tps)),
		counts: counts,
		others: others,
		ended:  make(chan struct{}),
	}
	for _, tp := range tps {
		cur.owned = append(cur.owned, tp.shard())
		cur.parts[tp.key()] = tp
	}
	g.mu.Lock()
	g.cur = cur
	g.failed, g.failures = nil, 0
	g.signal()
	g.mu.Unlock()
	g.log.Info("kafka consumer group generation",
		zap.Int32("generation", id), zap.String("member", m.id), zap.Stringers("owned", cur.owned))
	return cur
}

// end forgets cur's assignment, which is over.
func (g *Group) end(cur *generation) {
	close(cur.ended)
	g.mu.Lock()
	if g.cur == cur {
		g.cur = nil
		g.signal()
	}
	g.mu.Unlock()
	g.log.Info("kafka consumer group generation ended", zap.Int32("generation", cur.id))
}

// leave takes m out of the group, so that its partitions go to the others
// at once: a static member by its instance id, which the coordinator then
// forgets (LeaveGroup v3, Kafka 2.4).
func (g *Group) leave(m membership) {
	if m.id == "" || g.crashed.Load() {
		return
	}
	timeout := coordinatorTimeout
	if by := g.leaveBy.Load(); by != 0 {
		left := time.Until(time.Unix(0, by))
		if left <= 0 {
			g.debugf("Not leaving group %s as member %s: the time to leave is up", g.id, m.id)
			return
		}
		timeout = min(timeout, left)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := g.client.LeaveGroup(ctx, &kafkago.LeaveGroupRequest{
		GroupID: g.id,
		Members: []kafkago.LeaveGroupRequestMember{{ID: m.id, GroupInstanceID: m.instance}},
	})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		g.debugf("Failed to leave group %s as member %s: %v", g.id, m.id, err)
		return
	}
	g.debugf("Left group %s as member %s", g.id, m.id)
}

// signal wakes whoever waits on Changed. g.mu must be held.
func (g *Group) signal() {
	if g.closed {
		return
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// debugf writes a debug line about the membership.
func (g *Group) debugf(format string, args ...any) {
	if ce := g.log.Check(zap.DebugLevel, "kafka consumer group"); ce != nil {
		ce.Write(zap.Stringer("message", printf{format, args}))
	}
}

// errorf writes a failure of the membership, which is retried, as a
// warning, at most one every errorLogEvery.
func (g *Group) errorf(format string, args ...any) {
	g.errLog.Printf(format, args...)
}

// failuresToReport is how many attempts in a row must fail before a
// failure that may clear on its own (a coordinator moving while brokers
// restart, a timeout) is reported: each is followed by
// GroupOptions.JoinGroupBackoff.
const failuresToReport = 3

// fail records err, an attempt's failure to take part in a generation:
// reported by Failure at once if no retry mends it (a group of another
// protocol, a group or topic the credentials may not use), else once
// failuresToReport attempts in a row have failed.
func (g *Group) fail(err error) {
	lasting := errors.Is(err, kafkago.InconsistentGroupProtocol) ||
		errors.Is(err, kafkago.GroupAuthorizationFailed) || errors.Is(err, kafkago.TopicAuthorizationFailed)
	if errors.Is(err, kafkago.InconsistentGroupProtocol) {
		err = fmt.Errorf("%w (the group's other members consume by another protocol: another application's consumers in group %s? give this model a group of its own, source.group)", err, g.id)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures++
	if lasting || g.failures >= failuresToReport {
		g.failed = fmt.Errorf("consumer group %s: %w", g.id, err)
	}
}

// Failure reports why the member takes part in no generation: the error
// of its last attempt, once the attempts fail in a way that lasts (a
// group whose other members consume by another protocol, credentials the
// group refuses, or failuresToReport attempts in a row, such as a
// coordinator unreachable), until a generation begins. It is nil while
// the member is in a generation, while the group protocol moves it from
// one to the next (a rebalance), and after one failed attempt, such as a
// heartbeat a moving coordinator refuses. It fits
// consumer.Ownership.Failure.
func (g *Group) Failure() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

// Owned returns the shards "kafka:<topic>/<partition>" assigned to this
// member in the current generation, in shard order (topic bytewise, then
// partition numerically). It is empty, and not nil, between generations,
// before the first and after Close. It fits consumer.EpochConfig.Owned.
func (g *Group) Owned() []shardid.ID {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil {
		return []shardid.ID{}
	}
	return slices.Clone(g.cur.owned)
}

// Settled reports whether the member is in a generation, so that Owned is
// its assignment: false between two generations, while the group
// rebalances, and after Close.
func (g *Group) Settled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cur != nil
}

// Alone reports whether the member is in a generation in which it owns
// every partition of its topics, two or more, and its join showed no
// other member (another leader, or other members in the leader's
// answer). Owning every partition alone does not tell: the range
// assignor splits each topic by itself, so topics of one partition each
// all go to the first member, and the others own nothing while they
// follow the log. It fits consumer.EpochConfig.Alone.
func (g *Group) Alone() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil || g.cur.others {
		return false
	}
	total := 0
	for _, t := range g.topics {
		total += g.cur.counts[t]
	}
	return total >= 2 && len(g.cur.owned) == total
}

// Changed returns a channel that is closed when what Owned returns changes
// next: when a generation begins or ends (so a rebalance closes one
// channel as it ends the generation and the next as the new generation
// begins, even if the assignment is the same), and when the group is
// closed. After Close it returns a channel that is never closed. To follow
// the assignment without missing a change, call Changed before Owned.
func (g *Group) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// Commit writes positions (next offsets, by shard) as the group's offsets
// of the partitions this member owns in the current generation, for lag
// monitoring and tooling. Shards it does not own, and shards of other
// sources, are ignored; if none is left, Commit does nothing. The commit
// carries the generation and member ids, so the coordinator refuses it
// once the generation has ended: the error then wraps ErrGenerationEnded,
// as it does when there is no current generation. If ctx ends first,
// Commit returns ctx's error, and the request, bounded by a 5 s
// coordinator timeout, may still be applied.
func (g *Group) Commit(ctx context.Context, positions map[string]int64) error {
	if len(positions) == 0 {
		return nil
	}
	g.mu.Lock()
	cur := g.cur
	g.mu.Unlock()
	if cur == nil {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", g.id, ErrGenerationEnded)
	}
	offsets := map[string][]kafkago.OffsetCommit{}
	for shard, pos := range positions {
		tp, ok := cur.parts[shard]
		if !ok {
			continue
		}
		offsets[tp.topic] = append(offsets[tp.topic], kafkago.OffsetCommit{Partition: tp.id, Offset: pos})
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", g.id, err)
	}
	res := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), coordinatorTimeout)
		defer cancel()
		res <- g.commit(cctx, cur, offsets)
	}()
	var err error
	select {
	case err = <-res:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && cur.over(err) {
		return fmt.Errorf("kafka: commit offsets of group %s in generation %d: %w: %w", g.id, cur.id, ErrGenerationEnded, err)
	}
	return fmt.Errorf("kafka: commit offsets of group %s in generation %d: %w", g.id, cur.id, err)
}

// commit sends offsets as cur's member, and returns the first error of a
// partition if the coordinator refused any.
func (g *Group) commit(ctx context.Context, cur *generation, offsets map[string][]kafkago.OffsetCommit) error {
	res, err := g.client.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{
		GroupID:      g.id,
		GenerationID: int(cur.id),
		MemberID:     cur.member.id,
		InstanceID:   cur.member.instance,
		Topics:       offsets,
	})
	if err != nil {
		return err
	}
	for topic, parts := range res.Topics {
		for _, p := range parts {
			if p.Error != nil {
				return fmt.Errorf("%s/%d: %w", topic, p.Partition, p.Error)
			}
		}
	}
	return nil
}

// over reports whether err, a failed commit in generation cur, comes from
// the generation having ended, here or at the coordinator.
func (cur *generation) over(err error) bool {
	select {
	case <-cur.ended:
		return true
	default:
	}
	return errors.Is(err, kafkago.RebalanceInProgress) ||
		errors.Is(err, kafkago.IllegalGeneration) ||
		errors.Is(err, kafkago.UnknownMemberId) ||
		errors.Is(err, kafkago.FencedInstanceID)
}

// LeaveBy bounds the leaving of the group, which Close does, by t: a
// worker's shutdown has until then (shutdown.timeout from the signal),
// and a coordinator that does not answer would otherwise hold it for
// coordinatorTimeout beyond. After t Close does not leave.
func (g *Group) LeaveBy(t time.Time) { g.leaveBy.Store(t.UnixNano()) }

// Close leaves the group, so that the coordinator gives this member's
// partitions to the others at once (a static member's too), and waits for
// the group's goroutines. Close is prompt: a join in progress is
// abandoned, and leaving is bounded by a 5 s coordinator timeout. Owned is
// then empty and Commit fails. Close is idempotent and always returns nil.
func (g *Group) Close() error {
	g.once.Do(func() {
		g.stop()
		<-g.done
		g.trans.CloseIdleConnections()
		g.stopTr()
		g.mu.Lock()
		g.cur = nil
		g.signal()
		g.closed = true
		g.mu.Unlock()
	})
	return nil
}

// syncGroup sends req through client's transport and returns the
// member's assignment. Unlike kafka-go's Client.SyncGroup, it returns the
// coordinator's error when there is one (REBALANCE_IN_PROGRESS, say, which
// comes with no assignment to decode).
func syncGroup(ctx context.Context, client *kafkago.Client, req *kafkago.SyncGroupRequest) (map[string][]int, error) {
	msg := &syncgroup.Request{
		GroupID:         req.GroupID,
		GenerationID:    int32(req.GenerationID),
		MemberID:        req.MemberID,
		GroupInstanceID: req.GroupInstanceID,
		ProtocolType:    req.ProtocolType,
		ProtocolName:    req.ProtocolName,
	}
	for _, a := range req.Assignments {
		assign := consumer.Assignment{Version: consumer.MaxVersionSupported, UserData: a.Assignment.UserData}
		for topic, parts := range a.Assignment.AssignedPartitions {
			tp := consumer.TopicPartition{Topic: topic, Partitions: make([]int32, len(parts))}
			for i, p := range parts {
				tp.Partitions[i] = int32(p)
			}
			assign.AssignedPartitions = append(assign.AssignedPartitions, tp)
		}
		b, err := protocol.Marshal(consumer.MaxVersionSupported, assign)
		if err != nil {
			return nil, fmt.Errorf("assignment of %s: %w", a.MemberID, err)
		}
		msg.Assignments = append(msg.Assignments, syncgroup.RequestAssignment{MemberID: a.MemberID, Assignment: b})
	}
	r, err := client.Transport.RoundTrip(ctx, client.Addr, msg)
	if err != nil {
		return nil, err
	}
	res := r.(*syncgroup.Response)
	if res.ErrorCode != 0 {
		return nil, kafkago.Error(res.ErrorCode)
	}
	out := map[string][]int{}
	if len(res.Assignments) == 0 {
		return out, nil
	}
	var assign consumer.Assignment
	if err := protocol.Unmarshal(res.Assignments, consumer.MaxVersionSupported, &assign); err != nil {
		return nil, fmt.Errorf("assignment: %w", err)
	}
	for _, tp := range assign.AssignedPartitions {
		for _, p := range tp.Partitions {
			out[tp.Topic] = append(out[tp.Topic], int(p))
		}
	}
	return out, nil
}

// crash ends the membership as a killed process does: without leaving
// the group.
func (g *Group) crash() {
	g.crashed.Store(true)
	g.Close()
}
