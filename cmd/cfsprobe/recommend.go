package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/recommend/fleet"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

type recommendFlags struct {
	group      liveGroup
	duration   time.Duration
	out        string
	target     string
	headroom   string
	maxCPUs    float64
	kernel     string
	hostCPUs   int
	demand     string
	json       bool
	format     string
	verify     bool
	peers      bool
	parent     string
	prometheus string
	since      string
	selector   string
}

func newRecommendCmd() *cobra.Command {
	f := &recommendFlags{}
	c := &cobra.Command{
		Use:   "recommend (TRACE... | --cgroup PATH|--pid PID|--container NAME|--pod NS/NAME --duration D | --prometheus URL [--since W]) [--target T] [--format F]",
		Short: "advise a group's CPU limit — a quota, a burst, a thread cap, or none — from its per-period demand",
		Long: `Reads what a group did in every period (a trace saved by cfsprobe run, record or
simulate, or a live group recorded first for --duration: --cgroup PATH, --pid,
--container or --pod, named as cfsprobe record names it), turns it back into
the group's demand, and simulates that demand under candidate settings on a
model of the kernel's bandwidth control (the one of cfsprobe simulate). It
advises the setting that reserves the least CPU and still meets the target:

  quota          a limit alone (limits.cpu), in millicores
  quota + burst  a burst equal to the quota (kernel 5.14 and later): idle
                 periods bank CPU time for the bursts that follow
  thread cap     fewer threads (GOMAXPROCS, worker counts, through the CPU
                 view) where the group ran more threads at once than its
                 limit has CPUs, with the quota they need
  no limit       where nothing up to --max-cpus meets the target

The fewest millicores that meet the target in the simulation are raised by
--headroom (10 %), for what the model does not see: a rerun differs from its
recording by a few percent of CPU time. A near-tie (within 5 %) goes to the
simpler setting. Beside the advice are the current setting and the sizing
rules in use, computed from the same data's minute-average usage and each
predicted the same way: seed 003's p95 × 1.5, krr's simple strategy and
VPA's target (--peers=false leaves them out).
Throttled periods are lower bounds of demand: the replay completes them
(docs/simulate.md, "Replay"), so advice from a throttled group does not shrink
toward the limit it ran under.

Targets (--target):
  throttled:1%   at most 1 % of periods throttled (the default)
  stall:5ms      the 99th percentile of the periods' stall at most 5 ms
  demand:p99     no throttling at the 99th percentile of demand

--prometheus reads a whole fleet instead: every CPU-limited group whose
cfsprobe exporter the server scrapes (Prometheus, or what speaks its API:
Thanos Query, Mimir), over the window --since, narrowed by --selector.
Each group's per-period demand histogram becomes a synthetic trace of its
distribution under its current limits, advised as a recording would be
(docs/recommend-fleet.md); the group is named job/instance:cgroup. A week
of minute averages feeds the peers: load deploy/prometheus/rules.yaml.

Each TRACE is one group, named after its file (NAME=FILE names it). The model
is the trace's host: the era of its kernel and its CPUs, unless --kernel and
--host-cpus say otherwise. Outputs (--format): table (the default), json (a
stable document, cfsprobe.recommend/v1), k8s (a strategic-merge patch per
group: resources.limits.cpu and the thread cap's variables), markdown (for a
review). docs/recommend.md describes the method.

--verify checks the advice by running it (root: each rerun gets a cgroup of
its own): for a trace of cfsprobe run (a built-in workload or a command),
the workload runs again, one after another, under the recommendation, each
peer's setting, the current setting and the reference (the same workload
with the recommendation's thread cap and no limit), and each is shown
predicted beside measured: throttled periods, p99 stall, CPU used, and the
p99.9 latency of its operations. The recommendation met the target when run
if its rerun meets the target and, when the workload has operations, its
p99.9 is at most 2× the reference run's. A command rerun under a thread
cap gets it as its CPU view; one that sets its thread count itself
(sysbench --threads=4) ignores the view, and the verdict says the cap did
not hold. A recording of a live group has no program cfsprobe started, so
it cannot be verified. Progress goes to stderr.`,
		Example: `  cfsprobe run --out api.json --cpus 0.2 bursty --threads 4 --on-cpu 40ms --every 1s --duration 60s
  cfsprobe recommend api.json
  cfsprobe recommend --target stall:5ms --format markdown api.json worker=batch.json
  cfsprobe recommend --cgroup /system.slice/nginx.service --duration 2m --out nginx.json
  cfsprobe recommend --container api --duration 5m --format k8s
  cfsprobe recommend --format k8s api.json > patch.yaml   # kubectl patch deployment api --patch-file patch.yaml
  cfsprobe recommend --json --kernel 5.4 --host-cpus 16 --max-cpus 4 api.json
  cfsprobe recommend --prometheus http://prometheus:9090 --since 7d --selector 'cgroup=~"/kubepods.*"'
  sudo cfsprobe recommend --verify api.json
  sudo cfsprobe recommend --verify --peers=false api.json   # the advice alone: 3 reruns`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return runRecommend(c, f, args) },
	}
	fl := c.Flags()
	f.group.addFlags(fl, "record first, for --duration, and advise on", "record this live group first (its path as /proc/PID/cgroup shows it) for --duration, and advise on it")
	fl.DurationVar(&f.duration, "duration", 0, "with a live group ("+liveGroupWays+"): how long to record it")
	fl.StringVarP(&f.out, "out", "o", "", "with a live group: save the recorded trace to this file")
	fl.StringVar(&f.target, "target", "throttled:1%", "what the advice must meet: throttled:PCT, stall:DURATION or demand:pN")
	fl.StringVar(&f.headroom, "headroom", "10%", "raise the fewest millicores that meet the target in the simulation by this much, for what the model does not see (a run's own overhead, a noisy host); 0 advises the edge itself")
	fl.Float64Var(&f.maxCPUs, "max-cpus", 0, "the most CPUs a limit may reserve before removing it is advised (default: the CPUs the group can use)")
	fl.StringVar(&f.kernel, "kernel", "", "kernel era to model: "+sim.EraNames()+" (default: the era of the trace's kernel)")
	fl.IntVar(&f.hostCPUs, "host-cpus", 0, "CPUs of the simulated host (default: the trace's host's)")
	fl.StringVar(&f.demand, "demand", "", sim.DemandNames()+": what became of the work a throttled group could not do (default: from the trace; see cfsprobe simulate replay --help)")
	fl.BoolVar(&f.json, "json", false, "print the advice as JSON (--format json)")
	fl.StringVar(&f.format, "format", "", "output: table, json, k8s or markdown (default table)")
	fl.BoolVar(&f.verify, "verify", false, "rerun each trace's workload under the recommendation, the peers', the current and no limit, and show measured beside predicted (root)")
	fl.BoolVar(&f.peers, "peers", true, "show the sizing rules in use (seed 003, krr, VPA) beside the advice, each predicted and, with --verify, rerun; --peers=false leaves them out (--verify then reruns 3 settings, not 6)")
	fl.StringVar(&f.parent, "parent", cgroup.DefaultParent, "with --verify: the group under which the reruns' groups are created")
	fl.StringVar(&f.prometheus, "prometheus", "", "advise every group whose cfsprobe exporter this Prometheus server scrapes (http://HOST:9090)")
	fl.StringVar(&f.since, "since", "7d", "with --prometheus: the window read, ending now (Prometheus durations: 36h, 7d, 2w)")
	fl.StringVar(&f.selector, "selector", "", `with --prometheus: only the groups these label matchers select, without braces (job="cfsprobe",cgroup=~"/kubepods.*")`)
	return c
}

// options reads the flags into the recommender's options and the output
// format. Its errors are the user's.
func (f *recommendFlags) options(c *cobra.Command) (recommend.Options, recommend.Format, error) {
	var opt recommend.Options
	format := recommend.FormatTable
	switch {
	case f.format != "":
		var err error
		if format, err = recommend.ParseFormat(f.format); err != nil {
			return opt, "", usageErr("--format %s: %v", f.format, err)
		}
		if f.json && format != recommend.FormatJSON {
			return opt, "", usageErr("--json and --format %s ask for two outputs: give one", f.format)
		}
	case f.json:
		format = recommend.FormatJSON
	}
	t, err := recommend.ParseTarget(f.target)
	if err != nil {
		return opt, "", usageErr("--target: %v", err)
	}
	opt.Target = t
	if opt.Headroom, err = recommend.ParseHeadroom(f.headroom); err != nil {
		return opt, "", usageErr("--headroom: %v", err)
	}
	opt.NoPeers = !f.peers
	if c.Flags().Changed("max-cpus") && (!(f.maxCPUs > 0) || math.IsInf(f.maxCPUs, 0)) {
		return opt, "", usageErr("--max-cpus %v: give the most CPUs a limit may reserve, a positive number such as 4", f.maxCPUs)
	}
	opt.MaxCPUs = f.maxCPUs
	if c.Flags().Changed("host-cpus") {
		if f.hostCPUs < 1 || f.hostCPUs > sim.MaxCPUs {
			return opt, "", usageErr("--host-cpus %d: give the simulated host's CPUs, 1 to %d", f.hostCPUs, sim.MaxCPUs)
		}
		opt.HostCPUs = f.hostCPUs
	}
	if c.Flags().Changed("kernel") {
		if opt.Era, err = sim.ParseEra(f.kernel); err != nil {
			return opt, "", usageErr("--kernel %s: %v", f.kernel, err)
		}
	}
	if c.Flags().Changed("demand") {
		if opt.Demand, err = sim.ParseDemand(f.demand); err != nil {
			return opt, "", usageErr("--demand: %v", err)
		}
	}
	return opt, format, nil
}

// live checks the flags of a live group: one way of naming it (--cgroup,
// --pid, --container, --pod) with --duration, or traces without them.
func (f *recommendFlags) live(c *cobra.Command, args []string) (bool, error) {
	live := f.group.named(c)
	switch {
	case live && len(args) > 0:
		return false, usageErr("give traces or a live group (%s), not both: the traces would be advised without the live group", liveGroupWays)
	case !live && len(args) == 0:
		return false, usageErr("nothing to advise on: give traces (saved by cfsprobe run, record or simulate) or a live group to record: --cgroup PATH (or --pid, --container, --pod) --duration D (see: cfsprobe recommend --help)")
	case !live && c.Flags().Changed("duration"):
		return false, usageErr("--duration is how long to record a live group: add --cgroup PATH (or --pid, --container, --pod), or leave --duration out for traces")
	case !live && f.out != "":
		return false, usageErr("--out saves the recording of a live group: add --cgroup PATH (or --pid, --container, --pod), or leave --out out for traces")
	case live && !(f.duration > 0):
		return false, usageErr("a live group is recorded for --duration: add it, such as --duration 2m")
	}
	if live && f.out != "" {
		if err := checkWritable(f.out); err != nil {
			return false, usageErr("cannot write the recording to %s: %v", f.out, err)
		}
	}
	return live, nil
}

func runRecommend(c *cobra.Command, f *recommendFlags, args []string) error {
	opt, format, err := f.options(c)
	if err != nil {
		return err
	}
	ins, err := f.inputs(c, args)
	if err != nil {
		return err
	}
	groups, err := recommend.RecommendAll(ins, opt)
	if err != nil {
		var ie *recommend.InputError
		if errors.As(err, &ie) {
			return usageErr("%v", err)
		}
		return err
	}
	if f.verify {
		if err := f.verifyAll(ins, groups); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	if err := recommend.Write(&b, format, groups); err != nil {
		return err
	}
	_, err = c.OutOrStdout().Write(b.Bytes())
	return err
}

// inputs checks the flags of the groups to advise and reads them: a
// fleet from --prometheus, a live group recorded first, or traces.
func (f *recommendFlags) inputs(c *cobra.Command, args []string) ([]recommend.Input, error) {
	fopt, fromPrometheus, err := f.prometheusOptions(c, args)
	if err != nil {
		return nil, err
	}
	if fromPrometheus {
		return readFleet(fopt)
	}
	live, err := f.live(c, args)
	if err != nil {
		return nil, err
	}
	if err := f.checkVerify(c, live); err != nil {
		return nil, err
	}
	if live {
		in, err := f.record(c)
		if err != nil {
			return nil, err
		}
		return []recommend.Input{in}, nil
	}
	var ins []recommend.Input
	for _, a := range args {
		name, tr, err := namedTrace(a)
		if err != nil {
			return nil, err
		}
		ins = append(ins, recommend.Input{Name: name, Trace: tr})
	}
	if f.verify {
		if err := rerunnable(ins); err != nil {
			return nil, err
		}
	}
	return ins, nil
}

// prometheusOptions checks the flags of --prometheus: no traces, live
// group or --verify beside it, a window and a URL fleet.Query takes;
// --since and --selector only with it. Its errors are the user's.
func (f *recommendFlags) prometheusOptions(c *cobra.Command, args []string) (fleet.Options, bool, error) {
	on := c.Flags().Changed("prometheus")
	switch {
	case !on && (c.Flags().Changed("since") || c.Flags().Changed("selector")):
		return fleet.Options{}, false, usageErr("--since and --selector say what to read of --prometheus: add --prometheus URL, or leave them out")
	case !on:
		return fleet.Options{}, false, nil
	case len(args) > 0 || f.group.named(c):
		return fleet.Options{}, false, usageErr("give --prometheus, traces or a live group (%s), one of them: the others would be advised apart from the fleet", liveGroupWays)
	case f.verify:
		return fleet.Options{}, false, usageErr("--verify reruns a trace's workload, and a group read from Prometheus has none cfsprobe started: give its trace of cfsprobe run instead")
	case c.Flags().Changed("duration") || f.out != "":
		return fleet.Options{}, false, usageErr("--duration and --out are for recording a live group: leave them out with --prometheus")
	}
	since, err := model.ParseDuration(f.since)
	if err != nil || since <= 0 {
		return fleet.Options{}, false, usageErr("--since %q: give the window to read as a Prometheus duration, such as 7d or 36h", f.since)
	}
	opt := fleet.Options{URL: f.prometheus, Since: time.Duration(since), Selector: f.selector}
	if err := fleet.CheckOptions(opt); err != nil {
		return fleet.Options{}, false, usageErr("--prometheus: %v: give the server's address, such as http://prometheus:9090", err)
	}
	return opt, true, nil
}

// readFleet reads every group of --prometheus into the recommender's
// inputs; a group the sampler saw no period of is left out, said on
// stderr.
func readFleet(opt fleet.Options) ([]recommend.Input, error) {
	ctx, _, stop := signalContext()
	defer stop()
	groups, err := fleet.Read(ctx, opt)
	switch {
	case errors.Is(err, fleet.ErrUnreachable):
		return nil, usageErr("--prometheus: %v: give the address of a Prometheus server (or Thanos Query, Mimir) that scrapes cfsprobe exporter", err)
	case errors.Is(err, fleet.ErrRefused):
		return nil, usageErr("--selector %q: %v: give label matchers without braces, such as job=\"cfsprobe\"", opt.Selector, err)
	case err != nil:
		return nil, err
	}
	var ins []recommend.Input
	for _, g := range groups {
		if g.Err != nil {
			fmt.Fprintf(os.Stderr, "cfsprobe: %s: left out: %v\n", g.Key, g.Err)
			continue
		}
		ins = append(ins, recommend.Input{Name: g.Key.String(), Trace: g.Trace, MinuteUsage: g.MinuteUsage})
	}
	switch {
	case len(ins) == 0 && opt.Selector != "":
		return nil, usageErr("--prometheus %s has no group that --selector %s selects with per-period demand in the last %s: check the selector, and that it scrapes cfsprobe exporter",
			opt.URL, opt.Selector, model.Duration(opt.Since))
	case len(ins) == 0:
		return nil, usageErr("--prometheus %s has no group with per-period demand in the last %s: check that it scrapes cfsprobe exporter (cfsprobe_period_demand_cpus)",
			opt.URL, model.Duration(opt.Since))
	}
	return ins, nil
}

// record follows the live group the flags name for --duration (as
// cfsprobe record does) and returns it as the recommender's input.
func (f *recommendFlags) record(c *cobra.Command) (recommend.Input, error) {
	sel, given, err := f.group.selector(c, "", liveGroupWays)
	if err != nil {
		return recommend.Input{}, err
	}
	ctx, _, stop := signalContext()
	defer stop()
	cfg, label, err := f.group.recordConfig(sel, given)
	if err != nil {
		return recommend.Input{}, err
	}
	cfg.Duration = f.duration
	rec, err := lab.PrepareRecord(cfg)
	if err != nil {
		return recommend.Input{}, err
	}
	fmt.Fprintf(os.Stderr, "cfsprobe: recording %s (%s) for %v\n", cfg.Group.Path, label, f.duration)
	tr, err := rec.Run(ctx)
	if err != nil {
		return recommend.Input{}, err
	}
	if f.out != "" {
		if err := tr.WriteFile(f.out); err != nil {
			return recommend.Input{}, err
		}
	}
	return recommend.Input{Name: cfg.Names.Short(cfg.Group.Path), Trace: tr}, nil
}

// namedTrace reads a trace argument, FILE or NAME=FILE: its name (the
// file's without .json, unless given) and the trace. Its errors are the
// user's.
func namedTrace(arg string) (string, *trace.Trace, error) {
	name, path, ok := strings.Cut(arg, "=")
	if !ok {
		path = arg
		name = strings.TrimSuffix(filepath.Base(arg), ".json")
	}
	t, err := trace.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, usageErr("trace %s does not exist: give the path of a trace saved with --out", path)
	case errors.Is(err, io.EOF):
		return "", nil, usageErr("trace %s is empty: give a trace saved by cfsprobe run, record or simulate with --out", path)
	case err != nil:
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // the path is said once
		}
		return "", nil, usageErr("%s is not a cfsprobe trace (%v): give a file saved by cfsprobe run, record or simulate with --out", path, err)
	}
	return name, t, nil
}

// checkVerify checks the flags of --verify: traces, not a live group,
// and --parent only with it.
func (f *recommendFlags) checkVerify(c *cobra.Command, live bool) error {
	switch {
	case !f.verify && c.Flags().Changed("parent"):
		return usageErr("--parent is where --verify reruns the workloads: add --verify, or leave --parent out")
	case f.verify && live:
		return usageErr("--verify reruns a trace's workload, and cfsprobe did not start the live group's program: run it with cfsprobe run --out FILE -- COMMAND and give FILE")
	case f.verify:
		return checkParent(f.parent)
	}
	return nil
}

// rerunnable checks that --verify can rerun every trace's workload; it
// names the ones it cannot, before anything runs.
func rerunnable(ins []recommend.Input) error {
	var bad []string
	for _, in := range ins {
		if err := recommend.Rerunnable(in.Trace); err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", in.Name, err))
		}
	}
	switch {
	case len(bad) == 0:
		return nil
	case len(ins) == 1:
		return usageErr("--verify cannot rerun %s", bad[0])
	}
	return usageErr("--verify cannot rerun %d of the %d traces, so none was run: %s", len(bad), len(ins), strings.Join(bad, "; "))
}

// verifyAll reruns every group's workload under its advice (after
// checking them all) and sets what was measured in the groups.
func (f *recommendFlags) verifyAll(ins []recommend.Input, groups []*recommend.Group) error {
	plans := make([]*recommend.GroupVerify, len(groups))
	for i, g := range groups {
		opt := recommend.VerifyOptions{Parent: f.parent, Progress: func(k, n int, s recommend.Setting) {
			fmt.Fprintf(os.Stderr, "cfsprobe: verify %s: rerun %d of %d under %s (%s)\n", g.Name, k+1, n, s, g.Roles(s))
		}}
		var err error
		if plans[i], err = recommend.PrepareVerify(g, ins[i].Trace, opt); err != nil {
			var ue *lab.UserError
			if errors.As(err, &ue) {
				return usageErr("--verify %s: %v", g.Name, err)
			}
			return err
		}
	}
	ctx, sig, stop := signalContext()
	defer stop()
	for i, p := range plans {
		v, err := p.Run(ctx)
		if errors.Is(err, lab.ErrInterrupted) {
			return interrupted(sig(), "the rerun was killed and its cgroup removed")
		}
		if err != nil {
			return fmt.Errorf("verify %s: %w", groups[i].Name, err)
		}
		groups[i].Verified = v
		fmt.Fprintf(os.Stderr, "cfsprobe: verify %s: %s\n", groups[i].Name, v.Why)
	}
	return nil
}
