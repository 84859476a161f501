package main

// Every bad input gets one sentence that says what is wrong and how to fix
// it, exit status 2, nothing on stdout, and nothing created: no cgroup
// directory appears in any hierarchy, no trace file is written.

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// errCase is one bad invocation.
type errCase struct {
	name string
	args []string
	// want are substrings of the message: the value at fault and the hint.
	want []string
	// host: the case needs the host's cgroups (a cpu controller to detect,
	// a cpuset to compare with); the others run anywhere, also without root.
	host bool
	// nobody runs the binary as uid/gid 65534.
	nobody bool
	// limited: the case runs under the parent group limitedParent, made
	// for it with a quota of one CPU (cgroup v1 only, whose kernel refuses
	// a child more).
	limited bool
}

// limitedParent is the parent group of the limited cases.
var limitedParent = testParent + "-limited"

// runArgs prefixes a run command with the test parent, so that a case that
// wrongly got through would only touch cfsprobe-e2e.
func runArgs(args ...string) []string {
	return append([]string{"run", "--parent", testParent}, args...)
}

func TestErrors(t *testing.T) {
	noCPU, err := filepath.Abs("testdata/no-cpu")
	if err != nil {
		t.Fatal(err)
	}
	// A mount table whose cgroup mount points are ordinary directories.
	notCgroupFS, err := filepath.Abs("testdata/not-cgroupfs")
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	// Prometheus APIs that refuse every query as malformed, and that hold
	// no series.
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"1:31: parse error: unexpected identifier \"cfsprobe\""}`)
	}))
	defer refusing.Close()
	empty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	}))
	defer empty.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	simulated := filepath.Join(t.TempDir(), "simulated.json")
	if r := cfsprobe(t, "simulate", "--out", simulated, "--kernel", "4.18", "--cpus", "0.2", "periodic", "--iterations", "3"); r.code != 0 {
		t.Fatalf("simulate a trace: exit %d: %s", r.code, r.stderr)
	}
	// A trace --verify can rerun (a lab run of a built-in workload: the
	// simulated fixture without its simulated part), where uid 65534 can
	// read it.
	shared, err := os.MkdirTemp("", "cfsprobe-errors")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	rerunnable := filepath.Join(shared, "rerunnable.json")
	labRun(t, filepath.Join("..", "..", "internal", "recommend", "testdata", "burst-no-burst.json"), rerunnable)
	cases := []errCase{
		// What to run.
		{name: "unknown workload", args: runArgs("nosuch"),
			want: []string{`"nosuch"`, "use one of", "periodic", "-- COMMAND"}},
		{name: "no workload", args: runArgs("--cpus", "1"),
			want: []string{"no workload", "name one of", "-- COMMAND"}},
		{name: "workload flag malformed", args: runArgs("periodic", "--burn", "5xs"),
			want: []string{`"5xs"`, "--burn", "cfsprobe run periodic --help"}},
		{name: "workload flag unknown", args: runArgs("bursty", "--nosuch", "1"),
			want: []string{"--nosuch", "cfsprobe run bursty --help"}},
		{name: "workload stray argument", args: runArgs("periodic", "extra"),
			want: []string{`"extra"`, "cfsprobe run periodic --help"}},
		{name: "cfsprobe flag malformed", args: runArgs("--period", "10xs", "periodic"),
			want: []string{`"10xs"`, "--period", "cfsprobe run --help"}},
		{name: "cfsprobe flag unknown", args: runArgs("--nosuch", "periodic"),
			want: []string{"--nosuch", "cfsprobe run --help"}},
		{name: "cfsprobe flag without value", args: runArgs("--cpus"),
			want: []string{"--cpus", "needs an argument", "cfsprobe run --help"}},
		{name: "cfsprobe flag after the workload", args: runArgs("periodic", "--cpus", "0.5"),
			want: []string{"--cpus", "put it before the workload"}},
		{name: "command not found", args: runArgs("--", "/no/such/program"),
			want: []string{`"/no/such/program"`, "check the path"}},
		{name: "command not on PATH", args: runArgs("--cpus", "1", "--", "no-such-program-cfsprobe"),
			want: []string{`"no-such-program-cfsprobe"`, "install it"}},

		// Limits the kernel would refuse.
		{name: "quota below 1ms", args: runArgs("--quota", "500us", "periodic"),
			want: []string{"--quota 500µs", "minimum of 1ms", "use --quota 1ms or more"}},
		{name: "quota negative", args: runArgs("--quota", "-1ms", "periodic"),
			want: []string{"--quota -1ms is negative", "use --quota 1ms or more"}},
		{name: "quota beyond the kernel's maximum", args: runArgs("--quota", "5000h", "periodic"),
			want: []string{"--quota 5000h0m0s", "maximum of 4886h43m6.044415s", "use --quota 4886h43m6.044415s or less"}},
		{name: "cpus below 1ms of quota", args: runArgs("--cpus", "0.001", "periodic"),
			want: []string{"--cpus 0.001", "a quota of 100µs per 100ms period", "minimum of 1ms", "use --cpus 0.01 or more"}},
		{name: "cpus below 1ms of a short period", args: runArgs("--period", "1500us", "--cpus", "0.5", "periodic"),
			want: []string{"--cpus 0.5", "1.5ms period", "use --cpus 0.667 or more"}},
		{name: "cpus beyond any quota", args: runArgs("--cpus", "1e300", "periodic"),
			want: []string{"--cpus 1e+300", "maximum quota", "use --cpus 175000000 or less"}},
		{name: "cpus beyond the kernel's maximum quota", args: runArgs("--cpus", "1e9", "periodic"),
			want: []string{"--cpus 1e+09", "maximum quota of 4886h43m6.044415s", "use --cpus 175000000 or less"}},
		{name: "cpus NaN", args: runArgs("--cpus", "NaN", "periodic"),
			want: []string{"--cpus NaN", "positive", "e.g. 0.5"}},
		{name: "cpus infinite", args: runArgs("--cpus", "+Inf", "periodic"),
			want: []string{"--cpus +Inf", "positive", "e.g. 0.5"}},
		{name: "period above 1s", args: runArgs("--period", "2s", "periodic"),
			want: []string{"--period 2s", "maximum of 1s", "use --period 1ms to 1s"}},
		{name: "period below 1ms", args: runArgs("--period", "500us", "periodic"),
			want: []string{"--period 500µs", "minimum of 1ms", "use --period 1ms to 1s"}},
		{name: "period zero", args: runArgs("--period", "0", "periodic"),
			want: []string{"--period 0s", "minimum of 1ms", "use --period 1ms to 1s"}},
		{name: "period negative", args: runArgs("--cpus", "0.5", "--period", "-100ms", "periodic"),
			want: []string{"--period -100ms", "use --period 1ms to 1s"}},
		{name: "period not whole microseconds", args: runArgs("--period", "100.0005ms", "periodic"),
			want: []string{"--period 100.0005ms", "whole number of microseconds", "use --period 100.001ms"}},
		{name: "burst above quota", args: runArgs("--cpus", "0.2", "--burst", "30ms", "periodic"),
			want: []string{"--burst 30ms", "above the quota 20ms", "use --burst 0 to 20ms"}},
		{name: "burst negative", args: runArgs("--cpus", "0.5", "--burst", "-1ms", "periodic"),
			want: []string{"--burst -1ms is negative", "use --burst 0 to 50ms"}},
		{name: "burst without quota", args: runArgs("--burst", "10ms", "periodic"),
			want: []string{"--burst 10ms needs a quota", "add --quota or --cpus"}},
		{name: "cpus above a v1 ancestor's quota", args: []string{"run", "--parent", limitedParent + "/sub", "--cpus", "1.5", "periodic"}, host: true, limited: true,
			want: []string{"--cpus 1.5", "ancestor group /" + limitedParent, "use --cpus 1 or less"}},
		{name: "cpus and quota", args: runArgs("--cpus", "1", "--quota", "10ms", "periodic"),
			want: []string{"--cpus or --quota, not both"}},
		{name: "cpus negative", args: runArgs("--cpus", "-1", "periodic"),
			want: []string{"--cpus -1", "positive", "e.g. 0.5"}},
		{name: "cpus zero", args: runArgs("--cpus", "0", "periodic"),
			want: []string{"--cpus 0", "positive", "e.g. 0.5"}},
		{name: "quota zero", args: runArgs("--quota", "0", "periodic"),
			want: []string{"--quota 0s", "leave it out for no limit"}},
		{name: "cpuset malformed", args: runArgs("--cpuset", "1-0", "periodic"),
			want: []string{`"1-0"`, "like 0-1 or 0,2"}},
		{name: "cpuset missing CPU", args: runArgs("--cpuset", "7", "periodic"), host: true,
			want: []string{`cpuset "7"`, "CPU 7", "available:", "pick CPUs from that list"}},
		{name: "cpuset empty", args: runArgs("--cpuset=", "periodic"),
			want: []string{"--cpuset is empty", "leave --cpuset out"}},

		// Other flags of run.
		{name: "sample interval negative", args: runArgs("--sample-interval", "-1ms", "periodic"),
			want: []string{"--sample-interval -1ms", "100µs to the 100ms period"}},
		{name: "sample interval above the period", args: runArgs("--period", "10ms", "--sample-interval", "20ms", "periodic"),
			want: []string{"--sample-interval 20ms", "100µs to the 10ms period"}},
		{name: "parent outside the hierarchy", args: runArgs("--parent", "../../x", "periodic"),
			want: []string{`--parent "../../x"`, "below the hierarchy's root"}},
		{name: "parent is the root", args: runArgs("--parent", "/", "periodic"),
			want: []string{`--parent "/" is the root itself`, "below the hierarchy's root"}},
		{name: "parent empty", args: runArgs("--parent=", "periodic"),
			want: []string{"--parent is empty", "leave --parent out"}},
		{name: "proc root empty", args: runArgs("--proc-root=", "periodic"),
			want: []string{"--proc-root is empty"}},

		// The host.
		{name: "no cpu controller", args: runArgs("--proc-root", filepath.Join(noCPU, "proc"), "--fs-root", noCPU, "periodic"),
			want: []string{"cpu controller", "mount a v1 cpu hierarchy", "enable +cpu"}},
		{name: "fs root not cgroupfs", args: runArgs("--proc-root", filepath.Join(notCgroupFS, "proc"), "--fs-root", notCgroupFS, "periodic"),
			want: []string{"not a cgroup filesystem: " + notCgroupFS + "/sys/fs/cgroup/cpu is on a file system of type", "check --fs-root"}},
		{name: "fs root missing", args: runArgs("--fs-root", "/no/such/root", "periodic"), host: true,
			want: []string{"/no/such/root/", "does not exist", "check --fs-root"}},
		{name: "not root", args: runArgs("--cpus", "0.5", "periodic"), host: true, nobody: true,
			want: []string{"not writable by uid 65534", "run cfsprobe as root"}},
		{name: "trace directory missing", args: runArgs("-o", "/no/such/dir/trace.json", "periodic"), host: true,
			want: []string{"/no/such/dir", "create it or choose another path"}},
		{name: "trace path is a directory", args: runArgs("-o", outDir, "periodic"), host: true,
			want: []string{outDir, "give a file name"}},

		// simulate: the workload, the model, the limits and the output,
		// all checked before anything is simulated.
		{name: "simulate unknown workload", args: []string{"simulate", "nosuch"},
			want: []string{`"nosuch"`, "use one of", "parallel"}},
		{name: "simulate no workload", args: []string{"simulate", "--cpus", "1"},
			want: []string{"no workload", "name one of", "cfsprobe simulate --help"}},
		{name: "simulate a command", args: []string{"simulate", "--cpus", "1", "--", "sleep", "1"},
			want: []string{"cannot be simulated", "name a built-in workload"}},
		{name: "simulate unknown era", args: []string{"simulate", "--kernel", "4.19", "periodic"},
			want: []string{"--kernel 4.19", `"4.19"`, "3.16, 4.18, 5.4, 5.14, 6.18"}},
		{name: "simulate host without CPUs", args: []string{"simulate", "--host-cpus", "0", "periodic"},
			want: []string{"--host-cpus 0", "1 to 8192"}},
		{name: "simulate event without CPU time", args: []string{"simulate", "--event-cpu", "0s", "parallel"},
			want: []string{"--event-cpu 0s", "such as 250us"}},
		{name: "simulate events' spread short", args: []string{"simulate", "--event-cpu-quantiles", "1ms,2ms", "parallel"},
			want: []string{"--event-cpu-quantiles", "give 10 times", "0,10,25,50,75,90,95,99,99.9,100%", "not 2"}},
		{name: "simulate events' spread decreasing", args: []string{"simulate", "--event-cpu-quantiles", "2ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms", "parallel"},
			want: []string{"--event-cpu-quantiles", "positive and increasing"}},
		{name: "simulate events' time and spread", args: []string{"simulate", "--event-cpu", "1ms", "--event-cpu-quantiles", "1ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms,1ms", "parallel"},
			want: []string{"--event-cpu and --event-cpu-quantiles", "give one"}},
		{name: "simulate phase without a limit", args: []string{"simulate", "--phase", "20ms", "periodic"},
			want: []string{"--phase 20ms", "without a limit", "leave --phase out"}},
		{name: "simulate phase beyond the period", args: []string{"simulate", "--cpus", "0.5", "--period", "50ms", "--phase", "60ms", "periodic"},
			want: []string{"--phase 60ms", "up to the period (50ms)"}},
		{name: "simulate wake-ups too often", args: []string{"simulate", "--cpus", "0.5", "--wakeups", "50us", "periodic"},
			want: []string{"--wakeups 50µs", "100µs or more"}},
		{name: "simulate a wake-up's cost of nothing", args: []string{"simulate", "--wake-cpu", "0s", "periodic"},
			want: []string{"--wake-cpu 0s", "such as 25us"}},
		{name: "simulate a 50ms sleep's wake-up cost of nothing", args: []string{"simulate", "--wake-cpu-mid", "0s", "periodic"},
			want: []string{"--wake-cpu-mid 0s", "a sleep of 50ms"}},
		{name: "simulate a long sleep's wake-up cost of nothing", args: []string{"simulate", "--wake-cpu-long", "0s", "periodic"},
			want: []string{"--wake-cpu-long 0s", "a sleep of 1s or more"}},
		{name: "simulate burst before its era", args: []string{"simulate", "--kernel", "4.18", "--cpus", "0.2", "--burst", "10ms", "periodic"},
			want: []string{"--burst 10ms", "kernel era 4.18", "drop --burst or give --kernel 5.14"}},
		{name: "simulate cpuset beyond the host", args: []string{"simulate", "--host-cpus", "4", "--cpuset", "2-5", "periodic"},
			want: []string{`cpuset "2-5"`, "CPU 4", "CPUs 0 to 3"}},
		{name: "simulate quota below 1ms", args: []string{"simulate", "--quota", "500us", "periodic"},
			want: []string{"--quota 500µs", "use --quota 1ms or more"}},
		{name: "simulate workload flag malformed", args: []string{"simulate", "bursty", "--on", "5xs"},
			want: []string{`"5xs"`, "--on"}},
		{name: "simulate flag after the workload", args: []string{"simulate", "parallel", "--kernel", "4.18"},
			want: []string{"--kernel", "cfsprobe simulate", "put it before the workload"}},
		{name: "simulate trace directory missing", args: []string{"simulate", "-o", "/no/such/dir/trace.json", "periodic"},
			want: []string{"/no/such/dir", "create it or choose another path"}},
		{name: "simulate report directory missing", args: []string{"simulate", "--report", "/no/such/dir/r.html", "periodic"},
			want: []string{"--report /no/such/dir/r.html", "create it or choose another path"}},
		// simulate replay: the trace is read and checked first.
		{name: "simulate replay without a trace", args: []string{"simulate", "replay"},
			want: []string{"replay needs a trace", "give FILE (or --trace FILE)"}},
		{name: "simulate replay trace twice", args: []string{"simulate", "replay", "--trace", "a.json", "b.json"},
			want: []string{"the trace is given twice (b.json and --trace a.json)", "give it once"}},
		{name: "simulate replay two traces", args: []string{"simulate", "replay", "a.json", "b.json"},
			want: []string{`unexpected argument "b.json"`, "replay reads one trace"}},
		{name: "simulate replay positional trace missing", args: []string{"simulate", "replay", "/no/such/trace.json"},
			want: []string{"replay: /no/such/trace.json does not exist"}},
		{name: "simulate replay trace missing", args: []string{"simulate", "replay", "--trace", "/no/such/trace.json"},
			want: []string{"--trace /no/such/trace.json does not exist", "saved with --out"}},
		{name: "simulate replay trace empty", args: []string{"simulate", "replay", "--trace", file},
			want: []string{"--trace " + file + " is empty", "saved by cfsprobe run"}},
		{name: "simulate replay not a trace", args: []string{"simulate", "replay", "--trace", "testdata/no-cpu/proc/self/mountinfo"},
			want: []string{"is not a cfsprobe trace", "saved by cfsprobe run"}},
		{name: "simulate replay trace without periods", args: []string{"simulate", "replay", "--trace", "testdata/trace-no-periods.json"},
			want: []string{"testdata/trace-no-periods.json has no periods", "record the group for longer"}},
		{name: "simulate replay scale zero", args: []string{"simulate", "replay", "--trace", "testdata/trace-no-periods.json", "--scale", "0"},
			want: []string{"--scale 0", "above 0"}},
		{name: "simulate replay demand unknown", args: []string{"simulate", "replay", "--trace", "testdata/trace-no-periods.json", "--demand", "batch"},
			want: []string{"--demand batch", "use one of closed, scheduled, open, timed"}},
		{name: "simulate replay flag unknown", args: []string{"simulate", "replay", "--nosuch"},
			want: []string{"--nosuch", "cfsprobe simulate replay --help"}},
		{name: "suite model without simulate", args: []string{"suite", "--parent", testParent, "--quick", "--kernel", "4.18", "burst"},
			want: []string{"--kernel sets the model of --simulate", "add --simulate"}},
		{name: "suite compare on another host", args: []string{"suite", "--parent", testParent, "--quick", "--compare", "--host-cpus", "64", "burst"},
			want: []string{"--compare", "drop --kernel and --host-cpus"}},
		{name: "suite simulate unknown era", args: []string{"suite", "--quick", "--simulate", "--kernel", "2.6", "burst"},
			want: []string{"--kernel 2.6", "use one of"}},

		// cleanup.
		{name: "cleanup flag unknown", args: []string{"cleanup", "--parent", testParent, "--nosuch"},
			want: []string{"--nosuch", "cfsprobe cleanup --help"}},
		{name: "cleanup argument", args: []string{"cleanup", "--parent", testParent, "extra"},
			want: []string{`"extra"`, "--parent"}},
		{name: "cleanup not cgroupfs", args: []string{"cleanup", "--proc-root", filepath.Join(notCgroupFS, "proc"), "--fs-root", notCgroupFS},
			want: []string{"not a cgroup filesystem", "check --fs-root"}},
		{name: "cleanup without cpu controller", args: []string{"cleanup", "--parent", testParent, "--proc-root", filepath.Join(noCPU, "proc"), "--fs-root", noCPU},
			want: []string{"cpu controller", "--fs-root", "enable +cpu"}},
		{name: "cleanup parent outside the hierarchy", args: []string{"cleanup", "--parent", "cfsprobe/../.."},
			want: []string{`--parent "cfsprobe/../.."`, "below the hierarchy's root"}},

		// The other commands' flags.
		{name: "suite out is a file", args: []string{"suite", "--parent", testParent, "--quick", "--out", file, "bursty-limits"},
			want: []string{file, "give a directory"}},
		{name: "suite parent outside the hierarchy", args: []string{"suite", "--parent", "..", "--quick", "bursty-limits"},
			want: []string{`--parent ".."`, "below the hierarchy's root"}},
		{name: "check parent outside the hierarchy", args: []string{"check", "--parent", "a//b"},
			want: []string{`--parent "a//b"`, "below the hierarchy's root"}},
		{name: "check a simulated trace", args: []string{"check", "--from-traces", simulated},
			want: []string{simulated, "is a simulated trace", "kernel era 4.18", "give traces of real runs"}},
		{name: "check report directory missing", args: []string{"check", "--parent", testParent, "--report", "/no/such/dir/r.html"},
			want: []string{"--report /no/such/dir/r.html", "create it or choose another path"}},
		{name: "report out directory missing", args: []string{"report", "-o", "/no/such/dir/r.html", file},
			want: []string{"--out /no/such/dir/r.html", "create it or choose another path"}},
		{name: "report format empty", args: []string{"report", "--format=", file},
			want: []string{"--format is empty"}},
		{name: "report nothing to show", args: []string{"report"},
			want: []string{"no trace to show", "saved by cfsprobe run, record or simulate", "cfsprobe report --help"}},
		{name: "record two groups", args: []string{"record", "/a", "/b"},
			want: []string{"follows one group", `"/a" "/b"`, "cfsprobe record --help"}},
		{name: "version stray argument", args: []string{"version", "extra"},
			want: []string{`"extra"`, "takes no arguments"}},
		{name: "suite list with a name", args: []string{"suite", "--list", "burst"},
			want: []string{"--list and --show take no suite names", `"burst"`}},
		{name: "suite show with a scenario", args: []string{"suite", "--show", "burst", "--scenario", "no-burst"},
			want: []string{"--scenario picks the scenarios to run", "drop one"}},
		{name: "suite scenario unknown", args: []string{"suite", "--parent", testParent, "--quick", "--scenario", "B-moderate", "burst"},
			want: []string{`no scenario "B-moderate"`, "no-burst, burst-20ms"}},
		{name: "exec round empty", args: []string{"exec", "--round=", "--", "true"},
			want: []string{"--round is empty"}},
		{name: "cpus pid empty", args: []string{"cpus", "--pid="},
			want: []string{"--pid is empty", "leave --pid out"}},
		{name: "cpus cgroup empty", args: []string{"cpus", "--cgroup="},
			want: []string{"--cgroup is empty"}},
		{name: "top root empty", args: []string{"top", "--once", "--cgroup-root="},
			want: []string{"--cgroup-root is empty"}},
		{name: "exporter listen empty", args: []string{"exporter", "--listen="},
			want: []string{"--listen is empty"}},
		{name: "record sample interval negative", args: []string{"record", "--sample-interval", "-1ms", "/"}, host: true,
			want: []string{"--sample-interval -1ms", "100µs to the 100ms period"}},
		{name: "record root missing", args: []string{"record", "--cgroup-root", "/no/such/dir", "/"},
			want: []string{"--cgroup-root /no/such/dir does not exist"}},
		{name: "record cgroup empty", args: []string{"record", "--cgroup="},
			want: []string{"--cgroup is empty", "leave --cgroup out"}},
		{name: "record path twice", args: []string{"record", "/a", "--cgroup", "/b"},
			want: []string{"name the group one way only", "(or --cgroup)"}},
		{name: "record pod without name", args: []string{"record", "--pod", "shop/"},
			want: []string{`--pod "shop/": give the pod as NAMESPACE/NAME`}},
		{name: "record container no runtime", args: []string{"record", "--docker-host", "none", "--cri-endpoint", "none", "--container", "web"}, host: true,
			want: []string{"--container web: no container runtime answered", "at least 4 characters"}},
		{name: "record pod no runtime", args: []string{"record", "--docker-host", "none", "--cri-endpoint", "none", "--pod", "shop/api"}, host: true,
			want: []string{"--pod shop/api: no container runtime answered", "or its UID"}},
		{name: "top docker host scheme", args: []string{"top", "--once", "--docker-host", "ssh://me@host"}, host: true,
			want: []string{`docker host "ssh://me@host": cfsprobe speaks to unix:// and tcp:// addresses only`, "--docker-host unix:///var/run/docker.sock"}},
		{name: "exporter cri endpoint path", args: []string{"exporter", "--cri-endpoint", "/run/containerd/containerd.sock"}, host: true,
			want: []string{"give the runtime's socket as unix:///PATH"}},
		{name: "exporter kube api unknown", args: []string{"exporter", "--kube-api", "https://10.96.0.1"}, host: true,
			want: []string{`Kubernetes API "https://10.96.0.1"`, "--kube-api in-cluster"}},

		// recommend: the flags, then the traces (or the live group), all
		// checked before anything is recorded or simulated.
		{name: "recommend nothing", args: []string{"recommend"},
			want: []string{"nothing to advise on", "--cgroup PATH (or --pid, --container, --pod) --duration D"}},
		{name: "recommend trace missing", args: []string{"recommend", "/no/such/trace.json"},
			want: []string{"/no/such/trace.json does not exist", "saved with --out"}},
		{name: "recommend trace empty", args: []string{"recommend", file},
			want: []string{file + " is empty", "saved by cfsprobe run, record or simulate"}},
		{name: "recommend not a trace", args: []string{"recommend", "testdata/no-cpu/proc/self/mountinfo"},
			want: []string{"is not a cfsprobe trace", "saved by cfsprobe run, record or simulate"}},
		{name: "recommend trace without periods", args: []string{"recommend", "testdata/trace-no-periods.json"},
			want: []string{"no periods", "record the group for longer"}},
		{name: "recommend target unknown", args: []string{"recommend", "--target", "latency:5ms", simulated},
			want: []string{"--target", `"latency"`, "throttled:PCT"}},
		{name: "recommend target malformed", args: []string{"recommend", "--target", "throttled:lots", simulated},
			want: []string{"--target", `"lots"`, "such as 1%"}},
		{name: "recommend format unknown", args: []string{"recommend", "--format", "yaml", simulated},
			want: []string{"--format yaml", "table, json, k8s or markdown"}},
		{name: "recommend json and another format", args: []string{"recommend", "--json", "--format", "k8s", simulated},
			want: []string{"--json and --format k8s", "give one"}},
		{name: "recommend headroom above 100%", args: []string{"recommend", "--headroom", "150%", simulated},
			want: []string{"--headroom", `"150%"`, "from 0 to 100"}},
		{name: "recommend headroom not a number", args: []string{"recommend", "--headroom", "some", simulated},
			want: []string{"--headroom", `"some"`, "such as 10%"}},
		{name: "recommend max cpus zero", args: []string{"recommend", "--max-cpus", "0", simulated},
			want: []string{"--max-cpus 0", "positive number"}},
		{name: "recommend host without CPUs", args: []string{"recommend", "--host-cpus", "0", simulated},
			want: []string{"--host-cpus 0", "1 to 8192"}},
		{name: "recommend unknown era", args: []string{"recommend", "--kernel", "4.19", simulated},
			want: []string{"--kernel 4.19", "use one of"}},
		{name: "recommend demand unknown", args: []string{"recommend", "--demand", "batch", simulated},
			want: []string{"--demand", `"batch"`, "closed, scheduled, open, timed"}},
		{name: "recommend traces and a live group", args: []string{"recommend", "--cgroup", "/", "--duration", "1s", simulated},
			want: []string{"traces or a live group (--cgroup, --pid, --container or --pod), not both"}},
		{name: "recommend live group without duration", args: []string{"recommend", "--cgroup", "/"},
			want: []string{"a live group is recorded for --duration", "such as --duration 2m"}},
		{name: "recommend live group named twice", args: []string{"recommend", "--cgroup", "/", "--pid", "1", "--duration", "1s"},
			want: []string{"name the group one way only: --cgroup, --pid, --container or --pod"}},
		{name: "recommend pid not a process", args: []string{"recommend", "--pid", "0", "--duration", "1s"},
			want: []string{"--pid 0 is not a process ID"}},
		{name: "recommend pod without name", args: []string{"recommend", "--pod", "shop/", "--duration", "1s"},
			want: []string{`--pod "shop/": give the pod as NAMESPACE/NAME`}},
		{name: "recommend container no runtime", args: []string{"recommend", "--docker-host", "none", "--cri-endpoint", "none", "--container", "web", "--duration", "1s"}, host: true,
			want: []string{"--container web: no container runtime answered", "at least 4 characters"}},
		{name: "recommend duration without a live group", args: []string{"recommend", "--duration", "1s", simulated},
			want: []string{"--duration is how long to record a live group", "add --cgroup PATH (or --pid, --container, --pod)"}},
		{name: "recommend out without a live group", args: []string{"recommend", "--out", filepath.Join(outDir, "x.json"), simulated},
			want: []string{"--out saves the recording of a live group"}},
		{name: "recommend out directory missing", args: []string{"recommend", "--cgroup", "/", "--duration", "1s", "--out", "/no/such/dir/x.json"},
			want: []string{"cannot write the recording to /no/such/dir/x.json"}},
		{name: "recommend live group missing", args: []string{"recommend", "--cgroup", "/cfsprobe-no-such-group", "--duration", "1s"}, host: true,
			want: []string{"/cfsprobe-no-such-group"}},
		{name: "recommend verify a live group", args: []string{"recommend", "--verify", "--cgroup", "/", "--duration", "1s"},
			want: []string{"--verify reruns a trace's workload", "cfsprobe run --out FILE -- COMMAND"}},
		{name: "recommend parent without verify", args: []string{"recommend", "--parent", "x", rerunnable},
			want: []string{"--parent is where --verify reruns", "add --verify"}},
		{name: "recommend verify parent empty", args: []string{"recommend", "--verify", "--parent=", rerunnable},
			want: []string{"--parent is empty"}},
		{name: "recommend verify a simulated trace", args: []string{"recommend", "--verify", simulated},
			want: []string{"--verify cannot rerun simulated", "written by the simulator", "cfsprobe run"}},
		{name: "recommend verify traces one of which is simulated", args: []string{"recommend", "--verify", "--parent", testParent, rerunnable, simulated},
			want: []string{"cannot rerun 1 of the 2 traces, so none was run", "simulated (the trace"}},
		{name: "recommend verify not root", args: []string{"recommend", "--verify", "--parent", testParent, rerunnable}, host: true, nobody: true,
			want: []string{"--verify rerunnable", "not writable by uid 65534", "run cfsprobe as root"}},
		{name: "recommend root missing", args: []string{"recommend", "--cgroup-root", "/no/such/dir", "--cgroup", "/", "--duration", "1s"},
			want: []string{"--cgroup-root /no/such/dir does not exist"}},
		{name: "recommend prometheus not a URL", args: []string{"recommend", "--prometheus", "prometheus:9090"},
			want: []string{`URL "prometheus:9090" is not an http:// or https:// address`, "such as http://prometheus:9090"}},
		{name: "recommend prometheus unreachable", args: []string{"recommend", "--prometheus", "http://127.0.0.1:1"},
			want: []string{"no Prometheus API answered at http://127.0.0.1:1", "give the address of a Prometheus server"}},
		{name: "recommend prometheus window malformed", args: []string{"recommend", "--prometheus", "http://127.0.0.1:1", "--since", "a week"},
			want: []string{`--since "a week"`, "such as 7d"}},
		{name: "recommend prometheus and traces", args: []string{"recommend", "--prometheus", "http://127.0.0.1:1", simulated},
			want: []string{"give --prometheus, traces or a live group (--cgroup, --pid, --container or --pod), one of them"}},
		{name: "recommend prometheus verify", args: []string{"recommend", "--prometheus", "http://127.0.0.1:1", "--verify"},
			want: []string{"--verify reruns a trace's workload", "read from Prometheus"}},
		{name: "recommend prometheus selector refused", args: []string{"recommend", "--prometheus", refusing.URL, "--selector", "job=cfsprobe"},
			want: []string{`--selector "job=cfsprobe"`, "the server refused the query", `such as job="cfsprobe"`}},
		{name: "recommend prometheus without groups", args: []string{"recommend", "--prometheus", empty.URL, "--since", "2d"},
			want: []string{"has no group", "with per-period demand in the last 2d", "scrapes cfsprobe exporter"}},
		{name: "recommend since without prometheus", args: []string{"recommend", "--since", "7d", simulated},
			want: []string{"--since and --selector say what to read of --prometheus"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.host {
				needCgroups(t)
			}
			if c.limited {
				makeLimitedParent(t)
			}
			before := cgroupDirs(t)
			var r result
			if c.nobody {
				r = cfsprobeCmd(t, nobodyCmd(t, c.args...))
			} else {
				r = cfsprobe(t, c.args...)
			}
			checkUserError(t, r, c.want...)
			after := cgroupDirs(t)
			for d := range after {
				if !before[d] {
					t.Errorf("a bad input created %s", d)
				}
			}
			for _, h := range hierarchyRoots() {
				if _, err := os.Lstat(filepath.Join(h, testParent)); err == nil {
					t.Errorf("%s exists after a bad input", filepath.Join(h, testParent))
				}
			}
			if ents, _ := os.ReadDir(outDir); len(ents) > 0 {
				t.Errorf("a bad input wrote %s", filepath.Join(outDir, ents[0].Name()))
			}
		})
	}
}

// makeLimitedParent makes limitedParent in the cpu hierarchy with a quota
// of one CPU, for the test's time; it skips the test where the kernel
// does not refuse a child more than its ancestors (cgroup v2).
func makeLimitedParent(t *testing.T) {
	t.Helper()
	l, err := cgroup.Detect(hostfs.Default())
	if err != nil {
		t.Fatal(err)
	}
	if l.CPU.Version != 1 {
		t.Skip("cgroup v2 caps a child's quota at its ancestors' instead of refusing it")
	}
	dir := filepath.Join(l.CPU.Dir, limitedParent)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	setQuota(t, 1, dir, 100000, 100000)
}

// testGroupRE matches the parent groups tests make, named after their
// process: cfsprobe-e2e-PID, cfsprobe-monitor-PID, ...
var testGroupRE = regexp.MustCompile(`/cfsprobe-[a-z0-9-]*?-(\d+)(/|$)`)

// othersGroup reports whether dir is in the parent group of another test
// process: tests of other packages (and checkouts) make groups while
// these run.
func othersGroup(dir string) bool {
	m := testGroupRE.FindStringSubmatch(dir)
	return m != nil && m[1] != strconv.Itoa(os.Getpid())
}

// secondSentence finds a full stop followed by a new sentence ("e.g. 0.5"
// is not one).
var secondSentence = regexp.MustCompile(`\.\s+[A-Z]`)

// checkUserError asserts exit status 2, nothing on stdout, and one line on
// stderr, "cfsprobe: " and one sentence holding every wanted substring.
func checkUserError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit status %d, want 2", r.code)
	}
	if r.stdout != "" {
		t.Errorf("stdout is not empty:\n%s", r.stdout)
	}
	msg, ok := strings.CutSuffix(r.stderr, "\n")
	switch {
	case !ok || strings.Contains(msg, "\n"):
		t.Errorf("stderr is not one line:\n%s", r.stderr)
	case !strings.HasPrefix(msg, "cfsprobe: "):
		t.Errorf("stderr does not start with \"cfsprobe: \": %q", msg)
	case secondSentence.MatchString(msg):
		t.Errorf("the message is more than one sentence: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the message does not contain %q: %q", w, msg)
		}
	}
	if !t.Failed() {
		t.Logf("%s", msg)
	}
}

// hierarchyRoots are the roots of the hierarchies cfsprobe may create
// groups in: this machine's v1 cpu, cpuacct and cpuset mounts, and
// whatever the detected layout names (cgroup v2 in the qemu guest).
func hierarchyRoots() []string {
	roots := []string{"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpuset"}
	if l, err := cgroup.Detect(hostfs.Default()); err == nil {
		for _, h := range l.Hierarchies() {
			if !slices.Contains(roots, h.Dir) {
				roots = append(roots, h.Dir)
			}
		}
	}
	return roots
}

// cgroupDirs lists every directory below the hierarchy roots, but those
// of other test processes.
func cgroupDirs(t *testing.T) map[string]bool {
	t.Helper()
	dirs := map[string]bool{}
	for _, root := range hierarchyRoots() {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil { // a group removed while we walk, or no such root
				return nil
			}
			if d.IsDir() && !othersGroup(p) {
				dirs[p] = true
			}
			return nil
		})
	}
	return dirs
}

// nobodyCmd runs the binary as uid and gid 65534, from a copy that nobody
// can execute (the build directory is private to root).
func nobodyCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run cfsprobe as another user")
	}
	dir, err := os.MkdirTemp("", "cfsprobe-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "cfsprobe")
	copyFile(t, bin, exe, 0o755)
	cmd := exec.Command(exe, args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return cmd
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil { // umask
		t.Fatal(err)
	}
}

// labRun writes the trace at from to to as a lab run would have written
// it: without its simulated part.
func labRun(t *testing.T, from, to string) {
	t.Helper()
	tr, err := trace.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tr.Spec.Simulated = nil
	if err := tr.WriteFile(to); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, 0o644); err != nil {
		t.Fatal(err)
	}
}

// noArgs says the same each time it is asked: its hint is joined once,
// not again at every call.
func TestNoArgsSaysTheSameTwice(t *testing.T) {
	c := &cobra.Command{Use: "cpus"}
	check := noArgs("name a process with --pid")
	want := `cpus takes no arguments, but got "x": name a process with --pid (see: cpus --help)`
	for i := range 2 {
		if err := check(c, []string{"x"}); err == nil || err.Error() != want {
			t.Fatalf("call %d: %v, want %q", i+1, err, want)
		}
	}
	if err := check(c, nil); err != nil {
		t.Fatalf("no arguments: %v, want none", err)
	}
}
