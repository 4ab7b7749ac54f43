package config

import (
	"testing"

	"github.com/hyperplane-ml/hyperplane/learner"
)

// TestHistoryDigestPegasos: auto meant the mean for Pegasos before
// learner.MixPegasos, so an epoch log that a Pegasos model wrote under
// auto then has the mean's digest; auto now means pegasos, another
// digest, and LegacyMixing gives back the mean's, under which such a log
// continues (consumer.Options.Written).
func TestHistoryDigestPegasos(t *testing.T) {
	auto := validKafka()
	auto.Model.Learner.Algorithm = learner.Pegasos
	auto.Model.Mixing.Rule = learner.MixAuto
	mean := auto
	mean.Model.Mixing.Rule = learner.MixMean
	if auto.MixRule() != learner.MixPegasos {
		t.Fatalf("auto for pegasos is %s, want %s", auto.MixRule(), learner.MixPegasos)
	}
	if auto.HistoryDigest() == mean.HistoryDigest() {
		t.Error("pegasos under auto has the mean's digest")
	}
	if auto.LegacyMixing().HistoryDigest() != mean.HistoryDigest() || auto.LegacyMixing().MixRule() != learner.MixMean {
		t.Error("a log that pegasos wrote under auto before its rule does not continue under the mean")
	}
}
