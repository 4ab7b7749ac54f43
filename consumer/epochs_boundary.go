package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hyperplane-ml/hyperplane/consumer/retry"
	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// boundary returns B_e: the stored one, verified, or one this worker cuts
// once an epoch is due.
func (x *Epochs) boundary(ctx context.Context) (*epochlog.Boundary, [32]byte, error) {
	model := x.cfg.Worker.Model
	bo := retry.Backoff{Min: 25 * time.Millisecond, Max: 500 * time.Millisecond}
	for {
		var b *epochlog.Boundary
		var sha [32]byte
		// A shutdown ends the loop whatever the log holds: the paths
		// that go round again over a damaged or missing boundary need
		// not wait for anything.
		if err := ctx.Err(); err != nil {
			return nil, sha, err
		}
		err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("read epoch %d's boundary", x.epoch), func(ctx context.Context) (err error) {
			b, sha, err = x.cfg.Log.Boundary(ctx, model, x.epoch)
			return err
		})
		if err == nil {
			err := x.check(b)
			if err == nil || !x.ofAnotherMix(b) {
				return b, sha, err
			}
			// No worker holds the model it learns from, and none will:
			// the history ends there, as at a damaged boundary.
			if x.cfg.Follow {
				err = x.followHistoryAbove(ctx, err)
			} else {
				err = x.damagedBoundary(ctx, err)
			}
			if err != nil {
				return nil, sha, err
			}
			continue
		}
		if x.cfg.Follow && (errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, epochlog.ErrDamagedLog)) {
			// The live workers begin a new history above a boundary
			// damaged or deleted (docs/scale-out.md, section 3.9):
			// follow it, or say why the log cannot be followed on.
			if err := x.followNewHistory(ctx, err); err != nil {
				return nil, sha, err
			}
			continue
		}
		if errors.Is(err, epochlog.ErrDamagedLog) && !x.cfg.Follow {
			// Damaged on a second whole read too: at rest, not in
			// transit.
			_, _, again := x.cfg.Log.Boundary(ctx, model, x.epoch)
			if errors.Is(again, epochlog.ErrDamagedLog) {
				if err := x.damagedBoundary(ctx, err); err != nil {
					return nil, sha, err
				}
				continue
			}
			// Read whole (in transit, then), gone, or not read at all
			// (the store failing): read again as any read is, with
			// retries through an outage.
			if again != nil {
				if err := bo.Wait(ctx); err != nil {
					return nil, sha, err
				}
			}
			continue
		}
		if !errors.Is(err, snapshot.ErrNotFound) {
			return nil, sha, fatal(err)
		}
		// Every boundary below the log's newest exists: one missing
		// there was deleted. Checked once, until this worker has
		// reached the log's end; from there on it extends the log.
		if !x.atLogEnd {
			beyond, err := x.logBeyond(ctx, x.epoch)
			if err != nil {
				return nil, sha, err
			}
			// Another worker may have cut the boundary, and epochs
			// beyond it, since it was read: a boundary is created
			// before any above it, so it is missing only if it is
			// still absent now that a later epoch is seen.
			if beyond {
				if _, _, err := x.cfg.Log.Boundary(ctx, model, x.epoch); !errors.Is(err, snapshot.ErrNotFound) {
					continue
				}
				if err := x.damagedBoundary(ctx, fmt.Errorf("epoch %d's boundary is missing, and the log holds objects of that epoch or later ones", x.epoch)); err != nil {
					return nil, sha, err
				}
				continue
			}
			x.atLogEnd = true
		}
		cut, err := x.cut(ctx)
		if err != nil {
			return nil, sha, err
		}
		if cut != nil {
			err := x.retry(ctx, NotReadySnapshots, fmt.Sprintf("write epoch %d's boundary", cut.Epoch), func(ctx context.Context) (err error) {
				b, sha, err = x.cfg.Log.CreateBoundary(ctx, cut)
				return err
			})
			if err != nil {
				return nil, sha, fatal(err)
			}
			return b, sha, x.check(b)
		}
		// No epoch is due: an idle stream's newest mixed model is
		// written as soon as a snapshot is due, not when data comes, and
		// its last epochs are logged.
		x.mixes.flushDue(x.log)
		if err := x.idleHeads(ctx); err != nil {
			return nil, sha, err
		}
		if x.prev != nil && x.written < x.prev.Epoch {
			if err := x.snapshot(ctx, x.prev, x.prevSHA); err != nil {
				return nil, sha, err
			}
		}
		if err := bo.WaitAtMost(ctx, x.untilDue()); err != nil {
			return nil, sha, err
		}
	}
}

// untilDue is how long until the next time an epoch or a generation may
// fall due by the clock alone (model.mixing.interval since the last mix,
// snapshot.interval since the last generation), when that is ahead; 0
// when neither is. The idle poll looks then, so that an idle tail is cut
// and written when its interval ends, not up to a poll later.
func (x *Epochs) untilDue() time.Duration {
	var d time.Duration
	for _, at := range []time.Time{x.mixedAt.Add(x.cfg.Interval), x.lastSnap.at.Add(x.cfg.SnapshotInterval)} {
		if u := time.Until(at); u > 0 && (d == 0 || u < d) {
			d = u
		}
	}
	return d
}

// sameSettings is what an error about another configuration in a model's
// epoch log tells the operator: the workers of a model agree on every
// setting of the history digest (config.HistoryDigest), and a key left out
// takes its default, which a release may change.
const sameSettings = "every worker of a model needs the same model.learner, model.drift, model.mixing, model.challengers and model.compare.promote settings, " +
	"the same source (source.kind, source.topics and source.group, or source.stream and its partitions; source.format, max_bytes and max_features) and the same labels settings: " +
	"set them explicitly, model.learner.algorithm first (its default was perceptron before it was arow), or give this worker its own model.name"

// check verifies a boundary against what this worker holds.
func (x *Epochs) check(b *epochlog.Boundary) error {
	if b.ConfigDigest != x.cfg.ConfigDigest {
		return fmt.Errorf("%w: epoch %d's boundary, cut by %s, has config digest %x, this worker's is %x: another configuration writes this model (%s)",
			ErrFatal, b.Epoch, b.Cut.Writer, b.ConfigDigest, x.cfg.ConfigDigest, sameSettings)
	}
	if b.BaseStateSHA256 != x.digest {
		// A boundary cut before base digests were chained records
		// W_{e-1}'s state_sha256: the chain begins again there, for every
		// worker that reads it (docs/scale-out.md, section 2.2).
		if full := x.base.State().Digest(); b.BaseStateSHA256 == full {
			if err := x.checkFollows(b); err != nil {
				return err
			}
			x.base, x.digest = epochlog.BaseOf(x.base.State(), full), full
			return nil
		}
		return fmt.Errorf("%w: epoch %d's boundary, cut by %s, learns from the model with base digest %x, this worker holds %x: "+
			"another worker began a new history, as after a damaged or missing boundary (docs/scale-out.md, section 3.9); started again, this worker continues the newest",
			ErrFatal, b.Epoch, b.Cut.Writer, b.BaseStateSHA256, x.digest)
	}
	return x.checkFollows(b)
}

// ofAnotherMix reports whether b, which check refused, follows the
// boundary before it but learns from another model than the one held:
// its cutter mixed the epoch before otherwise, as a worker of another
// release does (docs/scale-out.md, section 3.9).
func (x *Epochs) ofAnotherMix(b *epochlog.Boundary) bool {
	return x.prev != nil && b.ConfigDigest == x.cfg.ConfigDigest && b.BaseStateSHA256 != x.digest && x.checkFollows(b) == nil
}

// checkFollows verifies that b follows the previous boundary, if any.
func (x *Epochs) checkFollows(b *epochlog.Boundary) error {
	if x.prev != nil {
		if err := b.Follows(x.prev); err != nil {
			return fmt.Errorf("%w: %w", ErrFatal, err)
		}
	}
	for _, r := range b.Shards {
		if from, ok := x.from[r.Shard]; ok && r.From != from {
			return fmt.Errorf("%w: epoch %d's boundary starts shard %s at %d, the model includes it up to %d",
				ErrFatal, b.Epoch, r.Shard, r.From, from)
		}
	}
	return nil
}

// cut returns the boundary of the next epoch if one is due now, nil if
// not (section 3.4): for each shard at most EpochExamples beyond where it
// begins and no further than the broker's end. One is due when a shard
// has EpochExamples waiting, when some shard has new data and Interval
// passed since the mixed model, when a shard whose range the previous
// boundary clipped at its limit has new data (without labels), when a
// shard joins, or for a new model's first epoch.
func (x *Epochs) cut(ctx context.Context) (*epochlog.Boundary, error) {
	var ends map[shardid.ID]int64
	err := x.retry(ctx, NotReadySource, "read the shards' ends", func(ctx context.Context) (err error) {
		ends, err = x.cfg.Shards.Ends(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("epoch %d: the shards' ends: %w", x.epoch, err)
	}
	// Ownership is shown while no epoch is cut too: an idle worker
	// owns its shards as much as a busy one.
	// A shard known from the model's positions counts though Ends may
	// leave it out while it holds no message.
	owned := 0
	for shard := range ends {
		if x.owns(shard) {
			owned++
		}
	}
	for shard := range x.from {
		if _, ok := ends[shard]; !ok && x.owns(shard) {
			owned++
		}
	}
	x.metrics.ShardsOwned.Set(float64(owned))
	reason := ""
	if x.prev == nil && len(x.from) == 0 {
		reason = epochlog.CutStart
	}
	b := &epochlog.Boundary{
		Model:           x.cfg.Worker.Model,
		Epoch:           x.epoch,
		ConfigDigest:    x.cfg.ConfigDigest,
		BaseStateSHA256: x.digest,
	}
	spans := make([]waiting, 0, len(ends))
	for shard, end := range ends {
		from, ok := x.from[shard]
		if !ok {
			err := x.retry(ctx, NotReadySource, "find where shard "+shard.String()+" begins", func(ctx context.Context) (err error) {
				from, err = x.cfg.Shards.Start(ctx, shard, x.cfg.Start)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("epoch %d: where shard %s begins: %w", x.epoch, shard, err)
			}
			// A message that arrived since the ends were read may put a
			// new shard's start beyond its end: it begins at the end.
			from = min(from, end)
			if reason == "" {
				reason = epochlog.CutShards
			}
		}
		if end < from {
			return nil, fmt.Errorf("%w: shard %s ends at %d, before %d, where the model is: was the topic or stream recreated, or its messages deleted?", ErrFatal, shard, end, from)
		}
		spans = append(spans, waiting{shard, from, end})
	}
	shards := len(spans)
	for shard := range x.from {
		if _, ok := ends[shard]; !ok {
			shards++
		}
	}
	limit, limitReason := x.epochLimit(spans, shards)
	var labelsEnds map[shardid.ID]int64
	if x.cfg.Labels != nil {
		shards := make([]shardid.ID, len(spans))
		for i, sp := range spans {
			shards[i] = sp.shard
		}
		if labelsEnds, err = x.labelsEnds(ctx, shards); err != nil {
			return nil, fmt.Errorf("epoch %d: %w", x.epoch, err)
		}
	}
	newData, backlog := false, false
	for _, sp := range spans {
		to := min(sp.from+limit, sp.to)
		rg := epochlog.Range{Shard: sp.shard, From: sp.from, To: to}
		fresh, full := to > sp.from, sp.to-sp.from >= limit
		if x.cfg.Labels != nil {
			pace := x.labelsPace(sp.shard, limit/spread(x.cfg.Shards))
			if rg.Labels, err = x.labelsRange(ctx, sp.shard, labelsEnds, pace); err != nil {
				return nil, fmt.Errorf("epoch %d: %w", x.epoch, err)
			}
			offered := x.offered(sp.shard, sp.from)
			fresh = rg.Labels.To > rg.Labels.From || to > offered
			// The examples from the range's start up to what the
			// previous range offered wait for their labels, not for an
			// epoch: the limit makes an epoch due when it offers that
			// many examples not offered before, or reads that many
			// labels, and not at every label that comes while an
			// example waits for its window (labels.md, section 11.1).
			full = to-offered >= limit || rg.Labels.To-rg.Labels.From >= limit
		}
		if full && reason == "" && fresh {
			reason = limitReason
		}
		newData = newData || fresh
		if x.cfg.Labels != nil {
			backlog = backlog || (fresh && x.joinBacklog(sp.shard))
		} else {
			backlog = backlog || (fresh && clipped(x.prev, sp.shard))
		}
		b.Shards = append(b.Shards, rg)
	}
	for shard, from := range x.from {
		if _, ok := ends[shard]; !ok {
			// A shard never leaves a boundary (I1).
			rg := epochlog.Range{Shard: shard, From: from, To: from}
			if x.cfg.Labels != nil {
				if rg.Labels, err = x.labelsRange(ctx, shard, nil, 0); err != nil {
					return nil, fmt.Errorf("epoch %d: %w", x.epoch, err)
				}
			}
			b.Shards = append(b.Shards, rg)
		}
	}
	if reason == "" && newData && (time.Since(x.mixedAt) >= x.cfg.Interval || x.snapshotOverdue()) {
		reason = epochlog.CutInterval
	}
	if reason == "" && backlog {
		reason = epochlog.CutBacklog
	}
	if reason == "" {
		return nil, nil
	}
	epochlog.SortRanges(b.Shards)
	b.Promote = x.requestToRecord(ctx)
	b.Cut = epochlog.Cut{Writer: x.cfg.Writer, Created: time.Now().UTC(), Reason: reason, EpochExamples: int(limit), Interval: x.cfg.Interval}
	return b, nil
}

// clipped says whether shard's range in b held as many positions as b's
// cut allowed (Cut.EpochExamples): the shard may have had more waiting,
// which the next cut takes at once rather than after the interval, so that
// the end of a backlog is learned as fast as the rest of it
// (docs/scale-out.md, section 3.4). A b rebuilt from a generation records
// no limit: then no range was clipped.
func clipped(b *epochlog.Boundary, shard shardid.ID) bool {
	if b == nil || b.Cut.EpochExamples <= 0 {
		return false
	}
	r, ok := b.ShardRange(shard)
	return ok && r.To-r.From >= int64(b.Cut.EpochExamples)
}

// joinBacklog is clipped for a shard with labels (docs/scale-out.md,
// section 3.4, rule (e)): its range in the previous boundary read as
// many labels as the labels' pace allowed at that boundary's limit, or
// offered as many examples as the limit and reached its end. A range
// that reached less than it offered waits for labels, not for an epoch.
func (x *Epochs) joinBacklog(shard shardid.ID) bool {
	b := x.prev
	if b == nil || b.Cut.EpochExamples <= 0 {
		return false
	}
	r, ok := b.ShardRange(shard)
	if !ok || r.Labels == nil {
		return false
	}
	limit := int64(b.Cut.EpochExamples) / spread(x.cfg.Shards)
	if (r.Labels.To-r.Labels.From)/spread(x.cfg.Labels.Shards) >= 2*limit {
		return true
	}
	reached, ok := x.from[shard]
	return ok && reached == r.To && clipped(b, shard)
}

// DefaultMinEpochExamples is the least examples of a shard in an epoch
// that grows (EpochConfig.Growth) when EpochConfig.MinEpochExamples is 0,
// unless EpochExamples is less: small, since mixing costs most accuracy
// while a model is new or has just started afresh at a drift, and only
// those first epochs are this small (docs/scale-out.md, section 12).
const DefaultMinEpochExamples = 250

// restartShrink is how much smaller than the epochs of the model's
// whole history (Growth) the epochs are at least once a change of concept
// has started the model afresh: small enough that the new concept's
// first epochs are mixed often, as a new model's are, and large enough
// that a stream that has grown its epochs does not pay a barrier every
// few hundred examples a shard while the new concept's epochs grow again
// (docs/scale-out.md, section 3.4).
const restartShrink = 4

// minSnapshotShare is the least examples of a shard in an epoch that ends
// where a snapshot falls due, unless the epoch's limit is less: every
// epoch costs a barrier, and a cut at a snapshot shares what is left
// until it among the shards.
const minSnapshotShare = 1000

// waiting is a shard's data not learned yet: from where the model is to
// the shard's end.
type waiting struct {
	shard    shardid.ID
	from, to int64
}

// epochLimit is the most positions of a shard in the next epoch, and the
// reason to record when a shard reaches it: EpochExamples, or less while
// the model is young (Growth: 1/Growth of W_{e-1}'s examples per shard of
// the boundary, shards of them; of its labeled examples since a drift
// last started it afresh, when one did, but at least 1/restartShrink of
// the first), or where snapshot.every falls due
// sooner, since only a mixed model can be written as a generation
// (docs/scale-out.md, section 3.4). A snapshot falls due when the labeled
// examples reach a multiple of snapshot.every; those left until then are
// shared among the shards with new data (spans), each taking
// minSnapshotShare at least, since every epoch costs a barrier. Which
// shards have new data depends on when the cut is made; the cut records
// the limit it used. The limit counts a shard's messages, which are its
// positions except where shards share their positions (spread).
func (x *Epochs) epochLimit(spans []waiting, shards int) (int64, string) {
	limit, reason := x.cfg.EpochExamples, epochlog.CutExamples
	if k := int64(x.cfg.Growth); k > 0 && shards > 0 {
		grown := int64(x.model.Counts().Examples) / int64(shards) / k
		if since, ok := x.model.SinceRestart(); ok {
			// A change of concept started the model afresh: its epochs
			// grow again from there, as a new model's do, but from
			// 1/restartShrink of the size they had grown to rather than
			// from the floor.
			grown = max(int64(since)/int64(shards)/k, grown/restartShrink)
		}
		limit = min(limit, max(x.minEpochExamples(), grown))
	}
	if every := int64(x.cfg.SnapshotEvery); every > 0 {
		n := int64(0)
		for _, sp := range spans {
			if sp.to > sp.from {
				n++
			}
		}
		// The next multiple of snapshot.every: a function of W_{e-1}, so
		// that every worker cuts alike.
		labeled := int64(x.model.Counts().Labeled)
		left := every - labeled%every
		if n == 0 {
			n = 1
		}
		if share := max((left+n-1)/n, minSnapshotShare); share < limit {
			limit, reason = share, epochlog.CutSnapshot
		}
	}
	return limit * spread(x.cfg.Shards), reason
}

// minEpochExamples is EpochConfig.MinEpochExamples, or
// DefaultMinEpochExamples when that is 0.
func (x *Epochs) minEpochExamples() int64 {
	if n := x.cfg.MinEpochExamples; n > 0 {
		return n
	}
	return DefaultMinEpochExamples
}

// spread is the positions per message of a shard of s (Shards.Spread),
// 1 at least.
func spread(s Shards) int64 { return int64(max(s.Spread(), 1)) }

// snapshotOverdue reports whether snapshot.interval has passed since the
// newest generation.
func (x *Epochs) snapshotOverdue() bool {
	return x.cfg.SnapshotInterval > 0 && time.Since(x.lastSnap.at) >= x.cfg.SnapshotInterval
}
