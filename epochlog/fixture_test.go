package epochlog_test

import (
	"testing"

	"gocloud.dev/blob"

	"github.com/hyperplane-ml/hyperplane/epochlog"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/snapshot/storetest"
)

// fixture is a storetest.Fixture with the epoch log kept in its store,
// whose Prefix is the key prefix the log writes under in raw.
type fixture struct {
	*epochlog.Log
	// raw is the store's bucket, for tests that reach past the log.
	raw *blob.Bucket
	// another opens one more log on the same bucket and prefix, as
	// another worker does.
	another func() *epochlog.Log
	// dir is the directory of a file:// store, empty for the others.
	dir string
}

// newFixture is the fixture of the log kept in f's store.
func newFixture(f storetest.Fixture) fixture {
	another := func() *epochlog.Log { return epochlog.New(f.Another()) }
	return fixture{Log: epochlog.New(f.Store), raw: f.Raw, another: another, dir: f.Dir}
}

// eachBackend runs test on a log in a store of each of storetest's
// backends.
func eachBackend(t *testing.T, test func(t *testing.T, s fixture)) {
	storetest.EachBackend(t, func(t *testing.T, f storetest.Fixture) { test(t, newFixture(f)) })
}

// baseState is W_{e-1} of model as boundary(t, model, e, …) names it:
// storetest.Generation's state at e−1, of which the results of epoch e
// (shardResult: the generation at e) learned a few more examples.
func baseState(t testing.TB, model string, e uint64) *learner.State {
	t.Helper()
	return storetest.Generation(t, model, e-1).State
}

// baseOf is the base of b's results.
func baseOf(t testing.TB, b *epochlog.Boundary) *epochlog.Base {
	t.Helper()
	return epochlog.NewBase(baseState(t, b.Model, b.Epoch))
}
