package suite

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// The simulator is validated on this host (issue 10, must-show 1): every
// scenario of the four built-in suites (--quick), measured on real cgroups
// and simulated on the model of this host's kernel era with its CPUs,
// agrees on the throttled ratio, the CPU used, p99 and p99.9 (Agree).
// The machine is shared with other work: a scenario whose measurement
// disagrees is measured again, three times in all, before the test
// concludes (the simulation is deterministic). About three minutes.
func TestSimulatorAgreesWithThisHost(t *testing.T) {
	if testing.Short() {
		t.Skip("about three minutes of real runs")
	}
	l := testenv.NeedCgroups(t)
	parent := fmt.Sprintf("cfsprobe-suiteagree-%d", os.Getpid())
	t.Cleanup(func() { testenv.NoLeftovers(t, l, parent) })
	release := cgroup.KernelRelease("/proc")
	era, err := sim.EraOfRelease(release)
	if err != nil {
		t.Fatalf("this host's kernel %q: %v", release, err)
	}
	env := Env{CPUs: cgroup.OnlineCPUs("/sys"), Quick: true, Sim: &SimEnv{Era: era, Seed: 1, Measure: true}}
	base := lab.Config{Parent: parent, Stdout: os.Stderr, Stderr: os.Stderr}
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Errorf("%d built-in suites, want the four of the issue", len(all))
	}
	for _, s := range all {
		t.Run(s.Suite, func(t *testing.T) {
			steps, err := s.Steps(env, base)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range steps {
				var figs []Figure
				for attempt := 1; attempt <= 3; attempt++ {
					res, err := s.Run(context.Background(), []*Step{st}, Options{})
					if err != nil {
						t.Fatal(err)
					}
					figs = Agree(res.Traces[0], res.Simulated[0])
					t.Logf("%s (attempt %d, kernel era %s, %d CPUs): %s", st.Name(), attempt, era, env.CPUs, figureLine(figs))
					if Agrees(figs) {
						break
					}
				}
				if !Agrees(figs) {
					t.Errorf("%s: the simulation disagrees with three measurements; the last: %s", st.Name(), figureLine(figs))
				}
			}
		})
	}
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
