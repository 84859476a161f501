package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// A simulated run (cfsprobe simulate) is marked as such wherever a
// measured run names its host: the summary, the text, markdown and HTML
// reports, and its row says "(simulated)", also in the terminal's table of
// runs side by side. It does not name the machine
// that simulated it.
func TestSimulatedHost(t *testing.T) {
	runs := loadFiles(t, filepath.Join(runsDir, "parallel-cpus1.json"))
	tr := runs[0].Trace
	tr.Spec.Simulated = &trace.Simulated{Era: "4.18", HostCPUs: 64}
	tr.Host = trace.Host{Kernel: "4.18", CPUs: 64, SliceUs: 5000}
	const want = "simulated, kernel era 4.18, 64 CPUs"
	var sum bytes.Buffer
	Summary(&sum, tr)
	if !strings.Contains(sum.String(), "host       "+want+", slice 5ms\n") {
		t.Errorf("summary:\n%s", sum.String())
	}
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Write(&b, f, "", runs); err != nil {
			t.Fatal(err)
		}
		if f != FormatJSON && !strings.Contains(b.String(), want) {
			t.Errorf("%s report does not say %q", f, want)
		}
		if strings.Contains(b.String(), "Linux 4.18") {
			t.Errorf("%s report names the era as the host's Linux", f)
		}
	}
	measured := loadFiles(t, filepath.Join(runsDir, "parallel-cpus1.json"))
	both := append(measured, runs...)
	var b bytes.Buffer
	if err := Write(&b, FormatMarkdown, "", both); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), "Linux "+measured[0].Trace.Host.Kernel) {
		t.Errorf("a measured and a simulated run: both hosts are not named:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "| parallel-cpus1 (simulated) |") || !strings.Contains(b.String(), "| parallel-cpus1 |") {
		t.Errorf("a measured and a simulated run: the rows do not tell them apart:\n%s", b.String())
	}
	// The terminal's table of runs side by side (cfsprobe report a.json b.json).
	b.Reset()
	if err := Write(&b, FormatText, "", both); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(rows) != 3 || strings.Contains(rows[1], "(simulated)") || !strings.Contains(rows[2], "parallel-cpus1 (simulated)") {
		t.Errorf("text table: the measured run's row and the simulated run's should tell them apart:\n%s", b.String())
	}
}

// A run whose reader could not be made real-time says so, and what it
// may have done; one in the real-time class says nothing of it.
func TestSummaryReaderClass(t *testing.T) {
	for class, want := range map[string]bool{trace.ReaderFair: true, trace.ReaderRealtime: false, "": false} {
		tr := loadFiles(t, filepath.Join(runsDir, "parallel-cpus1.json"))[0].Trace
		tr.ReaderClass = class
		var sum bytes.Buffer
		Summary(&sum, tr)
		if got := strings.Contains(sum.String(), "reader     in the fair class, not SCHED_FIFO"); got != want {
			t.Errorf("class %q: the summary says the reader's class: %v, want %v\n%s", class, got, want, sum.String())
		}
	}
}
