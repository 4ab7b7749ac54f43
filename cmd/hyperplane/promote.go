package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hyperplane-ml/hyperplane/shardid"
	"github.com/hyperplane-ml/hyperplane/snapshot"
)

// runPromote writes the model's promotion request to its store
// (docs/compare.md, "Promotion"), refusing a challenger the newest
// generation does not hold, naming it and those it holds.
func runPromote(ctx context.Context, e *env, args []string) error {
	var name string
	var shard shardid.ID
	fs := newFlagSet("promote", "--config FILE --challenger NAME [--shard NAME] [--key value ...]", e)
	fs.StringVar(&name, "challenger", "", "the challenger `NAME` to make the model")
	fs.Var(&shard, "shard", "in model.scope partition, the partition `NAME` whose model to promote (kafka:<topic>/<partition>, or jetstream:<stream>#<partition> of a partitioned stream)")
	cfg, err := commandConfig(e, fs, args)
	if err != nil {
		return ignoreHelp(err)
	}
	if err := cfg.Validate(); err != nil {
		return invalidConfig(e, args, err)
	}
	if name == "" {
		return usagef("-challenger: required: the challenger to make the model")
	}
	store, closeStore, err := liveStore(ctx, cfg, shard, "promote writes its request to")
	if err != nil {
		return err
	}
	defer closeStore()
	s, err := liveLatest(ctx, e, store, cfg, shard)
	if err != nil {
		return err
	}
	if err := s.Promotable(name, cfg.Model.Name); err != nil {
		return usagef("-challenger: %v", err)
	}
	r := snapshot.NewPromotionRequest(name, time.Now())
	r.Counts = s.ExampleCounts(cfg.Model.Name)
	for _, c := range s.State.Challengers {
		if c.Name == name {
			r.Examples = c.State.Examples
		}
	}
	if err := store.RequestPromotion(ctx, cfg.Model.Name, r); err != nil {
		return err
	}
	when := "after the next example the worker learns once it has read the request (at its start and after each generation it writes)"
	if s.Epoch > 0 {
		when = "after the mix of the epoch whose boundary records the request (the next boundary a worker cuts)"
	}
	fmt.Fprintf(e.stdout, "requested: %s becomes the model of %s %s (id %s)\n", name, cfg.Model.Name, when, r.ID)
	return nil
}
