// Package exporter serves the CPU bandwidth figures of a node's cgroups
// to Prometheus, as docs/metrics.md specifies them: the kernel's counters
// and settings of every group with a CPU limit, read at scrape time, and
// per-period distributions from a background sampler.
package exporter

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

// Buckets of the per-period histograms (docs/metrics.md).
var (
	UsageRatioBuckets = []float64{0.1, 0.25, 0.5, 0.75, 0.9, 1, 1.5}
	StallBuckets      = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1}
)

// HELP texts, word for word from docs/metrics.md.
const (
	helpInfo             = "What the cgroup's path says about a CPU-limited cgroup; always 1. Join on job, instance and cgroup."
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
	helpStall            = "Wall-clock time the cgroup's runnable tasks stood still in each throttled enforcement period; one observation per throttled period."
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

// errorCounts counts failed reads by file (monitor.ReadErrors).
type errorCounts interface {
	Counts() map[string]uint64
}

// Info is what the exporter says about itself and the node.
type Info struct {
	Version       string // cfsprobe's
	GoVersion     string
	Host          Host
	CgroupMode    string   // v1, hybrid, v2
	CPUController string   // v1, v2
	ErrorFiles    []string // files whose read error counts are shown from 0
}

// Collector is the prometheus.Collector of cfsprobe's metrics. It reads
// the groups' counters when it is collected; scrapes run one at a time.
type Collector struct {
	counters countersSource
	periods  periodsSource // nil: no sampler
	errs     errorCounts
	info     Info

	mu       sync.Mutex // one Collect at a time; guards the buffers
	readings []monitor.Reading
	snap     []monitor.GroupPeriods
	histOf   map[string]int          // path -> index in snap
	labels   map[string]*groupLabels // path -> its label pairs
	scrape   uint64                  // Collects so far

	cgroupInfo, quota, period, burstLimit                     *prometheus.Desc
	usage, usageUnknown                                       *prometheus.Desc
	periodsTotal, throttledPeriods, throttledSeconds          *prometheus.Desc
	bursts, burstSeconds, usageRatio, stall, underQuota       *prometheus.Desc
	buildInfo, hostInfo, hostCPUs, slice, scrapeDuration      *prometheus.Desc
	groupsScanned, readErrors, samplerGroups, samplerOverruns *prometheus.Desc
}

// NewCollector returns a Collector of the groups counters reads and the
// histograms periods keeps (nil when there is no sampler).
func NewCollector(counters countersSource, periods periodsSource, errs errorCounts, info Info) *Collector {
	g := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	cg := []string{"cgroup"}
	return &Collector{
		counters: counters, periods: periods, errs: errs, info: info, histOf: map[string]int{}, labels: map[string]*groupLabels{},

		cgroupInfo:       g("cfsprobe_cgroup_info", helpInfo, "cgroup", "kind", "name", "pod_uid", "qos", "container_id", "runtime", "unit"),
		quota:            g("cfsprobe_cpu_quota_cpus", helpQuota, cg...),
		period:           g("cfsprobe_cpu_period_seconds", helpPeriod, cg...),
		burstLimit:       g("cfsprobe_cpu_burst_limit_seconds", helpBurstLimit, cg...),
		usage:            g("cfsprobe_cpu_usage_seconds_total", helpUsage, cg...),
		usageUnknown:     g("cfsprobe_cpu_usage_unknown", helpUsageUnknown, "cgroup", "reason"),
		periodsTotal:     g("cfsprobe_cpu_periods_total", helpPeriods, cg...),
		throttledPeriods: g("cfsprobe_cpu_throttled_periods_total", helpThrottledPeriods, cg...),
		throttledSeconds: g("cfsprobe_cpu_throttled_seconds_total", helpThrottledSeconds, cg...),
		bursts:           g("cfsprobe_cpu_bursts_total", helpBursts, cg...),
		burstSeconds:     g("cfsprobe_cpu_burst_seconds_total", helpBurstSeconds, cg...),
		usageRatio:       g("cfsprobe_period_usage_ratio", helpUsageRatio, cg...),
		stall:            g("cfsprobe_stall_seconds", helpStall, cg...),
		underQuota:       g("cfsprobe_throttled_under_quota_periods_total", helpUnderQuota, cg...),

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

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.cgroupInfo, c.quota, c.period, c.burstLimit, c.usage, c.usageUnknown, c.periodsTotal, c.throttledPeriods, c.throttledSeconds,
		c.bursts, c.burstSeconds, c.usageRatio, c.stall, c.underQuota,
		c.buildInfo, c.hostInfo, c.hostCPUs, c.slice, c.scrapeDuration, c.groupsScanned, c.readErrors, c.samplerGroups, c.samplerOverruns,
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect reads every group and sends its metrics. It never fails: a
// group that cannot be read is left out and counted in
// cfsprobe_read_errors_total. A group whose usage cannot be read
// (monitor.UsageUnknown) is not: it has cfsprobe_cpu_usage_unknown with
// the reason instead of its usage counter, and no per-period series (the
// sampler does not follow it).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	c.readings = c.counters.Read(c.readings[:0])
	if c.periods != nil {
		c.snap = c.periods.Snapshot(c.snap[:0])
	}
	took := time.Since(start)

	clear(c.histOf)
	for i, p := range c.snap {
		c.histOf[p.Path] = i
	}
	c.scrape++
	sl := newSlabs(len(c.readings), len(c.snap))
	for i := range c.readings {
		r := &c.readings[i]
		l := c.labelsOf(r)
		ch <- sl.gauge(c.cgroupInfo, l.info, 1)
		if !r.Limits.Unlimited() {
			ch <- sl.gauge(c.quota, l.cgroup, r.Limits.CPUs())
			ch <- sl.gauge(c.period, l.cgroup, r.Limits.Period.Seconds())
			if r.Burst {
				ch <- sl.gauge(c.burstLimit, l.cgroup, r.Limits.Burst.Seconds())
			}
		}
		if u := r.Group.UsageUnknown(); u != "" {
			ch <- sl.gauge(c.usageUnknown, l.unknownLabels(u), 1)
		} else {
			ch <- sl.counter(c.usage, l.cgroup, seconds(r.Stat.UsageNs))
		}
		ch <- sl.counter(c.periodsTotal, l.cgroup, float64(r.Stat.NrPeriods))
		ch <- sl.counter(c.throttledPeriods, l.cgroup, float64(r.Stat.NrThrottled))
		ch <- sl.counter(c.throttledSeconds, l.cgroup, seconds(r.Stat.ThrottledNs))
		if r.Burst {
			ch <- sl.counter(c.bursts, l.cgroup, float64(r.Stat.NrBursts))
			ch <- sl.counter(c.burstSeconds, l.cgroup, seconds(r.Stat.BurstNs))
		}
		if j, ok := c.histOf[r.Group.Path]; ok && !r.Limits.Unlimited() {
			h := &c.snap[j]
			ch <- sl.histogram(c.usageRatio, l.cgroup, &h.Usage)
			ch <- sl.histogram(c.stall, l.cgroup, &h.Stall)
			ch <- sl.counter(c.underQuota, l.cgroup, float64(h.UnderQuota))
		}
	}
	for p, l := range c.labels { // groups gone
		if l.scrape != c.scrape {
			delete(c.labels, p)
		}
	}

	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	in := c.info
	ch <- prometheus.MustNewConstMetric(c.buildInfo, gauge, 1, in.Version, in.GoVersion)
	ch <- prometheus.MustNewConstMetric(c.hostInfo, gauge, 1, in.Host.Kernel, in.CgroupMode, in.CPUController)
	ch <- prometheus.MustNewConstMetric(c.hostCPUs, gauge, float64(in.Host.CPUs))
	if in.Host.SliceSeconds > 0 {
		ch <- prometheus.MustNewConstMetric(c.slice, gauge, in.Host.SliceSeconds)
	}
	ch <- prometheus.MustNewConstMetric(c.scrapeDuration, gauge, took.Seconds())
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

// groupLabels are a group's label pairs, made once in its life.
type groupLabels struct {
	cgroup  []*dto.LabelPair // cgroup
	info    []*dto.LabelPair // cfsprobe_cgroup_info's, sorted by name
	unknown []*dto.LabelPair // cfsprobe_cpu_usage_unknown's, once needed
	scrape  uint64           // the last scrape that saw the group
}

// unknownLabels are the label pairs of cfsprobe_cpu_usage_unknown: cgroup
// and reason.
func (l *groupLabels) unknownLabels(u monitor.UsageUnknown) []*dto.LabelPair {
	if len(l.unknown) != 2 || l.unknown[1].GetValue() != string(u) {
		l.unknown = []*dto.LabelPair{l.cgroup[0], {Name: proto.String("reason"), Value: proto.String(string(u))}}
	}
	return l.unknown
}

// labelsOf returns the label pairs of a reading's group.
func (c *Collector) labelsOf(r *monitor.Reading) *groupLabels {
	l := c.labels[r.Group.Path]
	if l == nil {
		id := r.Group.ID
		pair := func(n, v string) *dto.LabelPair { return &dto.LabelPair{Name: proto.String(n), Value: proto.String(v)} }
		cg := pair("cgroup", r.Group.Path)
		l = &groupLabels{
			cgroup: []*dto.LabelPair{cg},
			info: []*dto.LabelPair{ // by name, as the registry's own metrics have them
				cg, pair("container_id", id.ContainerID), pair("kind", string(id.Kind)), pair("name", id.Name),
				pair("pod_uid", id.PodUID), pair("qos", string(id.QoS)), pair("runtime", string(id.Runtime)), pair("unit", id.Unit),
			},
		}
		c.labels[r.Group.Path] = l
	}
	l.scrape = c.scrape
	return l
}

// slabs hold one scrape's per-group series, written straight into the
// structures the registry asks for, in a few allocations: const metrics
// cost four allocations or more per series, and a busy node has 30,000.
// A scrape's slabs are never reused: the registry may still be reading
// them after Collect returns.
type slabs struct {
	gauges   []gaugeMetric
	counters []counterMetric
	hists    []histMetric
	buckets  []dto.Bucket
	bucketP  []*dto.Bucket
	cum      []uint64
}

func newSlabs(groups, hists int) *slabs {
	return &slabs{
		gauges:   make([]gaugeMetric, 0, 5*groups),
		counters: make([]counterMetric, 0, 7*groups),
		hists:    make([]histMetric, 0, 2*hists),
	}
}

// The slabs' elements are set in place: the dto structures must not be
// copied. Their capacity is what a scrape needs; past it (it cannot
// happen) a new slab starts, as the old one's elements must not move.

// next is the next element of a slab, set to its zero value.
func next[T any](slab *[]T) *T {
	if len(*slab) == cap(*slab) {
		*slab = make([]T, 0, 64)
	}
	*slab = (*slab)[:len(*slab)+1]
	return &(*slab)[len(*slab)-1]
}

func (s *slabs) gauge(d *prometheus.Desc, labels []*dto.LabelPair, v float64) prometheus.Metric {
	m := next(&s.gauges)
	m.desc, m.labels, m.v = d, labels, v
	return m
}

func (s *slabs) counter(d *prometheus.Desc, labels []*dto.LabelPair, v float64) prometheus.Metric {
	m := next(&s.counters)
	m.desc, m.labels, m.v = d, labels, v
	return m
}

// histogram makes a histogram series of h, its buckets cumulated.
func (s *slabs) histogram(d *prometheus.Desc, labels []*dto.LabelPair, h *monitor.Histogram) prometheus.Metric {
	n := len(h.Bounds)
	if cap(s.buckets)-len(s.buckets) < n {
		// A chunk for the rest of the scrape's histograms, as long
		// as this one's.
		k := (max(cap(s.hists)-len(s.hists), 1) + 1) * n
		s.buckets, s.bucketP, s.cum = make([]dto.Bucket, 0, k), make([]*dto.Bucket, 0, k), make([]uint64, 0, k)
	}
	o := len(s.buckets)
	s.buckets, s.bucketP, s.cum = s.buckets[:o+n], s.bucketP[:o+n], s.cum[:o+n]
	b, p, cum := s.buckets[o:], s.bucketP[o:], s.cum[o:]
	var total uint64
	for i := range n {
		total += h.Counts[i]
		cum[i] = total
		b[i].CumulativeCount, b[i].UpperBound = &cum[i], &h.Bounds[i]
		p[i] = &b[i]
	}
	m := next(&s.hists)
	m.desc, m.labels, m.count, m.sum = d, labels, h.Count, h.Sum
	m.h.Bucket = p
	return m
}

type gaugeMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
	g      dto.Gauge
}

func (m *gaugeMetric) Desc() *prometheus.Desc { return m.desc }

func (m *gaugeMetric) Write(out *dto.Metric) error {
	m.g.Value = &m.v
	out.Label, out.Gauge = m.labels, &m.g
	return nil
}

type counterMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	v      float64
	c      dto.Counter
}

func (m *counterMetric) Desc() *prometheus.Desc { return m.desc }

func (m *counterMetric) Write(out *dto.Metric) error {
	m.c.Value = &m.v
	out.Label, out.Counter = m.labels, &m.c
	return nil
}

// histMetric is a classic histogram; the exposition adds the +Inf bucket
// from the count.
type histMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	count  uint64
	sum    float64
	h      dto.Histogram
}

func (m *histMetric) Desc() *prometheus.Desc { return m.desc }

func (m *histMetric) Write(out *dto.Metric) error {
	m.h.SampleCount, m.h.SampleSum = &m.count, &m.sum
	out.Label, out.Histogram = m.labels, &m.h
	return nil
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }
