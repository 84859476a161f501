package exporter

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// A web configuration the toolkit would refuse is refused before serving,
// in one line that names the file and says what is wrong; the fixtures
// (testdata/webconfig) are named after their case.
func TestCheckWebConfig(t *testing.T) {
	dir := filepath.Join("testdata", "webconfig")
	for _, tc := range []struct {
		file string
		want []string // in the error; none: valid
	}{
		{"unknown-field.yml", []string{"field basic_auth_user not found"}},
		{"password-not-bcrypt.yml", []string{"a password of basic_auth_users is not a bcrypt hash"}},
		{"cert-missing.yml", []string{"missing.crt", "no such file"}},
		{"key-not-given.yml", []string{"missing one of key or key_file"}},
		{"tls-version-unknown.yml", []string{"unknown TLS version: TLS99"}},
		{"not-yaml.yml", []string{"yaml:"}},
		{"no-such-file.yml", []string{"no such file or directory"}},
		{"basic-auth-only.yml", nil},
	} {
		t.Run(strings.TrimSuffix(tc.file, ".yml"), func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			err := CheckWebConfig(path)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid file refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.HasPrefix(msg, path+": ") || strings.Contains(msg, "\n") {
				t.Errorf("%q: want one line starting with the file's path", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
		})
	}
	if err := CheckWebConfig(""); err != nil {
		t.Errorf("no file: %v", err)
	}
	if err := CheckWebConfig(testenv.NewWebTLS(t).ConfigFile); err != nil {
		t.Errorf("testenv's TLS and basic auth: %v", err)
	}
}

func TestCheckTelemetryPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/metrics": true, "/cfsprobe/metrics": true,
		"metrics": false, "/": false, "/healthz": false, "/readyz": false, "/a b": false, "/{x}": false,
	} {
		if err := CheckTelemetryPath(p); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", p, err, ok)
		}
	}
}

// With a web configuration of TLS and basic auth the exporter serves
// HTTPS: the user gets the metrics at the telemetry path and the landing
// page links it; no credentials or a wrong password get 401 and no
// metrics; plain HTTP gets no metrics.
func TestServeTLSBasicAuth(t *testing.T) {
	w := testenv.NewWebTLS(t)
	r, err := monitor.OpenRoot(filepath.Join(fixtures, "container-v2"))
	if err != nil {
		t.Fatal(err)
	}
	e := newPedantic(Options{Root: r, Host: testHost(r), Version: "v0-test", TelemetryPath: "/cfs/metrics", WebConfigFile: w.ConfigFile})
	addr := serveAddr(t, e)
	get := func(c *http.Client, url string, modify func(*http.Request)) (int, string, error) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if modify != nil {
			modify(req)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	base := "https://" + addr
	code, body, err := get(w.Client(true), base+"/cfs/metrics", nil)
	if err != nil || code != 200 || !strings.Contains(body, "cfsprobe_cpu_throttled_periods_total{") {
		t.Errorf("with TLS and the user's password: %d %v\n%.500s", code, err, body)
	}
	if code, _, err := get(w.Client(true), base+"/metrics", nil); err != nil || code != 404 {
		t.Errorf("/metrics, moved by TelemetryPath: %d %v, want 404", code, err)
	}
	if code, body, err := get(w.Client(true), base+"/", nil); err != nil || code != 200 || !strings.Contains(body, `href="/cfs/metrics"`) || !strings.Contains(body, "cfsprobe exporter") {
		t.Errorf("landing page: %d %v\n%.2000s", code, err, body)
	}
	if code, _, err := get(w.Client(true), base+"/readyz", nil); err != nil || code != 200 {
		t.Errorf("/readyz: %d %v", code, err)
	}
	if code, body, err := get(w.Client(false), base+"/cfs/metrics", nil); err != nil || code != 401 || strings.Contains(body, "cfsprobe_") {
		t.Errorf("no credentials: %d %v, want 401 and no metrics\n%.500s", code, err, body)
	}
	if code, body, err := get(w.Client(false), base+"/cfs/metrics", func(r *http.Request) { r.SetBasicAuth(w.User, w.Password+"x") }); err != nil || code != 401 || strings.Contains(body, "cfsprobe_") {
		t.Errorf("wrong password: %d %v, want 401 and no metrics", code, err)
	}
	if code, body, err := get(http.DefaultClient, "http://"+addr+"/cfs/metrics", func(r *http.Request) { r.SetBasicAuth(w.User, w.Password) }); err == nil && (code == 200 || strings.Contains(body, "cfsprobe_")) {
		t.Errorf("plain HTTP: %d, want a refusal\n%.500s", code, body)
	} else {
		t.Logf("plain HTTP against TLS: status %d, error %v", code, err)
	}
	// An untrusted server certificate is refused by a client that checks.
	if _, _, err := get(&http.Client{}, base+"/cfs/metrics", nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client without the CA: %v, want a certificate error", err)
	}
}

// Run serves on every listener it is given (--web.listen-address
// repeated, or several sockets from systemd), and stops them all.
func TestRunSeveralListeners(t *testing.T) {
	r, err := monitor.OpenRoot(filepath.Join(fixtures, "container-v2"))
	if err != nil {
		t.Fatal(err)
	}
	lns, err := Listen([]string{"127.0.0.1:0", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	e := newPedantic(Options{Root: r, Host: testHost(r), Version: "v0-test"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, lns...) }()
	for _, ln := range lns {
		resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Errorf("%s: %v", ln.Addr(), err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %s", ln.Addr(), resp.Status)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	for _, ln := range lns {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			c.Close()
			t.Errorf("%s still accepts after Run returned", ln.Addr())
		}
	}
	if _, err := Listen([]string{"127.0.0.1:0", "nohost"}); err == nil || !strings.HasPrefix(err.Error(), "nohost: ") {
		t.Errorf("Listen of a malformed address: %v, want its error naming it", err)
	}
}
