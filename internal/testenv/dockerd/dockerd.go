// Package dockerd starts a private Docker daemon for a test: its own
// containerd and dockerd in a temporary directory, stopped by PID when the
// test ends, with every container it ran removed and nothing left behind
// (no process, mount, directory or container cgroup).
//
// The daemon is the one a user runs (Debian's docker.io: dockerd with the
// cgroupfs driver), so its containers' groups are where Docker puts them on
// a host: /sys/fs/cgroup/<controller>/docker/<64-hex id> under cgroup v1.
// It runs without networking (--bridge=none, no iptables) and changes no
// sysctl (--ip-forward=false).
package dockerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
	"github.com/cfsprobe/cfsprobe/internal/unixhttp"
)

// Daemon is a running private dockerd.
type Daemon struct {
	dir        string // everything of dockerd's is under it
	sock       string // dockerd's API socket
	docker     string // the docker CLI
	dockerd    *exec.Cmd
	containerd *Containerd // its own
	client     *http.Client
	images     map[string]string // built images by variant ("", "debug")
}

// How long the daemons get to start and to stop.
const (
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
)

// Start starts a private dockerd for the test and registers its teardown
// with t.Cleanup. It skips the test (fails it under
// CFSPROBE_REQUIRE_CGROUPS=1) when dockerd, containerd or the docker CLI is
// missing or this process is not root.
func Start(t testing.TB) *Daemon {
	t.Helper()
	bins := map[string]string{}
	for _, name := range []string{"dockerd", "containerd", "docker", "runc"} {
		p, err := exec.LookPath(name)
		if err != nil {
			need(t, fmt.Sprintf("%s not found (apt-get install docker.io, or make deps)", name))
		}
		bins[name] = p
	}
	if os.Geteuid() != 0 {
		need(t, "a private dockerd needs root")
	}
	// Stopped after dockerd (cleanups run last first).
	cd := StartContainerd(t, ContainerdOptions{})
	dir := tempDir(t, "cfsprobe-dockerd-")
	d := &Daemon{
		dir:        dir,
		sock:       filepath.Join(dir, "docker.sock"),
		docker:     bins["docker"],
		containerd: cd,
		images:     map[string]string{},
	}
	d.client = unixhttp.Client(d.sock)
	t.Cleanup(func() { d.stop(t) })
	if err := d.start(bins); err != nil {
		t.Fatalf("start a private dockerd in %s: %v\n%s", dir, err, logs(dir, "dockerd.log"))
	}
	return d
}

// need skips the test, or fails it when the components are required.
func need(t testing.TB, why string) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf("%s=1 but %s", testenv.RequireEnv, why)
	}
	t.Skipf("%s; set %s=1 to make this a failure", why, testenv.RequireEnv)
}

func (d *Daemon) start(bins map[string]string) error {
	// An empty daemon.json, so that the host's /etc/docker/daemon.json is
	// not read.
	dcfg := filepath.Join(d.dir, "daemon.json")
	if err := os.WriteFile(dcfg, []byte("{}\n"), 0o600); err != nil {
		return err
	}
	var err error
	d.dockerd, err = spawn(d.dir, "dockerd.log", bins["dockerd"],
		"--config-file", dcfg,
		"--containerd", d.containerd.Socket(),
		"--data-root", filepath.Join(d.dir, "data"),
		"--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "dockerd.pid"),
		"-H", "unix://"+d.sock,
		// No networking, and no sysctl changed (dockerd turns on
		// net.ipv4.ip_forward otherwise).
		"--iptables=false", "--ip-masq=false", "--ip-forward=false", "--bridge=none",
		"--exec-opt", "native.cgroupdriver=cgroupfs",
		"--log-level", "warn")
	if err != nil {
		return err
	}
	return waitFor(startTimeout, func() error {
		_, err := d.get("/_ping")
		return err
	})
}

// tempDir makes a directory for a daemon's files: short, because the
// sockets' paths in it must fit in sun_path.
func tempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// spawn starts a daemon with its output in a log file of dir.
func spawn(dir, log, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(dir, log))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group, so that a ^C of the test does not reach it
	// before the cleanup does; tied to the test, so that it does not
	// outlive a test binary killed before its cleanup (what it started,
	// containerd's shims and mounts, then stays for the next run's
	// leftovers check to report).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := tied.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return cmd, nil
}

func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v: %w", timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Host is the daemon's address as DOCKER_HOST and --docker-host take it:
// "unix:///tmp/cfsprobe-dockerd-.../docker.sock".
func (d *Daemon) Host() string { return "unix://" + d.sock }

// Socket is the path of the daemon's API socket.
func (d *Daemon) Socket() string { return d.sock }

// Env is the environment for a docker CLI (or any client) talking to the
// daemon: this process's, with DOCKER_HOST set, the legacy builder (there
// is no buildx here) and a CLI configuration directory of the daemon's, so
// that nothing is written to ~/.docker.
func (d *Daemon) Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_BUILDKIT", "DOCKER_CONFIG", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"DOCKER_HOST="+d.Host(),
		"DOCKER_BUILDKIT=0",
		"DOCKER_CONFIG="+filepath.Join(d.dir, "cli"))
}

// Docker runs the docker CLI against the daemon and returns its standard
// output. It fails the test if the command fails.
func (d *Daemon) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.Run(args...)
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// Run runs the docker CLI against the daemon and returns its standard
// output; the error includes its standard error.
func (d *Daemon) Run(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(d.docker, args...)
	cmd.Env = d.Env()
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Image builds cfsprobe's image into the daemon with `make image` (from
// the repository's Dockerfile and the binary the Makefile builds) and
// returns its reference. It builds once per daemon.
func (d *Daemon) Image(t testing.TB) string {
	t.Helper()
	return d.image(t, "")
}

// DebugImage is Image's debug variant (with busybox at /bin/sh), built by
// the same `make image`.
func (d *Daemon) DebugImage(t testing.TB) string {
	t.Helper()
	return d.image(t, "debug")
}

// ImageRef is the tag under which Image builds cfsprobe's image.
const ImageRef = "cfsprobe:test"

func (d *Daemon) image(t testing.TB, variant string) string {
	t.Helper()
	if ref, ok := d.images[variant]; ok {
		return ref
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "image", "IMAGE="+ImageRef)
	cmd.Dir = root
	cmd.Env = d.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image in %s: %v\n%s", root, err, out)
	}
	d.images[""] = ImageRef
	d.images["debug"] = ImageRef + "-debug"
	return d.images[variant]
}

// BusyboxImage builds an image of one file, Debian's busybox-static at
// /bin/busybox, tagged ref, whose entrypoint is the given command (JSON
// form), for tests that need a container but not cfsprobe's image: a
// pod's sandbox ("/bin/busybox", "sleep", "3600"), a shell. It returns ref.
func (d *Daemon) BusyboxImage(t testing.TB, ref string, entrypoint ...string) string {
	t.Helper()
	data, err := os.ReadFile("/bin/busybox")
	if err != nil {
		need(t, "no /bin/busybox (apt-get install busybox-static)")
	}
	ctx := t.TempDir()
	if err := os.WriteFile(filepath.Join(ctx, "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	ep, err := json.Marshal(entrypoint)
	if err != nil {
		t.Fatal(err)
	}
	df := fmt.Sprintf("FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT %s\n", ep)
	if err := os.WriteFile(filepath.Join(ctx, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Docker(t, "build", "-q", "-t", ref, ctx)
	return ref
}

// Save writes the images refs to an archive in a temporary directory of
// the test (docker save: what `ctr images import` and `docker load`
// take) and returns its path.
func (d *Daemon) Save(t testing.TB, refs ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "images.tar")
	d.Docker(t, append([]string{"save", "-o", out}, refs...)...)
	return out
}

// repoRoot is the directory of cfsprobe's go.mod, above the working
// directory (a test's is its package's).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/cfsprobe/cfsprobe\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cfsprobe's go.mod not found above the working directory")
		}
		dir = parent
	}
}

// get makes a GET request to the daemon's API and returns the body.
func (d *Daemon) get(path string) ([]byte, error) {
	return d.do(http.MethodGet, path)
}

func (d *Daemon) do(method, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(body))
	}
	return body, nil
}

// containerIDs lists the IDs of every container the daemon created, also
// those already removed (from its event log), and of those it still has.
func (d *Daemon) containerIDs() ([]string, error) {
	seen := map[string]bool{}
	filters := url.QueryEscape(`{"type":["container"],"event":["create"]}`)
	body, err := d.get(fmt.Sprintf("/events?since=0&until=%d&filters=%s", time.Now().Unix()+1, filters))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		var ev struct {
			ID    string `json:"id"`
			Actor struct{ ID string }
		}
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode the daemon's events: %w", err)
		}
		if ev.Actor.ID != "" {
			seen[ev.Actor.ID] = true
		}
	}
	body, err = d.get("/containers/json?all=1")
	if err != nil {
		return nil, err
	}
	var list []struct {
		ID string `json:"Id"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode the daemon's containers: %w", err)
	}
	for _, c := range list {
		seen[c.ID] = true
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// stop tears dockerd down: its containers, dockerd, its mounts and
// directory; then it checks that no group of a container is left (killing
// what is left in one). Its containerd's cleanup comes next.
func (d *Daemon) stop(t testing.TB) {
	t.Helper()
	var ids []string
	if d.dockerd != nil && d.dockerd.Process != nil {
		var err error
		if ids, err = d.containerIDs(); err != nil {
			t.Errorf("list the private dockerd's containers: %v", err)
		}
		for _, id := range ids {
			if _, err := d.do(http.MethodDelete, "/containers/"+id+"?force=1&v=1"); err != nil && !strings.Contains(err.Error(), "404") {
				t.Errorf("remove container %s: %v", id, err)
			}
		}
	}
	if err := testenv.Terminate(d.dockerd, stopTimeout); err != nil {
		t.Errorf("stop the private dockerd: %v", err)
	}
	if t.Failed() {
		t.Logf("private dockerd in %s:\n%s", d.dir, logs(d.dir, "dockerd.log"))
	}
	removeDir(t, d.dir)
	for _, id := range ids {
		for _, g := range containerGroups(id) {
			t.Errorf("container %s left its group %s", id, g)
			if err := RemoveGroup(g); err != nil {
				t.Error(err)
			}
		}
	}
	// Docker's parent group, if no other daemon uses it now.
	for _, p := range parentGroups() {
		_ = os.Remove(p)
	}
}

// removeDir unmounts everything under dir and removes it.
func removeDir(t testing.TB, dir string) {
	t.Helper()
	if err := testenv.UnmountUnder(dir); err != nil {
		t.Errorf("unmount under %s: %v", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove %s: %v", dir, err)
	}
}

// RemoveGroup kills the tasks of a cgroup directory and its descendants
// (left by a container whose runtime was stopped under it) and removes
// them, deepest first.
func RemoveGroup(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		err := waitFor(10*time.Second, func() error {
			b, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs"))
			if err != nil {
				return nil // gone, or not a group: rmdir says
			}
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscanf(f, "%d", &pid); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			err = syscall.Rmdir(dirs[i])
			if errors.Is(err, syscall.ENOENT) {
				return nil
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims whose command line names dir (their
// containerd's address) and waits for them.
func killShims(dir string) error {
	pids, err := testenv.ProcessesNaming(dir)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return waitFor(10*time.Second, func() error {
		left, err := testenv.ProcessesNaming(dir)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("processes %v still run", left)
		}
		return nil
	})
}

// cgroupRoot is where the host's cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// containerGroups lists the groups of a container that exist in any
// hierarchy (cgroupfs driver: <hierarchy>/docker/<id>).
func containerGroups(id string) []string {
	var out []string
	for _, pat := range []string{"docker/" + id, "*/docker/" + id} {
		m, _ := filepath.Glob(filepath.Join(cgroupRoot, pat))
		out = append(out, m...)
	}
	return out
}

// parentGroups lists Docker's parent group in every hierarchy.
func parentGroups() []string {
	var out []string
	for _, pat := range []string{"docker", "*/docker"} {
		m, _ := filepath.Glob(filepath.Join(cgroupRoot, pat))
		out = append(out, m...)
	}
	return out
}

// logs is the tail of a daemon's logs in dir, for a failure's message.
func logs(dir string, names ...string) string {
	var b strings.Builder
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, data)
	}
	return b.String()
}
