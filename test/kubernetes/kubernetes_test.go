// Package kubernetes runs deploy/kubernetes/ on a real single-node
// Kubernetes cluster that the test starts (node_test.go): the exporter
// DaemonSet, the check Jobs and DaemonSet, and a CPU-limited pod that the
// exporter and `cfsprobe top` must show throttled by its names; then the
// chart deploy/helm/cfsprobe in its place, with TLS and basic auth
// (helm_test.go).
//
// The node's binaries and helm are built once per machine by `make
// k8s-bins` (test/kubernetes/build); without them the test skips, or fails
// under CFSPROBE_REQUIRE_CGROUPS=1.
package kubernetes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/testenv/dockerd"
)

// The images the manifests name, and what the test substitutes for them:
// cfsprobe's image as `make image` builds it, imported into the node.
var imageNames = []struct{ manifest, test string }{
	{"ghcr.io/cfsprobe/cfsprobe:latest-debug", dockerd.ImageRef + "-debug"},
	{"ghcr.io/cfsprobe/cfsprobe:latest", dockerd.ImageRef},
}

const (
	ns          = "cfsprobe" // deploy/kubernetes/namespace.yaml's
	testNS      = "cfsprobe-test"
	busyPod     = "busy"
	busyCtr     = "spin"
	metricsPort = 9750
	// minThrottled is the least share of its periods in which the busy
	// pod must be throttled (measured: 0.5 to 1 under other tests' load).
	minThrottled = 0.3
	// stRdonly is statfs(2)'s ST_RDONLY: the mount is read-only.
	stRdonly = 0x1
)

func TestKubernetes(t *testing.T) {
	wall := time.Now()
	n := StartNode(t)
	t.Logf("node Ready %.1f s after the start", n.StartTime.Seconds())

	// cfsprobe's image, built by `make image` on a private dockerd, saved
	// and imported into the node's runtime.
	t0 := time.Now()
	d := dockerd.Start(t)
	refs := []string{d.Image(t), d.DebugImage(t)}
	if err := n.ImportImage(d.Save(t, refs...)); err != nil {
		t.Fatal(err)
	}
	t.Logf("images %v built and imported in %.1f s", refs, time.Since(t0).Seconds())

	// The exporter.
	n.apply(t, "namespace.yaml", "exporter-daemonset.yaml")
	n.Kubectl(t, "-n", ns, "rollout", "status", "ds/cfsprobe-exporter", "--timeout=3m")
	exp := n.onlyPod(t, ns, "app.kubernetes.io/component=exporter")
	t.Logf("exporter pod %s at %s", exp.Metadata.Name, exp.Status.PodIP)

	t.Run("exporter least privilege", func(t *testing.T) { checkExporterPrivileges(t, n, exp) })

	// The checks, one at a time: side by side they would share the CPUs
	// they measure.
	for _, job := range []struct{ file, name string }{
		{"check-job.yaml", "cfsprobe-check"},
		{"check-job-quota.yaml", "cfsprobe-check-quota"},
	} {
		t.Run(job.name, func(t *testing.T) {
			n.apply(t, job.file)
			defer n.delete(t, job.file)
			status := n.waitJob(t, ns, job.name, 5*time.Minute)
			logs := n.Kubectl(t, "-n", ns, "logs", "job/"+job.name)
			verdict := lineWith(logs, "NOT AFFECTED:")
			t.Logf("job %s: %s: %s", job.name, status, verdict)
			if status != "Complete" {
				t.Fatalf("job %s %s, want Complete (the kernel not affected); log:\n%s", job.name, status, logs)
			}
			if verdict == "" {
				t.Errorf("job %s's log has no verdict NOT AFFECTED:\n%s", job.name, logs)
			}
		})
	}
	for _, ds := range []struct{ file, name string }{
		{"check-daemonset.yaml", "cfsprobe-check-nodes"},
		{"check-daemonset-quota.yaml", "cfsprobe-check-nodes-quota"},
	} {
		t.Run(ds.name, func(t *testing.T) {
			n.apply(t, ds.file)
			defer n.delete(t, ds.file)
			n.Kubectl(t, "-n", ns, "rollout", "status", "ds/"+ds.name, "--timeout=5m")
			logs := n.Kubectl(t, "-n", ns, "logs", "-l", "app.kubernetes.io/instance="+ds.name, "--tail=-1")
			want := "cfsprobe check on node " + nodeName + ": exit status 0"
			t.Logf("%s: %s; %s", ds.name, lineWith(logs, "NOT AFFECTED:"), lineWith(logs, "cfsprobe check on node"))
			if !strings.Contains(logs, want) || lineWith(logs, "NOT AFFECTED:") == "" {
				t.Errorf("the check DaemonSet's log lacks %q or the verdict NOT AFFECTED:\n%s", want, logs)
			}
		})
	}

	t.Run("throttled pod", func(t *testing.T) { checkThrottledPod(t, n, exp) })
	t.Run("static pod", func(t *testing.T) { checkStaticPod(t, n, exp) })
	// What the exporter said: it asks the API server alone, which
	// answered (a source that does not is logged).
	logs := n.Kubectl(t, "-n", ns, "logs", exp.Metadata.Name)
	t.Logf("the exporter's log:\n%s", logs)
	if strings.Contains(logs, "kubernetes https://") || strings.Contains(logs, "paths only") {
		t.Errorf("the exporter logged that a source of names did not answer")
	}

	// The chart, in place of the manifests' exporter (the same names).
	n.delete(t, "exporter-daemonset.yaml")
	t.Run("helm chart", func(t *testing.T) { checkHelmChart(t, n) })
	t.Logf("test wall time so far %.1f s", time.Since(wall).Seconds())
}

// checkExporterPrivileges checks from the host what the exporter's
// process may do: it runs as 65534 with no capabilities, no new
// privileges and the runtime's seccomp filter, its root filesystem and the
// host's cgroup tree are read-only, and it serves (it is Ready, and the
// scrape below reads the tree).
func checkExporterPrivileges(t *testing.T, n *Node, exp pod) {
	pid := n.containerPID(t, exp, "exporter")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, l := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{
		"Uid": "65534\t65534\t65534\t65534", "Gid": "65534\t65534\t65534\t65534",
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	} {
		if fields[k] != want {
			t.Errorf("exporter (pid %d) %s: %q, want %q", pid, k, fields[k], want)
		}
	}
	// Each mount as the exporter sees it: statfs through its root says
	// whether the mount is read-only.
	mounts, err := cgroup.ReadMountinfo(hostfs.Default(), strconv.Itoa(pid))
	if err != nil {
		t.Fatal(err)
	}
	ro := map[string]bool{}
	var submounts []string
	for _, m := range mounts {
		var st syscall.Statfs_t
		if err := syscall.Statfs(fmt.Sprintf("/proc/%d/root%s", pid, m.MountPoint), &st); err != nil {
			continue
		}
		ro[m.MountPoint] = st.Flags&stRdonly != 0
		if strings.HasPrefix(m.MountPoint, "/host/sys/fs/cgroup/") {
			submounts = append(submounts, fmt.Sprintf("%s %s", m.MountPoint, map[bool]string{true: "ro", false: "rw"}[ro[m.MountPoint]]))
		}
	}
	for _, p := range []string{"/", "/host/sys/fs/cgroup"} {
		if isRO, ok := ro[p]; !ok || !isRO {
			t.Errorf("exporter (pid %d): %s is not mounted read-only", pid, p)
		}
	}
	// The hierarchies mounted below /sys/fs/cgroup stay writable mounts
	// when the runtime cannot make the bind mount recursively read-only
	// (recursiveReadOnly: IfPossible; containerd 1.6 cannot): then nothing
	// in them may be writable by the exporter's user, which has no
	// capability to override the files' modes.
	var rw []string
	for p, isRO := range ro {
		if !isRO && strings.HasPrefix(p, "/host/sys/fs/cgroup/") {
			rw = append(rw, p)
		}
	}
	for _, p := range rw {
		host := strings.TrimPrefix(p, "/host")
		_ = filepath.WalkDir(host, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			var st syscall.Stat_t
			if syscall.Lstat(path, &st) != nil {
				return nil
			}
			if st.Mode&0o002 != 0 || st.Uid == 65534 && st.Mode&0o200 != 0 || st.Gid == 65534 && st.Mode&0o020 != 0 {
				t.Errorf("%s (the exporter's %s) is writable by uid/gid 65534: mode %o owner %d:%d", path, "/host"+path, st.Mode&0o7777, st.Uid, st.Gid)
			}
			return nil
		})
	}
	if g := fields["Groups"]; g != "" && g != "65534" {
		t.Errorf("exporter (pid %d) supplementary groups %q, want none", pid, g)
	}
	t.Logf("exporter pid %d: uid 65534, no capabilities, no new privileges, seccomp filter; / and /host/sys/fs/cgroup read-only; hierarchies below: %s; nothing in the %d writable ones is writable by uid/gid 65534",
		pid, strings.Join(submounts, ", "), len(rw))
}

// checkThrottledPod runs a busy loop in a pod limited to 200m and checks
// that `cfsprobe top --once --json` and the exporter's /metrics show it
// throttled.
func checkThrottledPod(t *testing.T, n *Node, exp pod) {
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Pod
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  automountServiceAccountToken: false
  enableServiceLinks: false
  terminationGracePeriodSeconds: 1
  containers:
    - name: %[3]s
      image: %[4]s
      command: ["/busybox/sh", "-c", "while :; do :; done & while :; do :; done"]
      resources:
        requests: {cpu: 200m, memory: 16Mi}
        limits: {cpu: 200m, memory: 16Mi}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities: {drop: [ALL]}
`, testNS, busyPod, busyCtr, dockerd.ImageRef+"-debug")
	path := filepath.Join(n.Dir, "busy.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	n.Kubectl(t, "apply", "-f", path)
	defer n.KubectlErr("delete", "-f", path, "--wait=true", "--timeout=60s")
	n.Kubectl(t, "-n", testNS, "wait", "--for=condition=Ready", "pod/"+busyPod, "--timeout=2m")
	busy := n.onlyPod(t, testNS, "")
	cgroup := n.containerCgroup(t, busy, busyCtr)
	t.Logf("pod %s/%s container %s: cgroup %s", testNS, busyPod, busyCtr, cgroup)

	// /metrics, twice 4 s apart. Two busy loops want 2 CPUs of the 0.2
	// they may have: a period in which they ran is a throttled one, but
	// on a busy machine they may not run in every period.
	// The exporter finds new groups when it walks the tree, every
	// --scan-interval (10 s): wait until it lists the pod's.
	url := fmt.Sprintf("http://%s:%d/metrics", exp.Status.PodIP, metricsPort)
	key := `cgroup="` + cgroup + `"`
	var first exposition
	if err := n.waitFor(30*time.Second, "the exporter listing "+cgroup, func() (bool, error) {
		first = scrape(t, nil, url)
		return first.find("cfsprobe_cpu_periods_total", key) != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second)
	second := scrape(t, nil, url)
	periods := second.value("cfsprobe_cpu_periods_total", key) - first.value("cfsprobe_cpu_periods_total", key)
	throttled := second.value("cfsprobe_cpu_throttled_periods_total", key) - first.value("cfsprobe_cpu_throttled_periods_total", key)
	t.Logf("/metrics of %s over 4 s: %g periods, %g throttled", cgroup, periods, throttled)
	if periods < 10 || throttled/periods < minThrottled {
		t.Errorf("/metrics: %s throttled in %g of %g periods, want %g or more of them", cgroup, throttled, periods, minThrottled)
	}
	info := second.find("cfsprobe_cgroup_info", key)
	for _, l := range second {
		if strings.HasPrefix(l, "cfsprobe_cgroup_info{") && strings.Contains(l, busy.Metadata.UID) {
			t.Logf("the pod's groups: %s", l)
		}
	}
	for _, l := range []string{`pod_namespace="` + testNS + `"`, `pod_name="` + busyPod + `"`, `container_name="` + busyCtr + `"`} {
		if !strings.Contains(info, l) {
			t.Errorf("cfsprobe_cgroup_info of the busy container lacks %s: %s", l, info)
		}
	}

	// cfsprobe top on the host, naming containers through the node's
	// CRI, and in the exporter's pod (no shell: the image's entrypoint),
	// naming them through the API server as the exporter does.
	out, err := exec.Command(cfsprobeBin(t), "top", "--once", "--json", "--interval", "3s", "--cri-endpoint", n.CRI).Output()
	if err != nil {
		t.Fatalf("cfsprobe top --once --json: %v", err)
	}
	checkTopRow(t, "top on the host", out, cgroup)
	inPod := n.Kubectl(t, "-n", ns, "exec", exp.Metadata.Name, "--", "/cfsprobe", "top", "--once", "--json", "--interval", "3s", "--cgroup-root", "/host/sys/fs/cgroup")
	checkTopRow(t, "top in the exporter's pod", []byte(inPod), cgroup)
}

// checkStaticPod checks that the exporter names the node's static pod's
// container: its group is named by the kubelet's config hash, which only
// the mirror pod's annotation ties to the pod's names.
func checkStaticPod(t *testing.T, n *Node, exp pod) {
	var mirror struct {
		Metadata struct {
			UID         string
			Annotations map[string]string
		}
	}
	name := staticPod + "-" + nodeName
	if err := n.GetJSON("/api/v1/namespaces/default/pods/"+name, &mirror); err != nil {
		t.Fatal(err)
	}
	hash := mirror.Metadata.Annotations["kubernetes.io/config.mirror"]
	if hash == "" || hash == mirror.Metadata.UID {
		t.Fatalf("mirror pod %s: config.mirror %q, UID %s: want a hash other than the UID", name, hash, mirror.Metadata.UID)
	}
	url := fmt.Sprintf("http://%s:%d/metrics", exp.Status.PodIP, metricsPort)
	want := `pod_name="` + name + `"`
	var info string
	if err := n.waitFor(30*time.Second, "the exporter naming the static pod", func() (bool, error) {
		for _, l := range scrape(t, nil, url) {
			if strings.HasPrefix(l, "cfsprobe_cgroup_info{") && strings.Contains(l, `pod_uid="`+hash+`"`) && strings.Contains(l, `container_name="`+staticCtr+`"`) {
				info = l
			}
		}
		return strings.Contains(info, want), nil
	}); err != nil {
		t.Fatalf("%v; its container's info: %s", err, info)
	}
	t.Logf("static pod (mirror UID %s, group pod%s): %s", mirror.Metadata.UID, hash, info)
}

// checkTopRow checks that top's JSON has the busy container's group,
// throttled, by its names.
func checkTopRow(t *testing.T, where string, out []byte, cgroup string) {
	t.Helper()
	var rows []map[string]any
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("top's JSON: %v", err)
	}
	var row map[string]any
	for _, r := range rows {
		if r["cgroup"] == cgroup {
			row = r
		}
	}
	if row == nil {
		t.Fatalf("%s does not list %s:\n%s", where, cgroup, out)
	}
	b, _ := json.Marshal(row)
	t.Logf("%s: %s", where, b)
	if r, _ := row["throttled_ratio"].(float64); r < minThrottled {
		t.Errorf("%s: throttled_ratio %v, want %g or more", where, row["throttled_ratio"], minThrottled)
	}
	for k, want := range map[string]string{"pod_namespace": testNS, "pod_name": busyPod, "container_name": busyCtr} {
		if row[k] != want {
			t.Errorf("%s: %s %v, want %q", where, k, row[k], want)
		}
	}
}

// apply applies files of deploy/kubernetes, with the image names
// substituted and nothing else changed.
func (n *Node) apply(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		n.Kubectl(t, "apply", "-f", n.manifest(t, f))
	}
}

// delete deletes what a file of deploy/kubernetes made, and waits.
func (n *Node) delete(t *testing.T, file string) {
	t.Helper()
	if _, err := n.KubectlErr("delete", "-f", n.manifest(t, file), "--wait=true", "--timeout=90s"); err != nil {
		t.Error(err)
	}
}

// imageRE matches a manifest's image lines.
var imageRE = regexp.MustCompile(`(?m)^(\s*image:\s*)(\S+)$`)

// manifest writes a file of deploy/kubernetes with the test's image names
// into the node's directory and returns its path.
func (n *Node) manifest(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(repoPath("deploy/kubernetes/" + file))
	if err != nil {
		t.Fatal(err)
	}
	s := imageRE.ReplaceAllStringFunc(string(b), func(line string) string {
		m := imageRE.FindStringSubmatch(line)
		for _, im := range imageNames {
			if m[2] == im.manifest {
				return m[1] + im.test
			}
		}
		t.Fatalf("%s: image %s is not one the test substitutes", file, m[2])
		return ""
	})
	dir := filepath.Join(n.Dir, "manifests")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pod is what the test reads of a pod.
type pod struct {
	Metadata struct {
		Name, Namespace, UID string
	}
	Status struct {
		PodIP             string
		ContainerStatuses []struct {
			Name, ContainerID string
		}
	}
}

// onlyPod returns the one pod of a namespace that matches a label
// selector.
func (n *Node) onlyPod(t *testing.T, namespace, selector string) pod {
	t.Helper()
	var list struct{ Items []pod }
	path := "/api/v1/namespaces/" + namespace + "/pods"
	if selector != "" {
		path += "?labelSelector=" + selector
	}
	if err := n.GetJSON(path, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d pods in %s matching %q, want 1", len(list.Items), namespace, selector)
	}
	return list.Items[0]
}

// containerCgroup returns the cgroup path (from the hierarchy's root) of a
// pod's container, which the kubelet's cgroupfs driver names by the pod's
// UID and the container's ID.
func (n *Node) containerCgroup(t *testing.T, p pod, container string) string {
	t.Helper()
	id := containerID(t, p, container)
	var found string
	root := "/sys/fs/cgroup/cpu"
	_ = filepath.WalkDir(filepath.Join(root, "kubepods"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == id && strings.Contains(path, "/pod"+p.Metadata.UID+"/") {
			found = strings.TrimPrefix(path, root)
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no cgroup of container %s (%s) of pod %s under %s/kubepods", container, id, p.Metadata.Name, root)
	}
	return found
}

// containerPID returns the host PID of a container's main process.
func (n *Node) containerPID(t *testing.T, p pod, container string) int {
	t.Helper()
	cg := n.containerCgroup(t, p, container)
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cg, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	pids := strings.Fields(string(b))
	if len(pids) != 1 {
		t.Fatalf("container %s of pod %s runs %d processes (%v), want 1", container, p.Metadata.Name, len(pids), pids)
	}
	pid, _ := strconv.Atoi(pids[0])
	return pid
}

func containerID(t *testing.T, p pod, container string) string {
	t.Helper()
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == container {
			_, id, _ := strings.Cut(c.ContainerID, "://")
			return id
		}
	}
	t.Fatalf("pod %s has no container %s", p.Metadata.Name, container)
	return ""
}

// waitJob waits until a Job completes or fails and returns which.
func (n *Node) waitJob(t *testing.T, namespace, name string, timeout time.Duration) string {
	t.Helper()
	var status string
	err := n.waitFor(timeout, "job "+name+" finished", func() (bool, error) {
		var job struct {
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
		if err := n.GetJSON("/apis/batch/v1/namespaces/"+namespace+"/jobs/"+name, &job); err != nil {
			return false, nil
		}
		for _, c := range job.Status.Conditions {
			if (c.Type == "Complete" || c.Type == "Failed") && c.Status == "True" {
				status = c.Type
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		out, _ := n.KubectlErr("-n", namespace, "describe", "job", name)
		t.Fatalf("%v\n%s", err, out)
	}
	return status
}

// exposition is a scrape's text, by line.
type exposition []string

// scrape GETs url with c (nil: plain HTTP) and returns the exposition.
func scrape(t *testing.T, c *http.Client, url string) exposition {
	t.Helper()
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape the exporter: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape the exporter: %s: %s", resp.Status, b)
	}
	var lines exposition
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for s.Scan() {
		if l := s.Text(); l != "" && l[0] != '#' {
			lines = append(lines, l)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// find returns the line of metric whose labels contain label.
func (e exposition) find(metric, label string) string {
	for _, l := range e {
		if strings.HasPrefix(l, metric+"{") && strings.Contains(l, label) {
			return l
		}
	}
	return ""
}

// value returns the value of metric's series whose labels contain label (0
// when there is none).
func (e exposition) value(metric, label string) float64 {
	l := e.find(metric, label)
	if l == "" {
		return 0
	}
	f := strings.Fields(l[strings.LastIndex(l, "}")+1:])
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// cfsprobeBin is the binary `make image` built (bin/cfsprobe): the one in
// the image.
func cfsprobeBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(repoPath("bin/cfsprobe"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lineWith returns the first line of s that starts with prefix, "" when
// none does.
func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
