package dockerd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

// Containerd is a running private containerd: dockerd's (Start), or one
// with the CRI plugin that a test drives as the kubelet would.
type Containerd struct {
	dir  string // everything of containerd's is under it
	sock string // its gRPC socket
	cmd  *exec.Cmd
}

// ContainerdOptions say which containerd to start.
type ContainerdOptions struct {
	// CRI enables the CRI plugin (off: as dockerd uses containerd), with
	// SandboxImage as the pods' sandbox ("pause") image, which must be
	// imported before a pod is made (nothing is pulled), no CNI (pods use
	// the node's network), the cgroupfs driver, and OOM score
	// adjustments restricted (root here lacks CAP_SYS_RESOURCE).
	CRI          bool
	SandboxImage string
}

// containerdConfig is the private containerd's configuration: its own
// root, state and sockets.
const containerdConfig = `version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
`

// StartContainerd starts a private containerd for the test and registers
// its teardown with t.Cleanup: containerd stopped by PID, the shims of its
// containers killed, its mounts unmounted and its directory removed. It
// skips the test (fails it under CFSPROBE_REQUIRE_CGROUPS=1) when
// containerd is missing or this process is not root.
func StartContainerd(t testing.TB, opts ContainerdOptions) *Containerd {
	t.Helper()
	bin, err := exec.LookPath("containerd")
	if err != nil {
		need(t, "containerd not found (apt-get install docker.io, or make deps)")
	}
	if os.Geteuid() != 0 {
		need(t, "a private containerd needs root")
	}
	dir := tempDir(t, "cfsprobe-containerd-")
	c := &Containerd{dir: dir, sock: filepath.Join(dir, "c.sock")}
	t.Cleanup(func() { c.stop(t) })
	conf := fmt.Sprintf(containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, c.sock+".ttrpc")
	if opts.CRI {
		conf += fmt.Sprintf(`[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, opts.SandboxImage, filepath.Join(dir, "cni-bin"), filepath.Join(dir, "cni-conf"))
	} else {
		conf = strings.Replace(conf, "[grpc]", "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]", 1)
	}
	cfg := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if c.cmd, err = spawn(dir, "containerd.log", bin, "--config", cfg, "--log-level", "warn"); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(startTimeout, func() error { _, err := os.Stat(c.sock); return err }); err != nil {
		t.Fatalf("containerd did not create %s: %v\n%s", c.sock, err, logs(dir, "containerd.log"))
	}
	return c
}

// Socket is the path of containerd's gRPC socket.
func (c *Containerd) Socket() string { return c.sock }

// Address is its socket as a CRI endpoint: "unix:///tmp/.../c.sock".
func (c *Containerd) Address() string { return "unix://" + c.sock }

// Ctr runs ctr against containerd and returns its standard output. It
// fails the test if the command fails.
func (c *Containerd) Ctr(t testing.TB, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ctr", append([]string{"--address", c.sock}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String()
}

// stop stops containerd by PID, kills its containers' shims (they outlive
// it: they setsid; removing a container ends its own), unmounts and
// removes its directory.
func (c *Containerd) stop(t testing.TB) {
	t.Helper()
	if err := testenv.Terminate(c.cmd, stopTimeout); err != nil {
		t.Errorf("stop the private containerd: %v", err)
	}
	if err := killShims(c.dir); err != nil {
		t.Errorf("stop the private containerd's shims: %v", err)
	}
	if t.Failed() {
		t.Logf("private containerd in %s:\n%s", c.dir, logs(c.dir, "containerd.log"))
	}
	removeDir(t, c.dir)
}
