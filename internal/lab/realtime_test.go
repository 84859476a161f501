package lab

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
	"golang.org/x/sys/unix"
)

// stillGroup is a group whose counters never move.
type stillGroup struct{}

func (stillGroup) Stat() (cgroup.Stat, error) { return cgroup.Stat{NrPeriods: 1}, nil }

// policyOf reads a thread's scheduling policy (0 SCHED_OTHER, 1
// SCHED_FIFO) from its stat file: the 41st field, the 39th after the
// command's closing parenthesis.
func policyOf(t *testing.T, statPath string) int {
	t.Helper()
	b, err := os.ReadFile(statPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, err := strconv.Atoi(f[38])
	if err != nil {
		t.Fatalf("%s: policy %q: %v", statPath, f[38], err)
	}
	return p
}

func processPolicies(t *testing.T) map[int]int {
	t.Helper()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, tid := range tids {
		if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err == nil {
			got[tid] = policyOf(t, "/proc/self/task/"+strconv.Itoa(tid)+"/stat")
		}
	}
	return got
}

// firstClass waits for the reader's first reading (5 s at most) and
// says where it reads from (empty: it did not read).
func firstClass(smp *sampler) string {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		smp.mu.Lock()
		class := smp.class
		smp.mu.Unlock()
		if class != "" {
			return class
		}
	}
	return ""
}

// From its first reading until it stops, the reader's process is in
// the real-time class; a process started meanwhile is not, and every
// thread is back in the fair class afterwards.
func TestReaderRealtime(t *testing.T) {
	for tid, p := range processPolicies(t) {
		if p != 0 {
			t.Fatalf("thread %d is in policy %d before the reader starts", tid, p)
		}
	}
	smp := newSampler(stillGroup{}, workload.ClockMono(), 5*time.Millisecond, cgroup.Limits{})
	go smp.loop()
	class := firstClass(smp)
	if class != trace.ReaderRealtime {
		smp.stop()
		if class == trace.ReaderFair && !testenv.Required() && os.Geteuid() != 0 {
			t.Skip("not privileged: the reader stays in the fair class")
		}
		t.Fatalf("reader class %q, want %q", class, trace.ReaderRealtime)
	}
	fifo := 0
	for _, p := range processPolicies(t) {
		if p == 1 {
			fifo++
		}
	}
	out, err := exec.Command("cat", "/proc/self/stat").Output()
	smp.stop()
	if err != nil {
		t.Fatal(err)
	}
	if fifo == 0 {
		t.Error("no thread of the process was in SCHED_FIFO while the reader ran")
	}
	s := string(out)
	if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); f[38] != "0" {
		t.Errorf("a process started while the reader ran has policy %s, want 0 (SCHED_RESET_ON_FORK)", f[38])
	}
	for tid, p := range processPolicies(t) {
		if p != 0 {
			t.Errorf("thread %d is in policy %d after the reader stopped", tid, p)
		}
	}
}

// With the CPUs a pinned workload keeps to, the reader's threads keep
// off them while it reads, in the fair class (a real-time reader that
// last ran there would preempt the workload at every reading), and every
// thread is back on all the process's CPUs afterwards.
func TestReaderApart(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if all.Count() < 2 {
		t.Skip("one CPU: nowhere else for the reader")
	}
	cpus := workload.CPUsOf(all)
	last := cpus[len(cpus)-1]
	var pinned unix.CPUSet
	pinned.Set(last)
	smp := newSampler(stillGroup{}, workload.ClockMono(), 5*time.Millisecond, cgroup.Limits{})
	smp.avoid = &pinned
	go smp.loop()
	class := firstClass(smp)
	affinities := func() map[int]unix.CPUSet {
		tids, err := threads()
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]unix.CPUSet{}
		for _, tid := range tids {
			var set unix.CPUSet
			if unix.SchedGetaffinity(tid, &set) == nil {
				got[tid] = set
			}
		}
		return got
	}
	during, policies := affinities(), processPolicies(t)
	smp.stop()
	if class != trace.ReaderApart {
		t.Errorf("reader class %q, want %q", class, trace.ReaderApart)
	}
	for tid, set := range during {
		if set.IsSet(last) || set.Count() != all.Count()-1 {
			t.Errorf("thread %d ran on %d CPUs (CPU %d among them: %v) while the reader read, want the %d but CPU %d", tid, set.Count(), last, set.IsSet(last), all.Count()-1, last)
		}
	}
	for tid, p := range policies {
		if p != 0 {
			t.Errorf("thread %d in policy %d while the reader read apart, want the fair class", tid, p)
		}
	}
	for tid, set := range affinities() {
		if set != all {
			t.Errorf("thread %d on %d CPUs after the reader stopped, want the process's %d", tid, set.Count(), all.Count())
		}
	}
}
