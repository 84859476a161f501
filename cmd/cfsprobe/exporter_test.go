package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
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
	webConfigs, err := filepath.Abs("../../internal/exporter/testdata/webconfig")
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
		{"web listen address in use", []string{"exporter", "--cgroup-root", fixture, "--web.listen-address", "127.0.0.1:0", "--web.listen-address", busy.Addr().String()}, []string{"--web.listen-address " + busy.Addr().String(), "free host:port"}},
		{"web listen address empty", []string{"exporter", "--cgroup-root", fixture, "--web.listen-address="}, []string{"--web.listen-address is empty"}},
		{"web config unknown field", []string{"exporter", "--cgroup-root", fixture, "--web.config.file", webConfigs + "/unknown-field.yml"}, []string{"--web.config.file " + webConfigs + "/unknown-field.yml: ", "field basic_auth_user not found", "fix the file", "web-configuration.md"}},
		{"web config password not bcrypt", []string{"exporter", "--web.config.file", webConfigs + "/password-not-bcrypt.yml"}, []string{"password-not-bcrypt.yml: a password of basic_auth_users is not a bcrypt hash"}},
		{"web config cert missing", []string{"exporter", "--web.config.file", webConfigs + "/cert-missing.yml"}, []string{"cert-missing.yml: ", "missing.crt", "no such file"}},
		{"web config missing", []string{"exporter", "--web.config.file", "/nonexistent/web.yml"}, []string{"--web.config.file /nonexistent/web.yml: open /nonexistent/web.yml: no such file"}},
		{"telemetry path relative", []string{"exporter", "--web.telemetry-path", "metrics"}, []string{`--web.telemetry-path "metrics" does not start with /`, "/metrics"}},
		{"systemd socket without sockets", []string{"exporter", "--cgroup-root", fixture, "--web.systemd-socket"}, []string{"--web.systemd-socket: systemd passed no listening socket", ".socket unit"}},
		{"systemd socket and address", []string{"exporter", "--web.systemd-socket", "--listen", ":9750"}, []string{"give it or --web.listen-address, not both"}},
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
	// The Go runtime's GC target: exporter.GCPercent, unless GOGC is set.
	noGOGC := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOGC=") })
	for _, tc := range []struct {
		sig  syscall.Signal
		env  []string
		gogc string
	}{
		{syscall.SIGTERM, noGOGC, fmt.Sprintf("go_gc_gogc_percent %d\n", exporter.GCPercent)},
		{syscall.SIGINT, append(slices.Clone(noGOGC), "GOGC=100"), "go_gc_gogc_percent 100\n"},
	} {
		sig := tc.sig
		t.Run(sig.String(), func(t *testing.T) {
			addr := testenv.FreeAddr(t)
			cmd := exec.Command(bin, "exporter", "--web.listen-address", addr, "--cgroup-root", fixture, "--scan-interval", "200ms")
			cmd.Env = tc.env
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := tied.Start(cmd); err != nil {
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
			if !strings.Contains(body, tc.gogc) {
				t.Errorf("/metrics lacks %q", strings.TrimSpace(tc.gogc))
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

// With --web.config.file (TLS and basic auth) the exporter serves HTTPS:
// the user gets the metrics, a client without credentials 401, and
// plain HTTP no metrics. --listen, the older name, still listens.
func TestExporterServesTLS(t *testing.T) {
	fixture, err := filepath.Abs("../../internal/monitor/testdata/k8s-systemd-v1-containerd")
	if err != nil {
		t.Fatal(err)
	}
	w := testenv.NewWebTLS(t)
	addr := testenv.FreeAddr(t)
	d := testenv.StartDaemon(t, "cfsprobe exporter", exec.Command(bin, "exporter", "--listen", addr, "--web.config.file", w.ConfigFile,
		"--web.telemetry-path", "/cfsprobe", "--cgroup-root", fixture, "--scan-interval", "200ms"))
	base := "https://" + addr
	d.WaitReadyWith(t, w.Client(true), base+"/readyz", 10*time.Second)
	get := func(c *http.Client, url string) (int, string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	if code, body, err := get(w.Client(true), base+"/cfsprobe"); err != nil || code != 200 || !strings.Contains(body, "cfsprobe_cpu_throttled_periods_total{") {
		t.Errorf("with the password: %d %v\n%.500s", code, err, body)
	}
	if code, body, err := get(w.Client(false), base+"/cfsprobe"); err != nil || code != 401 || strings.Contains(body, "cfsprobe_") {
		t.Errorf("without credentials: %d %v, want 401", code, err)
	}
	if code, body, err := get(http.DefaultClient, "http://"+addr+"/cfsprobe"); err == nil && (code == 200 || strings.Contains(body, "cfsprobe_")) {
		t.Errorf("plain HTTP: %d, want a refusal", code)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"msg=serving listen=" + addr + " telemetry_path=/cfsprobe web_config_file=" + w.ConfigFile, "TLS is enabled"} {
		if !strings.Contains(d.Output(), want) {
			t.Errorf("log lacks %q:\n%s", want, d.Output())
		}
	}
}

// --web.systemd-socket serves on the socket systemd passes, as
// systemd-socket-activate passes it (the exporter is started at the
// first connection, which it then answers).
func TestExporterSystemdSocket(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		if testenv.Required() {
			t.Fatalf("%s=1 but systemd-socket-activate is not installed (apt-get install systemd)", testenv.RequireEnv)
		}
		t.Skip("systemd-socket-activate is not installed (apt-get install systemd)")
	}
	fixture, err := filepath.Abs("../../internal/monitor/testdata/k8s-systemd-v1-containerd")
	if err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeAddr(t)
	d := testenv.StartDaemon(t, "cfsprobe exporter (socket-activated)", exec.Command(activate, "--listen", addr,
		bin, "exporter", "--web.systemd-socket", "--cgroup-root", fixture, "--scan-interval", "200ms"))
	d.WaitReady(t, "http://"+addr+"/readyz", 10*time.Second)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "cfsprobe_cpu_throttled_periods_total{") {
		t.Errorf("/metrics: %d\n%.500s", resp.StatusCode, b)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Output(), "msg=serving listen="+addr) {
		t.Errorf("log lacks the socket's address %s:\n%s", addr, d.Output())
	}
}

// The systemd unit's ExecStart runs the exporter with flags it has: the
// command line, its continuation lines joined and the credentials
// directory set, parses (--help stops before anything is opened).
func TestSystemdUnitFlags(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/cfsprobe-exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	var args []string
	for _, l := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "ExecStart="); ok {
			args = strings.Fields(strings.ReplaceAll(rest, "${CREDENTIALS_DIRECTORY}", t.TempDir()))
		}
	}
	if len(args) < 2 || args[0] != "/usr/local/bin/cfsprobe" || args[1] != "exporter" {
		t.Fatalf("ExecStart %q: want /usr/local/bin/cfsprobe exporter ...", args)
	}
	for _, want := range []string{"--web.config.file=", "--web.listen-address="} {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, want) }) {
			t.Errorf("ExecStart %q lacks %s", args, want)
		}
	}
	r := cfsprobe(t, append(args[1:], "--help")...)
	if r.code != 0 {
		t.Errorf("cfsprobe %s --help: exit %d\n%s", strings.Join(args[1:], " "), r.code, r.stderr)
	}
}
