package fleet

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// seriesOf is what Prometheus would hold of a recorded group over the
// recording: the exporter's demand, pairs' and stopped-CPU histograms of
// the periods read closely (its sampler's monitor.PeriodHistograms), its
// throttled stretches, the periods the kernel counted, the limits and
// the host.
func seriesOf(tr *trace.Trace) Series {
	lim := tr.Limits.Cgroup()
	h := monitor.NewPeriodHistograms(exporter.UsageRatioBuckets, exporter.DemandBuckets, exporter.StallBuckets, exporter.StoppedBuckets)
	for _, p := range tr.Periods {
		h.Observe(p, lim.Quota, tr.Host.CPUs)
	}
	// As Prometheus gives them: cumulative, +Inf last.
	cumulative := func(m monitor.Histogram) Histogram {
		out := Histogram{Sum: m.Sum, Count: float64(m.Count)}
		n := 0.0
		for i, c := range m.Counts {
			n += float64(c)
			le := math.Inf(1)
			if i < len(m.Bounds) {
				le = m.Bounds[i]
			}
			out.add(le, n)
		}
		return out
	}
	quota := 0.0
	if !lim.Unlimited() {
		quota = lim.CPUs()
	}
	st := h.Stretches
	return Series{Key: Key{Cgroup: tr.Cgroup.Path}, Window: time.Duration(tr.Summary.WallNs), End: time.Unix(0, 0),
		QuotaCPUs: quota, PeriodSeconds: lim.Period.Seconds(), BurstSeconds: lim.Burst.Seconds(), HasBurst: tr.Host.BurstSupported,
		Host: tr.Host, Periods: float64(tr.Summary.NrPeriods),
		Stretches: &st,
		Demand:    cumulative(h.Demand), Pairs: cumulative(h.Pairs), Stopped: cumulative(h.Stopped)}
}

// A recorded group advised from its recording and from its periods as
// Prometheus would hold them, synthesized: the two recommendations are
// within 15 % (or 10 millicores), Must show 4's measure, with the
// sampler's own differences taken out. The fleet test's b1-tight (600 of
// its periods: 1 thread spinning 10 ms every 200 ms under 0.02 CPU, each
// burst a throttled period after which the loop hardly runs) was 30m
// from its recording, replayed as if the 2 ms it was let use were all its
// work, against 680m from Prometheus; 4 threads burning 40 ms once a
// second, recorded without a limit, with its flags taken out as a
// recording has none; and a closed loop throttled under its limit (2
// threads burning 80 ms of CPU a second under 0.2 CPU), which caught up
// after nearly every stretch: 0.92 CPUs + burst from its recording, 1.1
// CPUs capped to 1 thread from its histograms alone, read as a loop that
// runs for a time, before the exporter counted stretches.
func TestSynthesisRoundTrip(t *testing.T) {
	for _, path := range []string{
		"testdata/recorded-1-thread-10ms-every-200ms-under-0.02cpu.json",
		"../testdata/bursty-4-threads-40ms-per-second-unlimited.json",
		"../testdata/recorded-bursty-2-threads-80ms-per-second-0.2cpu.json",
	} {
		tr, err := trace.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		tr.Spec = trace.Spec{Workload: "recorded", Args: []string{tr.Cgroup.Path}}
		syn, _, err := Synthesize(seriesOf(tr), SynthOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(path)
		a, err := recommend.Recommend(recommend.Input{Name: name, Trace: tr}, recommend.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := recommend.Recommend(recommend.Input{Name: name, Trace: syn}, recommend.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ra, rb := a.Recommended, b.Recommended
		ma, mb := ra.Setting.Millicores(), rb.Setting.Millicores()
		t.Logf("%s: recorded %s %s (%s: %s), synthesized %s %s", name, ra.Kind, ra.Setting, a.Model.Demand, a.Model.DemandFrom, rb.Kind, rb.Setting)
		if (ra.Kind == recommend.KindNoLimit) != (rb.Kind == recommend.KindNoLimit) || math.Abs(float64(ma-mb)) > max(0.15*float64(max(ma, mb)), 10) {
			t.Errorf("%s: recommended %s %s from the recording, %s %s from its synthetic trace: more than 15 %% apart", name, ra.Kind, ra.Setting, rb.Kind, rb.Setting)
		}
	}
}
