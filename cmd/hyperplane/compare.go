package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hyperplane-ml/hyperplane/backtest"
	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/redact"
	"github.com/hyperplane-ml/hyperplane/learner/compare"
	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// runCompare prints how each challenger of the live model compares with
// it, as the newest generation in the model's store records it.
func runCompare(ctx context.Context, e *env, args []string) error {
	var jsonOut bool
	var shard shardid.ID
	fs := newFlagSet("compare", "--config FILE [--shard NAME] [--json] [--key value ...]", e)
	fs.BoolVar(&jsonOut, "json", false, "print one JSON line per challenger instead of the table")
	fs.Var(&shard, "shard", "in model.scope partition, the partition `NAME` whose model to read (kafka:<topic>/<partition>, or jetstream:<stream>#<partition> of a partitioned stream)")
	cfg, err := commandConfig(e, fs, args)
	if err != nil {
		return ignoreHelp(err)
	}
	if err := cfg.Validate(); err != nil {
		return invalidConfig(e, args, err)
	}
	store, closeStore, err := liveStore(ctx, cfg, shard, "compare reads")
	if err != nil {
		return err
	}
	defer closeStore()
	s, err := liveLatest(ctx, e, store, cfg, shard)
	if err != nil {
		return err
	}
	if len(s.State.Challengers) == 0 {
		return fmt.Errorf("generation %d of %s has no challengers (model.challengers; the worker learns them)", s.Generation, cfg.Model.Name)
	}
	standings, err := compare.Standings(cfg.Model.Name, s.State, cfg.Model.Compare.Alpha)
	if err != nil {
		return err
	}
	if jsonOut {
		return backtest.WriteJSON(e.stdout, standings)
	}
	fmt.Fprintf(e.stdout, "%s, generation %d:\n", cfg.Model.Name, s.Generation)
	for _, p := range s.State.Promotions {
		how := "requested " + p.Request
		if p.Auto {
			how = "auto"
		}
		after := fmt.Sprintf("%s/%d", p.Source, p.Offset)
		if p.Epoch > 0 {
			// Between two epochs: the boundary of the epoch records
			// where it ended in every shard.
			after = fmt.Sprintf("epoch %d", p.Epoch)
		}
		fmt.Fprintf(e.stdout, "promoted %s over %s after %s (example %d, %s)\n", p.Challenger, p.Replaced, after, p.Examples, how)
	}
	return backtest.WriteTable(e.stdout, standings, cfg.Model.Compare.Alpha)
}

// liveStore opens the live model's store (snapshot.url) for a command
// that does there what does says, or, in model.scope partition, shard's
// chain in it. A shard is required in partition scope, where each
// partition has a model of its own, and refused in global scope, where
// one model learns every partition.
func liveStore(ctx context.Context, cfg config.Config, shard shardid.ID, does string) (store *snapshot.Store, closeStore func(), err error) {
	if cfg.Snapshot.URL == "" {
		return nil, nil, usagef("config: snapshot.url: %s the live model's store; none is set", does)
	}
	partition := cfg.Model.Scope == config.ScopePartition
	if !partition && !shard.IsZero() {
		return nil, nil, usagef("-shard: model.scope is %s: one model learns every partition; leave -shard out (it names a partition's model in model.scope partition)", cfg.Model.Scope)
	}
	base, err := snapshot.OpenStore(ctx, cfg.Snapshot.URL)
	if err != nil {
		return nil, nil, fmt.Errorf("snapshot.url: %w", err)
	}
	if !partition {
		return base, func() { base.Close() }, nil //nolint:errcheck // it only read or wrote one object
	}
	if shard.IsZero() {
		err := missingShard(ctx, base, cfg.Model.Name)
		base.Close() //nolint:errcheck // it only listed
		return nil, nil, err
	}
	if store, err = base.PartitionChain(cfg.Model.Name, shard); err != nil {
		base.Close() //nolint:errcheck // the error is the partition's
		return nil, nil, fmt.Errorf("-shard: %w", err)
	}
	return store, func() { base.Close() }, nil //nolint:errcheck // it only read or wrote one object
}

// liveLatest is the newest valid generation of the live model in store,
// the one liveStore opened, with a warning on standard error for each
// damaged one skipped; with none, an error naming snapshot.url and the
// model, so that a wrong store or model.name shows.
func liveLatest(ctx context.Context, e *env, store *snapshot.Store, cfg config.Config, shard shardid.ID) (*snapshot.Snapshot, error) {
	s, err := store.Latest(ctx, cfg.Model.Name, loadLogger(e))
	if errors.Is(err, snapshot.ErrNotFound) {
		where := "snapshot.url " + redact.URLs(cfg.Snapshot.URL)
		if !shard.IsZero() {
			where += ", partition " + shard.String() + ","
		}
		return nil, fmt.Errorf("%s holds no generation of model %s (model.name): %w", where, cfg.Model.Name, err)
	}
	return s, err
}

// missingShard is the error of a command on a model of partition scope
// given no -shard: it names the shards whose models store holds.
func missingShard(ctx context.Context, store *snapshot.Store, model string) error {
	shards, err := store.PartitionShards(ctx, model)
	if err != nil {
		return fmt.Errorf("snapshot.url: %w", err)
	}
	if len(shards) == 0 {
		return usagef("-shard: required in model.scope partition, where each partition has a model of its own; snapshot.url holds none of %s yet", model)
	}
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.String()
	}
	return usagef("-shard: required in model.scope partition, where each partition has a model of its own; snapshot.url holds those of %s", strings.Join(names, ", "))
}
