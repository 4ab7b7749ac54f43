package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	"github.com/hyperplane-ml/hyperplane/learner"
	"github.com/hyperplane-ml/hyperplane/serve"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

const (
	// grafanaDir holds the dashboards and Grafana's provisioning files.
	grafanaDir = "grafana"
	// dashboardsDir holds the dashboards, one JSON model per file.
	dashboardsDir = "grafana/dashboards"
	// prometheusFile is the compose stack's Prometheus configuration.
	prometheusFile = "compose/prometheus.yaml"
	// prometheusConfigPath is where the Prometheus image reads its
	// configuration, and prometheusPort where it listens, by default.
	prometheusConfigPath = "/etc/prometheus/prometheus.yml"
	prometheusPort       = "9090"
	// grafanaProvisioning is where Grafana reads its provisioning files.
	grafanaProvisioning = "/etc/grafana/provisioning"
	// grafanaPort is where Grafana listens by default.
	grafanaPort = "3000"
)

// series is what a query may select: a series name the worker exports
// (or Prometheus makes for each target), its type, and its label names
// other than the target's.
type series struct {
	family string // the metric's name: a histogram's without _bucket
	typ    dto.MetricType
	counts bool // a counter, or a histogram's or summary's _bucket, _sum or _count
	labels []string
}

// workerSeries are the series a worker's /metrics exposes: its registry
// built as cmd/hyperplane's run builds it (the Go and process collectors,
// consumer.NewMetrics and serve.NewMetrics), gathered with every vector
// given a series; a histogram adds _bucket (with le), _sum and _count, a
// summary _sum and _count. Prometheus adds up for every target.
func workerSeries(t *testing.T) map[string]series {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rec := &recordingRegisterer{Registerer: reg}
	consumer.NewMetrics(rec)
	serve.NewMetrics(rec)
	shared := 0
	for _, c := range rec.collectors {
		if cm, ok := c.(*consumer.ChallengerMetrics); ok {
			// The challengers' series join the model's families, with a
			// model label: one challenger's, learned alone and on a shard.
			cm.Observe("", "sample", learner.Metrics{})
			cm.Observe("sample", "sample", learner.Metrics{})
			shared++
			continue
		}
		if err := giveSeries(c); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]series{"up": {family: "up", typ: dto.MetricType_GAUGE}}
	own := 0
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "hyperplane_") {
			own++
		}
		names := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				names[l.GetName()] = true
			}
		}
		ls := slices.Sorted(maps.Keys(names))
		name, typ := f.GetName(), f.GetType()
		switch typ {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"] = series{family: name, typ: typ, counts: true, labels: append(slices.Clone(ls), "le")}
			out[name+"_sum"] = series{family: name, typ: typ, counts: true, labels: ls}
			out[name+"_count"] = series{family: name, typ: typ, counts: true, labels: ls}
		case dto.MetricType_SUMMARY:
			out[name] = series{family: name, typ: typ, labels: append(slices.Clone(ls), "quantile")}
			out[name+"_sum"] = series{family: name, typ: typ, counts: true, labels: ls}
			out[name+"_count"] = series{family: name, typ: typ, counts: true, labels: ls}
		default:
			out[name] = series{family: name, typ: typ, counts: typ == dto.MetricType_COUNTER, labels: ls}
		}
	}
	if own != len(rec.collectors)-shared {
		t.Fatalf("the worker's metrics register %d collectors, %d hyperplane_ families gathered", len(rec.collectors), own)
	}
	return out
}

// recordingRegisterer keeps the collectors registered through it.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registerer.MustRegister(cs...)
}

// giveSeries makes a series of c if c is a vector, which has none until a
// label value is used: it asks for one with as many values as c has
// labels.
func giveSeries(c prometheus.Collector) error {
	get := reflect.ValueOf(c).MethodByName("GetMetricWithLabelValues")
	if !get.IsValid() {
		return nil
	}
	var lvs []string
	for range 8 {
		lvs = append(lvs, "sample")
		out := get.CallSlice([]reflect.Value{reflect.ValueOf(lvs)})
		if out[1].IsNil() {
			return nil
		}
	}
	return fmt.Errorf("%T: no label values of up to %d fit", c, len(lvs))
}

// dashboard is the part of a Grafana dashboard's JSON model the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Datasource *datasourceRef `json:"datasource"`
			Definition string         `json:"definition"`
			Query      struct {
				Query string `json:"query"`
			} `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets     []panelTarget `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds *struct {
				Steps []struct {
					Color string   `json:"color"`
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// panelTarget is one query of a panel.
type panelTarget struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource *datasourceRef `json:"datasource"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// readDashboards decodes every dashboard of dashboardsDir, by file name.
func readDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no dashboard in %s", dashboardsDir)
	}
	out := map[string]dashboard{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[f] = d
	}
	return out
}

// allPanels are d's panels, a collapsed row's among them, rows included.
func (d dashboard) allPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// promConfig is the part of Prometheus's configuration the stack uses,
// decoded strictly: a key Prometheus does not have, or one misspelt,
// fails.
type promConfig struct {
	Global struct {
		ScrapeInterval     string `yaml:"scrape_interval"`
		EvaluationInterval string `yaml:"evaluation_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		MetricsPath    string `yaml:"metrics_path"`
		ScrapeInterval string `yaml:"scrape_interval"`
		StaticConfigs  []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// readYAMLStrict decodes file into v, refusing keys v does not have.
func readYAMLStrict(t *testing.T, file string, v any) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// scrape is how Prometheus scrapes the workers: the one job of
// prometheusFile and its interval.
type scrape struct {
	job      string
	interval time.Duration
	path     string
	targets  []string
	labels   []string // the target labels a series gets: job, instance and static ones
}

func readScrape(t *testing.T) scrape {
	t.Helper()
	var c promConfig
	readYAMLStrict(t, prometheusFile, &c)
	if len(c.ScrapeConfigs) != 1 {
		t.Fatalf("%s: %d scrape configs, want the workers' one", prometheusFile, len(c.ScrapeConfigs))
	}
	sc := c.ScrapeConfigs[0]
	text := sc.ScrapeInterval
	if text == "" {
		text = c.Global.ScrapeInterval
	}
	d, err := model.ParseDuration(text)
	if err != nil || d <= 0 {
		t.Fatalf("%s: scrape interval %q: want a duration such as 15s (%v)", prometheusFile, text, err)
	}
	s := scrape{job: sc.JobName, interval: time.Duration(d), path: sc.MetricsPath, labels: []string{"job", "instance"}}
	if s.path == "" {
		s.path = "/metrics"
	}
	for _, st := range sc.StaticConfigs {
		s.targets = append(s.targets, st.Targets...)
		for l := range st.Labels {
			if !slices.Contains(s.labels, l) {
				s.labels = append(s.labels, l)
			}
		}
	}
	return s
}

// grafanaVariable is a Grafana variable in a query: $name, ${name} or
// ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(\w+)|\$\{(\w+)(?::\w+)?\}`)

// queryChecker checks a panel's PromQL query against what the worker
// exports and how Prometheus scrapes it.
type queryChecker struct {
	series map[string]series
	scrape scrape
	vars   []string // the dashboard's variables
}

// own are the hyperplane_ series the worker exports.
func (c queryChecker) own() []string {
	var out []string
	for name := range c.series {
		if strings.HasPrefix(name, "hyperplane_") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// expand replaces Grafana's variables in q with values Grafana could give
// them: a regular expression for a dashboard variable (they are multi-
// value), the rate interval Grafana computes for the datasource's scrape
// interval (at least four scrapes).
func (c queryChecker) expand(q string) (string, error) {
	var errs []error
	out := grafanaVariable.ReplaceAllStringFunc(q, func(m string) string {
		sub := grafanaVariable.FindStringSubmatch(m)
		name := sub[1] + sub[2]
		switch {
		case name == "__rate_interval":
			return model.Duration(4 * c.scrape.interval).String()
		case name == "__interval":
			return model.Duration(c.scrape.interval).String()
		case name == "__range":
			return "1h"
		case slices.Contains(c.vars, name):
			return ".+"
		}
		errs = append(errs, fmt.Errorf("%s is not a variable of the dashboard (%v) nor one of Grafana's", m, c.vars))
		return m
	})
	return out, errors.Join(errs...)
}

// check parses q with Prometheus's parser and returns what is wrong with
// it: a series the worker does not export, a label it does not have, a
// series of the model and its challengers that selects neither, a job
// that is not the scrape job, rate() of a gauge or deriv() of a
// counter, a range shorter than four scrapes, a histogram quantile that
// does not keep le.
func (c queryChecker) check(q string) []error {
	expanded, err := c.expand(q)
	if err != nil {
		return []error{err}
	}
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(expanded)
	if err != nil {
		return []error{err}
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		switch n := node.(type) {
		case *parser.VectorSelector:
			name := selectorName(n)
			s, ok := c.series[name]
			if !ok {
				fail("%s is not a series the worker exports (its own are %v)", n, c.own())
				return nil
			}
			if slices.Contains(s.labels, "model") && !slices.ContainsFunc(n.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == "model" }) {
				fail("%s: %s holds the model's series and each challenger's (label model): select model=\"\" for the model alone, or the challengers by name", n, name)
			}
			for _, m := range n.LabelMatchers {
				switch {
				case m.Name == model.MetricNameLabel:
				case m.Name == "job":
					if m.Type != labels.MatchEqual || m.Value != c.scrape.job {
						fail("%s: want job=%q, the job of %s", n, c.scrape.job, prometheusFile)
					}
				case !slices.Contains(s.labels, m.Name) && !slices.Contains(c.scrape.labels, m.Name):
					fail("%s: %s has no label %s (it has %v, and the target's %v)", n, name, m.Name, s.labels, c.scrape.labels)
				}
			}
		case *parser.MatrixSelector:
			if n.Range < 4*c.scrape.interval {
				fail("%s: a range shorter than four scrapes of %v: rate() over it is noisy or empty", n, c.scrape.interval)
			}
		case *parser.AggregateExpr:
			if n.Without {
				break
			}
			have := slices.Clone(c.scrape.labels)
			for _, sel := range selectors(n.Expr) {
				have = append(have, c.series[sel].labels...)
			}
			for _, l := range n.Grouping {
				if !slices.Contains(have, l) {
					fail("%s: by (%s), a label none of its series has (%v)", n, l, have)
				}
			}
		case *parser.Call:
			switch n.Func.Name {
			case "rate", "irate", "increase", "resets":
				for _, sel := range selectors(n.Args) {
					if s, ok := c.series[sel]; ok && !s.counts {
						fail("%s: %s of %s, which is a %s, not a counter", n, n.Func.Name, sel, s.typ)
					}
				}
			case "deriv", "delta", "idelta", "predict_linear":
				for _, sel := range selectors(n.Args) {
					if s, ok := c.series[sel]; ok && s.counts {
						fail("%s: %s of %s, which is a counter: use rate or increase", n, n.Func.Name, sel)
					}
				}
			case "histogram_quantile":
				for _, sel := range selectors(n.Args[1]) {
					if !strings.HasSuffix(sel, "_bucket") {
						fail("%s: the quantile of %s, which is not a histogram's _bucket", n, sel)
					}
				}
				parser.Inspect(n.Args[1], func(inner parser.Node, _ []parser.Node) error {
					if a, ok := inner.(*parser.AggregateExpr); ok && (a.Without || !slices.Contains(a.Grouping, "le")) {
						fail("%s: %s does not keep le, which histogram_quantile needs", n, a)
					}
					return nil
				})
			}
		}
		return nil
	})
	return errs
}

// selectors are the series names selected within node.
func selectors(node parser.Node) []string {
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, selectorName(vs))
		}
		return nil
	})
	return names
}

// selectorName is the series name vs selects, by name or by __name__.
func selectorName(vs *parser.VectorSelector) string {
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return vs.Name
}

// labelValuesQuery is a Grafana query variable's label_values(metric, label).
var labelValuesQuery = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// TestGrafanaDashboardQueries: every query of every panel parses with
// Prometheus's own parser and selects only series the worker exports
// (derived from the registry cmd/hyperplane builds), by labels they have,
// as Prometheus scrapes them; the dashboard's variables come from such
// series too.
func TestGrafanaDashboardQueries(t *testing.T) {
	exported := workerSeries(t)
	sc := readScrape(t)
	for file, d := range readDashboards(t) {
		c := queryChecker{series: exported, scrape: sc}
		for _, v := range d.Templating.List {
			c.vars = append(c.vars, v.Name)
			if v.Type != "query" {
				continue
			}
			m := labelValuesQuery.FindStringSubmatch(v.Query.Query)
			if m == nil {
				t.Errorf("%s: variable %s: query %q, want label_values(metric, label)", file, v.Name, v.Query.Query)
				continue
			}
			s, ok := exported[m[1]]
			if !ok {
				t.Errorf("%s: variable %s: %s is not a series the worker exports", file, v.Name, m[1])
			} else if !slices.Contains(s.labels, m[2]) && !slices.Contains(sc.labels, m[2]) {
				t.Errorf("%s: variable %s: %s has no label %s", file, v.Name, m[1], m[2])
			}
		}
		queries := 0
		for _, p := range d.allPanels() {
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %d %q has no query", file, p.ID, p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				for _, err := range c.check(tg.Expr) {
					t.Errorf("%s: panel %d %q, query %s: %v", file, p.ID, p.Title, tg.RefID, err)
				}
			}
		}
		if queries == 0 {
			t.Errorf("%s: no queries", file)
		}
	}
}

// TestGrafanaQueryCheck: the checker TestGrafanaDashboardQueries relies
// on accepts good queries and finds each mistake it is meant to find.
func TestGrafanaQueryCheck(t *testing.T) {
	c := queryChecker{
		series: workerSeries(t),
		scrape: scrape{job: "hyperplane", interval: 5 * time.Second, labels: []string{"job", "instance"}},
		vars:   []string{"instance"},
	}
	for _, q := range []string{
		`sum by (result) (rate(hyperplane_examples_total{model="",instance=~"$instance"}[$__rate_interval]))`,
		`hyperplane_rolling_accuracy{model!=""}`,
		`histogram_quantile(0.99, sum by (le, interface) (rate(hyperplane_serve_request_seconds_bucket[1m])))`,
		`time() - (hyperplane_last_snapshot_timestamp_seconds{instance=~"${instance}"} > 0)`,
		`up{job="hyperplane"}`,
		`deriv(hyperplane_position[1m])`,
		`rate(hyperplane_batch_latency_seconds_sum[1m]) / rate(hyperplane_batch_latency_seconds_count[1m])`,
		`rate(process_cpu_seconds_total{job="hyperplane"}[1m])`,
	} {
		if errs := c.check(q); len(errs) > 0 {
			t.Errorf("%s: %v", q, errs)
		}
	}
	for _, tc := range []struct{ q, want string }{
		{`rate(hyperplane_examples_total[1m]`, "unclosed"},
		{`hyperplane_examples`, "not a series the worker exports"},
		{`hyperplane_batch_latency_seconds`, "not a series the worker exports"},
		{`hyperplane_lag{partition="0"}`, "has no label partition"},
		{`sum by (partition) (hyperplane_lag)`, "by (partition)"},
		{`up{job="prometheus"}`, `want job="hyperplane"`},
		{`rate(hyperplane_rolling_accuracy[1m])`, "not a counter"},
		{`hyperplane_rolling_accuracy{instance=~"$instance"}`, "each challenger's"},
		{`sum by (result) (rate(hyperplane_examples_total[1m]))`, "each challenger's"},
		{`deriv(hyperplane_updates_total[1m])`, "which is a counter"},
		{`rate(hyperplane_updates_total[10s])`, "shorter than four scrapes"},
		{`histogram_quantile(0.5, sum(rate(hyperplane_batch_latency_seconds_bucket[1m])))`, "does not keep le"},
		{`histogram_quantile(0.5, rate(hyperplane_batch_latency_seconds_sum[1m]))`, "not a histogram's _bucket"},
		{`hyperplane_lag{instance=~"$worker"}`, "$worker is not a variable"},
		{`{__name__="hyperplane_nope"}`, "not a series the worker exports"},
		{`{job="hyperplane"}`, "not a series the worker exports"},
	} {
		errs := c.check(tc.q)
		if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), tc.want) }) {
			t.Errorf("%s: got %v, want an error with %q", tc.q, errs, tc.want)
		}
	}
}

// TestGrafanaDashboardLayout: panels with unique ids on Grafana's grid of
// 24 columns without overlapping, each with a title, a description and
// the provisioned datasource; a snapshot age turns orange only after more
// than twice the snapshot.interval of the stack's workers and the
// default.
func TestGrafanaDashboardLayout(t *testing.T) {
	uid := readDatasource(t).UID
	var intervals []time.Duration
	for _, s := range workerServices(t, readCompose(t)) {
		intervals = append(intervals, workerConfig(t, s).Snapshot.Interval)
	}
	def, err := config.Load(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	intervals = append(intervals, def.Snapshot.Interval)
	for file, d := range readDashboards(t) {
		if d.UID == "" || d.Title == "" || d.SchemaVersion == 0 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d: want all three", file, d.UID, d.Title, d.SchemaVersion)
		}
		ids := map[int]bool{}
		type cell struct{ x, y int }
		taken := map[cell]string{}
		for _, p := range d.allPanels() {
			where := fmt.Sprintf("%s: panel %d %q", file, p.ID, p.Title)
			if p.ID <= 0 || ids[p.ID] {
				t.Errorf("%s: id is 0 or repeated", where)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v is off Grafana's 24 columns", where, g)
			}
			overlaps := map[string]bool{}
			for x := g.X; x < g.X+g.W; x++ {
				for y := g.Y; y < g.Y+g.H; y++ {
					if other, ok := taken[cell{x, y}]; ok && !overlaps[other] {
						overlaps[other] = true
						t.Errorf("%s overlaps %s (column %d, row %d)", where, other, x, y)
					}
					taken[cell{x, y}] = where
				}
			}
			if p.Title == "" {
				t.Errorf("%s: no title", where)
			}
			if p.Type == "row" {
				continue
			}
			if p.Description == "" {
				t.Errorf("%s: no description", where)
			}
			if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != uid {
				t.Errorf("%s: datasource %+v, want the provisioned prometheus, uid %q", where, p.Datasource, uid)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: refId %q is empty or repeated", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if tg.Datasource != nil && tg.Datasource.UID != uid {
					t.Errorf("%s, query %s: datasource uid %q, want %q", where, tg.RefID, tg.Datasource.UID, uid)
				}
			}
			if th := p.FieldConfig.Defaults.Thresholds; th != nil && len(th.Steps) > 1 && slices.ContainsFunc(p.Targets, func(tg panelTarget) bool {
				return strings.Contains(tg.Expr, "hyperplane_last_snapshot_timestamp_seconds")
			}) {
				if p.FieldConfig.Defaults.Unit != "s" {
					t.Errorf("%s: unit %q, want s", where, p.FieldConfig.Defaults.Unit)
				}
				first := th.Steps[1].Value
				for _, iv := range intervals {
					if first == nil || time.Duration(*first*float64(time.Second)) <= 2*iv {
						t.Errorf("%s: turns %s after %vs without a snapshot, but a worker takes one every snapshot.interval %v: want more than twice that", where, th.Steps[1].Color, ptrString(first), iv)
					}
				}
			}
		}
		for _, v := range d.Templating.List {
			if v.Datasource != nil && v.Datasource.UID != uid {
				t.Errorf("%s: variable %s: datasource uid %q, want %q", file, v.Name, v.Datasource.UID, uid)
			}
		}
	}
}

// workerServices are the compose stack's workers, as TestComposeStack
// tells them: the image built here, running its default command.
func workerServices(t *testing.T, c composeFile) map[string]composeService {
	t.Helper()
	out := map[string]composeService{}
	for name, s := range c.Services {
		if len(s.Command) == 0 && s.Image == "hyperplane:local" {
			out[name] = s
		}
	}
	if len(out) == 0 {
		t.Fatal("compose.yaml has no worker")
	}
	return out
}

// grafanaDatasource is Grafana's provisioned datasource file.
type grafanaDatasource struct {
	Name      string `yaml:"name"`
	UID       string `yaml:"uid"`
	Type      string `yaml:"type"`
	Access    string `yaml:"access"`
	URL       string `yaml:"url"`
	IsDefault bool   `yaml:"isDefault"`
	Editable  bool   `yaml:"editable"`
	JSONData  struct {
		TimeInterval string `yaml:"timeInterval"`
	} `yaml:"jsonData"`
}

// readDatasource is the one datasource provisioned for Grafana.
func readDatasource(t *testing.T) grafanaDatasource {
	t.Helper()
	var f struct {
		APIVersion  int                 `yaml:"apiVersion"`
		Datasources []grafanaDatasource `yaml:"datasources"`
	}
	file := filepath.Join(grafanaDir, "provisioning", "datasources", "prometheus.yaml")
	readYAMLStrict(t, file, &f)
	if f.APIVersion != 1 || len(f.Datasources) != 1 {
		t.Fatalf("%s: apiVersion %d, %d datasources: want apiVersion 1 and the one Prometheus", file, f.APIVersion, len(f.Datasources))
	}
	ds := f.Datasources[0]
	if ds.UID == "" || ds.Type != "prometheus" {
		t.Fatalf("%s: uid %q, type %q: want a uid and type prometheus", file, ds.UID, ds.Type)
	}
	return ds
}

// monitoringService is the part of a compose service TestComposeMonitoring
// reads beyond composeService.
type monitoringService struct {
	DependsOn yaml.Node `yaml:"depends_on"`
}

// dependsOn are the services s waits for, in either of compose's forms.
func (s monitoringService) dependsOn() []string {
	var out []string
	switch s.DependsOn.Kind {
	case yaml.SequenceNode:
		for _, n := range s.DependsOn.Content {
			out = append(out, n.Value)
		}
	case yaml.MappingNode:
		for i := 0; i < len(s.DependsOn.Content); i += 2 {
			out = append(out, s.DependsOn.Content[i].Value)
		}
	}
	return out
}

// pinnedImage matches an image pinned by a version tag (or a digest).
var pinnedImage = regexp.MustCompile(`^[a-z0-9./-]+(:v?[0-9][0-9A-Za-z._-]*|@sha256:[0-9a-f]{64})$`)

// mounts are a service's bind mounts, from the host path (relative to
// the compose file, as a path from deploy) to the container's.
func mounts(s composeService) map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[filepath.Join("compose", parts[0])] = parts[1]
		}
	}
	return out
}

// TestComposeMonitoring: the stack's Prometheus scrapes every worker's
// /metrics at its http.addr port, and its Grafana is provisioned with that
// Prometheus and the dashboards of deploy/grafana, from images pinned by
// version.
func TestComposeMonitoring(t *testing.T) {
	c := readCompose(t)
	data, err := os.ReadFile(filepath.Join("compose", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		Services map[string]monitoringService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &extra); err != nil {
		t.Fatal(err)
	}
	prom, ok := c.Services["prometheus"]
	if !ok {
		t.Fatal("compose.yaml has no service prometheus")
	}
	graf, ok := c.Services["grafana"]
	if !ok {
		t.Fatal("compose.yaml has no service grafana")
	}
	for name, s := range map[string]composeService{"prometheus": prom, "grafana": graf} {
		if !pinnedImage.MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
	}

	// Prometheus reads prometheus.yaml and scrapes every worker.
	if got := mounts(prom)[prometheusFile]; got != prometheusConfigPath {
		t.Errorf("prometheus mounts %s at %q, want %s, where the image reads its configuration", prometheusFile, got, prometheusConfigPath)
	}
	if !slices.ContainsFunc(prom.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+prometheusPort) }) {
		t.Errorf("prometheus: ports %v do not publish %s", prom.Ports, prometheusPort)
	}
	sc := readScrape(t)
	if sc.job == "" {
		t.Errorf("%s: no job_name", prometheusFile)
	}
	if routes := servedRoutes(t); !slices.Contains(routes, sc.path) {
		t.Errorf("%s: metrics_path %s is not a route cmd/hyperplane serves (%v)", prometheusFile, sc.path, routes)
	}
	var want []string
	for name, s := range workerServices(t, c) {
		_, port, err := net.SplitHostPort(workerConfig(t, s).HTTP.Addr)
		if err != nil {
			t.Fatalf("%s: http.addr: %v", name, err)
		}
		want = append(want, net.JoinHostPort(name, port))
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(sc.targets)); !slices.Equal(got, want) {
		t.Errorf("%s scrapes %v, want every worker of the stack at its http.addr: %v", prometheusFile, got, want)
	}
	for _, target := range sc.targets {
		if _, ok := c.Services[strings.Split(target, ":")[0]]; !ok {
			t.Errorf("%s: target %s is not a service of the stack", prometheusFile, target)
		}
	}

	// Grafana's datasource is that Prometheus, at its scrape interval.
	ds := readDatasource(t)
	if u, err := url.Parse(ds.URL); err != nil || u.Scheme != "http" || u.Host != net.JoinHostPort("prometheus", prometheusPort) || strings.Trim(u.Path, "/") != "" {
		t.Errorf("datasource url %s, want the stack's Prometheus, http://prometheus:%s", ds.URL, prometheusPort)
	}
	if ds.Access != "proxy" {
		t.Errorf("datasource access %q, want proxy: the browser cannot resolve the service name prometheus", ds.Access)
	}
	if d, err := model.ParseDuration(ds.JSONData.TimeInterval); err != nil || time.Duration(d) != sc.interval {
		t.Errorf("datasource jsonData.timeInterval %q, want Prometheus's scrape interval %v: $__rate_interval is at least four of it", ds.JSONData.TimeInterval, sc.interval)
	}
	if !slices.Contains(extra.Services["grafana"].dependsOn(), "prometheus") {
		t.Error("grafana does not depend on prometheus")
	}
	if !slices.ContainsFunc(graf.Ports, func(p string) bool { return strings.HasSuffix(p, ":"+grafanaPort) }) {
		t.Errorf("grafana: ports %v do not publish %s", graf.Ports, grafanaPort)
	}

	// Grafana reads the provisioning files and the dashboards.
	m := mounts(graf)
	for _, kind := range []string{"datasources", "dashboards"} {
		host := filepath.Join(grafanaDir, "provisioning", kind)
		if got := m[host]; got != path.Join(grafanaProvisioning, kind) {
			t.Errorf("grafana mounts %s at %q, want %s", host, got, path.Join(grafanaProvisioning, kind))
		}
	}
	var provider struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name                  string `yaml:"name"`
			Folder                string `yaml:"folder"`
			Type                  string `yaml:"type"`
			DisableDeletion       bool   `yaml:"disableDeletion"`
			AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
			UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
			Options               struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAMLStrict(t, filepath.Join(grafanaDir, "provisioning", "dashboards", "hyperplane.yaml"), &provider)
	if provider.APIVersion != 1 || len(provider.Providers) != 1 || provider.Providers[0].Type != "file" {
		t.Fatalf("dashboards provisioning: apiVersion %d, %d providers: want apiVersion 1 and one of type file", provider.APIVersion, len(provider.Providers))
	}
	dashPath := m[dashboardsDir]
	if dashPath == "" || provider.Providers[0].Options.Path != dashPath {
		t.Errorf("grafana mounts %s at %q, but its dashboard provider reads %q", dashboardsDir, dashPath, provider.Providers[0].Options.Path)
	}
	home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if _, ok := readDashboards(t)[filepath.Join(dashboardsDir, path.Base(home))]; !ok || path.Dir(home) != dashPath {
		t.Errorf("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH %q is not a dashboard of %s as mounted at %s", home, dashboardsDir, dashPath)
	}
}

// notShown are the worker's metrics no panel shows, and why.
var notShown = map[string]string{
	"hyperplane_decode_errors_total": "hyperplane_dead_letters_total counts the same messages, by reason",
}

// TestGrafanaDashboardShowsEveryMetric: every hyperplane_ metric the
// worker exports is shown by some panel, or is in notShown with a reason;
// a new metric gets a panel, or a reason.
func TestGrafanaDashboardShowsEveryMetric(t *testing.T) {
	exported := workerSeries(t)
	families := map[string]bool{}
	for _, s := range exported {
		if strings.HasPrefix(s.family, "hyperplane_") {
			families[s.family] = true
		}
	}
	c := queryChecker{series: exported, scrape: readScrape(t)}
	for file, d := range readDashboards(t) {
		for _, v := range d.Templating.List {
			c.vars = append(c.vars, v.Name)
		}
		shown := map[string]bool{}
		for _, p := range d.allPanels() {
			for _, tg := range p.Targets {
				q, err := c.expand(tg.Expr)
				if err != nil {
					t.Fatal(err)
				}
				expr, err := parser.NewParser(parser.Options{}).ParseExpr(q)
				if err != nil {
					t.Fatalf("%s: panel %d: %v", file, p.ID, err)
				}
				for _, name := range selectors(expr) {
					shown[exported[name].family] = true
				}
			}
		}
		for f := range families {
			_, skipped := notShown[f]
			switch {
			case !shown[f] && !skipped:
				t.Errorf("%s: no panel shows %s: add one, or say in notShown why not", file, f)
			case shown[f] && skipped:
				t.Errorf("%s: a panel shows %s, which notShown says no panel shows", file, f)
			}
		}
	}
	for f := range notShown {
		if !families[f] {
			t.Errorf("notShown has %s, which the worker does not export", f)
		}
	}
}
