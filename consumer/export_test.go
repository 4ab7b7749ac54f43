package consumer

import "github.com/hyperplane-ml/hyperplane/shardid"

// EarlyMixMade reports whether the early mix of epoch e is made, and not
// yet installed.
func (x *Epochs) EarlyMixMade(e uint64) bool {
	x.mu.Lock()
	em := x.early
	x.mu.Unlock()
	if em == nil || em.epoch != e {
		return false
	}
	select {
	case <-em.done:
		return em.mixed != nil
	default:
		return false
	}
}

// HeadPositions are the positions of the head of shard (docs/labels.md,
// section 11.3), nil while none runs.
func (x *Epochs) HeadPositions(shard shardid.ID) map[string]int64 {
	x.mu.Lock()
	h := x.runningHeads[shard]
	x.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.w.Positions()
}

// HeldResults is how many results of epoch e this worker holds and has
// not written.
func (x *Epochs) HeldResults(e uint64) int { return x.heldResults(e) }
