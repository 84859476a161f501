package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// Bad flags of cfsprobe exporter: one sentence naming the value and the
// fix, exit status 2, and no server.
func TestExporterErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	fixture, err := filepath.Abs("../../internal/monitor/testdata/k8s-systemd-v2-containerd")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"argument", []string{"exporter", "extra"}, []string{`"extra"`, "no arguments"}},
		{"root missing", []string{"exporter", "--cgroup-root", "/nonexistent/cgroup"}, []string{"/nonexistent/cgroup", "does not exist", "/sys/fs/cgroup"}},
		{"root not cgroups", []string{"exporter", "--cgroup-root", t.TempDir()}, []string{"--cgroup-root", "cgroup.controllers"}},
		{"scan interval", []string{"exporter", "--cgroup-root", fixture, "--scan-interval", "1ms"}, []string{"--scan-interval 1ms", "100ms or more"}},
		{"scan interval malformed", []string{"exporter", "--scan-interval", "often"}, []string{`"often"`, "--scan-interval", "cfsprobe exporter --help"}},
		{"sampler groups", []string{"exporter", "--cgroup-root", fixture, "--sampler-max-groups", "-1"}, []string{"--sampler-max-groups -1", "0 for no sampler"}},
		{"listen in use", []string{"exporter", "--cgroup-root", fixture, "--listen", busy.Addr().String()}, []string{"--listen " + busy.Addr().String(), "free host:port"}},
		{"listen malformed", []string{"exporter", "--cgroup-root", fixture, "--listen", "nohost"}, []string{"--listen nohost", "host:port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cfsprobe(t, tc.args...)
			if r.code != 2 || r.stdout != "" {
				t.Errorf("exit %d, stdout %q; want 2 and nothing", r.code, r.stdout)
			}
			msg := strings.TrimSpace(r.stderr)
			if strings.Count(msg, "\n") > 0 {
				t.Errorf("message is more than one line:\n%s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

// cfsprobe exporter on a fixture tree serves /metrics, /healthz and
// /readyz, logs key=value lines to stderr, and stops cleanly (status 0)
// on SIGTERM and on SIGINT.
func TestExporterServes(t *testing.T) {
	fixture, err := filepath.Abs("../../internal/monitor/testdata/k8s-systemd-v1-containerd")
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			cmd := exec.Command(bin, "exporter", "--listen", addr, "--cgroup-root", fixture, "--scan-interval", "200ms")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					<-done
				}
			})
			get := func(path string) (int, string) {
				resp, err := http.Get("http://" + addr + path)
				if err != nil {
					return 0, err.Error()
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if code, _ := get("/readyz"); code == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not ready after 10s; stderr:\n%s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if code, _ := get("/healthz"); code != 200 {
				t.Errorf("/healthz: %d", code)
			}
			code, body := get("/metrics")
			if code != 200 || !strings.Contains(body, `cfsprobe_cpu_throttled_periods_total{cgroup="/kubepods.slice/`) ||
				!strings.Contains(body, "cfsprobe_host_info{") || !strings.Contains(body, "process_cpu_seconds_total") {
				t.Errorf("/metrics: %d\n%.2000s", code, body)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("exit after %v: %v; stderr:\n%s", sig, err, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10s after %v", sig)
			}
			logs := stderr.String()
			for _, want := range []string{"level=INFO msg=serving listen=" + addr, "cgroup_mode=v1", "limited=", "msg=stopped signal=" + sig.String()} {
				if !strings.Contains(logs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}
