package testenv

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// Daemon is a long-running program a test started with StartDaemon: it is
// stopped by its PID when the test ends, also when the test fails.
type Daemon struct {
	name    string
	cmd     *exec.Cmd
	out     syncBuffer
	done    chan struct{}
	err     error // Wait's, once done is closed
	stopped bool  // by Stop
}

// syncBuffer is a process's output, written by exec's copying goroutine
// and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StopTimeout is how long a daemon has to exit after SIGTERM before Stop
// kills it.
const StopTimeout = 15 * time.Second

// StartDaemon starts cmd, collecting its standard output and error, and
// registers its Stop with t.Cleanup; the test fails if the daemon exited
// before, or does not exit cleanly then. Its output is logged when the
// test has failed.
func StartDaemon(t testing.TB, name string, cmd *exec.Cmd) *Daemon {
	t.Helper()
	d := &Daemon{name: name, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &d.out, &d.out
	if err := tied.Start(cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		if !d.stopped {
			if err := d.Stop(); err != nil {
				t.Errorf("stop %s (pid %d): %v", name, cmd.Process.Pid, err)
			}
		}
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, d.Output())
		}
	})
	return d
}

// Output is what the daemon has written so far to its standard output and
// error; all of it once Stop has returned.
func (d *Daemon) Output() string { return d.out.String() }

// Stop ends the daemon by its PID (StopProcess, with StopTimeout). It
// reports a daemon that had exited already, did not exit on SIGTERM, or
// exited with an error.
func (d *Daemon) Stop() error {
	d.stopped = true
	select {
	case <-d.done:
		return fmt.Errorf("it had exited already: %v", d.err)
	default:
	}
	if err := StopProcess(d.cmd.Process, d.done, StopTimeout); err != nil {
		return err
	}
	return d.err
}

// StopProcess ends a process this program started, by its PID: SIGTERM,
// then SIGKILL if exited (closed once it has been reaped) is not closed
// within grace. It returns once the process has exited, with an error
// when it had to be killed or did not die.
func StopProcess(p *os.Process, exited <-chan struct{}, grace time.Duration) error {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.Kill()
	select {
	case <-exited:
		return fmt.Errorf("pid %d did not exit within %v of SIGTERM: killed", p.Pid, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d did not exit after SIGKILL", p.Pid)
	}
}

// Terminate is StopProcess for a started command nothing waits for yet:
// it reaps it.
func Terminate(cmd *exec.Cmd, grace time.Duration) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return StopProcess(cmd.Process, exited, grace)
}

// WaitReady polls url until it answers 200 OK, failing the test after
// timeout or when the daemon exits.
func (d *Daemon) WaitReady(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	d.WaitReadyWith(t, http.DefaultClient, url, timeout)
}

// WaitReadyWith is WaitReady asking with client (HTTPS, credentials).
func (d *Daemon) WaitReadyWith(t testing.TB, client *http.Client, url string, timeout time.Duration) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-d.done:
			t.Fatalf("%s exited: %v\n%s", d.name, d.err, d.Output())
		default:
		}
		resp, err := client.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = resp.Status
	}
	t.Fatalf("%s: %s not ready after %v (last: %s)\n%s", d.name, url, timeout, last, d.Output())
}

// StartExporter runs `bin exporter` on a free loopback port, walking the
// cgroup tree every 500 ms, with extra flags (--cgroup-root, --docker-host,
// ...), and returns it and its address once /readyz answers.
func StartExporter(t testing.TB, bin string, flags ...string) (*Daemon, string) {
	t.Helper()
	return startExporter(t, bin, "http", http.DefaultClient, flags)
}

// StartExporterTLS is StartExporter serving HTTPS with basic auth as w's
// web configuration says (--web.config.file).
func StartExporterTLS(t testing.TB, bin string, w WebTLS, flags ...string) (*Daemon, string) {
	t.Helper()
	return startExporter(t, bin, "https", w.Client(true), append([]string{"--web.config.file", w.ConfigFile}, flags...))
}

func startExporter(t testing.TB, bin, scheme string, client *http.Client, flags []string) (*Daemon, string) {
	t.Helper()
	addr := FreeAddr(t)
	args := append([]string{"exporter", "--web.listen-address", addr, "--scan-interval", "500ms"}, flags...)
	d := StartDaemon(t, "cfsprobe exporter", exec.Command(bin, args...))
	d.WaitReadyWith(t, client, scheme+"://"+addr+"/readyz", 30*time.Second)
	return d, addr
}
