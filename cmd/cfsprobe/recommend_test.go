package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/recommend"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// handMadeGroup makes the group name by hand in every hierarchy with cpu
// or cpuacct (mkdir, as cgcreate -g cpu,cpuacct:/name does) and removes
// it when the test ends, after busyLoop's cleanup, which kills the loop.
func handMadeGroup(t *testing.T, l *cgroup.Layout, name string) []string {
	t.Helper()
	var dirs []string
	for _, h := range []*cgroup.Hierarchy{l.CPU, l.CPUAcct} {
		if h != nil && (len(dirs) == 0 || dirs[0] != filepath.Join(h.Dir, name)) {
			dirs = append(dirs, filepath.Join(h.Dir, name))
		}
	}
	t.Cleanup(func() {
		for _, d := range dirs {
			rmCgroup(t, d)
		}
		testenv.NoLeftovers(t, l, name)
	})
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("create cgroup: %v", err)
		}
	}
	return dirs
}

// fixtureTrace is a trace of internal/recommend's fixtures.
func fixtureTrace(name string) string {
	return filepath.Join("..", "..", "internal", "recommend", "testdata", name+".json")
}

// cfsprobe recommend on saved traces: each is a group named after its
// file (or NAME=FILE), in every format.
func TestRecommendTraces(t *testing.T) {
	burst, threads := fixtureTrace("burst-no-burst"), fixtureTrace("threads-vs-quota-2x")
	r := cfsprobe(t, "recommend", "--json", burst, "capped="+threads)
	if r.code != 0 {
		t.Fatalf("recommend --json: exit %d\n%s", r.code, r.stderr)
	}
	var doc recommend.Document
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema != recommend.Schema || len(doc.Groups) != 2 || doc.Groups[0].Name != "burst-no-burst" || doc.Groups[1].Name != "capped" {
		t.Fatalf("document %s with groups %v", doc.Schema, doc.Groups)
	}
	if k := doc.Groups[0].Recommended.Kind; k != recommend.KindBurst {
		t.Errorf("burst-no-burst: %s, want a burst", k)
	}
	if k := doc.Groups[1].Recommended.Kind; k != recommend.KindThreads {
		t.Errorf("threads-vs-quota-2x: %s, want a thread cap", k)
	}
	r = cfsprobe(t, "recommend", "--format", "k8s", threads)
	if r.code != 0 || !strings.Contains(r.stdout, "cpu: 1100m") || !strings.Contains(r.stdout, "name: GOMAXPROCS") {
		t.Errorf("--format k8s: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// One thread's CPU and 10 % of headroom by default; the CPU alone
	// without.
	r = cfsprobe(t, "recommend", "--format", "k8s", "--headroom", "0", threads)
	if r.code != 0 || !strings.Contains(r.stdout, "cpu: 1000m") {
		t.Errorf("--format k8s --headroom 0: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cfsprobe(t, "recommend", "--target", "stall:100ms", burst)
	if r.code != 0 || !strings.Contains(r.stdout, "RECOMMENDED") || !strings.Contains(r.stdout, "p99 stall ≤ 100ms") || !strings.Contains(r.stdout, "why:") {
		t.Errorf("table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = cfsprobe(t, "recommend", "--format", "markdown", "--kernel", "5.4", burst)
	if r.code != 0 || !strings.Contains(r.stdout, "| RECOMMENDED |") || !strings.Contains(r.stdout, "era 5.4 has no CPU burst") {
		t.Errorf("markdown on era 5.4: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// cfsprobe recommend --cgroup records a live group first: a shell loop
// (one CPU-bound thread) in a hand-made group limited to 0.2 CPUs. Its
// throttled periods are lower bounds of its demand: the advice does not
// shrink toward the 0.2 CPU it was recorded under. (It wants a whole
// CPU; the replay reads less, from the CPUs the loop kept busy between
// its stalls: docs/recommend.md, "Censoring".)
func TestRecommendLiveGroupRealCgroups(t *testing.T) {
	l := needCgroups(t)
	name := fmt.Sprintf("cfsprobe-recommend-%d", os.Getpid())
	dirs := handMadeGroup(t, l, name)
	setQuota(t, l.CPU.Version, dirs[0], 20000, 100000)
	busy := busyLoop(t, dirs...)

	out := filepath.Join(t.TempDir(), "live.json")
	r := cfsprobe(t, "recommend", "--cgroup", "/"+name, "--duration", "2s", "--out", out, "--json")
	if r.code != 0 {
		t.Fatalf("recommend --cgroup: exit %d\n%s", r.code, r.stderr)
	}
	var doc recommend.Document
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Groups) != 1 {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	g := doc.Groups[0]
	rec := g.Recommended
	t.Logf("measured %+v; recommended %s %s: %s", g.Current.Measured, rec.Kind, rec.Setting, rec.Reason)
	if g.Name != "/"+name || g.Workload != "recorded" || g.Current.Measured == nil || g.Current.Measured.ThrottledRatio < 0.5 {
		t.Errorf("group %s (%s), measured %+v: want the recording of /%s, throttled most periods", g.Name, g.Workload, g.Current.Measured, name)
	}
	// The loop wants a whole CPU: recorded under 0.2 CPU, it is busy
	// all along in every throttled period (docs/simulate.md), and the
	// advice is the CPU it would use without the limit, not one shrunk
	// toward the limit it was recorded under.
	if !rec.Meets || !rec.Setting.Limits.Unlimited() && rec.Setting.Limits.CPUs() < 0.85 {
		t.Errorf("recommended %s (meets %v) for a CPU-bound loop recorded under 0.2 CPU: want about 1 CPU", rec.Setting, rec.Meets)
	}
	if g.Model.Demand != "timed" {
		t.Errorf("demand %s (%s): a group throttled to the end of its recording ran all along (timed)", g.Model.Demand, g.Model.DemandFrom)
	}
	if _, err := trace.ReadFile(out); err != nil {
		t.Errorf("--out: %v", err)
	}

	// The group named by a process in it, as cfsprobe record names it.
	r = cfsprobe(t, "recommend", "--pid", strconv.Itoa(busy.Process.Pid), "--duration", "1s", "--json")
	doc = recommend.Document{}
	if err := json.Unmarshal([]byte(r.stdout), &doc); r.code != 0 || err != nil || len(doc.Groups) != 1 {
		t.Fatalf("recommend --pid: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if g := doc.Groups[0]; g.Name != "/"+name || g.Workload != "recorded" {
		t.Errorf("recommend --pid %d: group %s (%s), want the recording of /%s", busy.Process.Pid, g.Name, g.Workload, name)
	}
}
