// Package exporter serves the CPU bandwidth figures of a node's cgroups
// to Prometheus, as docs/metrics.md specifies them: the kernel's counters
// and settings of every group with a CPU limit, read at scrape time, and
// per-period distributions from a background sampler.
package exporter

import (
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Buckets of the per-period histograms (docs/metrics.md).
var (
	UsageRatioBuckets = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.5}
	// DemandBuckets are the Renard R10 numbers (ten a decade, each about
	// 1.26 times the one before) from 0.01 to 63 CPUs.
	DemandBuckets  = renard10(0.01, 63)
	StallBuckets   = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}
	StoppedBuckets = []float64{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}
)

// renard10 lists the Renard R10 preferred numbers from lo to hi: 1, 1.25,
// 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8 times the powers of ten.
func renard10(lo, hi float64) []float64 {
	var out []float64
	for e := math.Floor(math.Log10(lo)); ; e++ {
		for _, m := range []float64{1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8} {
			// Parsed from text, so that 0.0125 is the float "0.0125" reads as.
			v, _ := strconv.ParseFloat(strconv.FormatFloat(m, 'f', -1, 64)+"e"+strconv.Itoa(int(e)), 64)
			if v > hi*(1+1e-9) {
				return out
			}
			if v >= lo*(1-1e-9) {
				out = append(out, v)
			}
		}
	}
}

// HELP texts, word for word from docs/metrics.md.
const (
	helpInfo             = "What the cgroup's path, and its container runtime, say about a CPU-limited cgroup; always 1. Join on job, instance and cgroup."
	helpQuota            = "CPU limit of the cgroup in CPUs: quota divided by period (cpu.max; cpu.cfs_quota_us / cpu.cfs_period_us)."
	helpPeriod           = "Length of the cgroup's CFS bandwidth enforcement period (cpu.max; cpu.cfs_period_us)."
	helpBurstLimit       = "CPU time the cgroup may take beyond its quota from time left unused in earlier periods, 0 when not set (cpu.max.burst; cpu.cfs_burst_us). Absent on kernels without CPU burst."
	helpUsage            = "CPU time used by the cgroup's tasks (cpu.stat usage_usec; cpuacct.usage)."
	helpUsageUnknown     = "The cgroup's CPU usage cannot be read, for the reason given; always 1. Its usage and per-period series are absent, its throttling series present."
	helpPeriods          = "Enforcement periods that elapsed while the cgroup had runnable tasks (cpu.stat nr_periods)."
	helpThrottledPeriods = "Enforcement periods in which the cgroup was throttled, however briefly (cpu.stat nr_throttled)."
	helpThrottledSeconds = "Time the cgroup's per-CPU run queues spent throttled, summed over CPUs: two CPUs stalled for 50ms add 0.1s (cpu.stat throttled_usec; throttled_time)."
	helpBursts           = "Enforcement periods in which the cgroup used CPU burst (cpu.stat nr_bursts). Absent on kernels without CPU burst."
	helpBurstSeconds     = "CPU time the cgroup used beyond its quota from its burst allowance (cpu.stat burst_usec; burst_time). Absent on kernels without CPU burst."
	helpUsageRatio       = "CPU the cgroup used in each enforcement period as a fraction of its quota; one observation per period the kernel counted."
	helpDemand           = "CPU the cgroup wanted in each enforcement period, in CPUs: its usage, and in a throttled period also the work of the time it stood still at the CPUs it ran on; one observation per period the kernel counted."
	helpPairDemand       = "Mean CPU the cgroup wanted in two consecutive enforcement periods, in CPUs: the demand of each period and the one just before it, as cfsprobe_period_demand_cpus counts them; one observation per pair. How the heavy periods follow each other, which a burst allowance depends on."
	helpStopped          = "CPUs whose run queues the kernel stopped in each throttled enforcement period: how many CPUs the cgroup ran on when its quota ran out; one observation per throttled period."
	helpStall            = "Wall-clock time the cgroup's runnable tasks stood still in each throttled enforcement period; one observation per throttled period."
	helpStretches        = "Throttled stretches of the cgroup (runs of consecutive throttled enforcement periods) that ended: the period after the last one was not throttled."
	helpCaughtUp         = "Throttled stretches after which the cgroup caught up: in the period right after, it ran for at least a tenth of its quota, doing the work the stalls delayed (a closed loop) rather than having lost it (a loop that runs for a time)."
	helpUnderQuota       = "Throttled enforcement periods in which the cgroup used less than half its quota: the signature of the kernel defects cfsprobe check tests for."

	helpBuildInfo      = "cfsprobe's version and the Go version it was built with; always 1."
	helpHostInfo       = "The node's kernel release, how it mounts cgroups (v1, hybrid, v2) and through which version the cpu controller is used; always 1."
	helpHostCPUs       = "Online CPUs of the node."
	helpSlice          = "CPU time a CPU takes from a group's quota at a time (kernel.sched_cfs_bandwidth_slice_us)."
	helpScrapeDuration = "Time the last scrape took to read every CPU-limited cgroup; the tree itself is walked every scan interval, apart from scrapes."
	helpGroupsScanned  = "Cgroups found in the last walk of the cgroup tree, with a CPU limit or without."
	helpReadErrors     = "Failed reads of cgroup files, by file name (cpu.stat, cpu.max, cpuacct.usage, ...); groups that disappeared during a walk are not counted."
	helpSamplerGroups  = "CPU-limited cgroups the per-period sampler follows."
	helpOverruns       = "Sampling passes that started more than one interval late: the exporter was short of CPU, and the per-period figures of those periods are less precise."
)

// countersSource reads every group's counters (a monitor.Scanner).
type countersSource interface {
	Read(dst []monitor.Reading) []monitor.Reading
	Walked() int
}

// periodsSource has the sampler's histograms (a monitor.Sampler).
type periodsSource interface {
	Snapshot(dst []monitor.GroupPeriods) []monitor.GroupPeriods
	Groups() int
	Overruns() uint64
}

// namer tells the names a container runtime gives a group's container or
// pod (a *containers.Resolver), from memory: it is asked at every scrape
// about the groups it could not name yet. Errors are the runtimes that
// did not answer its last listing.
type namer interface {
	Names(id monitor.Identity) (trace.Names, bool)
	Errors() []error
}

// errorCounts counts failed reads by file (monitor.ReadErrors).
type errorCounts interface {
	Counts() map[string]uint64
}

// Info is what the exporter says about itself and the node.
type Info struct {
	Version    string // cfsprobe's
	GoVersion  string
	Host       trace.Host
	ErrorFiles []string // files whose read error counts are shown from 0
}

// Collector makes cfsprobe's metrics: the series of every CPU-limited
// group, read when it is collected, and the node's and the exporter's
// own. It is a prometheus.Collector of them all (for a registry, which
// can speak every exposition format), and writes them in the text format
// itself (WriteText), several times faster than a registry can: a busy
// node has 30,000 per-group series, and the registry makes a dto.Metric
// of each, checks it and escapes its labels at every scrape. Both ways
// go through one table of the per-group families (groupFamilies); scrapes
// run one at a time.
type Collector struct {
	counters countersSource
	periods  periodsSource // nil: no sampler
	errs     errorCounts
	names    namer // nil: groups have their path identity only
	info     Info

	mu       sync.Mutex // one scrape at a time; guards what follows
	readings []monitor.Reading
	snap     []monitor.GroupPeriods
	histOf   map[string]int          // path -> index in snap
	labels   map[string]*groupLabels // path -> its label sets
	rows     []row                   // this scrape's groups
	scrape   uint64                  // scrapes so far
	families []*family               // per group, by name

	took atomic.Int64 // ns the last scrape took to read the groups

	buildInfo, hostInfo, hostCPUs, slice, scrapeDuration      *prometheus.Desc
	groupsScanned, readErrors, samplerGroups, samplerOverruns *prometheus.Desc
}

// NewCollector returns a Collector of the groups counters reads and the
// histograms periods keeps (nil when there is no sampler), naming
// containers and pods through names (nil: by their paths only).
func NewCollector(counters countersSource, periods periodsSource, errs errorCounts, names namer, info Info) *Collector {
	g := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &Collector{
		counters: counters, periods: periods, errs: errs, names: names, info: info, histOf: map[string]int{}, labels: map[string]*groupLabels{},
		families: groupFamilies(),

		buildInfo:       g("cfsprobe_build_info", helpBuildInfo, "version", "goversion"),
		hostInfo:        g("cfsprobe_host_info", helpHostInfo, "kernel", "cgroup_mode", "cpu_controller"),
		hostCPUs:        g("cfsprobe_host_cpus", helpHostCPUs),
		slice:           g("cfsprobe_host_cfs_bandwidth_slice_seconds", helpSlice),
		scrapeDuration:  g("cfsprobe_scrape_duration_seconds", helpScrapeDuration),
		groupsScanned:   g("cfsprobe_groups_scanned", helpGroupsScanned),
		readErrors:      g("cfsprobe_read_errors_total", helpReadErrors, "file"),
		samplerGroups:   g("cfsprobe_sampler_groups", helpSamplerGroups),
		samplerOverruns: g("cfsprobe_sampler_overruns_total", helpOverruns),
	}
}

// row is one group of a scrape.
type row struct {
	r *monitor.Reading
	l *groupLabels
	h *monitor.GroupPeriods // nil: no per-period series
}

// family is one per-group metric family: what the registry needs of it
// (desc), what the text format does (name, help, type), and, for each
// group, its series: value (a gauge or counter; ok false: the group has
// none) or hist (a histogram; nil: none), with the label set labels
// picks.
type family struct {
	desc   *prometheus.Desc
	name   string
	help   string
	typ    dto.MetricType
	value  func(r row) (v float64, ok bool)
	hist   func(r row) *monitor.Histogram
	labels func(r row) *labelSet
	bounds []float64 // a histogram's buckets' upper bounds (the sampler's)
	les    []string  // bounds as the text format writes them
}

// groupFamilies is the table of the per-group series (docs/metrics.md),
// by name.
func groupFamilies() []*family {
	limited := func(r row) bool { return !r.r.Limits.Unlimited() }
	burst := func(r row) bool { return r.r.Burst }
	cgroupLabel := func(r row) *labelSet { return &r.l.cgroup }
	f := func(name, help string, typ dto.MetricType, value func(r row) (float64, bool)) *family {
		return &family{name: name, help: help, typ: typ, value: value, labels: cgroupLabel}
	}
	gauge, counter := dto.MetricType_GAUGE, dto.MetricType_COUNTER
	fs := []*family{
		{name: "cfsprobe_cgroup_info", help: helpInfo, typ: gauge,
			value:  func(row) (float64, bool) { return 1, true },
			labels: func(r row) *labelSet { return &r.l.info }},
		f("cfsprobe_cpu_quota_cpus", helpQuota, gauge, func(r row) (float64, bool) { return r.r.Limits.CPUs(), limited(r) }),
		f("cfsprobe_cpu_period_seconds", helpPeriod, gauge, func(r row) (float64, bool) { return r.r.Limits.Period.Seconds(), limited(r) }),
		f("cfsprobe_cpu_burst_limit_seconds", helpBurstLimit, gauge, func(r row) (float64, bool) { return r.r.Limits.Burst.Seconds(), limited(r) && burst(r) }),
		f("cfsprobe_cpu_usage_seconds_total", helpUsage, counter, func(r row) (float64, bool) {
			return seconds(r.r.Stat.UsageNs), r.r.Group.UsageUnknown() == ""
		}),
		{name: "cfsprobe_cpu_usage_unknown", help: helpUsageUnknown, typ: gauge,
			value:  func(r row) (float64, bool) { return 1, r.r.Group.UsageUnknown() != "" },
			labels: func(r row) *labelSet { return r.l.unknownLabels(r.r.Group.UsageUnknown()) }},
		f("cfsprobe_cpu_periods_total", helpPeriods, counter, func(r row) (float64, bool) { return float64(r.r.Stat.NrPeriods), true }),
		f("cfsprobe_cpu_throttled_periods_total", helpThrottledPeriods, counter, func(r row) (float64, bool) { return float64(r.r.Stat.NrThrottled), true }),
		f("cfsprobe_cpu_throttled_seconds_total", helpThrottledSeconds, counter, func(r row) (float64, bool) { return seconds(r.r.Stat.ThrottledNs), true }),
		f("cfsprobe_cpu_bursts_total", helpBursts, counter, func(r row) (float64, bool) { return float64(r.r.Stat.NrBursts), burst(r) }),
		f("cfsprobe_cpu_burst_seconds_total", helpBurstSeconds, counter, func(r row) (float64, bool) { return seconds(r.r.Stat.BurstNs), burst(r) }),
		{name: "cfsprobe_period_usage_ratio", help: helpUsageRatio, typ: dto.MetricType_HISTOGRAM, labels: cgroupLabel, bounds: UsageRatioBuckets,
			hist: func(r row) *monitor.Histogram {
				return histOf(r, func(h *monitor.GroupPeriods) *monitor.Histogram { return &h.Usage })
			}},
		{name: "cfsprobe_period_demand_cpus", help: helpDemand, typ: dto.MetricType_HISTOGRAM, labels: cgroupLabel, bounds: DemandBuckets,
			hist: func(r row) *monitor.Histogram {
				return histOf(r, func(h *monitor.GroupPeriods) *monitor.Histogram { return &h.Demand })
			}},
		{name: "cfsprobe_period_pair_demand_cpus", help: helpPairDemand, typ: dto.MetricType_HISTOGRAM, labels: cgroupLabel, bounds: DemandBuckets,
			hist: func(r row) *monitor.Histogram {
				return histOf(r, func(h *monitor.GroupPeriods) *monitor.Histogram { return &h.Pairs })
			}},
		{name: "cfsprobe_period_stopped_cpus", help: helpStopped, typ: dto.MetricType_HISTOGRAM, labels: cgroupLabel, bounds: StoppedBuckets,
			hist: func(r row) *monitor.Histogram {
				return histOf(r, func(h *monitor.GroupPeriods) *monitor.Histogram { return &h.Stopped })
			}},
		{name: "cfsprobe_stall_seconds", help: helpStall, typ: dto.MetricType_HISTOGRAM, labels: cgroupLabel, bounds: StallBuckets,
			hist: func(r row) *monitor.Histogram {
				return histOf(r, func(h *monitor.GroupPeriods) *monitor.Histogram { return &h.Stall })
			}},
		f("cfsprobe_throttled_stretches_total", helpStretches, counter, func(r row) (float64, bool) {
			if r.h == nil {
				return 0, false
			}
			return float64(r.h.Stretches.Ended), true
		}),
		f("cfsprobe_throttled_stretches_caught_up_total", helpCaughtUp, counter, func(r row) (float64, bool) {
			if r.h == nil {
				return 0, false
			}
			return float64(r.h.Stretches.CaughtUp), true
		}),
		f("cfsprobe_throttled_under_quota_periods_total", helpUnderQuota, counter, func(r row) (float64, bool) {
			if r.h == nil {
				return 0, false
			}
			return float64(r.h.UnderQuota), true
		}),
	}
	slices.SortFunc(fs, func(a, b *family) int { return strings.Compare(a.name, b.name) })
	for _, f := range fs {
		labels := []string{"cgroup"}
		switch f.name {
		case "cfsprobe_cgroup_info":
			labels = []string{"cgroup", "kind", "name", "pod_uid", "qos", "container_id", "runtime", "unit", "container_name", "image", "pod_namespace", "pod_name"}
		case "cfsprobe_cpu_usage_unknown":
			labels = []string{"cgroup", "reason"}
		}
		f.desc = prometheus.NewDesc(f.name, f.help, labels, nil)
		for _, b := range f.bounds {
			f.les = append(f.les, strconv.FormatFloat(b, 'g', -1, 64))
		}
	}
	return fs
}

func histOf(r row, which func(h *monitor.GroupPeriods) *monitor.Histogram) *monitor.Histogram {
	if r.h == nil {
		return nil
	}
	return which(r.h)
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families {
		ch <- f.desc
	}
	c.nodeOnly().Describe(ch)
}

// Collect reads every group and sends all the metrics. It never fails: a
// group that cannot be read is left out and counted in
// cfsprobe_read_errors_total. A group whose usage cannot be read
// (monitor.UsageUnknown) is not: it has cfsprobe_cpu_usage_unknown with
// the reason instead of its usage counter, and no per-period series (the
// sampler does not follow it).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	for _, f := range c.families {
		for _, r := range c.rows {
			if m := f.metric(r); m != nil {
				ch <- m
			}
		}
	}
	c.nodeOnly().Collect(ch)
}

// Text is the exposition format WriteText writes.
var Text = expfmt.NewFormat(expfmt.TypeTextPlain)

// WriteText reads every group and writes all the metrics in the text
// format (Text): the groups' series, and those node gathers (the node's
// and the exporter's own, NodeCollector's, and the Go runtime's). Like
// Collect it leaves out groups that cannot be read; an error of node's
// is returned once everything else is written.
func (c *Collector) WriteText(w io.Writer, node prometheus.Gatherer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read()
	mfs, gatherErr := node.Gather()
	enc := expfmt.NewEncoder(w, Text)
	var b []byte
	fs := c.families
	for len(mfs) > 0 || len(fs) > 0 {
		// The families in name order, as a registry writes them.
		if len(fs) == 0 || len(mfs) > 0 && mfs[0].GetName() < fs[0].name {
			if err := enc.Encode(mfs[0]); err != nil {
				return err
			}
			mfs = mfs[1:]
			continue
		}
		f := fs[0]
		fs = fs[1:]
		b = f.appendHeader(b[:0]) // taken back when the family has no series
		some := false
		for _, r := range c.rows {
			n := len(b)
			b = f.appendText(b, r)
			some = some || len(b) > n
			if len(b) > 32<<10 {
				if _, err := w.Write(b); err != nil {
					return err
				}
				b = b[:0]
			}
		}
		if !some {
			continue
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return gatherErr
}

// read reads every group's counters and the sampler's histograms, and
// lays out the scrape's rows.
func (c *Collector) read() {
	start := time.Now()
	c.readings = c.counters.Read(c.readings[:0])
	if c.periods != nil {
		c.snap = c.periods.Snapshot(c.snap[:0])
	}
	c.took.Store(int64(time.Since(start)))

	clear(c.histOf)
	for i, p := range c.snap {
		c.histOf[p.Path] = i
	}
	c.scrape++
	c.rows = c.rows[:0]
	for i := range c.readings {
		r := &c.readings[i]
		w := row{r: r, l: c.labelsOf(r)}
		if j, ok := c.histOf[r.Group.Path]; ok && !r.Limits.Unlimited() {
			w.h = &c.snap[j]
		}
		c.rows = append(c.rows, w)
	}
	for p, l := range c.labels { // groups gone
		if l.scrape != c.scrape {
			delete(c.labels, p)
		}
	}
}

// NodeCollector collects the node's and the exporter's own metrics, not
// the groups': what WriteText gathers from a registry beside the Go
// runtime's.
func (c *Collector) NodeCollector() prometheus.Collector { return c.nodeOnly() }

func (c *Collector) nodeOnly() nodeCollector { return nodeCollector{c} }

type nodeCollector struct{ c *Collector }

func (n nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	c := n.c
	for _, d := range []*prometheus.Desc{c.buildInfo, c.hostInfo, c.hostCPUs, c.slice, c.scrapeDuration, c.groupsScanned, c.readErrors, c.samplerGroups, c.samplerOverruns} {
		ch <- d
	}
}

// Collect sends the node's metrics; the scrape duration is that of the
// last read of the groups.
func (n nodeCollector) Collect(ch chan<- prometheus.Metric) {
	c := n.c
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	in := c.info
	ch <- prometheus.MustNewConstMetric(c.buildInfo, gauge, 1, in.Version, in.GoVersion)
	ch <- prometheus.MustNewConstMetric(c.hostInfo, gauge, 1, in.Host.Kernel, in.Host.CgroupMode, "v"+strconv.Itoa(in.Host.CPUController))
	ch <- prometheus.MustNewConstMetric(c.hostCPUs, gauge, float64(in.Host.CPUs))
	if in.Host.SliceUs > 0 {
		ch <- prometheus.MustNewConstMetric(c.slice, gauge, float64(in.Host.SliceUs)/1e6)
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeDuration, gauge, time.Duration(c.took.Load()).Seconds())
	ch <- prometheus.MustNewConstMetric(c.groupsScanned, gauge, float64(c.counters.Walked()))
	errs := c.errs.Counts()
	for _, f := range in.ErrorFiles {
		if _, ok := errs[f]; !ok {
			errs[f] = 0
		}
	}
	for _, f := range slices.Sorted(maps.Keys(errs)) {
		ch <- prometheus.MustNewConstMetric(c.readErrors, counter, float64(errs[f]), f)
	}
	groups, overruns := 0, uint64(0)
	if c.periods != nil {
		groups, overruns = c.periods.Groups(), c.periods.Overruns()
	}
	ch <- prometheus.MustNewConstMetric(c.samplerGroups, gauge, float64(groups))
	ch <- prometheus.MustNewConstMetric(c.samplerOverruns, counter, float64(overruns))
}

// labelSet is one series' labels, as the registry takes them (pairs,
// sorted by name) and as the text format writes them (text: name="value"
// pairs, escaped, without braces), made once in a group's life.
type labelSet struct {
	pairs []*dto.LabelPair
	text  []byte
}

func newLabelSet(pairs ...*dto.LabelPair) labelSet {
	s := labelSet{pairs: pairs}
	for i, p := range pairs {
		if i > 0 {
			s.text = append(s.text, ',')
		}
		s.text = append(s.text, p.GetName()...)
		s.text = append(s.text, '=', '"')
		s.text = appendEscaped(s.text, p.GetValue(), true)
		s.text = append(s.text, '"')
	}
	return s
}

// appendEscaped escapes a label value as the text format does (\, " and
// newline), or a HELP text (quote false: \ and newline).
func appendEscaped(b []byte, v string, quote bool) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		case c == '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}

// groupLabels are a group's label sets.
type groupLabels struct {
	cgroup  labelSet // cgroup
	info    labelSet // cfsprobe_cgroup_info's, sorted by name
	unknown labelSet // cfsprobe_cpu_usage_unknown's, once needed
	reason  monitor.UsageUnknown
	scrape  uint64 // the last scrape that saw the group
	// names are the runtime's names on info; named is true once they
	// are complete (a container's own name is known), after which the
	// runtime is not asked again in the group's life.
	names trace.Names
	named bool
}

// unknownLabels are the labels of cfsprobe_cpu_usage_unknown: cgroup and
// reason.
func (l *groupLabels) unknownLabels(u monitor.UsageUnknown) *labelSet {
	if l.unknown.pairs == nil || l.reason != u {
		l.unknown, l.reason = newLabelSet(l.cgroup.pairs[0], pair("reason", string(u))), u
	}
	return &l.unknown
}

func pair(n, v string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(n), Value: proto.String(v)}
}

// labelsOf returns the label sets of a reading's group. A container's or
// pod's names are looked up until they are known (from the namer's
// memory: no call to a runtime per scrape), and its info labels made
// again when they change.
func (c *Collector) labelsOf(r *monitor.Reading) *groupLabels {
	id := r.Group.ID
	l := c.labels[r.Group.Path]
	if l == nil {
		l = &groupLabels{cgroup: newLabelSet(pair("cgroup", r.Group.Path)), named: c.names == nil || id.ContainerID == "" && id.PodUID == ""}
		l.info = infoLabels(l.cgroup.pairs[0], id, l.names)
		c.labels[r.Group.Path] = l
	}
	if !l.named {
		if n, ok := c.names.Names(id); ok {
			l.named = id.ContainerID == "" || n.ContainerName != ""
			if n != l.names {
				l.names = n
				l.info = infoLabels(l.cgroup.pairs[0], id, n)
			}
		}
	}
	l.scrape = c.scrape
	return l
}

// infoLabels are cfsprobe_cgroup_info's labels, sorted by name as the
// registry's own metrics have them: the path's identity and the
// runtime's names (name is how people call the group, trace.Names.Label).
func infoLabels(cg *dto.LabelPair, id monitor.Identity, n trace.Names) labelSet {
	return newLabelSet(
		cg, pair("container_id", id.ContainerID), pair("container_name", n.ContainerName), pair("image", n.Image),
		pair("kind", string(id.Kind)), pair("name", n.Label(id.Name)), pair("pod_name", n.PodName), pair("pod_namespace", n.PodNamespace),
		pair("pod_uid", id.PodUID), pair("qos", string(id.QoS)), pair("runtime", string(id.Runtime)), pair("unit", id.Unit),
	)
}

// metric is the group's series of the family for a registry (nil: none).
func (f *family) metric(r row) prometheus.Metric {
	m := &dtoMetric{desc: f.desc, labels: f.labels(r).pairs}
	if f.hist != nil {
		h := f.hist(r)
		if h == nil {
			return nil
		}
		d := &dto.Histogram{SampleCount: proto.Uint64(h.Count), SampleSum: proto.Float64(h.Sum)}
		var total uint64
		for i, b := range f.bounds {
			total += h.Counts[i]
			d.Bucket = append(d.Bucket, &dto.Bucket{CumulativeCount: proto.Uint64(total), UpperBound: proto.Float64(b)})
		}
		m.hist = d
		return m
	}
	v, ok := f.value(r)
	if !ok {
		return nil
	}
	if f.typ == dto.MetricType_COUNTER {
		m.counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		m.gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	return m
}

// dtoMetric is one series for a registry.
type dtoMetric struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	gauge   *dto.Gauge
	counter *dto.Counter
	hist    *dto.Histogram
}

func (m *dtoMetric) Desc() *prometheus.Desc { return m.desc }

func (m *dtoMetric) Write(out *dto.Metric) error {
	out.Label, out.Gauge, out.Counter, out.Histogram = m.labels, m.gauge, m.counter, m.hist
	return nil
}

// appendHeader appends the family's HELP and TYPE lines.
func (f *family) appendHeader(b []byte) []byte {
	b = append(b, "# HELP "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = appendEscaped(b, f.help, false)
	b = append(b, "\n# TYPE "...)
	b = append(b, f.name...)
	b = append(b, ' ')
	b = append(b, strings.ToLower(f.typ.String())...)
	return append(b, '\n')
}

// appendText appends the group's series of the family in the text
// format (nothing when it has none).
func (f *family) appendText(b []byte, r row) []byte {
	l := f.labels(r)
	if f.hist == nil {
		v, ok := f.value(r)
		if !ok {
			return b
		}
		return appendSample(b, f.name, "", l.text, "", v)
	}
	h := f.hist(r)
	if h == nil {
		return b
	}
	var total uint64
	for i := range f.les {
		total += h.Counts[i]
		b = appendSample(b, f.name, "_bucket", l.text, f.les[i], float64(total))
	}
	b = appendSample(b, f.name, "_bucket", l.text, "+Inf", float64(h.Count))
	b = appendSample(b, f.name, "_sum", l.text, "", h.Sum)
	return appendSample(b, f.name, "_count", l.text, "", float64(h.Count))
}

// appendSample appends one line: name+suffix{labels[,le="le"]} value.
func appendSample(b []byte, name, suffix string, labels []byte, le string, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if len(labels) > 0 || le != "" {
		b = append(b, '{')
		b = append(b, labels...)
		if le != "" {
			if len(labels) > 0 {
				b = append(b, ',')
			}
			b = append(b, `le="`...)
			b = append(b, le...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	return append(b, '\n')
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
