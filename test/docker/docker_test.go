// Package docker runs cfsprobe with and against real Docker containers, on
// a private dockerd (internal/testenv/dockerd): the image `make image`
// builds, seed 002's `docker run` lines with the image running the check,
// and seed 003's four runs (--cpus 0.5, 0.1, 1.0 and none) watched by name
// through `top --once --json` and the exporter's /metrics.
package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/testenv/dockerd"
	"github.com/cfsprobe/cfsprobe/internal/top"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// root is the repository's root, relative to this package.
const root = "../.."

// binary is the cfsprobe the Makefile built (d.Image builds it first).
func binary(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(root, "bin", "cfsprobe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v (make image builds it)", p, err)
	}
	return p
}

// cfsprobe runs the binary with args and returns its stdout, failing the
// test on an error.
func cfsprobe(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cfsprobe %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// TestImage is Must show 1: `make image` builds the image from a fresh
// clone of the repository (what is committed, nothing else), with nothing
// pulled (the daemon has no network); `docker run --rm IMAGE version`
// prints the version the Makefile gives; the image runs as a non-root user
// and has no shell; its debug variant has busybox's.
func TestImage(t *testing.T) {
	d := dockerd.Start(t)
	clone := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	git(root, "clone", "-q", "--no-hardlinks", ".", clone)
	version := git(clone, "describe", "--always", "--dirty")

	const ref = "cfsprobe-fresh:test"
	start := time.Now()
	cmd := exec.Command("make", "-s", "image", "IMAGE="+ref)
	cmd.Dir = clone
	cmd.Env = d.Env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image in a fresh clone: %v\n%s", err, out)
	}
	t.Logf("make image in a fresh clone (native code, binary, both images): %v", time.Since(start).Round(100*time.Millisecond))

	if got := strings.TrimSpace(d.Docker(t, "run", "--rm", ref, "version")); got != "cfsprobe "+version {
		t.Errorf("docker run --rm %s version printed %q, want %q", ref, got, "cfsprobe "+version)
	}
	var cfg struct {
		User       string
		Entrypoint []string
	}
	if err := json.Unmarshal([]byte(d.Docker(t, "image", "inspect", "--format", "{{json .Config}}", ref)), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.User != "65534:65534" || len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != "/cfsprobe" {
		t.Errorf("image config: user %q, entrypoint %q; want 65534:65534 and /cfsprobe", cfg.User, cfg.Entrypoint)
	}
	// The running process's user, as the kernel has it.
	id := strings.TrimSpace(d.Docker(t, "run", "-d", ref, "top", "--once", "--interval", "30s"))
	pid := strings.TrimSpace(d.Docker(t, "inspect", "--format", "{{.State.Pid}}", id))
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(status, []byte("\nUid:\t65534\t65534\t65534\t65534\n")) {
		t.Errorf("the container's process is not nobody:\n%s", status)
	}
	d.Docker(t, "rm", "-f", id)
	if _, err := d.Run("run", "--rm", "--entrypoint", "/bin/sh", ref, "-c", "true"); err == nil {
		t.Errorf("%s has a shell at /bin/sh", ref)
	}
	if _, err := d.Run("run", "--rm", "--entrypoint", "/busybox/sh", ref, "-c", "true"); err == nil {
		t.Errorf("%s has a shell at /busybox/sh", ref)
	}
	out := d.Docker(t, "run", "--rm", "--entrypoint", "/busybox/sh", ref+"-debug", "-c", "id -u; /cfsprobe version")
	if out != "65534\ncfsprobe "+version+"\n" {
		t.Errorf("%s-debug: id -u; cfsprobe version printed %q", ref, out)
	}
	size := d.Docker(t, "image", "inspect", "--format", "{{.Size}}", ref)
	dbgSize := d.Docker(t, "image", "inspect", "--format", "{{.Size}}", ref+"-debug")
	t.Logf("image sizes: %s bytes, debug %s bytes", strings.TrimSpace(size), strings.TrimSpace(dbgSize))
}

// checkRun is one of seed 002's docker run lines.
type checkRun struct {
	name  string
	flags []string
}

// checkFlags are what the check needs of `docker run` (deploy/README.md):
// root, and the host's cgroup tree writable (-v, in the host's cgroup
// namespace), where it makes its runs' groups; the default seccomp
// profile blocks clone3, with which it starts a workload in its group.
// --privileged gives all that too, where root has every capability (here
// it lacks CAP_SYS_RESOURCE, so runc cannot give a privileged container
// all of them).
var checkFlags = []string{"--user", "0", "--cgroupns", "host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup", "--security-opt", "seccomp=unconfined"}

// TestSeed002Check runs seed 002's `docker run` lines with cfsprobe's
// image running the check: without a quota, and with --cpu-quota 20000
// --cpu-period 100000 (the seed's 0.2 CPU), which limits cfsprobe itself
// (its sampler), not the runs' groups it makes beside the container's.
// This kernel (fixed since 5.4) must not be found affected; the verdicts
// and their numbers are logged.
func TestSeed002Check(t *testing.T) {
	d := dockerd.Start(t)
	img := d.Image(t)
	for _, r := range []checkRun{
		{"without quota", nil},
		{"with quota", []string{"--cpu-quota", "20000", "--cpu-period", "100000"}},
	} {
		t.Run(r.name, func(t *testing.T) {
			args := append(append([]string{"run", "--rm"}, checkFlags...), r.flags...)
			args = append(args, img, "check", "--json")
			start := time.Now()
			out, err := d.Run(args...)
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
			}
			var res struct {
				Verdict, Headline, Summary string
				Evidence                   struct {
					Runs                int   `json:"runs"`
					PeriodsJudged       int64 `json:"periods_judged"`
					Throttled           int64 `json:"throttled"`
					ThrottledUnderQuota int64 `json:"throttled_under_quota"`
					SlowOps             int64 `json:"slow_ops"`
					Ops                 int64 `json:"ops"`
				}
			}
			if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
				t.Fatalf("docker %s (exit %d, %v): %v\n%s", strings.Join(args, " "), code, err, jerr, out)
			}
			e := res.Evidence
			t.Logf("docker %s: exit %d, verdict %q in %v: %d runs, %d periods judged, %d throttled, %d throttled under quota, %d of %d operations slow\n  %s\n  %s",
				strings.Join(args, " "), code, res.Verdict, time.Since(start).Round(100*time.Millisecond),
				e.Runs, e.PeriodsJudged, e.Throttled, e.ThrottledUnderQuota, e.SlowOps, e.Ops, res.Headline, res.Summary)
			if code != 0 || res.Verdict != "not affected" {
				t.Errorf("exit %d, verdict %q: want 0, \"not affected\" on this kernel", code, res.Verdict)
			}
		})
	}
}

// seed003 is one of seed 003's runs: a container named name, limited to
// cpus ("" for none), running the bursty workload (50 ms busy, 50 ms
// idle).
type seed003 struct {
	name, cpus string
}

// TestSeed003Containers is Must show 2 and 3: seed 003's four containers
// run side by side, each read by its name through `top --once --json` and
// the exporter's /metrics (its names on cfsprobe_cgroup_info, its
// throttled share from the counters' increase between two scrapes), and
// recorded by name.
func TestSeed003Containers(t *testing.T) {
	d := dockerd.Start(t)
	img := d.Image(t)
	bin := binary(t)
	runs := []seed003{{"seed003-none", ""}, {"seed003-cpus-0.5", "0.5"}, {"seed003-cpus-0.1", "0.1"}, {"seed003-cpus-1.0", "1.0"}}
	for _, r := range runs {
		args := []string{"run", "-d", "--name", r.name}
		if r.cpus != "" {
			args = append(args, "--cpus", r.cpus)
		}
		// The bursty workload of cfsprobe run, in the container's own
		// group (cfsprobe's hidden entry point of its workloads): 50 ms
		// of CPU, then 50 ms idle. The seed busy-waits 50 ms of wall
		// time, the same on an idle machine; on this shared one a
		// burst of CPU time wants the same of the quota however much
		// other work delays it.
		args = append(args, img, "__workload", "bursty", "--on-cpu", "50ms", "--off", "50ms", "--duration", "120s")
		d.Docker(t, args...)
	}
	// The exporter of every group (--all), naming containers through the
	// private daemon; stopped by PID when the test ends.
	_, addr := testenv.StartExporter(t, bin, "--all", "--docker-host", d.Host())
	metrics := "http://" + addr + "/metrics"
	time.Sleep(2 * time.Second) // every container running, walked by the exporter

	m1 := scrape(t, metrics)
	start := time.Now()
	out := cfsprobe(t, bin, "top", "--once", "--json", "--all", "--interval", "10s", "--docker-host", d.Host())
	m2 := scrape(t, metrics)
	wall := time.Since(start)
	var rows []top.Row
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("top --once --json: %v\n%s", err, out)
	}
	byName := map[string]top.Row{}
	for _, r := range rows {
		if r.ContainerName != "" {
			byName[r.ContainerName] = r
		}
	}
	info := infoByName(m2)
	ratio := map[string]float64{}
	t.Logf("seed 003's containers, 50 ms busy / 50 ms idle, over top's 10 s and /metrics' %v:", wall.Round(100*time.Millisecond))
	t.Logf("  %-18s %-5s  %-32s  %-28s  %s", "NAME", "CPUS", "top: throttled (periods) usage", "/metrics: throttled (periods)", "throttled s")
	for _, r := range runs {
		row, ok := byName[r.name]
		if !ok {
			t.Errorf("top --once --json does not list %s by name:\n%s", r.name, out)
			continue
		}
		if row.Image != img || row.Name != r.name+" ("+img+")" || row.Kind != "docker" {
			t.Errorf("%s: top's row names it %q, image %q, kind %q", r.name, row.Name, row.Image, row.Kind)
		}
		labels, ok := info[r.name]
		if !ok {
			t.Errorf("/metrics has no cfsprobe_cgroup_info{container_name=%q}", r.name)
			continue
		}
		if labels["image"] != img || labels["container_id"] != row.ContainerID || labels["cgroup"] != row.Cgroup {
			t.Errorf("%s: cfsprobe_cgroup_info %v, top's row %s %s", r.name, labels, row.ContainerID, row.Cgroup)
		}
		cg := labels["cgroup"]
		dp := counter(m2, "cfsprobe_cpu_periods_total", cg) - counter(m1, "cfsprobe_cpu_periods_total", cg)
		dt := counter(m2, "cfsprobe_cpu_throttled_periods_total", cg) - counter(m1, "cfsprobe_cpu_throttled_periods_total", cg)
		ds := counter(m2, "cfsprobe_cpu_throttled_seconds_total", cg) - counter(m1, "cfsprobe_cpu_throttled_seconds_total", cg)
		if dp > 0 {
			ratio[r.name] = dt / dp
		}
		if !row.Ready() {
			t.Errorf("%s: top's row has no figures", r.name)
			continue
		}
		iv := row.Interval
		t.Logf("  %-18s %-5s  %5.1f%% (%3d/%3d) %5.2f CPUs    %5.1f%% (%3.0f/%3.0f)              %.2f",
			r.name, or(r.cpus, "none"), 100**row.ThrottledRatio, iv.NrThrottled, iv.NrPeriods, *row.UsageCPUs,
			100*ratio[r.name], dt, dp, ds)
		switch r.cpus {
		case "":
			if row.Limits.QuotaUs != nil || iv.NrPeriods != 0 || dp != 0 {
				t.Errorf("%s: no limit, yet quota %v and %d periods (top), %v (/metrics)", r.name, row.Limits.QuotaUs, iv.NrPeriods, dp)
			}
		case "0.1":
			// Must show 2: throttled, by name. It wants 0.5 CPU.
			if *row.ThrottledRatio < 0.7 || ratio[r.name] < 0.7 {
				t.Errorf("%s: throttled in %.0f%% (top), %.0f%% (/metrics) of periods, want 70%% or more", r.name, 100**row.ThrottledRatio, 100*ratio[r.name])
			}
		case "1.0":
			if *row.ThrottledRatio > 0.05 || ratio[r.name] > 0.05 {
				t.Errorf("%s: throttled in %.1f%% (top), %.1f%% (/metrics) of periods, want 5%% at most", r.name, 100**row.ThrottledRatio, 100*ratio[r.name])
			}
		case "0.5":
			// At its limit: a burst straddles two periods, so a period
			// rarely gets more than 50 ms; a late wake-up on a busy
			// machine can make one do so.
			if *row.ThrottledRatio > 0.3 || ratio[r.name] > 0.3 {
				t.Errorf("%s: throttled in %.1f%% (top), %.1f%% (/metrics) of periods, want 30%% at most", r.name, 100**row.ThrottledRatio, 100*ratio[r.name])
			}
		}
	}

	// record --container NAME names the group in the trace.
	var tr trace.Trace
	if err := json.Unmarshal(cfsprobe(t, bin, "record", "--container", "seed003-cpus-0.1", "--duration", "3s", "--json", "--docker-host", d.Host()), &tr); err != nil {
		t.Fatal(err)
	}
	want := trace.Names{ContainerName: "seed003-cpus-0.1", Image: img}
	if tr.Cgroup.Names != want || tr.Cgroup.Path != "/docker/"+byName["seed003-cpus-0.1"].ContainerID {
		t.Errorf("record --container seed003-cpus-0.1: cgroup %+v, want %s named %+v", tr.Cgroup, byName["seed003-cpus-0.1"].Cgroup, want)
	}
	throttled := 0
	for _, p := range tr.Periods {
		if p.Throttled {
			throttled++
		}
	}
	t.Logf("record --container seed003-cpus-0.1 --duration 3s: cgroup %s, %d of %d periods throttled", tr.Cgroup.Path, throttled, len(tr.Periods))
	if len(tr.Periods) < 20 || throttled < len(tr.Periods)*7/10 {
		t.Errorf("record: %d of %d periods throttled, want 70%% or more of 20 or more", throttled, len(tr.Periods))
	}

	// recommend --container NAME records the container's group as record
	// does, names the advice after the container (the one --format k8s
	// patches), and does not shrink it toward the 0.1 CPU it ran under.
	var doc recommend.Document
	if err := json.Unmarshal(cfsprobe(t, bin, "recommend", "--container", "seed003-cpus-0.1", "--duration", "3s", "--json", "--docker-host", d.Host()), &doc); err != nil || len(doc.Groups) != 1 {
		t.Fatalf("recommend --container: %v, %d groups", err, len(doc.Groups))
	}
	g := doc.Groups[0]
	rec := g.Recommended
	t.Logf("recommend --container seed003-cpus-0.1 --duration 3s: %s %s (%s)", rec.Kind, rec.Setting, rec.Reason)
	if g.Name != "seed003-cpus-0.1" || g.Names.ContainerName != "seed003-cpus-0.1" || g.Workload != "recorded" || rec.Kind != recommend.KindNoLimit && rec.Setting.Millicores() <= 100 {
		t.Errorf("recommend --container seed003-cpus-0.1: group %q (names %+v, %s), recommended %s %s; want the container's name, its recording, and more than the 100m it is throttled under", g.Name, g.Names, g.Workload, rec.Kind, rec.Setting)
	}
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// scrape reads /metrics and parses it.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// labelsOf is a series' labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// infoByName is cfsprobe_cgroup_info's labels by container_name.
func infoByName(fams map[string]*dto.MetricFamily) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range fams["cfsprobe_cgroup_info"].GetMetric() {
		if l := labelsOf(m); l["container_name"] != "" {
			out[l["container_name"]] = l
		}
	}
	return out
}

// counter is the value of a counter's series of the cgroup (0 when none).
func counter(fams map[string]*dto.MetricFamily, name, cgroup string) float64 {
	for _, m := range fams[name].GetMetric() {
		if labelsOf(m)["cgroup"] == cgroup {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
