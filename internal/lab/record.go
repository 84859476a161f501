package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// Recorded is the spec.workload of a trace of a live group (Record).
const Recorded = "recorded"

// RecordConfig describes the recording of a live group.
type RecordConfig struct {
	// Group is the group to follow (monitor.Root.Find).
	Group monitor.Group
	// Duration is how long to follow it; 0: until ctx is done.
	Duration time.Duration
	// SampleInterval overrides how often counters are read: from
	// MinSampleInterval to the group's period (0: period/10, from 1 ms to
	// 10 ms).
	SampleInterval time.Duration
	// Args say how the group was selected, for the trace's spec.
	Args []string
	// Host describes the machine (monitor.Root.HostFacts).
	Host trace.Host
	// Names are what the group's container runtime calls it
	// (containers.Resolver), for the trace's cgroup; empty when unknown.
	Names trace.Names
}

// Recording is a checked recording of a live group: its limits are read
// and the configuration is valid; nothing is followed yet.
type Recording struct {
	cfg      RecordConfig
	lim      cgroup.Limits
	interval time.Duration
}

// PrepareRecord reads the group's limits and checks the configuration
// (a SampleInterval out of range is a *SampleIntervalError).
func PrepareRecord(cfg RecordConfig) (*Recording, error) {
	if u := cfg.Group.UsageUnknown(); u != "" {
		// A timeline without usage would show every throttled period
		// as throttled under quota.
		return nil, fmt.Errorf("cannot record %s: its CPU usage cannot be read (%s): %s", cfg.Group.Path, u, u.Explain())
	}
	lim, err := cfg.Group.Limits()
	if err != nil {
		return nil, fmt.Errorf("read the limits of %s: %w", cfg.Group.Path, err)
	}
	interval, err := sampleInterval(cfg.SampleInterval, lim.Period)
	if err != nil {
		return nil, err
	}
	return &Recording{cfg: cfg, lim: lim, interval: interval}, nil
}

// Run follows the live group, run by someone else, for the configured
// Duration or until ctx is done, and returns its trace: the same
// timeline, summary and checks as a lab run's, with spec.workload
// "recorded" and no per-operation latency. Cancelling ctx ends the
// recording early; that is not an error.
func (r *Recording) Run(ctx context.Context) (*trace.Trace, error) {
	cfg, lim, interval := r.cfg, r.lim, r.interval
	g := cfg.Group
	s0, err := g.Stat()
	if err != nil {
		return nil, fmt.Errorf("read the counters of %s: %w", g.Path, err)
	}
	started := time.Now()
	t0 := workload.ClockMono()
	smp := newSampler(g, t0, interval, lim)
	smp.add(s0, 0)
	go smp.loop()
	var timeout <-chan time.Time
	if cfg.Duration > 0 {
		tm := time.NewTimer(cfg.Duration)
		defer tm.Stop()
		timeout = tm.C
	}
	select {
	case <-ctx.Done():
	case <-timeout:
	}
	smp.sampleNow()
	wallNs := workload.ClockMono() - t0
	smp.stop()
	if smp.err != nil {
		return nil, fmt.Errorf("read the counters of %s: %w", g.Path, smp.err)
	}
	if len(smp.samples) < 2 {
		return nil, fmt.Errorf("%s was read only once: record for longer", g.Path)
	}
	tr := &trace.Trace{
		Schema: trace.Schema, Tool: trace.Tool{Name: "cfsprobe", Version: Version},
		Spec: trace.Spec{Workload: Recorded, Args: append([]string{}, cfg.Args...)},
		Host: cfg.Host, Limits: trace.LimitsOf(lim),
		Cgroup:           trace.Cgroup{Path: g.Path, Version: g.Version, Names: cfg.Names},
		Started:          started.UTC(),
		StartedMonoNs:    t0,
		SampleIntervalNs: int64(interval),
		ReaderClass:      smp.class,
	}
	trace.Finish(tr, smp.samples, wallNs, false)
	if after, err := g.Limits(); err == nil && after != lim {
		tr.Checks = append(tr.Checks, trace.Check{
			Name: "limits_unchanged", OK: false,
			Detail: fmt.Sprintf("the group's limits changed while it was recorded (quota %v period %v, then %v %v): the timeline uses the first", lim.Quota, lim.Period, after.Quota, after.Period),
		})
	}
	return tr, nil
}
