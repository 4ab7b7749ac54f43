package consumer_test

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/consumer"
)

// TestFollowedNotChecked: the summary names the epochs a replay could not check,
// by why their generation is missing.
func TestFollowedNotChecked(t *testing.T) {
	cases := []struct {
		began     uint64
		replayed  int
		unchecked []uint64
		gens      []uint64
		want      string
	}{
		{0, 4, nil, []uint64{1, 2, 3, 4}, ""},
		{0, 6, []uint64{1, 2, 3, 5}, []uint64{4, 6}, "epochs 1-3: before the oldest live generation, 4 (snapshot.keep removed theirs); epochs 5: no live generation"},
		{0, 9, []uint64{7, 8, 9}, []uint64{3, 6}, "epochs 7-9: no live generation yet (the newest is 6;"},
		{0, 2, []uint64{1, 2}, nil, "epochs 1, 2: no live generation yet (none is stored;"},
		{5, 0, nil, []uint64{5}, "the log holds no epoch after generation 5, where the replay began (the epoch log keeps nothing at or below its oldest live generation"},
	}
	for _, c := range cases {
		f := &consumer.Followed{Began: c.began, Unchecked: c.unchecked}
		for range c.replayed - len(c.unchecked) {
			f.Checked = append(f.Checked, 0)
		}
		got := f.NotChecked(c.gens)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("NotChecked of began %d, replayed %d, unchecked %v; gens %v = %q, want %q", c.began, c.replayed, c.unchecked, c.gens, got, c.want)
		}
	}
}
