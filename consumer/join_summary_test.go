package consumer_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/shardid"
)

func TestJoinSummary(t *testing.T) {
	st := &consumer.JoinState{
		Head:     41,
		Examples: []consumer.JoinedExample{{ID: "a", Learned: true}, {ID: "b"}, {ID: "c"}},
		Labels:   []consumer.HeldLabelState{{ID: "z"}},
		Counts: consumer.JoinCountsState{Joined: 3, Late: 2, Unknown: 1, Duplicate: 4, Marks: 5, Expired: 6,
			Served: 4, ServedCorrect: 3, ServedLogLoss: 2},
	}
	want := &consumer.JoinSummary{
		Labels:  map[string]uint64{"joined": 3, "late": 2, "unknown": 1, "duplicate": 4},
		Expired: 6, Marks: 5, Served: 4, ServedAccuracy: 0.75, ServedLogLoss: 0.5,
		Pending: 2, HeldLabels: 1, Head: 41,
	}
	if got := st.Summary(); !reflect.DeepEqual(got, want) {
		t.Errorf("Summary() = %+v, want %+v", got, want)
	}
	if got := (&consumer.JoinState{}).Summary(); got.ServedAccuracy != 0 || got.ServedLogLoss != 0 {
		t.Errorf("with nothing served: accuracy %v, log-loss %v, want 0", got.ServedAccuracy, got.ServedLogLoss)
	}
}

func TestSummarizeJoins(t *testing.T) {
	joins := map[shardid.ID]*consumer.JoinState{
		shardid.Kafka("ex", 0): {Head: 7, Examples: []consumer.JoinedExample{{ID: "a", Learned: true}}, Labels: []consumer.HeldLabelState{{ID: "z"}},
			Counts: consumer.JoinCountsState{Joined: 3, Late: 1, Expired: 2, Served: 2, ServedCorrect: 1, ServedLogLoss: 1}},
		shardid.Kafka("ex", 1): {Head: 9, Examples: []consumer.JoinedExample{{ID: "b"}},
			Counts: consumer.JoinCountsState{Joined: 1, Unknown: 2, Duplicate: 1, Marks: 4, Expired: 1, Served: 2, ServedCorrect: 2, ServedLogLoss: 1}},
	}
	want := &consumer.JoinSummary{
		Labels:  map[string]uint64{"joined": 4, "late": 1, "unknown": 2, "duplicate": 1},
		Expired: 3, Marks: 4, Served: 4, ServedAccuracy: 0.75, ServedLogLoss: 0.5,
		Pending: 1, HeldLabels: 1,
	}
	if got := consumer.SummarizeJoins(joins); !reflect.DeepEqual(got, want) {
		t.Errorf("SummarizeJoins() = %+v, want %+v", got, want)
	}
	// As epochs record them: the ranges score nothing served.
	for _, st := range joins {
		st.Counts.Served, st.Counts.ServedCorrect, st.Counts.ServedLogLoss = 0, 0, 0
	}
	if got := consumer.SummarizeJoins(joins); got.Served != 0 || !strings.Contains(got.ServedNote, "hyperplane_served_accuracy") {
		t.Errorf("with nothing served: %d served, note %q; want 0 and where the served figures are", got.Served, got.ServedNote)
	}
}
