package monitor

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A static pod's UID is a hash of its manifest: 32 hex digits, no dashes.
const staticPod = "6f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f"

var identifyCases = []struct {
	name string
	path string
	want Identity
}{
	// The kubelet's systemd driver.
	{
		name: "systemd-burstable-containerd",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice/cri-containerd-" + ctrA + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod 48118e8f/containerd 8a9026fda27b", PodUID: podA, QoS: QoSBurstable,
			ContainerID: ctrA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrA + ".scope"},
	},
	{
		name: "systemd-burstable-pod",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice",
		want: Identity{Kind: KindKubernetes, Name: "pod 48118e8f", PodUID: podA, QoS: QoSBurstable,
			Unit: "kubepods-burstable-pod" + esc(podA) + ".slice"},
	},
	{
		name: "systemd-guaranteed-pod",
		path: "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice",
		want: Identity{Kind: KindKubernetes, Name: "pod d3ce16dc", PodUID: podC, QoS: QoSGuaranteed, Unit: "kubepods-pod" + esc(podC) + ".slice"},
	},
	{
		name: "systemd-guaranteed-containerd",
		path: "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice/cri-containerd-" + ctrC + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod d3ce16dc/containerd 95cce2f742de", PodUID: podC, QoS: QoSGuaranteed,
			ContainerID: ctrC, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrC + ".scope"},
	},
	{
		name: "systemd-besteffort-containerd",
		path: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + esc(podD) + ".slice/cri-containerd-" + ctrD + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod 6861a18b/containerd 01540d6a1ed4", PodUID: podD, QoS: QoSBestEffort,
			ContainerID: ctrD, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrD + ".scope"},
	},
	{
		name: "systemd-crio",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-" + ctrE + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/cri-o 89f590d96fb2", PodUID: podE, QoS: QoSBurstable,
			ContainerID: ctrE, Runtime: RuntimeCRIO, Unit: "crio-" + ctrE + ".scope"},
	},
	{
		// conmon runs in a scope of its own beside the container: the
		// ID is in the name, but it is not the container.
		name: "systemd-crio-conmon",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-conmon-" + ctrE + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/conmon 89f590d96fb2", PodUID: podE, QoS: QoSBurstable,
			Runtime: RuntimeCRIO, Unit: "crio-conmon-" + ctrE + ".scope"},
	},
	{
		// crun's nested group below the scope keeps the container's
		// identity, with its own name.
		name: "systemd-crio-nested",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-" + ctrE + ".scope/container",
		want: Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/cri-o 89f590d96fb2/container", PodUID: podE, QoS: QoSBurstable,
			ContainerID: ctrE, Runtime: RuntimeCRIO, Unit: "crio-" + ctrE + ".scope"},
	},
	{
		name: "systemd-cri-dockerd",
		path: "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice/docker-" + ctrC + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod d3ce16dc/docker 95cce2f742de", PodUID: podC, QoS: QoSGuaranteed,
			ContainerID: ctrC, Runtime: RuntimeDocker, Unit: "docker-" + ctrC + ".scope"},
	},
	{
		name: "systemd-kubepods",
		path: "/kubepods.slice",
		want: Identity{Kind: KindKubernetes, Name: "kubepods", Unit: "kubepods.slice"},
	},
	{
		name: "systemd-qos",
		path: "/kubepods.slice/kubepods-besteffort.slice",
		want: Identity{Kind: KindKubernetes, Name: "kubepods/besteffort", QoS: QoSBestEffort, Unit: "kubepods-besteffort.slice"},
	},
	{
		// --cgroup-root=/kubelet.slice prefixes every slice.
		name: "systemd-cgroup-root",
		path: "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + esc(podA) + ".slice/cri-containerd-" + ctrA + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod 48118e8f/containerd 8a9026fda27b", PodUID: podA, QoS: QoSBurstable,
			ContainerID: ctrA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrA + ".scope"},
	},
	{
		name: "systemd-static-pod",
		path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + staticPod + ".slice",
		want: Identity{Kind: KindKubernetes, Name: "pod 6f1c2d3e", PodUID: staticPod, QoS: QoSBurstable,
			Unit: "kubepods-burstable-pod" + staticPod + ".slice"},
	},

	// The kubelet's cgroupfs driver: the runtime is not in the path.
	{
		name: "cgroupfs-burstable",
		path: "/kubepods/burstable/pod" + podH + "/" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, ContainerID: ctrH},
	},
	{
		name: "cgroupfs-guaranteed",
		path: "/kubepods/pod" + podJ + "/" + ctrJ,
		want: Identity{Kind: KindKubernetes, Name: "pod 7ba845e4/container b924a3c41c4e", PodUID: podJ, QoS: QoSGuaranteed, ContainerID: ctrJ},
	},
	{
		name: "cgroupfs-besteffort",
		path: "/kubepods/besteffort/pod" + podK + "/" + ctrK,
		want: Identity{Kind: KindKubernetes, Name: "pod b321278d/container df7963e34a75", PodUID: podK, QoS: QoSBestEffort, ContainerID: ctrK},
	},
	{
		name: "cgroupfs-pod",
		path: "/kubepods/burstable/pod" + podH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949", PodUID: podH, QoS: QoSBurstable},
	},
	{
		name: "cgroupfs-guaranteed-pod",
		path: "/kubepods/pod" + podJ,
		want: Identity{Kind: KindKubernetes, Name: "pod 7ba845e4", PodUID: podJ, QoS: QoSGuaranteed},
	},
	{
		name: "cgroupfs-kubepods",
		path: "/kubepods",
		want: Identity{Kind: KindKubernetes, Name: "kubepods"},
	},
	{
		name: "cgroupfs-qos",
		path: "/kubepods/burstable",
		want: Identity{Kind: KindKubernetes, Name: "kubepods/burstable", QoS: QoSBurstable},
	},
	{
		name: "cgroupfs-crio",
		path: "/kubepods/burstable/pod" + podH + "/crio-" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/cri-o 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, ContainerID: ctrH, Runtime: RuntimeCRIO},
	},
	{
		name: "cgroupfs-crio-conmon",
		path: "/kubepods/burstable/pod" + podH + "/crio-conmon-" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/conmon 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, Runtime: RuntimeCRIO},
	},
	{
		name: "cgroupfs-static-pod",
		path: "/kubepods/burstable/pod" + staticPod + "/" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 6f1c2d3e/container 7d6eddd1a71d", PodUID: staticPod, QoS: QoSBurstable, ContainerID: ctrH},
	},

	// Paths seen from inside a cgroup namespace whose root is below
	// kubepods: what the tail says is still recognised.
	{
		name: "tail-cgroupfs-qos",
		path: "/burstable/pod" + podH + "/" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, ContainerID: ctrH},
	},
	{
		// Below /kubepods or /kubepods/burstable: the QoS class is unknown.
		name: "tail-cgroupfs-pod",
		path: "/pod" + podH + "/" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 7d6eddd1a71d", PodUID: podH, ContainerID: ctrH},
	},
	{
		name: "tail-systemd-pod",
		path: "/kubepods-burstable-pod" + esc(podA) + ".slice/cri-containerd-" + ctrA + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod 48118e8f/containerd 8a9026fda27b", PodUID: podA, QoS: QoSBurstable,
			ContainerID: ctrA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrA + ".scope"},
	},
	{
		name: "tail-systemd-container",
		path: "/cri-containerd-" + ctrA + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "containerd 8a9026fda27b", ContainerID: ctrA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrA + ".scope"},
	},
	{
		name: "tail-bare-id",
		path: "/" + ctrH,
		want: Identity{Kind: KindCgroup, Name: "container 7d6eddd1a71d", ContainerID: ctrH},
	},
	{
		// A kind node is a Docker container running the kubelet.
		name: "kind-node",
		path: "/docker/" + dockerX + "/kubepods/burstable/pod" + podH + "/" + ctrH,
		want: Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, ContainerID: ctrH},
	},
	{
		name: "kind-node-systemd",
		path: "/system.slice/docker-" + dockerX + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + esc(podC) + ".slice/cri-containerd-" + ctrC + ".scope",
		want: Identity{Kind: KindKubernetes, Name: "pod d3ce16dc/containerd 95cce2f742de", PodUID: podC, QoS: QoSGuaranteed,
			ContainerID: ctrC, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrC + ".scope"},
	},

	// Docker.
	{
		name: "docker-cgroupfs",
		path: "/docker/" + dockerX,
		want: Identity{Kind: KindDocker, Name: "docker 38b69922967f", ContainerID: dockerX, Runtime: RuntimeDocker},
	},
	{
		name: "docker-systemd",
		path: "/system.slice/docker-" + dA + ".scope",
		want: Identity{Kind: KindDocker, Name: "docker 8ba8dcdbd628", ContainerID: dA, Runtime: RuntimeDocker, Unit: "docker-" + dA + ".scope"},
	},
	{
		name: "docker-parent",
		path: "/docker",
		want: Identity{Kind: KindDocker, Name: "docker"},
	},
	{
		name: "docker-daemon",
		path: "/system.slice/docker.service",
		want: Identity{Kind: KindSystemd, Name: "docker.service", Unit: "docker.service"},
	},
	{
		name: "docker-in-docker",
		path: "/docker/" + dockerX + "/docker/" + dockerY,
		want: Identity{Kind: KindDocker, Name: "docker 54e47c7eed8c", ContainerID: dockerY, Runtime: RuntimeDocker},
	},
	{
		// systemd inside a container: the units are part of the
		// container's name, not units of the host.
		name: "docker-systemd-inside",
		path: "/system.slice/docker-" + dA + ".scope/system.slice/nginx.service",
		want: Identity{Kind: KindDocker, Name: "docker 8ba8dcdbd628/system.slice/nginx.service", ContainerID: dA, Runtime: RuntimeDocker, Unit: "docker-" + dA + ".scope"},
	},

	// Podman.
	{
		name: "podman-machine",
		path: "/machine.slice/libpod-" + pA + ".scope",
		want: Identity{Kind: KindPodman, Name: "podman 92237a12e542", ContainerID: pA, Runtime: RuntimePodman, Unit: "libpod-" + pA + ".scope"},
	},
	{
		name: "podman-conmon",
		path: "/machine.slice/libpod-conmon-" + pA + ".scope",
		want: Identity{Kind: KindPodman, Name: "podman conmon 92237a12e542", Runtime: RuntimePodman, Unit: "libpod-conmon-" + pA + ".scope"},
	},
	{
		name: "podman-rootless",
		path: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + pR + ".scope",
		want: Identity{Kind: KindPodman, Name: "podman 9e501568f9b3", ContainerID: pR, Runtime: RuntimePodman, Unit: "libpod-" + pR + ".scope"},
	},
	{
		name: "podman-pod",
		path: "/machine.slice/machine-libpod_pod_" + podP + ".slice",
		want: Identity{Kind: KindPodman, Name: "podman pod 7a8027a80e05", Unit: "machine-libpod_pod_" + podP + ".slice"},
	},
	{
		name: "podman-pod-container",
		path: "/machine.slice/machine-libpod_pod_" + podP + ".slice/libpod-" + pB + ".scope",
		want: Identity{Kind: KindPodman, Name: "podman ed927c347033", ContainerID: pB, Runtime: RuntimePodman, Unit: "libpod-" + pB + ".scope"},
	},
	{
		name: "podman-cgroupfs",
		path: "/libpod_parent/libpod-" + pA,
		want: Identity{Kind: KindPodman, Name: "podman 92237a12e542", ContainerID: pA, Runtime: RuntimePodman},
	},

	// systemd.
	{
		name: "systemd-service",
		path: "/system.slice/nginx.service",
		want: Identity{Kind: KindSystemd, Name: "nginx.service", Unit: "nginx.service"},
	},
	{
		name: "systemd-slice",
		path: "/system.slice",
		want: Identity{Kind: KindSystemd, Name: "system.slice", Unit: "system.slice"},
	},
	{
		name: "systemd-session",
		path: "/user.slice/user-1000.slice/session-2.scope",
		want: Identity{Kind: KindSystemd, Name: "session-2.scope", Unit: "session-2.scope"},
	},
	{
		name: "systemd-template",
		path: "/system.slice/system-getty.slice/getty@tty1.service",
		want: Identity{Kind: KindSystemd, Name: "getty@tty1.service", Unit: "getty@tty1.service"},
	},
	{
		name: "systemd-trailing-slash",
		path: "/system.slice/nginx.service/",
		want: Identity{Kind: KindSystemd, Name: "nginx.service", Unit: "nginx.service"},
	},
	{
		// A service's own sub-groups (delegation) keep the unit.
		name: "systemd-delegated",
		path: "/system.slice/buildkitd.service/job-7",
		want: Identity{Kind: KindSystemd, Name: "buildkitd.service/job-7", Unit: "buildkitd.service"},
	},

	// Anything else is a cgroup by its path.
	{name: "cgroup", path: "/custom/job1", want: Identity{Kind: KindCgroup, Name: "/custom/job1"}},
	{name: "root", path: "/", want: Identity{Kind: KindCgroup, Name: "/"}},
	{name: "empty", path: "", want: Identity{Kind: KindCgroup, Name: "/"}},
	{name: "not-a-pod", path: "/podman", want: Identity{Kind: KindCgroup, Name: "/podman"}},
	{name: "qos-alone", path: "/burstable", want: Identity{Kind: KindCgroup, Name: "/burstable"}},
	{name: "short-hex", path: "/docker/abc", want: Identity{Kind: KindDocker, Name: "docker/abc"}},
	{name: "bare-unit-suffix", path: "/.service", want: Identity{Kind: KindCgroup, Name: "/.service"}},
}

func TestIdentify(t *testing.T) {
	for _, tc := range identifyCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Identify(tc.path); got != tc.want {
				t.Errorf("Identify(%q)\n got %+v\nwant %+v", tc.path, got, tc.want)
			}
		})
	}
}

func FuzzIdentify(f *testing.F) {
	for _, tc := range identifyCases {
		f.Add(tc.path)
	}
	f.Add("/kubepods-pod.slice")
	f.Add("//kubepods//burstable//pod" + podH + "//" + ctrH + "//")
	f.Add("/./docker/./" + dockerX)
	f.Fuzz(func(t *testing.T, path string) {
		id := Identify(path)
		switch id.Kind {
		case KindKubernetes, KindDocker, KindPodman, KindSystemd, KindCgroup:
		default:
			t.Fatalf("Identify(%q).Kind = %q", path, id.Kind)
		}
		if id.Name == "" {
			t.Fatalf("Identify(%q).Name is empty", path)
		}
		if id.Kind == KindCgroup && id.ContainerID == "" && id.Name != path && id.Name != "/" {
			t.Fatalf("Identify(%q).Name = %q, want the path", path, id.Name)
		}
		// What Identify reports comes out of the path.
		for _, s := range []string{id.ContainerID, id.Unit, strings.ReplaceAll(id.PodUID, "-", "_")} {
			if s != "" && !strings.Contains(strings.ReplaceAll(path, "-", "_"), strings.ReplaceAll(s, "-", "_")) {
				t.Fatalf("Identify(%q) reports %q, which is not in the path", path, s)
			}
		}
		if id.ContainerID != "" && len(id.ContainerID) < shortID {
			t.Fatalf("Identify(%q).ContainerID = %q, shorter than %d", path, id.ContainerID, shortID)
		}
		if utf8.ValidString(path) && !utf8.ValidString(id.Name) {
			t.Fatalf("Identify(%q).Name = %q is not valid UTF-8", path, id.Name)
		}
		// Identification depends on the components, not on how the
		// path spells its separators.
		if clean := "/" + strings.Join(strings.FieldsFunc(path, func(r rune) bool { return r == '/' }), "/"); id.Kind != KindCgroup {
			if got := Identify(clean); got != id {
				t.Fatalf("Identify(%q) = %+v but Identify(%q) = %+v", path, id, clean, got)
			}
		}
	})
}
