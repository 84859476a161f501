package main

// The exporter against the host's real cgroup tree (v1 here, v2 in the
// qemu guest): a throttled group made by cfsprobe run is scraped, and its
// counters agree with the kernel's cpu.stat.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
)

func TestExporterRealThrottledGroup(t *testing.T) {
	l := needCgroups(t)
	run := exec.Command(bin, "run", "--parent", testParent, "--cpus", "0.2", "bursty", "--on", "50ms", "--off", "50ms", "--duration", "8s")
	if err := run.Start(); err != nil {
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	exp := exec.Command(bin, "exporter", "--listen", addr, "--cgroup-root", "/sys/fs/cgroup", "--scan-interval", "500ms")
	var expErr strings.Builder
	exp.Stderr = &expErr
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Process.Kill(); _ = exp.Wait() })

	rel := "/" + testParent + "/" + filepath.Base(groupDir)
	series := `cfsprobe_cpu_throttled_periods_total{cgroup="` + rel + `"}`
	scrape := func() (float64, bool) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				return f, err == nil
			}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return 0, false
	}
	time.Sleep(3 * time.Second)
	var got float64
	if !waitFor(5*time.Second, func() bool {
		var ok bool
		got, ok = scrape()
		return ok && got > 0
	}) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var mine []string
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, testParent) || strings.HasPrefix(line, "cfsprobe_groups") || strings.HasPrefix(line, "cfsprobe_host_info") {
					mine = append(mine, line)
				}
			}
			t.Logf("/metrics lines about %s:\n%s", testParent, strings.Join(mine, "\n"))
		}
		t.Fatalf("no throttled periods for %s in /metrics; exporter said:\n%s", rel, expErr.String())
	}
	stat, err := cgroup.ReadStat(groupDir, groupDir, l.CPU.Version)
	if l.CPU.Version == 1 {
		stat, err = cgroup.ReadStat(groupDir, filepath.Join(l.CPUAcct.Dir, testParent, filepath.Base(groupDir)), 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exporter: %s = %.0f; cpu.stat nr_throttled %d (cgroup v%d)", series, got, stat.NrThrottled, l.CPU.Version)
	if int64(got) > stat.NrThrottled || int64(got) < stat.NrThrottled-3 {
		t.Errorf("exporter says %.0f throttled periods, cpu.stat read just after says %d", got, stat.NrThrottled)
	}
}
