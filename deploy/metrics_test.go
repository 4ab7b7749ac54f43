package deploy

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricsPage documents every metric of the worker, one table row each.
const metricsPage = "../docs/metrics.md"

// metricRow is a row of the metrics page: | `name` | type | `l1`, `l2` | meaning |.
var metricRow = regexp.MustCompile("^\\| `(hyperplane_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\| (.*) \\|$")

// documentedMetric is what the metrics page says of one metric.
type documentedMetric struct {
	typ     string
	labels  []string
	meaning string
}

// documentedMetrics reads the metrics page's rows, by metric name.
func documentedMetrics(t *testing.T) map[string]documentedMetric {
	t.Helper()
	f, err := os.Open(metricsPage)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]documentedMetric{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `hyperplane_") {
			continue
		}
		m := metricRow.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("%s: a row that does not read as | `name` | type | labels | meaning |:\n%s", metricsPage, line)
			continue
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s: %s has two rows", metricsPage, m[1])
		}
		var labels []string
		for l := range strings.SplitSeq(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		out[m[1]] = documentedMetric{typ: m[2], labels: labels, meaning: strings.TrimSpace(m[4])}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsPageListsEveryMetric: docs/metrics.md has a row for every
// hyperplane_ metric a worker's registry holds (workerSeries: the
// registry as cmd/hyperplane's run builds it, every vector given a
// series, so that a metric with labels counts before its first event),
// with its type and label names, and no row for a metric that does not
// exist.
func TestMetricsPageListsEveryMetric(t *testing.T) {
	type family struct {
		typ    string
		labels []string
	}
	exposed := map[string]family{}
	for _, s := range workerSeries(t) {
		if !strings.HasPrefix(s.family, "hyperplane_") {
			continue
		}
		var labels []string
		for _, l := range s.labels {
			if l != "le" && l != "quantile" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		exposed[s.family] = family{strings.ToLower(s.typ.String()), labels}
	}
	documented := documentedMetrics(t)
	for _, name := range slices.Sorted(maps.Keys(exposed)) {
		f := exposed[name]
		d, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("%s: no row for %s (%s, labels %v)", metricsPage, name, f.typ, f.labels)
		case d.typ != f.typ:
			t.Errorf("%s: %s is a %s, the page says %s", metricsPage, name, f.typ, d.typ)
		case !slices.Equal(d.labels, f.labels):
			t.Errorf("%s: %s has labels %v, the page says %v", metricsPage, name, f.labels, d.labels)
		case d.meaning == "":
			t.Errorf("%s: %s: no meaning", metricsPage, name)
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok {
			t.Errorf("%s documents %s, which the worker does not register", metricsPage, name)
		}
	}
}
