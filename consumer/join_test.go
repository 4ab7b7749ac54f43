package consumer

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/learner"
)

const testWindow = 10 * time.Second

// exRec and labelRec are records of the two logs in a join test.
type exRec struct {
	offset, t int64
	id        string
	delayed   bool
}

type labelRec struct {
	offset, t int64
	id        string
	label     int
	mark      bool
}

// joinRun feeds a join and learns what it decides, as the worker does.
type joinRun struct {
	t    *testing.T
	j    *Join
	ex   []exRec
	next int // the next example the tail learns, in ex
	// headOffset is the offset after the last example the head read.
	headOffset int64
	learned    []string
	// outcomes by label offset
	outcomes map[int64]LabelOutcome
}

func newJoinRun(t *testing.T, cfg JoinConfig, ex []exRec) *joinRun {
	return &joinRun{t: t, j: NewJoin(cfg), ex: ex, outcomes: map[int64]LabelOutcome{}}
}

func (r *joinRun) record(ds []Decided) {
	for _, d := range ds {
		if _, dup := r.outcomes[d.LabelOffset]; dup {
			r.t.Fatalf("label at offset %d decided twice", d.LabelOffset)
		}
		r.outcomes[d.LabelOffset] = d.Outcome
	}
}

func (r *joinRun) example(e exRec) {
	r.record(r.j.Example(e.offset, e.t, e.delayed, []byte(e.id), Served{}))
	r.tail()
}

func (r *joinRun) label(l labelRec) {
	r.record(r.j.Label(l.offset, l.t, l.mark, []byte(l.id), l.label))
	r.tail()
}

// tail learns the examples read so far up to the first undecided one.
func (r *joinRun) tail() {
	for r.next < len(r.ex) {
		off, decided, ok := r.j.Next()
		e := r.ex[r.next]
		if !e.delayed {
			if ok && off < e.offset {
				r.t.Fatalf("next delayed example at %d is before %d", off, e.offset)
			}
			if !ok || off > e.offset {
				// Learned as it is, if the head has read it.
				if !r.read(e) {
					return
				}
				r.learned = append(r.learned, fmt.Sprintf("%d:own", e.offset))
				r.next++
				continue
			}
		}
		if !ok || off != e.offset {
			return // not read at the head yet
		}
		if !decided {
			return
		}
		label, labeled, _ := r.j.Learned()
		s := fmt.Sprintf("%d:none", e.offset)
		if labeled {
			s = fmt.Sprintf("%d:%d", e.offset, label)
		}
		r.learned = append(r.learned, s)
		r.next++
	}
}

// read reports whether the head has read e.
func (r *joinRun) read(e exRec) bool { return e.offset < r.headOffset }

func TestJoinDecisions(t *testing.T) {
	w := testWindow.Milliseconds()
	for _, tc := range []struct {
		name    string
		cfg     JoinConfig
		steps   []any // exRec or labelRec, in the order read
		learned []string
		counts  [labelOutcomes]uint64
		expired uint64
	}{
		{
			name:    "in time",
			steps:   []any{exRec{0, 1000, "a", true}, labelRec{0, 1000 + w/2, "a", 1, false}},
			learned: []string{"0:1"},
			counts:  [labelOutcomes]uint64{LabelJoined: 1},
		},
		{
			name: "late: a record past the window closed it first",
			steps: []any{exRec{0, 1000, "a", true}, labelRec{0, 1000 + w + 1, "b", 1, false},
				labelRec{1, 1000 + w + 2, "a", 1, false}},
			learned: []string{"0:none"},
			counts:  [labelOutcomes]uint64{LabelLate: 1},
			expired: 1,
		},
		{
			name:    "the label that closes its own window is late",
			steps:   []any{exRec{0, 1000, "a", true}, labelRec{0, 1000 + w + 1, "a", 1, false}},
			learned: []string{"0:none"},
			counts:  [labelOutcomes]uint64{LabelLate: 1},
			expired: 1,
		},
		{
			name:    "duplicate",
			steps:   []any{exRec{0, 1000, "a", true}, labelRec{0, 1001, "a", 1, false}, labelRec{1, 1002, "a", -1, false}},
			learned: []string{"0:1"},
			counts:  [labelOutcomes]uint64{LabelJoined: 1, LabelDuplicate: 1},
		},
		{
			name:    "a label before its example",
			steps:   []any{labelRec{0, 1001, "a", -1, false}, exRec{0, 1000, "a", true}},
			learned: []string{"0:-1"},
			counts:  [labelOutcomes]uint64{LabelJoined: 1},
		},
		{
			name: "a label for an id never seen is unknown once the examples pass it by a window",
			steps: []any{labelRec{0, 1000, "x", 1, false}, exRec{0, 1000, "a", true},
				exRec{1, 1000 + w + 1, "b", true}},
			counts: [labelOutcomes]uint64{LabelUnknown: 1},
		},
		{
			name: "a mark closes the window on a quiet label input: the default",
			cfg:  JoinConfig{Window: testWindow, Default: -1, HasDefault: true},
			steps: []any{exRec{0, 1000, "a", true}, exRec{1, 1005, "b", false},
				labelRec{0, 1000 + w + 1, "", 0, true}},
			learned: []string{"0:-1", "1:own"},
			expired: 1,
		},
		{
			name:    "no default: predicted, never learned",
			steps:   []any{exRec{0, 1000, "a", true}, labelRec{0, 1000 + w + 1, "", 0, true}},
			learned: []string{"0:none"},
			expired: 1,
		},
		{
			name:    "an open window holds the examples behind it",
			steps:   []any{exRec{0, 1000, "a", true}, exRec{1, 1001, "b", false}, exRec{2, 1002, "c", true}, labelRec{0, 1003, "c", 1, false}},
			learned: nil,
			counts:  [labelOutcomes]uint64{LabelJoined: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg.Window == 0 {
				cfg.Window = testWindow
			}
			var ex []exRec
			for _, s := range tc.steps {
				if e, ok := s.(exRec); ok {
					ex = append(ex, e)
				}
			}
			r := newJoinRun(t, cfg, ex)
			for _, s := range tc.steps {
				switch s := s.(type) {
				case exRec:
					r.headOffset = s.offset + 1
					r.example(s)
				case labelRec:
					r.label(s)
				}
			}
			if !reflect.DeepEqual(r.learned, tc.learned) {
				t.Errorf("learned %v, want %v", r.learned, tc.learned)
			}
			c := r.j.Counts()
			if c.Labels != tc.counts || c.Expired != tc.expired {
				t.Errorf("counts %v expired %d, want %v expired %d", c.Labels, c.Expired, tc.counts, tc.expired)
			}
		})
	}
}

// TestJoinIsAFunctionOfTheLogs reads the same two logs in many random
// interleavings, saving and restoring the join at random moments, and
// requires every run to learn the same labels and count the same
// outcomes.
func TestJoinIsAFunctionOfTheLogs(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		ex, labels := randomLogs(rng, 400)
		cfg := JoinConfig{Window: testWindow}
		if seed%2 == 0 {
			cfg.Default, cfg.HasDefault = -1, true
		}
		var want []string
		var wantOutcomes map[int64]LabelOutcome
		var wantCounts JoinCounts
		for run := range 30 {
			r := newJoinRun(t, cfg, ex)
			i, k := 0, 0
			for i < len(ex) || k < len(labels) {
				if rng.IntN(50) == 0 {
					j, err := RestoreJoin(cfg, r.j.State(r.headOffset), learner.DefaultConfig())
					if err != nil {
						t.Fatal(err)
					}
					r.j = j
				}
				// Runs of one log or the other, of random lengths.
				takeEx := k == len(labels) || (i < len(ex) && rng.IntN(2) == 0)
				for n := 1 + rng.IntN(20); n > 0; n-- {
					if takeEx && i < len(ex) {
						r.headOffset = ex[i].offset + 1
						r.example(ex[i])
						i++
					} else if !takeEx && k < len(labels) {
						r.label(labels[k])
						k++
					}
				}
			}
			if run == 0 {
				want, wantOutcomes, wantCounts = r.learned, r.outcomes, r.j.Counts()
				if len(want) < len(ex)/2 {
					t.Fatalf("seed %d: only %d of %d examples learned", seed, len(want), len(ex))
				}
				continue
			}
			if !reflect.DeepEqual(r.learned, want) {
				t.Fatalf("seed %d run %d: learned differ:\n%v\n%v", seed, run, r.learned, want)
			}
			if !reflect.DeepEqual(r.outcomes, wantOutcomes) {
				t.Fatalf("seed %d run %d: outcomes differ", seed, run)
			}
			if got := r.j.Counts(); got != wantCounts {
				t.Fatalf("seed %d run %d: counts %+v, want %+v", seed, run, got, wantCounts)
			}
		}
		c := wantCounts.Labels
		for o := range labelOutcomes {
			if c[o] == 0 && o != LabelUnknown {
				t.Errorf("seed %d: no label %v: the logs do not exercise every case (%v)", seed, o, c)
			}
		}
	}
}

// randomLogs makes n examples, most delayed, and their labels: most in
// time, some late, some twice, some never, some for ids never seen, some
// written before their example, and a final mark that closes every
// window.
func randomLogs(rng *rand.Rand, n int) ([]exRec, []labelRec) {
	w := testWindow.Milliseconds()
	var ex []exRec
	type timed struct {
		t     int64
		id    string
		label int
	}
	var ls []timed
	for i := range n {
		t := int64(i)*100 + rng.Int64N(300) // times a little out of order
		id := fmt.Sprintf("e%d", i)
		delayed := rng.IntN(10) != 0
		ex = append(ex, exRec{offset: int64(i), t: t, id: id, delayed: delayed})
		label := 1 - 2*rng.IntN(2)
		switch r := rng.IntN(20); {
		case r < 12:
			ls = append(ls, timed{t + rng.Int64N(w), id, label})
		case r < 14:
			ls = append(ls, timed{t + w + rng.Int64N(w), id, label})
		case r < 16:
			ls = append(ls, timed{t + rng.Int64N(w), id, label}, timed{t + rng.Int64N(w), id, -label})
		case r < 17:
			ls = append(ls, timed{t - rng.Int64N(w/2), id, label})
		case r < 18:
			ls = append(ls, timed{t + rng.Int64N(w), fmt.Sprintf("x%d", i), label})
		}
	}
	// The labels' log in roughly their time order.
	for i := 1; i < len(ls); i++ {
		for k := i; k > 0 && ls[k].t+int64(rng.IntN(200)) < ls[k-1].t; k-- {
			ls[k], ls[k-1] = ls[k-1], ls[k]
		}
	}
	var labels []labelRec
	for i, l := range ls {
		labels = append(labels, labelRec{offset: int64(i), t: l.t, id: l.id, label: l.label})
	}
	end := ex[len(ex)-1].t + 10*w
	labels = append(labels, labelRec{offset: int64(len(labels)), t: end, mark: true})
	return ex, labels
}

// TestJoinLabelsAheadBeforeAnyExample: labels read before the first
// example can only be held, as those far ahead of the examples can: past
// MaxPending of them the labels' reader waits (docs/labels.md, section
// 3), so that labels read while the examples' input is empty, or before
// its first batch, are bounded as any are. The first examples let it go
// on once the labels they make unknown leave fewer held.
func TestJoinLabelsAheadBeforeAnyExample(t *testing.T) {
	const maxPending = 10
	j := NewJoin(JoinConfig{Window: testWindow, MaxPending: maxPending})
	for i := range maxPending {
		if j.LabelsAhead() {
			t.Fatalf("the labels' reader waits with %d labels held, below MaxPending %d", i, maxPending)
		}
		j.Label(int64(i), 1000+int64(i), false, fmt.Appendf(nil, "u%d", i), 1)
	}
	if !j.LabelsAhead() {
		t.Fatalf("%d labels held before any example, and the labels' reader reads on: nothing bounds them", maxPending)
	}
	// An example a window past every label's: each is unknown, and the
	// reader goes on.
	j.Example(0, 1000+maxPending+testWindow.Milliseconds()+1, true, []byte("e0"), Served{})
	if j.LabelsAhead() {
		t.Error("the examples passed every held label, and the labels' reader still waits")
	}
	if got := j.Counts().Labels[LabelUnknown]; got != maxPending {
		t.Errorf("%d labels unknown, want the %d held", got, maxPending)
	}
}

// TestJoinHeldCountsLabelsWaiting: Held (hyperplane_join_held_labels)
// and LabelsAhead count the labels that wait for their examples, not
// those their examples took already. A label for an id never seen stays
// at the front of the held labels for a window, and the labels read
// before their examples behind it stayed counted after they joined:
// 200,000 labels that all joined left the gauge at 7,996, and the
// labels' reader could wait on labels no longer held.
func TestJoinHeldCountsLabelsWaiting(t *testing.T) {
	const n = 10
	j := NewJoin(JoinConfig{Window: testWindow, MaxPending: n})
	j.Label(0, 1000, false, []byte("never"), 1)
	for i := range n {
		j.Label(int64(1+i), 1000+int64(i), false, fmt.Appendf(nil, "e%d", i), 1)
	}
	if got := j.Held(); got != n+1 {
		t.Fatalf("%d labels held, want %d", got, n+1)
	}
	// A label a window and more ahead of the examples: the reader waits.
	j.Label(n+1, 1000+2*testWindow.Milliseconds(), false, []byte("ahead"), 1)
	if !j.LabelsAhead() {
		t.Fatal("more than MaxPending labels held a window ahead, and the labels' reader reads on")
	}
	for i := range n {
		if d := j.Example(int64(i), 1000+int64(i), true, fmt.Appendf(nil, "e%d", i), Served{}); len(d) != 1 || d[0].Outcome != LabelJoined {
			t.Fatalf("example e%d: %+v, want its held label joined", i, d)
		}
	}
	if got := j.Held(); got != 2 {
		t.Errorf("every example took its label: %d labels held, want 2 (an id never seen, and one ahead)", got)
	}
	if j.LabelsAhead() {
		t.Error("2 labels held, below MaxPending, and the labels' reader waits")
	}
	r, err := RestoreJoin(JoinConfig{Window: testWindow, MaxPending: n}, j.State(n), learner.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Held(); got != 2 {
		t.Errorf("restored: %d labels held, want 2", got)
	}
}
