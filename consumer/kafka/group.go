package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// ErrGenerationEnded is wrapped by Commit's error when there is no
// generation to commit in: the last one ended and the next has not begun
// (a rebalance), none has begun yet, or the group is closed; or when the
// generation ended, or the coordinator moved on to another one, while the
// commit was on its way. Commits only feed lag monitoring, so this error
// is worth a debug line at most: the next owner commits the partition.
var ErrGenerationEnded = errors.New("no current generation of the consumer group")

// GroupOptions are the timings of a Group's membership. A zero field takes
// kafka-go's default (v0.4.51), which is the one to use in production.
type GroupOptions struct {
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
// The group uses kafka-go's ConsumerGroup: it offers the range and
// round-robin balancers, in that order, so the range balancer assigns the
// partitions (it is the first that every member supports). Both split each
// topic on its own, among the members sorted by member id, taking the
// partitions in the order the broker's metadata lists them: six partitions
// and three members give each member two, while several topics with fewer
// partitions than members all go to the same members. Each generation's
// assignment comes from the member the coordinator elects leader, which
// reads the partitions when the generation begins; every member watches
// the partition counts, so partitions added to a topic are assigned
// within about PartitionWatchInterval.
//
// A Group learns of a rebalance at its next heartbeat, ends its generation
// and joins the next one on its own; Owned is empty in between. A member
// that leaves (Close) or stops heartbeating for SessionTimeout loses its
// partitions to the others. Until the coordinator has dropped a stalled
// member, its partitions are owned by no one else; a member that was
// dropped while paused still reports its old assignment until its own
// next heartbeat (a zombie, harmless in the epoch protocol).
//
// A Group is safe for concurrent use.
type Group struct {
	id   string
	log  *zap.Logger
	cg   *kafkago.ConsumerGroup
	done chan struct{} // closed when the generation loop has returned
	once sync.Once

	mu      sync.Mutex
	cur     *generation   // the current generation; nil between generations
	changed chan struct{} // closed, and replaced, when cur changes
	closed  bool
}

// generation is one generation of the group as this member sees it.
type generation struct {
	gen   *kafkago.Generation
	owned []string                  // the assigned shards, in shard order
	parts map[string]topicPartition // the assigned partitions, by shard
	ended chan struct{}             // closed when the generation has ended
}

// NewGroup joins the consumer group groupID, over topics, on the cluster
// cfg reaches, with kafka-go's default timings (GroupOptions). See
// NewGroupWith.
func NewGroup(cfg Config, groupID string, topics []string, log *zap.Logger) (*Group, error) {
	return NewGroupWith(cfg, groupID, topics, GroupOptions{}, log)
}

// NewGroupWith joins the consumer group groupID, over topics, on the
// cluster cfg reaches, with the timings of opts. It returns at once and
// joins on its own goroutine, which also joins every later generation: a
// failed join is logged and retried (after opts.JoinGroupBackoff, unless
// the coordinator answered that a rebalance is in progress), and Owned is
// empty until the first generation begins. It fails only on an invalid
// configuration. Close leaves the group.
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
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("group", groupID))
	cg, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID:                     groupID,
		Brokers:                cfg.Brokers,
		Dialer:                 cfg.dialer(),
		Topics:                 topics,
		HeartbeatInterval:      opts.HeartbeatInterval,
		SessionTimeout:         opts.SessionTimeout,
		RebalanceTimeout:       opts.RebalanceTimeout,
		PartitionWatchInterval: opts.PartitionWatchInterval,
		JoinGroupBackoff:       opts.JoinGroupBackoff,
		WatchPartitionChanges:  true,
		Logger:                 debugLog{log},
		ErrorLogger:            newErrorLog(log),
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: consumer group %s: %w", groupID, err)
	}
	g := &Group{id: groupID, log: log, cg: cg, done: make(chan struct{}), changed: make(chan struct{})}
	go g.run()
	return g, nil
}

// run takes every generation the consumer group joins, until it is
// closed.
func (g *Group) run() {
	defer close(g.done)
	for {
		gen, err := g.cg.Next(context.Background())
		if errors.Is(err, kafkago.ErrGroupClosed) {
			return
		}
		if err != nil {
			// kafka-go has logged it through the error log, and retries.
			g.log.Debug("kafka consumer group: no generation", zap.Error(err))
			continue
		}
		g.begin(gen)
	}
}

// begin records gen's assignment as the current one, until gen ends.
func (g *Group) begin(gen *kafkago.Generation) {
	var tps []topicPartition
	for topic, parts := range gen.Assignments {
		for _, p := range parts {
			tps = append(tps, topicPartition{topic: topic, id: p.ID})
		}
	}
	slices.SortFunc(tps, func(a, b topicPartition) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id))
	})
	cur := &generation{
		gen:   gen,
		owned: make([]string, 0, len(tps)),
		parts: make(map[string]topicPartition, len(tps)),
		ended: make(chan struct{}),
	}
	for _, tp := range tps {
		cur.owned = append(cur.owned, tp.key())
		cur.parts[tp.key()] = tp
	}
	g.mu.Lock()
	g.cur = cur
	g.signal()
	g.mu.Unlock()
	g.log.Info("kafka consumer group generation",
		zap.Int32("generation", gen.ID), zap.String("member", gen.MemberID), zap.Strings("owned", cur.owned))
	// A function launched with Start ends the generation when it returns,
	// so this one returns only once the generation is over; kafka-go waits
	// for it before it joins the next generation.
	gen.Start(func(ctx context.Context) {
		<-ctx.Done()
		g.end(cur)
	})
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
	g.log.Info("kafka consumer group generation ended", zap.Int32("generation", cur.gen.ID))
}

// signal wakes whoever waits on Changed. g.mu must be held.
func (g *Group) signal() {
	if g.closed {
		return
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// Owned returns the shards "kafka:<topic>/<partition>" assigned to this
// member in the current generation, in shard order (topic bytewise, then
// partition numerically). It is empty, and not nil, between generations,
// before the first and after Close. It fits consumer.EpochConfig.Owned.
func (g *Group) Owned() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur == nil {
		return []string{}
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
// Commit returns ctx's error, and the request, bounded by kafka-go's 5 s
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
	offsets := map[string]map[int]int64{}
	for shard, pos := range positions {
		tp, ok := cur.parts[shard]
		if !ok {
			continue
		}
		if offsets[tp.topic] == nil {
			offsets[tp.topic] = map[int]int64{}
		}
		offsets[tp.topic][tp.id] = pos
	}
	if len(offsets) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kafka: commit offsets of group %s: %w", g.id, err)
	}
	res := make(chan error, 1)
	go func() { res <- cur.gen.CommitOffsets(offsets) }()
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
		return fmt.Errorf("kafka: commit offsets of group %s in generation %d: %w: %w", g.id, cur.gen.ID, ErrGenerationEnded, err)
	}
	return fmt.Errorf("kafka: commit offsets of group %s in generation %d: %w", g.id, cur.gen.ID, err)
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
		errors.Is(err, kafkago.UnknownMemberId)
}

// Close leaves the group, so that the coordinator gives this member's
// partitions to the others at once, and waits for the group's goroutines.
// It is prompt unless a join is in progress, which kafka-go lets finish:
// up to RebalanceTimeout (or SessionTimeout, while the leader assigns)
// plus its 5 s coordinator timeout. Owned is then
// empty and Commit fails. Close is idempotent and always returns nil.
func (g *Group) Close() error {
	g.once.Do(func() {
		g.cg.Close()
		<-g.done
		g.mu.Lock()
		g.cur = nil
		g.signal()
		g.closed = true
		g.mu.Unlock()
	})
	return nil
}

// debugLog turns kafka-go's informational log lines (joins, assignments,
// commits) into debug lines.
type debugLog struct{ log *zap.Logger }

// Printf implements kafkago.Logger.
func (l debugLog) Printf(format string, args ...any) {
	if ce := l.log.Check(zap.DebugLevel, "kafka consumer group"); ce != nil {
		ce.Write(zap.Stringer("message", printf{format, args}))
	}
}
