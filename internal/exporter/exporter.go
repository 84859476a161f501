package exporter

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// GCPercent is the exporter's garbage collection target (GOGC) when the
// environment does not set GOGC. At Go's default of 100 the heap grows
// to twice what is live between collections: the process peaked at 51
// to 53 MiB with 1,000 groups while 10,000 came and went, over the
// exporter's budget of 50, and took 40 to 44 MiB at 50, for up to 2 ms
// more CPU a scrape (bench/RESULTS.md, "exporter"). A scrape's garbage
// is not what grows it: down from 1.3 MB to 0.4 MB for 1,000 followed
// groups (the sampler's snapshot reuses the last one's counts), the
// process still peaked at 53 MiB. Prometheus sets its own to 75 for the
// same trade.
const GCPercent = 50

// Defaults of the command's flags (docs/metrics.md).
const (
	DefaultListen           = ":9750"
	DefaultScanInterval     = 10 * time.Second
	DefaultSamplerMaxGroups = 1000
)

// Options configure an Exporter.
type Options struct {
	Root             *monitor.Root
	All              bool          // report groups without a CPU limit too
	ScanInterval     time.Duration // how often the tree is walked and limits read; DefaultScanInterval when 0
	SamplerMaxGroups int           // most groups the per-period sampler follows; 0: no sampler
	Host             trace.Host    // the node: Root.HostFacts
	Version          string        // cfsprobe's
	GoVersion        string        // runtime.Version() when empty
	Logger           *slog.Logger  // nil: no logs
	// Names names containers and pods as their runtimes do
	// (containers.Resolver); nil: by their paths only.
	Names namer
	// NoRuntimeMetrics leaves out the Go client's process_* and go_*
	// metrics (tests that compare expositions).
	NoRuntimeMetrics bool
	// SamplerPeriods, when set, is given every period the sampler hands
	// out (monitor.SamplerOptions.Periods): tests compare them with
	// another reader's.
	SamplerPeriods func(path string, p trace.Period)
	// TelemetryPath is where the metrics are served; DefaultTelemetryPath
	// when empty (CheckTelemetryPath checks it).
	TelemetryPath string
	// WebConfigFile is prometheus/exporter-toolkit's web configuration
	// (TLS, client certificates, basic auth), read by Run; empty: plain
	// HTTP (CheckWebConfig checks it).
	WebConfigFile string
}

// Exporter walks a cgroup root, samples its limited groups and serves
// their metrics.
type Exporter struct {
	opts      Options
	log       *slog.Logger
	scanner   *monitor.Scanner
	sampler   *monitor.Sampler // nil without sampler
	collector *Collector
	reg       *prometheus.Registry // every metric (Collector and the Go runtime's)
	node      *prometheus.Registry // all but the groups' (WriteText's)
	lastGen   uint64
	targets   []monitor.Target
	walkFail  bool // the last walk failed (for logging changes only)
	// usageUnknown counts the groups without usage by reason, at the
	// last walk (for logging changes only).
	usageUnknown map[monitor.UsageUnknown]int
	// namesErr is what the runtimes that did not answer said last (for
	// logging changes only).
	namesErr string
	// samplerFull: the sampler followed all it may at the last walk,
	// and more groups had a limit (for logging changes only).
	samplerFull bool
	mu          sync.Mutex
}

// New returns an Exporter of opts.Root. Nothing is read before Rescan or
// Run.
func New(opts Options) *Exporter { return newExporter(opts, prometheus.NewRegistry()) }

// newExporter is New gathering through reg: tests hand in a pedantic
// registry, which checks every metric against its description at every
// scrape (too dear for a node's 30,000 series).
func newExporter(opts Options, reg *prometheus.Registry) *Exporter {
	if opts.ScanInterval <= 0 {
		opts.ScanInterval = DefaultScanInterval
	}
	if opts.GoVersion == "" {
		opts.GoVersion = runtime.Version()
	}
	if opts.TelemetryPath == "" {
		opts.TelemetryPath = DefaultTelemetryPath
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e := &Exporter{opts: opts, log: log, reg: reg, node: prometheus.NewRegistry()}
	e.scanner = monitor.NewScanner(opts.Root, monitor.ScanOptions{All: opts.All})
	var periods periodsSource
	if opts.SamplerMaxGroups > 0 {
		e.sampler = monitor.NewSampler(monitor.SamplerOptions{
			MaxGroups:    opts.SamplerMaxGroups,
			CPUs:         opts.Host.CPUs,
			UsageBuckets: UsageRatioBuckets, DemandBuckets: DemandBuckets,
			StallBuckets: StallBuckets, StoppedBuckets: StoppedBuckets,
			Errors: e.scanner.Errors(), Periods: opts.SamplerPeriods,
		})
		periods = e.sampler
	}
	files := []string{"directory", "cpu.stat", "cpu.cfs_quota_us", "cpu.cfs_period_us", "cpuacct.usage"}
	if opts.Root.Version == 2 {
		files = []string{"directory", "cpu.stat", "cpu.max"}
	}
	e.collector = NewCollector(e.scanner, periods, e.scanner.Errors(), opts.Names, Info{
		Version: opts.Version, GoVersion: opts.GoVersion, Host: opts.Host, ErrorFiles: files,
	})
	e.reg.MustRegister(e.collector)
	e.node.MustRegister(e.collector.NodeCollector())
	if !opts.NoRuntimeMetrics {
		rt := []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
		e.reg.MustRegister(rt...)
		e.node.MustRegister(rt...)
	}
	return e
}

// Registry is the registry the Exporter's metrics are gathered from.
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Rescan walks the tree now and hands the sampler the groups found.
func (e *Exporter) Rescan() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := time.Now()
	err := e.scanner.Rescan()
	switch {
	case err != nil && !e.walkFail:
		e.log.Warn("cannot walk the cgroup tree", "dir", e.opts.Root.CPUDir, "err", err)
	case err == nil && e.walkFail:
		e.log.Info("walking the cgroup tree again", "dir", e.opts.Root.CPUDir)
	}
	e.walkFail = err != nil
	if err != nil {
		return err
	}
	var gen uint64
	e.targets, gen = e.scanner.Targets(e.targets[:0])
	if gen != e.lastGen {
		e.lastGen = gen
		if e.sampler != nil {
			e.sampler.Follow(e.targets)
			e.logSamplerFull()
		}
		e.log.Debug("walked the cgroup tree", "groups", e.scanner.Walked(), "limited", len(e.targets), "took", time.Since(start))
		e.logUsageUnknown()
	}
	e.logNamesErrors()
	return nil
}

// logSamplerFull says when more groups have a limit than the sampler
// may follow, and when that ends: the per-period metrics of the groups
// found last are missing meanwhile.
func (e *Exporter) logSamplerFull() {
	followed := e.sampler.Groups()
	full := followed >= e.opts.SamplerMaxGroups && len(e.targets) > followed
	switch {
	case full && !e.samplerFull:
		e.log.Warn("more groups have a CPU limit than the sampler follows: the others have no per-period metrics; raise --sampler-max-groups",
			"followed", followed, "limited", len(e.targets), "sampler_max_groups", e.opts.SamplerMaxGroups)
	case !full && e.samplerFull:
		e.log.Info("the sampler follows every group with a CPU limit again", "followed", followed)
	}
	e.samplerFull = full
}

// logNamesErrors says when container runtimes stop or start answering:
// their containers keep the path's labels meanwhile.
func (e *Exporter) logNamesErrors() {
	if e.opts.Names == nil {
		return
	}
	var msgs []string
	for _, err := range e.opts.Names.Errors() {
		msgs = append(msgs, err.Error())
	}
	msg := strings.Join(msgs, "; ")
	switch {
	case msg == e.namesErr:
	case msg != "":
		e.log.Info("containers of these runtimes are labelled by their cgroup paths only", "err", msg)
	default:
		e.log.Info("every container runtime answers: containers are named")
	}
	e.namesErr = msg
}

// logUsageUnknown says, for each reason, how many groups are reported
// without their usage whenever that number changes (but to none):
// cfsprobe_cpu_usage_unknown names them.
func (e *Exporter) logUsageUnknown() {
	n := map[monitor.UsageUnknown]int{}
	for _, t := range e.targets {
		if u := t.Group.UsageUnknown(); u != "" {
			n[u]++
		}
	}
	for u, k := range n {
		if e.usageUnknown[u] != k {
			e.log.Info("cgroups reported without their CPU usage (cfsprobe_cpu_usage_unknown names them)", "groups", k, "reason", string(u), "why", u.Explain())
		}
	}
	e.usageUnknown = n
}

// Handler serves the metrics (at Options.TelemetryPath, /metrics unless
// told), /healthz, /readyz and the toolkit's landing page at /, which
// links them.
//
// The metrics are written in the text format by Collector.WriteText
// whenever the client takes it (Prometheus always does, if at lower
// preference than OpenMetrics or protobuf); a client that takes only
// another format gets them from the registry, through promhttp's
// negotiation.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	other := promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		EnableOpenMetrics:  true,
		ErrorHandling:      promhttp.ContinueOnError,
		ErrorLog:           slogPrintln{e.log},
		DisableCompression: true, // gzipped compresses, faster
	})
	mux.Handle("GET "+e.opts.TelemetryPath, gzipped(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !acceptsText(r.Header.Get("Accept")) {
			other.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", string(Text))
		if err := e.collector.WriteText(w, e.node); err != nil {
			e.log.Warn("scrape", "err", err)
		}
	})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := e.scanner.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "cfsprobe exporter",
		Description: "CPU-quota throttling (CFS bandwidth control) of every CPU-limited cgroup",
		Version:     e.opts.Version,
		Profiling:   "false",
		Links: []web.LandingLinks{
			{Address: e.opts.TelemetryPath, Text: "Metrics", Description: "every limited group's throttling (docs/metrics.md)"},
			{Address: "/healthz", Text: "Health", Description: "the process serves"},
			{Address: "/readyz", Text: "Readiness", Description: "the last walk of the cgroup tree succeeded"},
		},
	})
	if err != nil { // the toolkit's own templates do not execute
		panic(fmt.Sprintf("exporter-toolkit's landing page: %v", err))
	}
	mux.Handle("GET /{$}", landing)
	return mux
}

// Run walks the tree, starts the sampler and serves on each listener
// until ctx is done, then shuts the servers down (waiting up to 5 s for
// scrapes in flight) and stops. With Options.WebConfigFile the toolkit
// serves TLS and checks basic auth as the file says, reading it again
// for each connection (certificates can be renewed in place). Walks that
// fail are logged and make /readyz fail; they do not stop the exporter.
func (e *Exporter) Run(ctx context.Context, lns ...net.Listener) error {
	if len(lns) == 0 {
		return errors.New("exporter: no listener to serve on")
	}
	_ = e.Rescan()
	addrs := make([]string, len(lns))
	for i, ln := range lns {
		addrs[i] = ln.Addr().String()
	}
	e.log.Info("serving", "listen", strings.Join(addrs, ","), "telemetry_path", e.opts.TelemetryPath, "web_config_file", e.opts.WebConfigFile,
		"cgroup_root", e.opts.Root.Dir, "cgroup_mode", e.opts.Root.Mode,
		"cpu_controller", fmt.Sprintf("v%d", e.opts.Root.Version), "groups", e.scanner.Walked(), "limited", e.scanner.Len(),
		"scan_interval", e.opts.ScanInterval, "sampler_max_groups", e.opts.SamplerMaxGroups)

	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if e.sampler != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.sampler.Run(bg)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(e.opts.ScanInterval)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				_ = e.Rescan()
			}
		}
	}()

	// One server per listener: the toolkit's Serve sets the server's
	// handler and TLS configuration.
	h := e.Handler()
	noSocket := false
	flags := &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &noSocket, WebConfigFile: &e.opts.WebConfigFile}
	servers := make([]*http.Server, len(lns))
	served := make(chan error, len(lns))
	for i, ln := range lns {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelWarn)}
		servers[i] = srv
		go func() { served <- web.Serve(ln, srv, flags, e.log) }()
	}
	var err error
	got := 0
	select {
	case <-ctx.Done():
	case err = <-served: // a server stopped by itself: stop the others
		got++
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	for _, srv := range servers {
		if serr := srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	cancel()
	for ; got < len(lns); got++ {
		if serr := <-served; err == nil && !errors.Is(serr, http.ErrServerClosed) {
			err = serr
		}
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		err = fmt.Errorf("serve: %w", err)
	}
	stop()
	wg.Wait()
	e.scanner.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// gzipWriters are gzip writers at BestSpeed, reused across scrapes.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// gzipped compresses h's responses for clients that accept gzip (as
// Prometheus does by default) at gzip.BestSpeed: a busy node's
// exposition is several megabytes of repetitive text, which promhttp's
// default level takes four times as long to compress for a tenth less.
func gzipped(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.ServeHTTP(w, r)
			return
		}
		gz := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(gz)
		gz.Reset(w)
		w.Header().Set("Content-Encoding", "gzip")
		h.ServeHTTP(gzipResponse{ResponseWriter: w, w: gz}, r)
		_ = gz.Close()
	})
}

// acceptsText reads an Accept header: true when it is empty or admits
// the text format (text/plain, text/*, */*) with a quality above 0.
func acceptsText(header string) bool {
	if strings.TrimSpace(header) == "" {
		return true
	}
	for _, part := range strings.Split(header, ",") {
		media, params, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(media)) {
		case "text/plain", "text/*", "*/*":
		default:
			continue
		}
		if !refused(params) {
			return true
		}
	}
	return false
}

// refused says whether media-type parameters give q=0.
func refused(params string) bool {
	for _, p := range strings.Split(params, ";") {
		k, v, _ := strings.Cut(strings.ReplaceAll(p, " ", ""), "=")
		if strings.EqualFold(k, "q") {
			q, err := strconv.ParseFloat(v, 64)
			return err == nil && q <= 0
		}
	}
	return false
}

// acceptsGzip reads an Accept-Encoding header: gzip, not refused with
// q=0.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.TrimSpace(coding) == "gzip" {
			return !refused(params)
		}
	}
	return false
}

type gzipResponse struct {
	http.ResponseWriter
	w *gzip.Writer
}

func (g gzipResponse) Write(b []byte) (int, error) { return g.w.Write(b) }

func (g gzipResponse) WriteHeader(code int) {
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}

// slogPrintln is promhttp's error log on slog.
type slogPrintln struct{ log *slog.Logger }

func (l slogPrintln) Println(v ...any) { l.log.Warn(strings.TrimSpace(fmt.Sprintln(v...))) }
