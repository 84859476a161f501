package containers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/testenv/dockerd"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// pauseRef is the image the real pod's sandbox and container run: busybox
// sleeping (the pause image cannot be pulled here).
const pauseRef = "cfsprobe-pause:test"

// listUntilUp lists c until the runtime answers.
func listUntilUp(t *testing.T, c *CRI) []Entry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, err := c.List(context.Background())
		if err == nil {
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("List of a real containerd's CRI: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCRIRealContainerd asks a real containerd, with its CRI plugin and
// nothing else of Kubernetes, through the CRI source, for a pod made as
// the kubelet makes one (sandbox, then a container with a CPU limit, under
// a cgroupfs parent kubepods/burstable/pod<uid>): the container's group,
// identified by its path alone, is named by the runtime.
func TestCRIRealContainerd(t *testing.T) {
	cd := dockerd.StartContainerd(t, dockerd.ContainerdOptions{CRI: true, SandboxImage: "docker.io/library/" + pauseRef})
	c, err := NewCRI(cd.Address())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after the pod's teardown, which uses it
	if entries := listUntilUp(t, c); len(entries) != 0 {
		t.Errorf("a containerd without pods listed %+v", entries)
	}

	// The image, built FROM scratch and imported as the kubelet's
	// images are where nothing can be pulled.
	d := dockerd.Start(t)
	d.BusyboxImage(t, pauseRef, "/bin/busybox", "sleep", "3600")
	cd.Ctr(t, "-n", "k8s.io", "images", "import", d.Save(t, pauseRef))

	rt := c.client
	ctx := context.Background()
	uid := fmt.Sprintf("0c0ffee0-%04x-4000-8000-%012x", os.Getpid()&0xffff, time.Now().UnixNano()&0xffffffffffff)
	top := fmt.Sprintf("cfsprobe-cri-%d", os.Getpid())
	parent := "/" + top + "/kubepods/burstable/pod" + uid
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", top))
		for _, d := range dirs {
			if err := dockerd.RemoveGroup(d); err != nil {
				t.Error(err)
			}
		}
	})
	sbConfig := &cri.PodSandboxConfig{
		Metadata: &cri.PodSandboxMetadata{Name: "api-7d9f", Uid: uid, Namespace: "shop"},
		Linux: &cri.LinuxPodSandboxConfig{CgroupParent: parent, SecurityContext: &cri.LinuxSandboxSecurityContext{
			NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_NODE, Pid: cri.NamespaceMode_CONTAINER, Ipc: cri.NamespaceMode_POD},
		}},
		LogDirectory: t.TempDir(),
	}
	sb, err := rt.RunPodSandbox(ctx, &cri.RunPodSandboxRequest{Config: sbConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		_, _ = rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
		if _, err := rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	ctr, err := rt.CreateContainer(ctx, &cri.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId, SandboxConfig: sbConfig,
		Config: &cri.ContainerConfig{
			Metadata: &cri.ContainerMetadata{Name: "app"},
			Image:    &cri.ImageSpec{Image: pauseRef},
			LogPath:  "app.log",
			Linux:    &cri.LinuxContainerConfig{Resources: &cri.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 20000}},
		},
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	t.Cleanup(func() {
		_, _ = rt.StopContainer(ctx, &cri.StopContainerRequest{ContainerId: ctr.ContainerId})
		if _, err := rt.RemoveContainer(ctx, &cri.RemoveContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
			t.Errorf("RemoveContainer: %v", err)
		}
	})
	if _, err := rt.StartContainer(ctx, &cri.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	// The container's group, found and identified by its path as top
	// and the exporter find it, and named through the CRI.
	root, err := monitor.OpenRoot("/sys/fs/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	g, err := root.GroupAt(parent + "/" + ctr.ContainerId)
	if err != nil {
		t.Fatalf("the container's group: %v", err)
	}
	if l, err := g.Limits(); err != nil || l.Quota != 20*time.Millisecond {
		t.Errorf("the container's group has limits %+v, %v; want a 20ms quota", l, err)
	}
	r := NewResolver([]Source{c}, Options{})
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	want := trace.Names{ContainerName: "app", Image: pauseRef, PodNamespace: "shop", PodName: "api-7d9f"}
	if n, ok := r.Names(g.ID); !ok || n.ContainerName != want.ContainerName || n.PodNamespace != want.PodNamespace || n.PodName != want.PodName || !strings.Contains(n.Image, pauseRef) {
		t.Errorf("Names(%+v) = %+v, %v; want %+v", g.ID, n, ok, want)
	}
	sbGroup, err := root.GroupAt(parent + "/" + sb.PodSandboxId)
	if err != nil {
		t.Fatalf("the sandbox's group: %v", err)
	}
	if n, _ := r.Names(sbGroup.ID); n.ContainerName != "POD" || n.PodName != "api-7d9f" {
		t.Errorf("the sandbox's group is named %+v", n)
	}
	podGroup, err := root.GroupAt(parent)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := r.Names(podGroup.ID); !ok || n != (trace.Names{PodNamespace: "shop", PodName: "api-7d9f"}) {
		t.Errorf("the pod's group is named %+v, %v", n, ok)
	}
	if got, err := r.FindPod("shop", "api-7d9f"); err != nil || got != uid {
		t.Errorf("FindPod = %q, %v; want %q", got, err, uid)
	}
	if got, err := r.FindContainer("app"); err != nil || got != ctr.ContainerId {
		t.Errorf("FindContainer(app) = %q, %v", got, err)
	}
	t.Logf("pod shop/api-7d9f (%s), container app: group %s named %+v", uid, g.Path, want)
}
