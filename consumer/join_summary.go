package consumer

import "github.com/hyperplane-ml/hyperplane/shardid"

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
	// ServedNote says where the served figures are when the summary has
	// none to show.
	ServedNote string `json:"served_note,omitempty"`
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

// SummarizeJoins sums up the shards' joins of a model learned in epochs
// (snapshot.Snapshot.Joins, decoded by DecodeJoins) as one: the outcomes,
// pending examples and held labels of every shard added. Head is 0: each
// shard's is a position of its own.
func SummarizeJoins(joins map[shardid.ID]*JoinState) *JoinSummary {
	var all JoinState
	for _, st := range joins {
		c, s := &all.Counts, st.Counts
		c.Joined += s.Joined
		c.Late += s.Late
		c.Unknown += s.Unknown
		c.Duplicate += s.Duplicate
		c.Marks += s.Marks
		c.Expired += s.Expired
		c.Served += s.Served
		c.ServedCorrect += s.ServedCorrect
		c.ServedLogLoss += s.ServedLogLoss
		all.Examples = append(all.Examples, st.Examples...)
		all.Labels = append(all.Labels, st.Labels...)
	}
	j := all.Summary()
	if j.Served > 0 {
		return j
	}
	// The heads score the served predictions, and what a head served
	// depends on when it read: it is no part of the model's history.
	j.ServedNote = "in epochs the served predictions are scored by each shard's head into hyperplane_served_accuracy and hyperplane_served_log_loss, not recorded in the generation"
	return j
}
