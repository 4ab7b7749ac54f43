package main

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// checkMetricsDocumented checks that every hyperplane_ metric the worker
// at addr exposes on /metrics has a row of its type in docs/metrics.md.
// deploy's TestMetricsPageListsEveryMetric checks the page against the
// registry, metrics without series included; this checks it against a
// running worker.
func checkMetricsDocumented(t *testing.T, addr string) {
	t.Helper()
	page, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := readReply(t, resp, http.StatusOK)
	types := regexp.MustCompile(`(?m)^# TYPE (hyperplane_\w+) (\w+)$`).FindAllStringSubmatch(string(body), -1)
	if len(types) == 0 {
		t.Fatalf("no hyperplane_ metric on /metrics:\n%s", body)
	}
	for _, m := range types {
		if row := "| `" + m[1] + "` | " + m[2] + " |"; !strings.Contains(string(page), row) {
			t.Errorf("/metrics has %s, a %s; docs/metrics.md has no row %q", m[1], m[2], row)
		}
	}
}
