// Package actors runs a program's lifecycles together, as
// github.com/oklog/run does: each actor is a function paired with one that
// interrupts it, and the first actor to return interrupts all the others.
package actors

// Group runs actors: the first actor to return interrupts all the
// others; Run returns the first error; every actor is joined before Run
// returns.
//
// "The first error" is the first non-nil value an actor returned, in the
// order they returned: an actor that ends on request returns nil, and
// then the error another one stopped with (a shutdown that ran out of
// time) is not lost. An interrupt must make its actor return, and may be
// called after it has returned. The zero Group is empty and ready.
type Group struct {
	actors []actor
}

type actor struct {
	execute   func() error
	interrupt func(error)
}

// Add adds an actor: execute runs in a goroutine of its own once Run is
// called; interrupt receives the return value of the first actor to
// return.
func (g *Group) Add(execute func() error, interrupt func(error)) {
	g.actors = append(g.actors, actor{execute, interrupt})
}

// Run runs every actor until all have returned.
func (g *Group) Run() error {
	if len(g.actors) == 0 {
		return nil
	}
	errs := make(chan error, len(g.actors))
	for _, a := range g.actors {
		go func() { errs <- a.execute() }()
	}
	first := <-errs
	for _, a := range g.actors {
		a.interrupt(first)
	}
	err := first
	for range len(g.actors) - 1 {
		if e := <-errs; err == nil {
			err = e
		}
	}
	return err
}
