package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	metricNameRE = regexp.MustCompile(`^cfsprobe_[a-z0-9]+(_[a-z0-9]+)*$`)
	labelNameRE  = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	recordNameRE = regexp.MustCompile(`^[a-z_]+:[a-z0-9_]+:[a-z0-9_]+$`)
)

// The metric tables of docs/metrics.md follow Prometheus' naming rules, so
// that the exporter implementing them does too.
func TestMetricsDocNaming(t *testing.T) {
	d := loadMetricsDoc(t)
	for name, m := range d.Metrics {
		where := fmt.Sprintf("docs/metrics.md:%d: %s", m.Line, name)
		if !metricNameRE.MatchString(name) {
			t.Errorf("%s: not a cfsprobe_ metric name in snake case", where)
		}
		switch isTotal := strings.HasSuffix(name, "_total"); {
		case m.Type == "counter" && !isTotal:
			t.Errorf("%s: a counter's name ends in _total", where)
		case m.Type != "counter" && isTotal:
			t.Errorf("%s: only counters end in _total", where)
		}
		for _, s := range append(histogramSuffixes, "_created") {
			if strings.HasSuffix(name, s) {
				t.Errorf("%s: %s is a suffix the exposition format adds", where, s)
			}
		}
		if strings.HasSuffix(name, "_info") && m.Type != "gauge" {
			t.Errorf("%s: an info metric is a gauge (always 1)", where)
		}
		for _, unit := range []string{"_milliseconds", "_microseconds", "_nanoseconds", "_usec", "_percent"} {
			if strings.Contains(name, unit) {
				t.Errorf("%s: use base units (seconds, ratios)", where)
			}
		}
		for _, l := range m.Labels {
			if !labelNameRE.MatchString(l) {
				t.Errorf("%s: label %q is not a label name", where, l)
			}
			if slices.Contains(targetLabels, l) {
				t.Errorf("%s: label %q would clash with a target label (it would become exported_%s)", where, l, l)
			}
			if strings.Contains(l, "pid") || l == "thread" {
				t.Errorf("%s: label %q is unbounded", where, l)
			}
		}
		checkHelp(t, where, m.Help)
	}
	for name, m := range d.Records {
		where := fmt.Sprintf("docs/metrics.md:%d: %s", m.Line, name)
		if !recordNameRE.MatchString(name) {
			t.Errorf("%s: a recording rule is named level:metric:operations", where)
		}
		checkHelp(t, where, m.Help)
	}
	for name, m := range d.Extern {
		checkHelp(t, fmt.Sprintf("docs/metrics.md:%d: %s", m.Line, name), m.Help)
	}
}

func checkHelp(t *testing.T, where, help string) {
	t.Helper()
	switch {
	case help == "":
		t.Errorf("%s: no HELP text", where)
	case !strings.HasSuffix(help, "."):
		t.Errorf("%s: HELP text %q does not end a sentence", where, help)
	case strings.ContainsAny(help, "`\\"):
		t.Errorf("%s: HELP text %q holds markdown or a backslash: it is exposed as it is written", where, help)
	}
}

// The sections of docs/metrics.md whose series a group has only when its
// usage is unknown, and those it then lacks besides its usage counter.
const (
	usageUnknownSection = "Groups whose usage is unknown"
	perPeriodSection    = "Per-period metrics (the sampler)"
)

// Every histogram has its buckets listed, ascending, ending in +Inf, and
// the doc's counts of series per group follow from its tables.
func TestMetricsDocBucketsAndSeriesCount(t *testing.T) {
	d := loadMetricsDoc(t)
	// series is how many series a group has of the metric: 1, or a
	// histogram's buckets with +Inf, _sum and _count.
	series := func(name string, m docMetric) int {
		if m.Type != "histogram" {
			return 1
		}
		b, ok := d.Buckets[name]
		if !ok {
			t.Errorf("docs/metrics.md: histogram %s has no row in the bucket table", name)
			return 0
		}
		if b[len(b)-1] != "+Inf" {
			t.Errorf("docs/metrics.md: buckets of %s end in %s, not +Inf", name, b[len(b)-1])
		}
		prev := -1.0
		for _, s := range b[:len(b)-1] {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v <= prev {
				t.Errorf("docs/metrics.md: bucket %q of %s is not a number above the one before", s, name)
			}
			prev = v
		}
		return len(b) + 2
	}
	perGroup, perPeriod, unknownOnly := 0, 0, 0
	for name, m := range d.Metrics {
		if !slices.Contains(m.Labels, "cgroup") {
			continue
		}
		n := series(name, m)
		switch m.Section {
		case usageUnknownSection:
			unknownOnly += n
			continue
		case perPeriodSection:
			perPeriod += n
		}
		perGroup += n
	}
	for name := range d.Buckets {
		if m, ok := d.Metrics[name]; !ok || m.Type != "histogram" {
			t.Errorf("docs/metrics.md: the bucket table lists %s, which is not a documented histogram", name)
		}
	}
	want := fmt.Sprintf("A limited group has %d series", perGroup)
	if !strings.Contains(d.Text, want) {
		t.Errorf("docs/metrics.md: the tables give %d series per limited group; the text should say %q", perGroup, want)
	}
	// Without usage: no usage counter, no per-period series, and those of
	// its own section.
	unknown := perGroup - 1 - perPeriod + unknownOnly
	if want := fmt.Sprintf("a group whose usage is unknown has %d", unknown); unknownOnly == 0 || !strings.Contains(d.Text, want) {
		t.Errorf("docs/metrics.md: the tables give %d series per group whose usage is unknown (%d of section %q); the text should say %q", unknown, unknownOnly, usageUnknownSection, want)
	}
}
