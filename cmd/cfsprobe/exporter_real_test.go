package main

// The exporter against the host's real cgroup tree (v1 here, v2 in the
// qemu guest): a throttled group made by cfsprobe run is scraped, and its
// counters agree with the kernel's cpu.stat.

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

func TestExporterRealThrottledGroup(t *testing.T) {
	l := needCgroups(t)
	run := exec.Command(bin, "run", "--parent", testParent, "--cpus", "0.2", "bursty", "--on", "50ms", "--off", "50ms", "--duration", "8s")
	if err := tied.Start(run); err != nil {
		t.Fatal(err)
	}
	runDone := make(chan error, 1)
	go func() { runDone <- run.Wait() }()
	t.Cleanup(func() {
		_ = run.Process.Signal(os.Interrupt)
		<-runDone
	})
	var groupDir string
	if !waitFor(5*time.Second, func() bool {
		m, _ := filepath.Glob(filepath.Join(l.CPU.Dir, testParent, "run-*"))
		if len(m) == 1 {
			groupDir = m[0]
		}
		return groupDir != ""
	}) {
		t.Fatal("the run's group did not appear")
	}
	exp, addr := testenv.StartExporter(t, bin, "--cgroup-root", "/sys/fs/cgroup")
	rel := "/" + testParent + "/" + filepath.Base(groupDir)
	series := `cfsprobe_cpu_throttled_periods_total{cgroup="` + rel + `"}`
	time.Sleep(3 * time.Second)
	var got float64
	var scraped time.Time // when the last scrape began
	if !waitFor(5*time.Second, func() bool {
		scraped = time.Now()
		m, err := scrapeSeries(addr, rel)
		got = m[series]
		return err == nil && got > 0
	}) {
		m, err := scrapeSeries(addr, testParent)
		t.Logf("/metrics series about %s: %v (%v)", testParent, m, err)
		t.Fatalf("no throttled periods for %s in /metrics; exporter said:\n%s", rel, exp.Output())
	}
	stat, err := cgroup.ReadStat(groupDir, groupDir, l.CPU.Version)
	if l.CPU.Version == 1 {
		stat, err = cgroup.ReadStat(groupDir, filepath.Join(l.CPUAcct.Dir, testParent, filepath.Base(groupDir)), 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The workload is throttled in every period: the kernel may count
	// one more for each period that ended between the exporter's reading,
	// during the scrape, and this one, and 3 more besides, the margin
	// this host needed (the qemu guest, whose scrape and reading took
	// about 0.4 s once, counted 4 more).
	since := time.Since(scraped)
	missable := int64(since/(100*time.Millisecond)) + 3
	t.Logf("exporter: %s = %.0f; cpu.stat nr_throttled %d (cgroup v%d), read %v after the scrape began", series, got, stat.NrThrottled, l.CPU.Version, since.Round(time.Millisecond))
	if int64(got) > stat.NrThrottled || int64(got) < stat.NrThrottled-missable {
		t.Errorf("exporter says %.0f throttled periods, cpu.stat read %v after the scrape began says %d: want at most %d more", got, since.Round(time.Millisecond), stat.NrThrottled, missable)
	}
}

// scrapeSeries gets the /metrics of the exporter at addr and returns its
// series (name{labels}) whose lines hold sub, with their values.
func scrapeSeries(addr, sub string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.Contains(line, sub) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			return nil, fmt.Errorf("series %q: not name{labels} value", line)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}
