package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// FollowStart is where a replay of the epoch log live begins for model:
// its first boundary if the log still has it (nil), or else its oldest
// generation from which the log goes on: the oldest at or above the
// epoch below the log's first. A model learned from one shard before its
// source grew has generations below that, which no epoch of the log
// follows (docs/scale-out.md, section 7).
func FollowStart(ctx context.Context, live *epochlog.Log, model string) (*snapshot.Snapshot, error) {
	_, _, err := live.Boundary(ctx, model, 1)
	if !errors.Is(err, snapshot.ErrNotFound) {
		return nil, err
	}
	gens, err := live.Generations(ctx, model)
	if err != nil {
		return nil, err
	}
	if len(gens) == 0 {
		return nil, fmt.Errorf("replay: the epoch log of %s has neither its first boundary nor a generation to begin from", model)
	}
	epochs, err := live.Epochs(ctx, model)
	if err != nil {
		return nil, err
	}
	at := 0
	if len(epochs) > 0 {
		for i, g := range gens {
			if g+1 >= epochs[0] {
				at = i
				break
			}
		}
	}
	start, err := live.Load(ctx, model, gens[at])
	if errors.Is(err, snapshot.ErrCorrupt) {
		on := "no generation above it"
		if at+1 < len(gens) {
			on = fmt.Sprintf("to begin from the next, --from-generation %d", gens[at+1])
		}
		return nil, fmt.Errorf("replay: generation %d, where the replay of the epoch log begins (the oldest the log goes on from), does not read (%w); %s", gens[at], err, on)
	}
	return start, err
}

// Followed is what following an epoch log learned: the model and its
// positions, the last epoch mixed, the generation it began from (0: the
// log's start), the gaps it went on over, and the epochs checked against
// a live generation, those that have none and those whose live generation
// is damaged. With labels
// (EpochConfig.Labels), Joins are the shards' joins of the last epoch and
// JoinCounts their outcomes, summed.
type Followed struct {
	Model      *learner.Model
	Positions  map[string]int64
	Mixed      uint64
	Began      uint64
	Gaps       []Gap
	Checked    []uint64
	Unchecked  []uint64
	Damaged    []uint64
	Joins      map[shardid.ID]*JoinState
	JoinCounts JoinCounts
}

// Gap is a part of the live log that Follow could not learn: epoch
// From's boundary is damaged or missing, no history above it begins from
// the model of the epoch before, and Follow went on from live generation
// To, the oldest at or above From that reads, as stored. Epochs From to
// To are neither learned nor checked.
type Gap struct{ From, To uint64 }

// Follow learns the epochs that the live log records, from start (nil:
// the log's first boundary; else a generation, FollowStart's), into out,
// which holds everything it writes: the live log is only read. cfg says
// how to learn (its Log, Follow, Verify and Writer are Follow's own).
// Every mixed model is checked against the live generation of its epoch
// where there is one: the result is the live model bit for bit, or Follow
// stops saying where it differs. challengers are the model's
// (model.challengers), which a new model begins with and start's goes on
// with (learner.Model.SetChallengers), unless start's model was promoted:
// it goes on with the challengers start holds.
func Follow(ctx context.Context, cfg EpochConfig, live, out *epochlog.Log, start *snapshot.Snapshot, lcfg learner.Config, challengers []learner.ChallengerConfig, log *zap.Logger) (*Followed, error) {
	model := cfg.Worker.Model
	m, epoch, prev, positions, err := Continue(start, lcfg, cfg.ConfigDigest)
	if err != nil {
		return nil, err
	}
	// A promoted model goes on with the challengers its generation holds:
	// the configured ones, the promoted one's place taken by the old
	// model's configuration (docs/scale-out.md, section 3.11).
	if promoted := start != nil && len(start.State.Promotions) > 0; !promoted && (len(challengers) > 0 || len(m.Challengers()) > 0) {
		if _, _, err := m.SetChallengers(challengers); err != nil {
			return nil, fmt.Errorf("model.challengers: %w", err)
		}
	}
	cfg.BaseDigest = BaseDigestOf(start, m)
	f := &Followed{}
	if start != nil {
		f.Began = start.Generation
	}
	if cfg.Labels != nil {
		// The shards' joins go on from those start recorded.
		l := *cfg.Labels
		l.State = nil
		if start != nil {
			if l.State, err = DecodeJoins(start.Joins); err != nil {
				return nil, fmt.Errorf("replay: generation %d: %w", start.Generation, err)
			}
		}
		cfg.Labels = &l
	}
	cfg.Log = followedLog{Log: out, live: live}
	cfg.Writer = "hyperplane replay"
	cfg.Follow = true
	cfg.Verify = func(ctx context.Context, e uint64, got [32]byte) error {
		snap, err := live.Load(ctx, model, e)
		if errors.Is(err, snapshot.ErrNotFound) {
			f.Unchecked = append(f.Unchecked, e)
			return nil
		}
		if errors.Is(err, snapshot.ErrCorrupt) {
			// The replay learned the epoch from its boundary: the live
			// generation is only what it would have been checked against.
			log.Warn("the live generation of an epoch is damaged: the epoch is learned, not checked", zap.Uint64("epoch", e), zap.Error(err))
			f.Damaged = append(f.Damaged, e)
			return nil
		}
		if err != nil {
			return err
		}
		if want := snap.State.Digest(); want != got {
			err := fmt.Errorf("replay: epoch %d gives state_sha256 %x, the live generation %d holds %x", e, got, e, want)
			return olderBase(ctx, live, model, e, err)
		}
		f.Checked = append(f.Checked, e)
		return nil
	}
	cfg.Resume = func(ctx context.Context, e uint64) (*snapshot.Snapshot, error) {
		gens, err := live.Generations(ctx, model)
		if err != nil {
			return nil, err
		}
		for _, g := range gens {
			if g < e {
				continue
			}
			snap, err := live.Load(ctx, model, g)
			if errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, snapshot.ErrCorrupt) {
				continue
			}
			if err != nil {
				return nil, err
			}
			// out holds the model the replay goes on from, as it holds
			// every model it ends at: the epochs after it may be none.
			if err := out.Write(ctx, snap); err != nil {
				return nil, fmt.Errorf("replay: write generation %d, gone on from: %w", g, err)
			}
			f.Gaps = append(f.Gaps, Gap{From: e, To: g})
			return snap, nil
		}
		return nil, nil
	}
	x := NewEpochs(cfg, m, epoch, prev, positions, nil, log)
	if err := x.Run(ctx); err != nil {
		return nil, err
	}
	f.Model, f.Positions, f.Mixed = x.Model(), x.Positions(), x.Mixed()
	f.Joins, f.JoinCounts = x.Joins(), x.JoinCounts()
	return f, nil
}

// olderBase is err, a replay's mixed model of epoch e that differs from
// the live generation, said with its likely cause when the live
// generation e goes on from, e-1, was written in an earlier snapshot
// format: workers of that hyperplane learned the epochs up to it (and
// maybe part of e) otherwise, and a replay reproduces the live bits only
// from the first generation the upgraded workers wrote.
func olderBase(ctx context.Context, live *epochlog.Log, model string, e uint64, err error) error {
	if e < 2 {
		return err
	}
	base, lerr := live.Load(ctx, model, e-1)
	if lerr != nil || base.Format == 0 || base.Format >= snapshot.Format {
		return err
	}
	return fmt.Errorf("%w: generation %d, which epoch %d goes on from, was written in snapshot format %d by an earlier hyperplane, "+
		"which learned its epochs otherwise; replay from the first generation written in format %d (--from-generation; hyperplane inspect prints each generation's format)",
		err, e-1, e, base.Format, snapshot.Format)
}

// Follow learns the epochs that the live log records from start
// (FollowStart's) into out, as the function Follow does, configured by
// the pipeline's options: the mixing the log was written with
// (Options.Written), the worker's configuration and the shards, labels
// over them (Options.EpochLabels), the model's learner and challengers.
// It writes no generation on a schedule, only those of the epochs that
// promoted, as a replay does.
func (p *Pipeline) Follow(ctx context.Context, live, out *epochlog.Log, start *snapshot.Snapshot) (*Followed, error) {
	cfg, err := p.mixing(ctx, live, start)
	if err != nil {
		return nil, err
	}
	cfg.SnapshotEvery, cfg.SnapshotInterval, cfg.Keep = 0, 0, 0
	cfg.Worker, cfg.Shards = p.conn.Worker, p.conn.Shards
	cfg.Worker.Snapshots = nil
	if p.opts.Labels != nil && p.opts.EpochLabels != nil {
		if cfg.Labels, err = p.opts.EpochLabels(ctx); err != nil {
			return nil, err
		}
	}
	return Follow(ctx, cfg, live, out, start, p.opts.Learner, p.opts.Challengers, p.opts.Log)
}

// followedLog is the epoch log Follow follows: the live boundaries, read
// only, and everything it writes (results, generations) in a store of its
// own.
type followedLog struct {
	*epochlog.Log
	live *epochlog.Log
}

func (l followedLog) Boundary(ctx context.Context, model string, e uint64) (*epochlog.Boundary, [32]byte, error) {
	return l.live.Boundary(ctx, model, e)
}

// Epochs lists the live log's epochs: Follow looks there for a new
// history above a boundary damaged or deleted.
func (l followedLog) Epochs(ctx context.Context, model string) ([]uint64, error) {
	return l.live.Epochs(ctx, model)
}

func (l followedLog) CreateBoundary(context.Context, *epochlog.Boundary) (*epochlog.Boundary, [32]byte, error) {
	return nil, [32]byte{}, errors.New("replay: a replay never cuts an epoch")
}

// NotChecked says which epochs f could not check against the live
// model, and why: those of its gaps, which it did not learn, and those
// it learned of which the live store holds no generation, or a damaged
// one. A generation is written only when a snapshot is due, and
// retention removes the oldest. "" when every epoch was learned and checked. gens are the live
// generations, oldest first.
func (f *Followed) NotChecked(gens []uint64) string {
	var parts []string
	for _, g := range f.Gaps {
		epochs := fmt.Sprintf("epoch %d", g.From)
		if g.To > g.From {
			epochs = fmt.Sprintf("epochs %d-%d", g.From, g.To)
		}
		parts = append(parts, fmt.Sprintf("%s: not replayed (epoch %d's boundary is damaged or missing in the live log, and no history above it begins from the model of the epoch before): the replay went on from live generation %d, as stored", epochs, g.From, g.To))
	}
	if n := len(f.Gaps); n > 0 && f.Gaps[n-1].To == f.Mixed {
		parts = append(parts, fmt.Sprintf("the log holds no epoch after generation %d: nothing after it was replayed or checked, and the state_sha256 is that generation's as stored", f.Mixed))
	} else if n == 0 && len(f.Checked)+len(f.Unchecked)+len(f.Damaged) == 0 {
		if f.Began == 0 {
			return "the log holds no epoch: nothing was replayed or checked"
		}
		return fmt.Sprintf("the log holds no epoch after generation %d, where the replay began (the epoch log keeps nothing at or below its oldest live generation, whether or not snapshot.keep removed any before it): nothing was replayed or checked, and the state_sha256 is that generation's as stored", f.Began)
	}
	var before, between, after []uint64
	for _, e := range f.Unchecked {
		switch {
		case len(gens) == 0 || e > gens[len(gens)-1]:
			after = append(after, e)
		case e < gens[0]:
			before = append(before, e)
		default:
			between = append(between, e)
		}
	}
	if len(before) > 0 {
		parts = append(parts, fmt.Sprintf("epochs %s: before the oldest live generation, %d (snapshot.keep removed theirs)", JoinEpochs(before, ", "), gens[0]))
	}
	if len(between) > 0 {
		parts = append(parts, fmt.Sprintf("epochs %s: no live generation (one is written only when snapshot.every or snapshot.interval is due)", JoinEpochs(between, ", ")))
	}
	if len(f.Damaged) > 0 {
		parts = append(parts, fmt.Sprintf("epochs %s: the live generation is damaged and does not read (the replay learned the epoch from its boundary, and the epochs after it from that)", JoinEpochs(f.Damaged, ", ")))
	}
	if len(after) > 0 {
		newest := "none is stored"
		if len(gens) > 0 {
			newest = fmt.Sprintf("the newest is %d", gens[len(gens)-1])
		}
		parts = append(parts, fmt.Sprintf("epochs %s: no live generation yet (%s; the live worker writes one when a snapshot is due, and at shutdown)", JoinEpochs(after, ", "), newest))
	}
	return strings.Join(parts, "; ")
}

// JoinEpochs writes the ascending epochs es with sep between them, runs of
// three or more as first-last when sep is not a comma alone (which JSON
// arrays need).
func JoinEpochs(es []uint64, sep string) string {
	var b strings.Builder
	for i := 0; i < len(es); i++ {
		if i > 0 {
			b.WriteString(sep)
		}
		j := i
		for sep != "," && j+1 < len(es) && es[j+1] == es[j]+1 {
			j++
		}
		if j-i >= 2 {
			fmt.Fprintf(&b, "%d-%d", es[i], es[j])
			i = j
			continue
		}
		fmt.Fprintf(&b, "%d", es[i])
	}
	return b.String()
}
