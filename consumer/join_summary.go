package consumer

// JoinSummary is what a reader is shown of a recorded join
// (hyperplane inspect): the outcomes so far, the predictions as served,
// and what waits.
type JoinSummary struct {
	Labels         map[string]uint64 `json:"labels"`
	Expired        uint64            `json:"examples_expired"`
	Marks          uint64            `json:"marks"`
	Served         uint64            `json:"served"`
	ServedAccuracy float64           `json:"served_accuracy"`
	ServedLogLoss  float64           `json:"served_log_loss"`
	Pending        int               `json:"pending"`
	HeldLabels     int               `json:"held_labels"`
	Head           int64             `json:"head"`
}

// Summary is st summed up: the served accuracy and log-loss are means
// over the served predictions (0 without one), Pending counts the
// examples not learned yet and HeldLabels the labels that wait for their
// example.
func (st *JoinState) Summary() *JoinSummary {
	c := st.Counts
	j := &JoinSummary{
		Labels:  map[string]uint64{"joined": c.Joined, "late": c.Late, "unknown": c.Unknown, "duplicate": c.Duplicate},
		Expired: c.Expired, Marks: c.Marks, Served: c.Served,
		HeldLabels: len(st.Labels), Head: st.Head,
	}
	if c.Served > 0 {
		j.ServedAccuracy = float64(c.ServedCorrect) / float64(c.Served)
		j.ServedLogLoss = c.ServedLogLoss / float64(c.Served)
	}
	for _, e := range st.Examples {
		if !e.Learned {
			j.Pending++
		}
	}
	return j
}
