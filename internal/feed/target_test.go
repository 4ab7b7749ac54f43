package feed_test

import (
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/feed"
)

// TestTarget: a * token in a NATS subject is each example's key, i mod
// Keys; a destination without one is the destination; Kafka and a second
// * are refused.
func TestTarget(t *testing.T) {
	cases := []struct {
		to    string
		keys  int
		i     int
		kind  config.Kind
		want  string
		error string
	}{
		{"jetstream:ex.*", 1024, 1030, config.KindJetStream, "ex.6", ""},
		{"nats:*.in", 10, 3, config.KindNATS, "3.in", ""},
		{"jetstream:a.*.b", 4, 9, config.KindJetStream, "a.1.b", ""},
		{"jetstream:ex.all", 4, 9, config.KindJetStream, "ex.all", ""},
		{"kafka:clicks", 4, 9, config.KindKafka, "clicks", ""},
		{"kafka:*", 4, 0, "", "", "only a NATS subject"},
		{"jetstream:*.*", 4, 0, "", "", "one * token at most"},
		{"jetstream:ex.*.", 4, 0, "", "", "with KEY for its *"},
	}
	for _, tc := range cases {
		var to feed.Target
		err := to.UnmarshalText([]byte(tc.to))
		if tc.error != "" {
			if err == nil || !strings.Contains(err.Error(), tc.error) {
				t.Errorf("%s: error %v, want one saying %q", tc.to, err, tc.error)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.to, err)
			continue
		}
		to.Keys = tc.keys
		if to.Kind != tc.kind || to.Subject(tc.i) != tc.want {
			t.Errorf("%s: kind %s, example %d to %q; want %s, %q", tc.to, to.Kind, tc.i, to.Subject(tc.i), tc.kind, tc.want)
		}
	}
}
