package containers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// TestCRIRealContainerd asks a real containerd, with its CRI plugin and
// nothing else of Kubernetes, through the CRI source: the protocol (CRI
// v1 over gRPC on a unix socket) is the runtime's, and a runtime without
// pods lists none.
func TestCRIRealContainerd(t *testing.T) {
	bin, err := exec.LookPath("containerd")
	if err != nil || os.Geteuid() != 0 {
		if testenv.Required() {
			t.Fatalf("%s=1 but containerd is missing (%v) or this is not root", testenv.RequireEnv, err)
		}
		t.Skip("needs root and containerd (apt-get install docker.io)")
	}
	dir, err := os.MkdirTemp("", "cfsprobe-cri-") // short: the socket's path must fit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "c.sock")
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc", filepath.Join(dir, "cni-bin"), filepath.Join(dir, "cni-conf"))
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "--config", cfg, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("containerd (pid %d) did not stop on SIGTERM", cmd.Process.Pid)
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("containerd's log:\n%s", b)
		}
	})

	c, err := NewCRI("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, err := c.List(context.Background())
		if err == nil {
			if len(entries) != 0 {
				t.Errorf("a containerd without pods listed %+v", entries)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("List of a real containerd's CRI: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := NewResolver([]Source{c}, Options{})
	if err := r.Refresh(context.Background()); err != nil {
		t.Errorf("Refresh: %v", err)
	}
	if _, err := r.FindPod("default", "none"); err == nil {
		t.Error("FindPod of a pod that is not there: no error")
	}
}
