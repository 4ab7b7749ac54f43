package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroup: the first actor to return interrupts all the others; run
// returns the first error; every actor is joined before Run returns.
func TestGroup(t *testing.T) {
	errFirst, errLater := errors.New("first"), errors.New("later")
	cases := []struct {
		name  string
		first error // what the actor that returns by itself returns
		later error // what the interrupted actors return
		want  error
	}{
		{"all nil", nil, nil, nil},
		{"the first one's error", errFirst, errLater, errFirst},
		{"an error after a nil", nil, errLater, errLater},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g Group
			var returned, interrupted atomic.Int32
			var got error
			g.Add(func() error { returned.Add(1); return tc.first }, func(err error) { got = err })
			for range 3 {
				stop := make(chan struct{})
				g.Add(func() error {
					<-stop
					time.Sleep(10 * time.Millisecond) // return well after the interrupt
					returned.Add(1)
					return tc.later
				}, func(error) {
					interrupted.Add(1)
					close(stop)
				})
			}
			if err := g.Run(); err != tc.want {
				t.Errorf("Run() = %v, want %v", err, tc.want)
			}
			if n := returned.Load(); n != 4 {
				t.Errorf("%d of 4 actors had returned when Run did", n)
			}
			if n := interrupted.Load(); n != 3 {
				t.Errorf("%d of 3 actors interrupted", n)
			}
			if got != tc.first {
				t.Errorf("interrupt got %v, want the first actor's %v", got, tc.first)
			}
		})
	}
}

func TestGroupEmpty(t *testing.T) {
	var g Group
	if err := g.Run(); err != nil {
		t.Fatal(err)
	}
}
