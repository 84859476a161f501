package main

import (
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
)

type exporterFlags struct {
	web              webFlags
	cgroupRoot       cgroupRoot
	scanInterval     time.Duration
	samplerMaxGroups int
	all              bool
	runtime          runtimeFlags
}

// minScanInterval keeps walks from costing more than scrapes.
const minScanInterval = 100 * time.Millisecond

func newExporterCmd() *cobra.Command {
	f := &exporterFlags{}
	c := &cobra.Command{
		Use:   "exporter [--web.listen-address ADDR] [--web.config.file FILE] [--cgroup-root DIR]",
		Short: "serve every CPU-limited cgroup's throttling to Prometheus (/metrics)",
		Long: `Serves, for every cgroup of the node with a CPU limit (Kubernetes containers and
pods, docker --cpus, systemd CPUQuota=, ...), the kernel's bandwidth counters
and settings, and per-period distributions that counters cannot show: how much
of its quota the group used in each enforcement period, how long its tasks
stood still when throttled, and how often it was throttled while using less
than half its quota. docs/metrics.md lists the metrics.

cfsprobe_cgroup_info names containers as their runtimes do: a Docker
container's name and image (the Docker Engine API on --docker-host), a
Kubernetes container's namespace, pod and name (the CRI on --cri-endpoint).
The runtimes are listed when a container appears, at most every 5 seconds,
never per scrape; a runtime that does not answer leaves the path's labels.

Endpoints: /metrics (--web.telemetry-path; Prometheus text, OpenMetrics to a client
that takes no text), /healthz (the process serves), /readyz (the last walk of
--cgroup-root succeeded), / (a page linking them).

/metrics names every container and pod of the node: serve it with TLS and basic
auth through --web.config.file, prometheus/exporter-toolkit's web configuration
as node_exporter takes it (` + exporter.WebConfigDoc + `);
docs/metrics.md shows one. Without it the exporter serves plain HTTP to anyone.
Logs go to stderr; SIGINT or SIGTERM stops it cleanly. Its Go runtime collects
garbage at GOGC=50 unless GOGC is set (go_gc_gogc_percent shows it): about
40 MiB for 1,000 groups followed, where Go's default of 100 took over 50.`,
		Example: `  cfsprobe exporter --web.config.file /etc/cfsprobe/web-config.yml
  cfsprobe exporter --web.listen-address :9750 --cgroup-root /host/sys/fs/cgroup
  curl -s --cacert ca.crt -u prometheus:PASSWORD https://localhost:9750/metrics | grep cfsprobe_cpu_throttled_periods_total`,
		Args: noArgs(""),
		RunE: func(c *cobra.Command, _ []string) error { return runExporter(f) },
	}
	fl := c.Flags()
	f.web.addFlags(fl)
	f.cgroupRoot.addFlag(fl)
	fl.DurationVar(&f.scanInterval, "scan-interval", exporter.DefaultScanInterval, "how often the tree is walked to find new and removed groups and read their limits")
	fl.IntVar(&f.samplerMaxGroups, "sampler-max-groups", exporter.DefaultSamplerMaxGroups, "most groups the per-period sampler follows (0: no sampler)")
	fl.BoolVar(&f.all, "all", false, "report cgroups without a CPU limit too (counters and info only)")
	f.runtime.addFlags(fl)
	return c
}

func runExporter(f *exporterFlags) error {
	if f.scanInterval < minScanInterval {
		return usageErr("--scan-interval %v is too short: each walk reads every group's limits; use %v or more", f.scanInterval, minScanInterval)
	}
	if f.samplerMaxGroups < 0 {
		return usageErr("--sampler-max-groups %d is negative: use 0 for no sampler, or the most groups to follow", f.samplerMaxGroups)
	}
	if err := f.web.check(); err != nil {
		return err
	}
	root, err := f.cgroupRoot.open()
	if err != nil {
		return err
	}
	names, err := f.runtime.resolver()
	if err != nil {
		return err
	}
	lns, err := f.web.listen()
	if err != nil {
		return err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(exporter.GCPercent)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	e := exporter.New(exporter.Options{
		Root:             root,
		All:              f.all,
		ScanInterval:     f.scanInterval,
		SamplerMaxGroups: f.samplerMaxGroups,
		Host:             root.HostFacts(hostfs.Default()),
		Version:          lab.Version,
		Logger:           log,
		Names:            names,
		TelemetryPath:    f.web.telemetryPath,
		WebConfigFile:    f.web.configFile,
	})
	ctx, sig, stop := signalContext()
	defer stop()
	err = e.Run(ctx, lns...)
	if s := sig(); s != nil {
		log.Info("stopped", "signal", s.String())
	}
	return err
}
