package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

// promotionObject is the name of a model's promotion request beside its
// generations (ModelDir).
const promotionObject = "promotion.json"

// PromotionRequest asks the worker of a model to make one of its
// challengers the model (docs/compare.md, "Promotion"). hyperplane
// promote writes it; the worker reads it after each generation it
// writes, and applies it once: the generation that holds the promoted
// model records ID in its history (learner.Promotion.Request).
type PromotionRequest struct {
	Challenger string    `json:"challenger"`
	ID         string    `json:"id"`
	Requested  time.Time `json:"requested"`
	// Examples is the challenger's example count in the generation
	// hyperplane promote found it in. A challenger of that name that has
	// learned fewer was started anew since (removed and configured again,
	// or configured otherwise under the same name): it is not the one
	// asked for (Stale). 0 in a request that does not say.
	Examples uint64 `json:"examples,omitempty"`
	// Counts are the example counts, in that generation, of the model
	// (under the name of its configuration, learner.NameOf) and of each
	// of its challengers, by name: every configuration that goes on
	// learns the same examples, so a challenger that has learned fewer
	// since was started anew, however many it has learned (Stale). Nil
	// in a request that does not say.
	Counts map[string]uint64 `json:"counts,omitempty"`
}

// Stale reports whether the challenger of m named by r, c, was started
// anew since r was written: it has learned fewer examples than the
// challenger r was asked for, or fewer since r than another of m's
// configurations (m itself, named by its configuration's name given
// base, model.name, or another challenger) that went on since. A
// challenger started anew stays stale once it has learned as many
// examples as the one asked for had. Only a configuration of no larger
// dimension than c's counts: one of a larger dimension learns the
// examples whose dense part is too long for c, which c's decoder refuses
// (wire.Decoder.DecodeHashings), so it may have learned more since.
func (r *PromotionRequest) Stale(m *learner.Model, base string, c *learner.Model) bool {
	n := c.Counts().Examples
	if n < r.Examples {
		return true
	}
	since, dim := n-r.Examples, c.Config().Dimension()
	longer := func(name string, o *learner.Model) bool {
		then, ok := r.Counts[name]
		now := o.Counts().Examples
		return ok && o.Config().Dimension() <= dim && now >= then && now-then > since
	}
	if longer(m.Name(base), m) {
		return true
	}
	return slices.ContainsFunc(m.Challengers(), func(o *learner.Challenger) bool { return longer(o.Name, o.Model) })
}

// ExampleCounts are the example counts of the model of s, configured as
// model, and of its challengers, by name, for a request's Counts.
func (s *Snapshot) ExampleCounts(model string) map[string]uint64 {
	counts := map[string]uint64{learner.NameOf(s.State.Promotions, model): s.State.Examples}
	for _, c := range s.State.Challengers {
		counts[c.Name] = c.State.Examples
	}
	return counts
}

// NewPromotionRequest is a request to promote challenger, with an id of
// its own.
func NewPromotionRequest(challenger string, now time.Time) PromotionRequest {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return PromotionRequest{Challenger: challenger, ID: hex.EncodeToString(b[:]), Requested: now.UTC()}
}

// Applied reports whether history holds the promotion r asked for.
func (r *PromotionRequest) Applied(history []learner.Promotion) bool {
	for _, p := range history {
		if p.Request == r.ID {
			return true
		}
	}
	return false
}

// RequestPromotion writes r as model's promotion request, replacing the
// one before. It checks nothing: hyperplane promote first reads the
// newest generation and refuses a challenger the model does not have.
func (s *Store) RequestPromotion(ctx context.Context, model string, r PromotionRequest) (err error) {
	defer s.hide(&err)
	if err := CheckModel(model); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	key := ModelDir(s.prefix, model) + promotionObject
	if err := s.upload(ctx, key, data, &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("promotion request %s: %w", key, err)
	}
	return nil
}

// PromotionRequest reads model's promotion request; nil when there is
// none.
func (s *Store) PromotionRequest(ctx context.Context, model string) (_ *PromotionRequest, err error) {
	defer s.hide(&err)
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	key := ModelDir(s.prefix, model) + promotionObject
	data, err := s.readAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("promotion request %s: %w", key, err)
	}
	var r PromotionRequest
	if err := json.Unmarshal(data, &r); err != nil || r.Challenger == "" || r.ID == "" {
		return nil, fmt.Errorf("promotion request %s: not a request (%v): write it again with hyperplane promote", key, err)
	}
	return &r, nil
}

// PromotionRequest reads the promotion request of the snapshotter's
// model; nil when there is none.
func (c *Snapshotter) PromotionRequest(ctx context.Context) (*PromotionRequest, error) {
	return c.store.PromotionRequest(ctx, c.model)
}

// Promotable says whether the model of s, configured as model, has a
// challenger name to promote: an error names the model's own name, or
// the challengers s holds. A model learned in epochs is promoted after
// the epoch whose boundary records the request (docs/scale-out.md,
// section 3.11).
func (s *Snapshot) Promotable(name, model string) error {
	var names []string
	for _, c := range s.State.Challengers {
		names = append(names, c.Name)
	}
	if slices.Contains(names, name) {
		return nil
	}
	if name == learner.NameOf(s.State.Promotions, model) {
		return fmt.Errorf("%s is the model of generation %d already (challengers: %v)", name, s.Generation, names)
	}
	return fmt.Errorf("generation %d of %s has no challenger %s (challengers: %v)", s.Generation, model, name, names)
}

// Promotions are the promotions the newest generation of model records
// in its history: of shard's chain in partition scope, of the model's
// own chain for the zero ID. None when there is no generation.
func (s *Store) Promotions(ctx context.Context, model string, shard shardid.ID) ([]learner.Promotion, error) {
	chain := s
	if !shard.IsZero() {
		var err error
		if chain, err = s.PartitionChain(model, shard); err != nil {
			return nil, err
		}
	}
	snap, err := chain.Latest(ctx, model, nil)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return snap.State.Promotions, nil
}
