package snapshot

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// ResumeOptions say how Resume continues a model.
type ResumeOptions struct {
	// Writer names this worker in the snapshots it writes. It is
	// required with a store: the caller owns the default (the command
	// takes config.Config.SnapshotWriter, snapshot.writer or the host
	// name), so that it is set in one place.
	Writer string
	// Keep is how many of the newest generations the snapshotter keeps,
	// at least 1.
	Keep int
	// Reset starts a new model when the newest snapshot was trained under
	// another configuration, instead of refusing to start.
	Reset bool
	// Start, if not nil, names where a new model's source begins, for the
	// log.
	Start fmt.Stringer
	// Challengers are the model's configured challengers. A snapshot
	// whose model is a promoted challenger's configuration
	// (learner.Model.Promote) is continued when its history's last
	// promotion names one of them under the same configuration
	// (docs/compare.md, "Promotion").
	Challengers []learner.ChallengerConfig
	// Log may be nil.
	Log *zap.Logger
}

// Resumed is the model a worker continues, and what writes its next
// generations.
type Resumed struct {
	Model *learner.Model
	// Positions are those Model includes, the snapshot's: nil for a new
	// model.
	Positions map[string]int64
	// Snapshotter writes the generations after every one the store holds,
	// unreadable ones included, since a key is never written twice; nil
	// without a store.
	Snapshotter *Snapshotter
	// Generation is the generation the model was restored from, 0 for a
	// new model.
	Generation uint64
	// Created is when that generation was written, zero for a new model.
	Created time.Time
	// Snapshot is that generation as read, nil for a new model: its
	// epoch keys say whether it continues an epoch log.
	Snapshot *Snapshot
	// Challengers are the challengers the model goes on with
	// (learner.Model.SetChallengers): ResumeOptions.Challengers, or, for
	// a model that serves a promoted challenger's configuration, those
	// with the promoted one replaced by the configuration given to Resume
	// under the name the history gives it.
	Challengers []learner.ChallengerConfig
}

// Resume returns the model named model to continue under cfg: the newest
// valid generation in store (see Store.Latest: an unreadable one is
// skipped with a warning), or a new model when the store holds none. A
// snapshot trained under another configuration stops it, with an error
// that names the setting, unless opts.Reset starts a new model instead.
//
// A nil store is none, which is allowed but loses the model at every
// stop: Resume warns about it and returns a new model without a
// snapshotter. With a store, an empty opts.Writer is an error. Its
// errors and warnings name the configuration keys the operator sets
// (snapshot.url, snapshot.reset).
func Resume(ctx context.Context, store *Store, model string, cfg learner.Config, opts ResumeOptions) (Resumed, error) {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	start := zap.Skip()
	if opts.Start != nil {
		start = zap.Stringer("start", opts.Start)
	}
	if store == nil {
		log.Warn("no snapshot.url: the model is not saved and is lost when the worker stops; a restart begins again at source.start", start)
		return newModel(cfg, nil, opts.Challengers)
	}
	if opts.Writer == "" {
		return Resumed{}, errors.New("snapshot.writer: empty (ResumeOptions.Writer): a worker with a store must name itself in the generations it writes")
	}
	gens, err := store.Generations(ctx, model)
	if err != nil {
		const hint = "check that the bucket or directory exists and that the credentials may list, read and write it"
		if Refused(err) {
			// Still ErrUnavailable to those who retry a read while it
			// fails (credentials may be mended), worded as what it is.
			return Resumed{}, unavailable{fmt.Errorf("snapshot.url: the store refused to list the model's generations: %w (%s)", err, hint)}
		}
		return Resumed{}, fmt.Errorf("snapshot.url: %w: %w (%s)", ErrUnavailable, err, hint)
	}
	var next uint64 = 1
	if len(gens) > 0 {
		next = gens[len(gens)-1] + 1
	}
	snapshotter := NewSnapshotter(store, model, opts.Writer, next, opts.Keep, log)

	latest, err := store.Latest(ctx, model, log)
	switch {
	case errors.Is(err, ErrNotFound):
		log.Info("no snapshot: a new model", zap.String("model", model), start)
		return newModel(cfg, snapshotter, opts.Challengers)
	case errors.Is(err, ErrNewerFormat), errors.Is(err, ErrInvalidState), errors.Is(err, ErrCorrupt):
		return Resumed{}, fmt.Errorf("snapshot: %w", err)
	case err != nil:
		return Resumed{}, fmt.Errorf("snapshot: %w: %w", ErrUnavailable, err)
	}
	challengers := opts.Challengers
	if err := latest.Compatible(cfg); err != nil {
		cs, ok := promoted(latest, model, cfg, opts.Challengers)
		switch {
		case ok:
			challengers = cs
			p := latest.State.Promotions[len(latest.State.Promotions)-1]
			// A promotion between two epochs has no example's position:
			// the epoch says where it took effect.
			where := []zap.Field{zap.String("source", p.Source), zap.Int64("offset", p.Offset)}
			if p.Epoch > 0 {
				where = []zap.Field{zap.Uint64("epoch", p.Epoch)}
			}
			log.Info("the model serves a promoted challenger's configuration; model.learner goes on as a challenger (the file may be updated to say so: docs/compare.md, Promotion)",
				append([]zap.Field{zap.String("model", model), zap.String("promoted", p.Challenger), zap.String("replaced", p.Replaced),
					zap.String("algorithm", string(latest.State.Config.Algorithm)), zap.Uint64("examples", p.Examples)}, where...)...)
		case !opts.Reset:
			return Resumed{}, fmt.Errorf("model %s generation %d: %w (%s)", model, latest.Generation, err, continueHint(err))
		default:
			log.Warn("snapshot incompatible: starting a new model (snapshot.reset)", zap.Error(err))
			return newModel(cfg, snapshotter, opts.Challengers)
		}
	}
	m, err := learner.Restore(latest.State)
	if err != nil {
		return Resumed{}, fmt.Errorf("snapshot generation %d: %w", latest.Generation, err)
	}
	log.Info("resuming from snapshot", zap.String("model", model), zap.Uint64("generation", latest.Generation),
		zap.Any("positions", latest.Positions), zap.Uint64("examples", m.Metrics().Examples))
	return Resumed{Model: m, Positions: latest.Positions, Snapshotter: snapshotter, Generation: latest.Generation, Created: latest.Created, Snapshot: latest,
		Challengers: challengers}, nil
}

// promoted says whether the history of snap explains why its model's
// configuration is not cfg: its last promotion made the challenger cs
// names the model, under the configuration cs gives it. The challengers
// the model goes on with are then cs with that one replaced by cfg,
// under the name the old model's configuration took.
func promoted(snap *Snapshot, model string, cfg learner.Config, cs []learner.ChallengerConfig) ([]learner.ChallengerConfig, bool) {
	ps := snap.State.Promotions
	if len(ps) == 0 {
		return nil, false
	}
	last := ps[len(ps)-1]
	for i, c := range cs {
		if c.Name != last.Challenger || snap.Compatible(c.Config) != nil {
			continue
		}
		// The configured model.learner goes by the name under which the
		// snapshot holds its configuration as a challenger, else by the
		// name the last promotion gave the configuration it replaced. A
		// configured challenger may have model.learner's configuration
		// too: the name is then the one the last promotion gave, or one
		// the configuration does not list, never that challenger's.
		configured := func(name string) bool {
			return slices.ContainsFunc(cs, func(o learner.ChallengerConfig) bool { return o.Name == name && o.Name != c.Name })
		}
		name, found := last.Replaced, false
		for _, sc := range snap.State.Challengers {
			if !reflect.DeepEqual(sc.State.Config.Canonical(), cfg.Canonical()) {
				continue
			}
			if sc.Name == last.Replaced {
				name = sc.Name
				break
			}
			if !found && !configured(sc.Name) {
				name, found = sc.Name, true
			}
		}
		if configured(name) {
			return nil, false
		}
		out := slices.Clone(cs)
		out[i] = learner.ChallengerConfig{Name: name, Config: cfg}
		return out, true
	}
	return nil, false
}

// continueHint tells the operator of a snapshot that Compatible refused
// how to go on: set the key that differs as the snapshot has it (a setting
// left out of the configuration takes its default, which may have changed
// since the snapshot was written), or start a new model.
func continueHint(err error) string {
	var ie *IncompatibleError
	if !errors.As(err, &ie) {
		return "set snapshot.reset to start a new model (over one partition; over several, give it its own model.name)"
	}
	key := "model.learner." + ie.Field
	if strings.HasPrefix(ie.Field, "drift.") {
		key = "model." + ie.Field
	}
	return fmt.Sprintf("to continue it, set %s explicitly to its value in the snapshot, %s; or set snapshot.reset to start a new model (over one partition; over several, give it its own model.name)", key, ie.Snapshot)
}

func newModel(cfg learner.Config, s *Snapshotter, challengers []learner.ChallengerConfig) (Resumed, error) {
	m, err := learner.New(cfg)
	if err != nil {
		return Resumed{}, fmt.Errorf("model.learner: %w", err)
	}
	return Resumed{Model: m, Snapshotter: s, Challengers: challengers}, nil
}

// DamagedAbove is the generations of model in store above gen, the
// generation Resume continued (0: none), in order, when every one of them
// is damaged, and none when there is none above it: epochs rebuild
// damaged generations or begin a new history above them
// (docs/scale-out.md, section 3.9). newer
// reports a generation above gen that reads and fits cfg: another worker
// wrote it since Resume read the store, and the model should be resumed
// again. One above 0 that reads but does not fit is one Resume passed over
// (ResumeOptions.Reset): a new model must not write its epochs into that
// model's log, and DamagedAbove says so. One whose first generation is
// not written yet is joined.
func DamagedAbove(ctx context.Context, store *Store, model string, cfg learner.Config, gen uint64) (damaged []uint64, newer bool, err error) {
	gens, err := store.Generations(ctx, model)
	if err != nil {
		return nil, false, err
	}
	for _, g := range gens {
		if g <= gen {
			continue
		}
		snap, err := store.Load(ctx, model, g)
		switch {
		case errors.Is(err, ErrCorrupt):
			damaged = append(damaged, g)
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, false, err
		case gen == 0 && snap.Compatible(cfg) != nil:
			return nil, false, fmt.Errorf("snapshot.url: the store holds generations %d to %d of another model named %s, which this worker did not continue (snapshot.reset starts a new model over one partition only: over several, the stored model's epoch log is under the same name): give this model its own model.name or store", gens[0], gens[len(gens)-1], model)
		default:
			return nil, true, nil
		}
	}
	return damaged, false, nil
}
