package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/tied"
)

// The node's addresses. The API server listens on apiIP:443, an address
// this test adds to the host's loopback device: that is also the
// `kubernetes` Service's cluster IP (the first of serviceCIDR), so pods
// reach the API server at the address their in-cluster configuration
// names without a kube-proxy. Pods get addresses of podCIDR on a
// point-to-point link to the host (the CNI ptp plugin), so the host reaches
// them and they reach apiIP.
const (
	nodeName    = "cfsprobe-node"
	apiIP       = "10.250.0.1"
	serviceCIDR = "10.250.0.0/24"
	podCIDR     = "10.250.1.0/24"
	cniNetwork  = "cfsprobe-k8s"
	pauseImage  = "localhost/cfsprobe/pause:test"
	// The node's static pod (in namespace default; its mirror pod is
	// staticPod-nodeName) and its container.
	staticPod = "static"
	staticCtr = "pause"
)

// kubeletSysctls are the kernel settings the kubelet sets at start
// (pkg/kubelet/cm: setupKernelTunables) and the ptp plugin's ip_forward:
// the node puts back what it found.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

// Node is a single-node Kubernetes cluster that a test started: etcd, the
// API server, controller manager and scheduler, a containerd of its own
// with the CRI plugin, and a kubelet. Stop (registered with t.Cleanup)
// removes everything it made, also when the test failed.
type Node struct {
	Dir        string        // everything the node writes, but the few host paths below
	Bins       string        // the built binaries (test/kubernetes/build)
	Kubeconfig string        // the admin's
	CRI        string        // containerd's socket: unix://...
	StartTime  time.Duration // from Start until the node was Ready

	pki    *pki
	client *http.Client
	procs  []*proc // in start order

	host hostState
}

// hostState is what the node found on the host and what it changed there,
// saved in Dir (stateFile) as soon as it is known: a node whose test was
// killed before its cleanups ran (a -timeout panic) is undone by the next
// StartNode from it.
type hostState struct {
	Sysctls   map[string]string // as found
	AddedAddr bool              // apiIP added to lo
	// Host paths outside Dir that the runtime writes: kept if they were
	// there before, removed if the node made them.
	HadNetns, HadCNI, HadLogContainers bool
	NetnsBefore                        map[string]bool
}

const stateFile = "host-state.json"

func (n *Node) saveHostState() error {
	b, err := json.Marshal(n.host)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, stateFile), b, 0o600)
}

// proc is a daemon the node started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// binsDir returns the directory of the built binaries, skipping (or
// failing, under CFSPROBE_REQUIRE_CGROUPS=1) when they are not built.
func binsDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(repoPath("test/kubernetes/build/build.sh"), "--check").Output()
	if err != nil {
		need(t, "the Kubernetes binaries are not built (run `make k8s-bins`, about 10 minutes once per machine)")
	}
	return strings.TrimSpace(string(out))
}

// need skips the test, or fails it under CFSPROBE_REQUIRE_CGROUPS=1.
func need(t testing.TB, why string) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf("%s=1: %s", testenv.RequireEnv, why)
	}
	t.Skip(why)
}

// StartNode starts a node and waits until it is Ready.
func StartNode(t testing.TB) *Node {
	t.Helper()
	bins := binsDir(t)
	if os.Geteuid() != 0 {
		need(t, "a Kubernetes node needs root")
	}
	for _, p := range []string{"containerd", "ctr", "runc", "ip"} {
		if _, err := exec.LookPath(p); err != nil {
			need(t, p+" is not installed (make deps)")
		}
	}
	sweepKilledNodes(t)
	for _, h := range cgroupHierarchies(t) {
		if _, err := os.Stat(filepath.Join(h, "kubepods")); err == nil {
			t.Fatalf("%s exists: a kubelet runs on this machine or a node test left it; stop that kubelet or remove its groups", filepath.Join(h, "kubepods"))
		}
	}
	if out, _ := exec.Command("ip", "-4", "-o", "addr", "show").Output(); strings.Contains(string(out), " "+apiIP+"/") {
		t.Fatalf("%s is already an address of this host: another node test runs, or one left it (ip addr del %s/32 dev lo)", apiIP, apiIP)
	}

	start := time.Now()
	dir, err := os.MkdirTemp("", "cfsprobe-k8s-")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{Dir: dir, Bins: bins, Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		CRI: "unix://" + filepath.Join(dir, "containerd.sock")}
	// Cleanups run last first: Stop, then the check that it left nothing.
	t.Cleanup(func() { n.checkNothingLeft(t) })
	t.Cleanup(func() { n.Stop(t) })
	if err := n.start(t); err != nil {
		t.Fatalf("start the node: %v", err) // Stop logs the daemons' logs
	}
	n.StartTime = time.Since(start)
	return n
}

func (n *Node) start(t testing.TB) error {
	h := &n.host
	h.Sysctls = map[string]string{}
	for _, s := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			return err
		}
		h.Sysctls[s] = strings.TrimSpace(string(b))
	}
	h.HadNetns = exists("/var/run/netns")
	h.HadCNI = exists("/var/lib/cni")
	h.HadLogContainers = exists("/var/log/containers")
	h.NetnsBefore = map[string]bool{}
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			h.NetnsBefore[e.Name()] = true
		}
	}
	if err := n.saveHostState(); err != nil {
		return err
	}
	if out, err := exec.Command("ip", "addr", "add", apiIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s/32 dev lo: %v: %s", apiIP, err, out)
	}
	h.AddedAddr = true
	if err := n.saveHostState(); err != nil {
		return err
	}

	var err error
	if n.pki, err = newPKI(filepath.Join(n.Dir, "pki")); err != nil {
		return err
	}
	p := n.pki
	server := "https://" + apiIP + ":443"
	for _, c := range []struct {
		name, cn string
		orgs     []string
		ips      []net.IP
		dns      []string
	}{
		{"apiserver", "kube-apiserver", nil, []net.IP{net.ParseIP(apiIP), net.ParseIP("127.0.0.1")},
			[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}},
		{"admin", "cfsprobe-test-admin", []string{"system:masters"}, nil, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil},
		{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}, nil, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil, nil},
	} {
		if err := p.Issue(c.name, c.cn, c.orgs, c.ips, c.dns); err != nil {
			return err
		}
	}
	for _, name := range []string{"admin", "kubelet", "controller-manager", "scheduler"} {
		path := filepath.Join(n.Dir, name+".kubeconfig")
		if name == "admin" {
			path = n.Kubeconfig
		}
		if err := p.kubeconfig(path, server, name); err != nil {
			return err
		}
	}
	if n.client, err = p.httpClient("admin"); err != nil {
		return err
	}

	// etcd
	etcdPort, peerPort := testenv.FreePort(t), testenv.FreePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	if err := n.run(t, "etcd", "etcd", "--name", "cfsprobe", "--data-dir", filepath.Join(n.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls", "http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster", "cfsprobe=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--listen-metrics-urls", "", "--log-level", "warn", "--quota-backend-bytes", strconv.Itoa(1<<30)); err != nil {
		return err
	}
	if err := n.waitFor(60*time.Second, "etcd healthy", func() (bool, error) {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == 200, nil
	}); err != nil {
		return err
	}

	// The control plane.
	if err := n.run(t, "kube-apiserver", "kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", apiIP, "--advertise-address", apiIP, "--secure-port", "443",
		"--tls-cert-file", p.Path("apiserver", "crt"), "--tls-private-key-file", p.Path("apiserver", "key"),
		"--client-ca-file", p.Path("ca", "crt"),
		"--kubelet-client-certificate", p.Path("apiserver-kubelet-client", "crt"),
		"--kubelet-client-key", p.Path("apiserver-kubelet-client", "key"),
		"--kubelet-preferred-address-types", "InternalIP",
		"--service-cluster-ip-range", serviceCIDR,
		"--service-account-key-file", filepath.Join(p.Dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(p.Dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--allow-privileged=true", "--profiling=false", "--anonymous-auth=false",
		"--enable-priority-and-fairness=false", "--v=1"); err != nil {
		return err
	}
	if err := n.waitFor(120*time.Second, "the API server ready", func() (bool, error) {
		return n.getOK("/readyz"), nil
	}); err != nil {
		return err
	}
	if err := n.run(t, "kube-controller-manager", "kube-controller-manager",
		"--kubeconfig", filepath.Join(n.Dir, "controller-manager.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(n.Dir, "controller-manager.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(n.Dir, "controller-manager.kubeconfig"),
		"--service-account-private-key-file", filepath.Join(p.Dir, "sa.key"),
		"--root-ca-file", p.Path("ca", "crt"),
		"--use-service-account-credentials=true", "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "0", "--profiling=false", "--v=1"); err != nil {
		return err
	}
	if err := n.run(t, "kube-scheduler", "kube-scheduler",
		"--kubeconfig", filepath.Join(n.Dir, "scheduler.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(n.Dir, "scheduler.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(n.Dir, "scheduler.kubeconfig"),
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0", "--profiling=false", "--v=1"); err != nil {
		return err
	}

	// The runtime.
	if err := n.startContainerd(t); err != nil {
		return err
	}
	pause, err := os.ReadFile(filepath.Join(n.Bins, "pause"))
	if err != nil {
		return err
	}
	archive := filepath.Join(n.Dir, "pause.tar")
	if err := writeImageArchive(archive, pauseImage, []string{"/pause"}, "65535:65535",
		[]imageFile{{path: "pause", data: pause, mode: 0o755}}); err != nil {
		return err
	}
	if err := n.ImportImage(archive); err != nil {
		return err
	}

	// The kubelet.
	kdir := filepath.Join(n.Dir, "kubelet")
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: %[2]d
healthzPort: 0
readOnlyPort: 0
containerRuntimeEndpoint: %[3]s
imageServiceEndpoint: %[3]s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
podLogsDir: %[4]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[5]s}
authorization:
  mode: Webhook
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
staticPodPath: %[6]s
`, apiIP, testenv.FreePort(t), n.CRI, filepath.Join(n.Dir, "pod-logs"), p.Path("ca", "crt"), filepath.Join(kdir, "manifests"))
	if err := os.WriteFile(filepath.Join(kdir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	// A static pod with a CPU limit: its group is named by the kubelet's
	// hash of its manifest, not by its mirror pod's UID.
	if err := os.MkdirAll(filepath.Join(kdir, "manifests"), 0o700); err != nil {
		return err
	}
	static := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  automountServiceAccountToken: false
  containers:
    - name: %s
      image: %s
      resources:
        limits: {cpu: 100m, memory: 16Mi}
`, staticPod, staticCtr, pauseImage)
	if err := os.WriteFile(filepath.Join(kdir, "manifests", staticPod+".yaml"), []byte(static), 0o600); err != nil {
		return err
	}
	if err := n.run(t, "kubelet", "kubelet",
		"--config", filepath.Join(kdir, "config.yaml"),
		"--kubeconfig", filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--root-dir", filepath.Join(kdir, "root"),
		"--cert-dir", filepath.Join(kdir, "pki"),
		"--hostname-override", nodeName, "--node-ip", apiIP, "--v=1"); err != nil {
		return err
	}
	return n.waitFor(180*time.Second, "the node Ready and untainted", func() (bool, error) {
		var node struct {
			Spec struct {
				Taints []struct{ Key string }
			}
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
		if err := n.GetJSON("/api/v1/nodes/"+nodeName, &node); err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return len(node.Spec.Taints) == 0, nil
			}
		}
		return false, nil
	})
}

// startContainerd starts a containerd of the node's own with the CRI
// plugin, the runc runtime under the cgroupfs driver, the locally built
// sandbox image and the CNI ptp network.
func (n *Node) startContainerd(t testing.TB) error {
	cd := filepath.Join(n.Dir, "containerd")
	cni := filepath.Join(n.Dir, "cni")
	for _, d := range []string{cd, filepath.Join(cni, "net.d")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "ptp",
    "ipMasq": false,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, cniNetwork, podCIDR, filepath.Join(cni, "ipam"))
	if err := os.WriteFile(filepath.Join(cni, "net.d", "10-"+cniNetwork+".conflist"), []byte(conflist), 0o600); err != nil {
		return err
	}
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so the
	// runtime may not lower a container's OOM score below its own.
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), strings.TrimPrefix(n.CRI, "unix://"),
		filepath.Join(cd, "ttrpc.sock"), filepath.Join(cd, "opt"), pauseImage, filepath.Join(cd, "runc"),
		n.Bins, filepath.Join(cni, "net.d"))
	if err := os.WriteFile(filepath.Join(cd, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := n.run(t, "containerd", "/usr/bin/containerd", "--config", filepath.Join(cd, "config.toml")); err != nil {
		return err
	}
	return n.waitFor(60*time.Second, "containerd serving", func() (bool, error) {
		return n.ctr("version") == nil, nil
	})
}

// ctr runs ctr against the node's containerd in the CRI's namespace.
func (n *Node) ctr(args ...string) error {
	_, err := n.ctrOut(args...)
	return err
}

func (n *Node) ctrOut(args ...string) (string, error) {
	a := append([]string{"--address", strings.TrimPrefix(n.CRI, "unix://"), "--namespace", "k8s.io"}, args...)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("ctr", a...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// ImportImage imports an image archive (`docker save`'s or an OCI
// layout's) into the node's runtime, where pods find it without a pull.
func (n *Node) ImportImage(archive string) error {
	return n.ctr("images", "import", archive)
}

// run starts one of the node's daemons: bin is a file of n.Bins or an
// absolute path. Its output goes to Dir/logs/name.log.
func (n *Node) run(t testing.TB, name, bin string, args ...string) error {
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(n.Bins, bin)
	}
	logs := filepath.Join(n.Dir, "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(logs, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = n.Dir
	// If the test binary dies without its cleanups (a -timeout panic),
	// the daemons die with it.
	if err := tied.Start(cmd); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		f.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	t.Logf("node: %s started, pid %d", name, cmd.Process.Pid)
	return nil
}

// waitFor polls cond until it holds, a daemon exits or timeout passes.
func (n *Node) waitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		for _, p := range n.procs {
			select {
			case <-p.done:
				return fmt.Errorf("waiting for %s: %s exited: %s (log %s)", what, p.name, p.cmd.ProcessState, p.log)
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %v", what, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// httpClient is an HTTPS client that trusts the node's CA and presents
// name's certificate.
func (p *pki) httpClient(name string) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.Path(name, "crt"), p.Path(name, "key"))
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.Pool(), Certificates: []tls.Certificate{cert}}},
	}, nil
}

// getOK reports whether GET path on the API server answers 200.
func (n *Node) getOK(path string) bool {
	resp, err := n.client.Get("https://" + apiIP + ":443" + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// GetJSON decodes GET path on the API server, as the admin, into v.
func (n *Node) GetJSON(path string, v any) error {
	resp, err := n.client.Get("https://" + apiIP + ":443" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, v)
}

// Kubectl runs the node's kubectl as the admin and returns its stdout; it
// fails the test on error.
func (n *Node) Kubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := n.KubectlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// KubectlErr is Kubectl that returns the error.
func (n *Node) KubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(n.Bins, "kubectl"), append([]string{"--kubeconfig", n.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// dumpLogs logs the tail of every daemon's log.
func (n *Node) dumpLogs(t testing.TB) {
	t.Helper()
	for _, p := range n.procs {
		b, _ := os.ReadFile(p.log)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		t.Logf("--- %s (%s), last lines:\n%s", p.name, p.log, strings.Join(lines, "\n"))
	}
}

// Stop stops everything the node started and removes what it made: the
// kubelet first (it would restart what is killed under it), then the
// control plane (the API server before etcd), every container and sandbox
// left in the runtime, containerd; then the pods' network namespaces,
// the mounts under Dir, the kubelet's kubepods groups in every hierarchy,
// the address on lo, the host files the runtime made, and the sysctls the
// kubelet changed. Errors are test errors: a node that leaves something
// behind fails the test.
func (n *Node) Stop(t testing.TB) {
	t.Helper()
	if t.Failed() {
		n.dumpLogs(t)
	}
	byName := map[string]*proc{}
	for _, p := range n.procs {
		byName[p.name] = p
	}
	stop := func(name string) {
		if p := byName[name]; p != nil {
			if err := p.stop(15 * time.Second); err != nil {
				t.Error(err)
			}
		}
	}
	for _, name := range []string{"kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		stop(name)
	}
	if p := byName["containerd"]; p != nil {
		n.removeContainers(t)
		stop("containerd")
	}
	// A shim whose task could not be deleted outlives containerd: its
	// command line names the node's directory (containerd's address).
	if pids, err := testenv.ProcessesNaming(n.Dir); err == nil {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Every process left in the kubelet's groups (a shim's child whose
	// shim was killed) is killed by its PID; then the groups go.
	for _, h := range cgroupHierarchies(t) {
		if err := removeTree(filepath.Join(h, "kubepods")); err != nil {
			t.Error(err)
		}
	}
	n.removeNetns(t)
	if err := testenv.UnmountUnder(n.Dir); err != nil {
		t.Error(err)
	}
	if n.host.AddedAddr {
		if out, err := exec.Command("ip", "addr", "del", apiIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Errorf("ip addr del %s/32 dev lo: %v: %s", apiIP, err, out)
		}
	}
	n.removeHostFiles(t)
	for _, s := range kubeletSysctls {
		was, ok := n.host.Sysctls[s]
		if !ok {
			continue
		}
		b, err := os.ReadFile("/proc/sys/" + s)
		if err == nil && strings.TrimSpace(string(b)) == was {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+s, []byte(was), 0o644); err != nil {
			t.Errorf("restore sysctl %s to %s: %v", s, was, err)
		}
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		t.Errorf("remove the node's directory: %v", err)
	}
}

// sweepKilledNodes undoes the nodes whose tests were killed before their
// cleanups ran: directories of this package's nodes with a saved host
// state and no process naming them but containerd's shims (the daemons
// died with the test: Pdeathsig). Stop then removes what is left, from
// the state the node saved.
func sweepKilledNodes(t testing.TB) {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "cfsprobe-k8s-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, stateFile))
		if err != nil {
			continue
		}
		pids, err := testenv.ProcessesNaming(dir)
		if err != nil {
			continue
		}
		live := false
		for _, pid := range pids {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			if !strings.HasPrefix(string(comm), "containerd-shim") {
				live = true // a node another test runs
			}
		}
		if live {
			continue
		}
		n := &Node{Dir: dir}
		if err := json.Unmarshal(b, &n.host); err != nil {
			continue
		}
		t.Logf("undoing the node of a killed test in %s (%d shims left)", dir, len(pids))
		n.Stop(t)
	}
}

// checkNothingLeft fails the test if the node left anything: a process
// of its own, a kubepods group, a mount, its directory, the address on lo,
// a network namespace, or a sysctl other than it was.
func (n *Node) checkNothingLeft(t testing.TB) {
	t.Helper()
	var left []string
	if err := n.waitFor(10*time.Second, "the node's processes gone", func() (bool, error) {
		pids, err := testenv.ProcessesNaming(n.Dir)
		return len(pids) == 0, err
	}); err != nil {
		left = append(left, err.Error())
	}
	for _, h := range cgroupHierarchies(t) {
		if exists(filepath.Join(h, "kubepods")) {
			left = append(left, filepath.Join(h, "kubepods"))
		}
	}
	if points, err := testenv.MountsUnder(n.Dir); err == nil {
		for _, p := range points {
			left = append(left, "mount "+p)
		}
	}
	if exists(n.Dir) {
		left = append(left, n.Dir)
	}
	if out, _ := exec.Command("ip", "-4", "-o", "addr", "show", "dev", "lo").Output(); strings.Contains(string(out), " "+apiIP+"/") {
		left = append(left, apiIP+" on lo")
	}
	if ents, err := os.ReadDir("/var/run/netns"); err == nil {
		for _, e := range ents {
			if !n.host.NetnsBefore[e.Name()] {
				left = append(left, "/var/run/netns/"+e.Name())
			}
		}
	}
	for s, was := range n.host.Sysctls {
		if b, err := os.ReadFile("/proc/sys/" + s); err == nil && strings.TrimSpace(string(b)) != was {
			left = append(left, fmt.Sprintf("sysctl %s = %s, was %s", s, strings.TrimSpace(string(b)), was))
		}
	}
	if len(left) > 0 {
		t.Errorf("the node left: %s", strings.Join(left, "; "))
	}
}

// stop ends the daemon by its PID (testenv.StopProcess), SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	return testenv.StopProcess(p.cmd.Process, p.done, grace)
}

// removeContainers kills and deletes every task and container in the
// runtime's CRI namespace (sandboxes included), so that their shims exit
// and unmount their root filesystems.
func (n *Node) removeContainers(t testing.TB) {
	t.Helper()
	out, err := n.ctrOut("containers", "list", "--quiet")
	if err != nil {
		t.Errorf("list the runtime's containers: %v", err)
		return
	}
	ids := strings.Fields(out)
	for _, id := range ids {
		_ = n.ctr("tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range ids {
		var err error
		for i := 0; i < 20; i++ {
			// A task that is not there is gone already.
			if err = n.ctr("tasks", "delete", "--force", id); err == nil || strings.Contains(err.Error(), "not found") {
				err = nil
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("delete task %s: %v", id, err)
		}
		if err := n.ctr("containers", "delete", id); err != nil {
			t.Errorf("delete container %s: %v", id, err)
		}
	}
}

// removeNetns removes the pods' network namespaces that the runtime made
// (/var/run/netns/cni-*) and that the CNI DEL of a stopped sandbox did not:
// their veths go with them.
func (n *Node) removeNetns(t testing.TB) {
	t.Helper()
	ents, _ := os.ReadDir("/var/run/netns")
	for _, e := range ents {
		if n.host.NetnsBefore[e.Name()] || !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		p := filepath.Join("/var/run/netns", e.Name())
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			t.Errorf("unmount %s: %v", p, err)
		}
		if err := os.Remove(p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	}
	if !n.host.HadNetns {
		if ents, err := os.ReadDir("/var/run/netns"); err == nil && len(ents) == 0 {
			_ = syscall.Unmount("/var/run/netns", syscall.MNT_DETACH)
			_ = os.Remove("/var/run/netns")
		}
	}
}

// removeHostFiles removes what the runtime and the kubelet wrote outside
// Dir: the CNI's cached results of the node's network, and the
// directories they made.
func (n *Node) removeHostFiles(t testing.TB) {
	t.Helper()
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, f := range results {
		if err := os.Remove(f); err != nil {
			t.Error(err)
		}
	}
	if !n.host.HadCNI {
		if err := os.RemoveAll("/var/lib/cni"); err != nil {
			t.Error(err)
		}
	}
	// The kubelet's /var/log/containers links point into Dir.
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, l := range links {
		if dst, err := os.Readlink(l); err == nil && strings.HasPrefix(dst, n.Dir+"/") {
			_ = os.Remove(l)
		}
	}
	if !n.host.HadLogContainers {
		if ents, err := os.ReadDir("/var/log/containers"); err == nil && len(ents) == 0 {
			_ = os.Remove("/var/log/containers")
		}
	}
}

// cgroupHierarchies returns the mount points of every cgroup hierarchy.
func cgroupHierarchies(t testing.TB) []string {
	t.Helper()
	mounts, err := cgroup.ReadMountinfo(hostfs.Default(), "self")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range mounts {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// removeTree removes a cgroup directory and every group below it, deepest
// first, killing (by PID) any process still in one.
func removeTree(dir string) error {
	if !exists(dir) {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		var err error
		for i := 0; i < 40; i++ {
			if b, rerr := os.ReadFile(filepath.Join(d, "cgroup.procs")); rerr == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, perr := strconv.Atoi(f); perr == nil && pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// repoPath returns a path of the repository from this package's directory.
func repoPath(rel string) string {
	return filepath.Join("..", "..", rel)
}

// helperEnv makes the test binary a node whose test is then killed
// (TestKilledNodeIsUndone).
const helperEnv = "CFSPROBE_K8S_KILLED_NODE"

// TestKilledNodeHelper is not a test of its own: run by
// TestKilledNodeIsUndone, it starts a node with a pod, prints the node's
// directory and waits to be killed, so that none of its cleanups run.
func TestKilledNodeHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("run by TestKilledNodeIsUndone")
	}
	n := StartNode(t)
	pod := filepath.Join(n.Dir, "pod.yaml")
	if err := os.WriteFile(pod, []byte(`apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default}
spec:
  automountServiceAccountToken: false
  containers:
    - name: pause
      image: `+pauseImage+`
`), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Kubectl(t, "apply", "-f", pod)
	n.Kubectl(t, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=2m")
	fmt.Printf("node-dir %s\n", n.Dir)
	time.Sleep(10 * time.Minute)
}

// A test killed with its node running (a -timeout panic, kill -9) runs
// none of its cleanups: its daemons die with it (Pdeathsig), its pod's
// shim, processes, mounts, network namespace and groups stay. The next
// node undoes them from the state the killed one saved.
func TestKilledNodeIsUndone(t *testing.T) {
	binsDir(t)
	if os.Geteuid() != 0 {
		need(t, "a Kubernetes node needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledNodeHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dirc := make(chan string, 1)
	var lines []string
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			lines = append(lines, s.Text())
			if d, ok := strings.CutPrefix(s.Text(), "node-dir "); ok {
				dirc <- d
			}
		}
		close(dirc)
	}()
	var dir string
	select {
	case dir = <-dirc:
	case <-time.After(3 * time.Minute):
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for range dirc { // the reader is done with lines
	}
	if dir == "" {
		t.Fatalf("the helper did not start its node:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	}
	// The daemons die with the test, a moment after it; the pod's shim
	// stays.
	var shims []int
	waitErr := (&Node{}).waitFor(15*time.Second, "the killed node's daemons gone", func() (bool, error) {
		pids, err := testenv.ProcessesNaming(dir)
		shims = shims[:0]
		for _, pid := range pids {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.HasPrefix(string(comm), "containerd-shim") {
				shims = append(shims, pid)
			}
		}
		return len(pids) == len(shims), err
	})
	if waitErr != nil {
		t.Error(waitErr)
	}
	t.Logf("killed the test of node %s: its pod's shims %v are left", dir, shims)
	if len(shims) == 0 {
		t.Errorf("the killed node left no shim: nothing to undo, the test shows nothing")
	}

	var h hostState
	if b, err := os.ReadFile(filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	sweepKilledNodes(t)
	(&Node{Dir: dir, host: h}).checkNothingLeft(t)
}
