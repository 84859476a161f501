package suite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// The simulator is validated on this host (issue 10, must-show 1): every
// scenario of the four built-in suites (--quick), measured on real cgroups
// and simulated on the model of this host's kernel era with its CPUs,
// agrees on the throttled ratio, the CPU used, p99 and p99.9 (Agree).
//
// It validates the model against the kernel, not against the other work
// of a shared machine: a measurement during which other processes kept
// more than maxOthers CPUs busy (the host's busy time in /proc/stat less
// the group's) is disturbed, and measured again. A scenario is judged on
// up to two undisturbed measurements (the simulation is deterministic):
// it agrees when one of them does. One that got no undisturbed
// measurement in six is not judged; when more than half of them are not,
// the machine is too busy for the test, which then skips (fails under
// CFSPROBE_REQUIRE_CGROUPS=1). About four minutes on a quiet machine.
func TestSimulatorAgreesWithThisHost(t *testing.T) {
	if testing.Short() {
		t.Skip("about four minutes of real runs")
	}
	l := testenv.NeedCgroups(t)
	parent := fmt.Sprintf("cfsprobe-suiteagree-%d", os.Getpid())
	t.Cleanup(func() { testenv.NoLeftovers(t, l, parent) })
	release := cgroup.KernelRelease(hostfs.Default())
	era, err := sim.EraOfRelease(release)
	if err != nil {
		t.Fatalf("this host's kernel %q: %v", release, err)
	}
	env := Env{CPUs: cgroup.OnlineCPUs(hostfs.Default()), Quick: true, Sim: &SimEnv{Era: era, Seed: 1, Measure: true}}
	base := lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr}
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Errorf("%d built-in suites, want the four of the issue", len(all))
	}
	judged, unjudged := 0, 0
	for _, s := range all {
		t.Run(s.Suite, func(t *testing.T) {
			steps, err := s.Steps(env, base)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				name := s.Suite + "/" + st.Name()
				simulated, err := st.Sim.Run()
				if err != nil {
					t.Fatal(err)
				}
				var last []Figure
				clean := 0
				for attempt := 1; attempt <= 6 && clean < 2; attempt++ {
					measured, others, err := measure(st)
					if err != nil {
						t.Fatal(err)
					}
					figs := Agree(measured, simulated)
					if others > maxOthers {
						t.Logf("%s, attempt %d: disturbed (other work kept %.2f CPUs busy): %s", name, attempt, others, figureLine(figs))
						continue
					}
					clean++
					last = figs
					t.Logf("%s, attempt %d (others %.2f CPUs; kernel era %s, %d CPUs): %s", name, attempt, others, era, env.CPUs, figureLine(figs))
					if Agrees(figs) {
						break
					}
				}
				switch {
				case last == nil:
					unjudged++
					t.Logf("%s: not judged: every measurement was disturbed", name)
				case !Agrees(last):
					judged++
					t.Errorf("%s: the simulation disagrees with %d undisturbed measurements; the last: %s", name, clean, figureLine(last))
				default:
					judged++
				}
			}
		})
	}
	t.Logf("%d scenarios judged, %d not (disturbed)", judged, unjudged)
	if unjudged > judged {
		msg := fmt.Sprintf("the machine was too busy: %d of %d scenarios got no undisturbed measurement", unjudged, judged+unjudged)
		if testenv.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// maxOthers is how many CPUs other work may keep busy, on average, while
// a scenario is measured (cfsprobe's own sampler takes a few hundredths).
const maxOthers = 0.25

// measure runs the step's measurement and says how many CPUs, on
// average, the rest of the host kept busy meanwhile.
func measure(st *Step) (*trace.Trace, float64, error) {
	b0, err := hostBusy()
	if err != nil {
		return nil, 0, err
	}
	t0 := time.Now()
	tr, err := st.Plan.Run(context.Background())
	if err != nil {
		return nil, 0, err
	}
	wall := time.Since(t0)
	b1, err := hostBusy()
	if err != nil {
		return nil, 0, err
	}
	others := float64(b1-b0-time.Duration(tr.Summary.UsageNs)) / float64(wall)
	return tr, max(others, 0), nil
}

// hostBusy is the time the host's CPUs have spent on anything but idling
// since boot: the cpu line of /proc/stat, in USER_HZ (100 a second).
func hostBusy() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat is empty")
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: %q is not the cpu line", sc.Text())
	}
	var busy int64
	for i, f := range fields[1:9] { // user nice system idle iowait irq softirq steal
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
		}
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond, nil
}

func figureLine(figs []Figure) string {
	var parts []string
	for _, f := range figs {
		mark := ""
		if !f.OK {
			mark = " (outside)"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", f.Name, f, mark))
	}
	return strings.Join(parts, ", ")
}
