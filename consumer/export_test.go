package consumer

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
