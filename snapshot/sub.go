package snapshot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperplane-ml/hyperplane/shardid"
)

// Sub is the store under s's prefix + "/" + path, on s's bucket: what
// partition scope keeps each shard's generation chain in, as a model of
// its own (docs/scale-out.md, section 6). store.Sub("<model>/partition/<segment>")
// holds the chain of the shard whose shardid.ID.Segment is <segment> exactly as
// a one-shard model's generations, under the model's own name:
//
//	<prefix>/<model>/partition/<segment>/<model>/<gen, 20 digits>.msgpack
//
// so that Resume, Latest, Write and Retain work on it unchanged, and a
// snapshot in it names the model it belongs to. The parent's Generations
// do not see it: they skip directories.
//
// path is a slash-separated key path; slashes at either end are dropped,
// and an empty path gives a store with s's prefix. Its segments should
// be names a key may hold (a model name, a shard's segment): a file:// store
// opened by OpenStore refuses to create keys whose segments fileblob
// would escape, and says so when it writes.
//
// A Sub keeps s's guarantees: it creates keys the same way, by link in
// a file:// store's directory. Closing a Sub does not close the bucket,
// which s owns: the Sub is usable until s is closed.
func (s *Store) Sub(path string) *Store {
	prefix := s.prefix
	if path = strings.Trim(path, "/"); path != "" {
		if prefix != "" {
			prefix += "/"
		}
		prefix += path
	}
	return &Store{bucket: s.bucket, prefix: prefix, dir: s.dir, dirMode: s.dirMode, shared: true, secrets: s.secrets}
}

// PartitionChain is the store of shard's chain of generations of model in
// partition scope: s.Sub("<model>/partition/<segment>"), where segment is
// the shard's Segment, whose error it returns.
func (s *Store) PartitionChain(model string, shard shardid.ID) (*Store, error) {
	seg, err := shard.Segment()
	if err != nil {
		return nil, err
	}
	return s.Sub(model + "/partition/" + seg), nil
}

// LoadPartition reads generation gen of shard's chain of model in
// partition scope (PartitionChain). A shard that has no chain, like a
// generation the chain does not hold, gives an error wrapping
// ErrNotFound.
func (s *Store) LoadPartition(ctx context.Context, model string, shard shardid.ID, gen uint64) (*Snapshot, error) {
	chain, err := s.PartitionChain(model, shard)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return chain.Load(ctx, model, gen)
}

// PartitionShards lists, in shard order, the shards that have a chain of
// model in partition scope (PartitionChain) in s: those whose segment
// names a directory under <model>/partition/. A directory that is no
// shard's segment is left out.
func (s *Store) PartitionShards(ctx context.Context, model string) ([]shardid.ID, error) {
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	dir := ModelDir(s.prefix, model) + "partition/"
	dirs, err := s.ListDirs(ctx, dir)
	if err != nil {
		return nil, err
	}
	var shards []shardid.ID
	for _, d := range dirs {
		if id, err := shardid.ParseSegment(strings.TrimSuffix(strings.TrimPrefix(d, dir), "/")); err == nil {
			shards = append(shards, id)
		}
	}
	slices.SortFunc(shards, shardid.Compare)
	return shards, nil
}

// partitionScope is, when s holds no generation of model itself but
// chains of it in partition scope, an error that says so and names the
// chains' model URLs, urlOf(segment) for each; nil otherwise. A reader
// given the model's URL would else say only that there is no snapshot.
func (s *Store) partitionScope(ctx context.Context, model string, urlOf func(seg string) string) error {
	shards, err := s.PartitionShards(ctx, model)
	if err != nil || len(shards) == 0 {
		return nil
	}
	urls := make([]string, 0, len(shards))
	for _, id := range shards {
		seg, err := id.Segment()
		if err != nil {
			continue
		}
		urls = append(urls, urlOf(seg))
	}
	return fmt.Errorf("model %s is learned in partition scope, one model per partition: name a partition's model, %s: %w", model, strings.Join(urls, " or "), ErrNotFound)
}
