package monitor

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"golang.org/x/sys/unix"
)

const ms = time.Millisecond

// wantGroup is a group Discover must find in a fixture, and what its files say.
type wantGroup struct {
	path string
	id   Identity
	lim  cgroup.Limits
	stat cgroup.Stat
	// unknown is why its usage cannot be read: it has no cpuacct
	// directory (AcctDir "") and stat.UsageNs is 0.
	unknown UsageUnknown
}

// discoverCases are the fixture trees under testdata/<name>/, each the
// cgroup root (/sys/fs/cgroup) of a kind of node, and the groups with a
// quota in them. cpuDir and acctDir are relative to the fixture.
type discoverCase struct {
	name    string
	mode    cgroup.Mode
	version int
	cpuDir  string
	acctDir string
	groups  []wantGroup
}

var discoverCases = []discoverCase{
	{
		// A Kubernetes node (systemd driver, containerd) on cgroup v2: a burstable
		// pod with a limit on every container (so on the pod), one with a limit
		// on one container only, a guaranteed pod and a best-effort pod; pause
		// containers unlimited; user-1000.slice without the cpu controller.
		name: "k8s-systemd-v2-containerd", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod 48118e8f", PodUID: podA, QoS: QoSBurstable, Unit: "kubepods-burstable-pod" + esc(podA) + ".slice"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 9876540000, NrPeriods: 10007, NrThrottled: 3335, ThrottledNs: 4115390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice/cri-containerd-" + ctrA + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod 48118e8f/containerd 8a9026fda27b", PodUID: podA, QoS: QoSBurstable, ContainerID: ctrA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrA + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms, Burst: 10 * ms},
				stat: cgroup.Stat{UsageNs: 11851848000, NrPeriods: 12007, NrThrottled: 4002, ThrottledNs: 4938468000},
			},
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podB) + ".slice/cri-containerd-" + ctrB1 + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod 94cc4dea/containerd 0f80d7a3fe96", PodUID: podB, QoS: QoSBurstable, ContainerID: ctrB1, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrB1 + ".scope"},
				lim:  cgroup.Limits{Quota: 20 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 14814810000, NrPeriods: 15007, NrThrottled: 5002, ThrottledNs: 6172468000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod d3ce16dc", PodUID: podC, QoS: QoSGuaranteed, Unit: "kubepods-pod" + esc(podC) + ".slice"},
				lim:  cgroup.Limits{Quota: 200 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 16790118000, NrPeriods: 17007, NrThrottled: 5669, ThrottledNs: 6995546000, NrBursts: 2, BurstNs: 1000000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice/cri-containerd-" + ctrC + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod d3ce16dc/containerd 95cce2f742de", PodUID: podC, QoS: QoSGuaranteed, ContainerID: ctrC, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrC + ".scope"},
				lim:  cgroup.Limits{Quota: 200 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 18765426000, NrPeriods: 19007, NrThrottled: 6335, ThrottledNs: 7817390000, NrBursts: 1, BurstNs: 500000},
			},
		},
	},
	{
		// The same with CRI-O: conmon scopes beside the containers and crun's
		// nested "container" group, none with a quota.
		name: "k8s-systemd-v2-crio", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod d81d8bf8", PodUID: podE, QoS: QoSBurstable, Unit: "kubepods-burstable-pod" + esc(podE) + ".slice"},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 31604928000, NrPeriods: 32007, NrThrottled: 10669, ThrottledNs: 13165546000, NrBursts: 2, BurstNs: 1000000},
			},
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-" + ctrE + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/cri-o 89f590d96fb2", PodUID: podE, QoS: QoSBurstable, ContainerID: ctrE, Runtime: RuntimeCRIO, Unit: "crio-" + ctrE + ".scope"},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 34567890000, NrPeriods: 35007, NrThrottled: 11669, ThrottledNs: 14399546000, NrBursts: 2, BurstNs: 1000000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podG) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod eaf9d47b", PodUID: podG, QoS: QoSGuaranteed, Unit: "kubepods-pod" + esc(podG) + ".slice"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 40493814000, NrPeriods: 41007, NrThrottled: 13669, ThrottledNs: 16867546000, NrBursts: 2, BurstNs: 1000000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podG) + ".slice/crio-" + ctrG + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod eaf9d47b/cri-o 23aa3858f4c7", PodUID: podG, QoS: QoSGuaranteed, ContainerID: ctrG, Runtime: RuntimeCRIO, Unit: "crio-" + ctrG + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 41481468000, NrPeriods: 42007, NrThrottled: 14002, ThrottledNs: 17278468000},
			},
		},
	},
	{
		// A Kubernetes node (cgroupfs driver, Docker) on cgroup v1 with cpu and
		// cpuacct co-mounted (symlinks cpu and cpuacct to cpu,cpuacct), on a
		// kernel without burst (no cpu.cfs_burst_us); a plain Docker
		// container beside the pods, one container with a 50 ms period.
		name: "k8s-cgroupfs-v1-docker", mode: cgroup.ModeV1, version: 1, cpuDir: "cpu,cpuacct", acctDir: "cpu,cpuacct",
		groups: []wantGroup{
			{
				path: "/docker/" + dockerX,
				id:   Identity{Kind: KindDocker, Name: "docker 38b69922967f", ContainerID: dockerX, Runtime: RuntimeDocker},
				lim:  cgroup.Limits{Quota: 150 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 45432084123, NrPeriods: 46007, NrThrottled: 15335, ThrottledNs: 18923390000},
			},
			{
				path: "/kubepods/burstable/pod" + podH,
				id:   Identity{Kind: KindKubernetes, Name: "pod 0dea1949", PodUID: podH, QoS: QoSBurstable},
				lim:  cgroup.Limits{Quota: 30 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 51358008123, NrPeriods: 52007, NrThrottled: 17335, ThrottledNs: 21391390000},
			},
			{
				path: "/kubepods/burstable/pod" + podH + "/" + ctrH,
				id:   Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 7d6eddd1a71d", PodUID: podH, QoS: QoSBurstable, ContainerID: ctrH},
				lim:  cgroup.Limits{Quota: 30 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 53333316123, NrPeriods: 54007, NrThrottled: 18002, ThrottledNs: 22214468000},
			},
			{
				path: "/kubepods/burstable/pod" + podI + "/" + ctrI1,
				id:   Identity{Kind: KindKubernetes, Name: "pod 09eb5a25/container a5cfa21bca7c", PodUID: podI, QoS: QoSBurstable, ContainerID: ctrI1},
				lim:  cgroup.Limits{Quota: 25 * ms, Period: 50 * ms},
				stat: cgroup.Stat{UsageNs: 56296278123, NrPeriods: 57007, NrThrottled: 19002, ThrottledNs: 23448468000},
			},
			{
				path: "/kubepods/pod" + podJ,
				id:   Identity{Kind: KindKubernetes, Name: "pod 7ba845e4", PodUID: podJ, QoS: QoSGuaranteed},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 58271586123, NrPeriods: 59007, NrThrottled: 19669, ThrottledNs: 24271546000},
			},
			{
				path: "/kubepods/pod" + podJ + "/" + ctrJ,
				id:   Identity{Kind: KindKubernetes, Name: "pod 7ba845e4/container b924a3c41c4e", PodUID: podJ, QoS: QoSGuaranteed, ContainerID: ctrJ},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 60246894123, NrPeriods: 61007, NrThrottled: 20335, ThrottledNs: 25093390000},
			},
		},
	},
	{
		// A Kubernetes node (systemd driver, containerd) on cgroup v1 with cpu
		// and cpuacct mounted apart, like this machine: usage comes from the
		// cpuacct tree.
		name: "k8s-systemd-v1-containerd", mode: cgroup.ModeV1, version: 1, cpuDir: "cpu", acctDir: "cpuacct",
		groups: []wantGroup{
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podL) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod 0538ece5", PodUID: podL, QoS: QoSBurstable, Unit: "kubepods-burstable-pod" + esc(podL) + ".slice"},
				lim:  cgroup.Limits{Quota: 150 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 72098742123, NrPeriods: 73007, NrThrottled: 24335, ThrottledNs: 30029390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podL) + ".slice/cri-containerd-" + ctrL1 + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod 0538ece5/containerd 33cf4ca9d482", PodUID: podL, QoS: QoSBurstable, ContainerID: ctrL1, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrL1 + ".scope"},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms, Burst: 20 * ms},
				stat: cgroup.Stat{UsageNs: 74074050123, NrPeriods: 75007, NrThrottled: 25002, ThrottledNs: 30852468000},
			},
			{
				path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podL) + ".slice/cri-containerd-" + ctrL2 + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod 0538ece5/containerd ccd1d47d14c8", PodUID: podL, QoS: QoSBurstable, ContainerID: ctrL2, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrL2 + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 75061704123, NrPeriods: 76007, NrThrottled: 25335, ThrottledNs: 31263390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podN) + ".slice",
				id:   Identity{Kind: KindKubernetes, Name: "pod e5a760cd", PodUID: podN, QoS: QoSGuaranteed, Unit: "kubepods-pod" + esc(podN) + ".slice"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 78024666123, NrPeriods: 79007, NrThrottled: 26335, ThrottledNs: 32497390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/kubepods.slice/kubepods-pod" + esc(podN) + ".slice/cri-containerd-" + ctrN + ".scope",
				id:   Identity{Kind: KindKubernetes, Name: "pod e5a760cd/containerd 27beb74093b1", PodUID: podN, QoS: QoSGuaranteed, ContainerID: ctrN, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + ctrN + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 79012320123, NrPeriods: 80007, NrThrottled: 26669, ThrottledNs: 32909546000, NrBursts: 2, BurstNs: 1000000},
			},
		},
	},
	{
		// A host like this project's test machine (cgroup v1 cpu and cpuacct
		// mounted apart, a cgroup2 tree at unified without controllers) on
		// which groups were made in the cpu hierarchy alone (cgcreate -g
		// cpu:/batch, mkdir): /batch and its child throttled in about every
		// period, /tenant/worker under a /tenant that cpuacct has. Their
		// usage is unknown; their throttling is read all the same. The
		// nginx service, in both hierarchies, has its usage.
		name: "cpu-only-v1-apart", mode: cgroup.ModeHybrid, version: 1, cpuDir: "cpu", acctDir: "cpuacct",
		groups: []wantGroup{
			{
				path:    "/batch",
				id:      Identity{Kind: KindCgroup, Name: "/batch"},
				lim:     cgroup.Limits{Quota: 20 * ms, Period: 100 * ms},
				stat:    cgroup.Stat{NrPeriods: 150007, NrThrottled: 150007, ThrottledNs: 12000560000},
				unknown: UsageNoCpuacctGroup,
			},
			{
				path:    "/batch/job-7",
				id:      Identity{Kind: KindCgroup, Name: "/batch/job-7"},
				lim:     cgroup.Limits{Quota: 10 * ms, Period: 50 * ms},
				stat:    cgroup.Stat{NrPeriods: 160007, NrThrottled: 159998, ThrottledNs: 6399920000},
				unknown: UsageNoCpuacctGroup,
			},
			{
				path: "/system.slice/nginx.service",
				id:   Identity{Kind: KindSystemd, Name: "nginx.service", Unit: "nginx.service"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 6987654123, NrPeriods: 140007, NrThrottled: 2335, ThrottledNs: 93390000},
			},
			{
				path:    "/tenant/worker",
				id:      Identity{Kind: KindCgroup, Name: "/tenant/worker"},
				lim:     cgroup.Limits{Quota: 30 * ms, Period: 100 * ms, Burst: 5 * ms},
				stat:    cgroup.Stat{NrPeriods: 170007, NrThrottled: 85002, ThrottledNs: 5100120000, NrBursts: 3, BurstNs: 15000000},
				unknown: UsageNoCpuacctGroup,
			},
		},
	},
	{
		// Docker with the systemd driver on cgroup v2.
		name: "docker-v2", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/system.slice/docker-" + dA + ".scope",
				id:   Identity{Kind: KindDocker, Name: "docker 8ba8dcdbd628", ContainerID: dA, Runtime: RuntimeDocker, Unit: "docker-" + dA + ".scope"},
				lim:  cgroup.Limits{Quota: 150 * ms, Period: 100 * ms, Burst: 50 * ms},
				stat: cgroup.Stat{UsageNs: 83950590000, NrPeriods: 85007, NrThrottled: 28335, ThrottledNs: 34965390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/system.slice/docker-" + dC + ".scope",
				id:   Identity{Kind: KindDocker, Name: "docker deac195d9b41", ContainerID: dC, Runtime: RuntimeDocker, Unit: "docker-" + dC + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 85925898000, NrPeriods: 87007, NrThrottled: 29002, ThrottledNs: 35788468000},
			},
		},
	},
	{
		// Podman: rootful containers, a pod with a limit, a rootless container
		// under user@1000.service; conmon scopes unlimited.
		name: "podman-v2", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/machine.slice/libpod-" + pA + ".scope",
				id:   Identity{Kind: KindPodman, Name: "podman 92237a12e542", ContainerID: pA, Runtime: RuntimePodman, Unit: "libpod-" + pA + ".scope"},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 89876514000, NrPeriods: 91007, NrThrottled: 30335, ThrottledNs: 37433390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/machine.slice/machine-libpod_pod_" + podP + ".slice",
				id:   Identity{Kind: KindPodman, Name: "podman pod 7a8027a80e05", Unit: "machine-libpod_pod_" + podP + ".slice"},
				lim:  cgroup.Limits{Quota: 200 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 91851822000, NrPeriods: 93007, NrThrottled: 31002, ThrottledNs: 38256468000},
			},
			{
				path: "/machine.slice/machine-libpod_pod_" + podP + ".slice/libpod-" + pB + ".scope",
				id:   Identity{Kind: KindPodman, Name: "podman ed927c347033", ContainerID: pB, Runtime: RuntimePodman, Unit: "libpod-" + pB + ".scope"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 93827130000, NrPeriods: 95007, NrThrottled: 31669, ThrottledNs: 39079546000, NrBursts: 2, BurstNs: 1000000},
			},
			{
				path: "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + pR + ".scope",
				id:   Identity{Kind: KindPodman, Name: "podman 9e501568f9b3", ContainerID: pR, Runtime: RuntimePodman, Unit: "libpod-" + pR + ".scope"},
				lim:  cgroup.Limits{Quota: 25 * ms, Period: 50 * ms},
				stat: cgroup.Stat{UsageNs: 100740708000, NrPeriods: 102007, NrThrottled: 34002, ThrottledNs: 41958468000},
			},
		},
	},
	{
		// systemd services and slices with CPUQuota=, and a hand-made group.
		name: "systemd-services-v2", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/system.slice/nginx.service",
				id:   Identity{Kind: KindSystemd, Name: "nginx.service", Unit: "nginx.service"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 104691324000, NrPeriods: 106007, NrThrottled: 35335, ThrottledNs: 43603390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/system.slice/backup.service",
				id:   Identity{Kind: KindSystemd, Name: "backup.service", Unit: "backup.service"},
				lim:  cgroup.Limits{Quota: 20 * ms, Period: 100 * ms, Burst: 10 * ms},
				stat: cgroup.Stat{UsageNs: 106666632000, NrPeriods: 108007, NrThrottled: 36002, ThrottledNs: 44426468000},
			},
			{
				path: "/batch.slice",
				id:   Identity{Kind: KindSystemd, Name: "batch.slice", Unit: "batch.slice"},
				lim:  cgroup.Limits{Quota: 200 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 109629594000, NrPeriods: 111007, NrThrottled: 37002, ThrottledNs: 45660468000},
			},
			{
				path: "/user.slice/user-1000.slice",
				id:   Identity{Kind: KindSystemd, Name: "user-1000.slice", Unit: "user-1000.slice"},
				lim:  cgroup.Limits{Quota: 100 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 112592556000, NrPeriods: 114007, NrThrottled: 38002, ThrottledNs: 46894468000},
			},
			{
				path: "/custom/job1",
				id:   Identity{Kind: KindCgroup, Name: "/custom/job1"},
				lim:  cgroup.Limits{Quota: 30 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 115555518000, NrPeriods: 117007, NrThrottled: 39002, ThrottledNs: 48128468000},
			},
		},
	},
	{
		// Ubuntu booted with systemd.unified_cgroup_hierarchy=0: cpu,cpuacct
		// co-mounted, a cgroup2 tree at unified without controllers.
		name: "hybrid", mode: cgroup.ModeHybrid, version: 1, cpuDir: "cpu,cpuacct", acctDir: "cpu,cpuacct",
		groups: []wantGroup{
			{
				path: "/system.slice/docker-" + hA + ".scope",
				id:   Identity{Kind: KindDocker, Name: "docker b81cea691b5b", ContainerID: hA, Runtime: RuntimeDocker, Unit: "docker-" + hA + ".scope"},
				lim:  cgroup.Limits{Quota: 200 * ms, Period: 100 * ms, Burst: 100 * ms},
				stat: cgroup.Stat{UsageNs: 119506134123, NrPeriods: 121007, NrThrottled: 40335, ThrottledNs: 49773390000, NrBursts: 1, BurstNs: 500000},
			},
			{
				path: "/batch/job-42",
				id:   Identity{Kind: KindCgroup, Name: "/batch/job-42"},
				lim:  cgroup.Limits{Quota: 50 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 124444404123, NrPeriods: 126007, NrThrottled: 42002, ThrottledNs: 51830468000},
			},
		},
	},
	{
		// A container's own view on cgroup v2 (private cgroup namespace): its
		// group is the root, with the container's quota.
		name: "container-v2", mode: cgroup.ModeV2, version: 2, cpuDir: "", acctDir: "",
		groups: []wantGroup{
			{
				path: "/",
				id:   Identity{Kind: KindCgroup, Name: "/"},
				lim:  cgroup.Limits{Quota: 150 * ms, Period: 100 * ms},
				stat: cgroup.Stat{UsageNs: 125432058000, NrPeriods: 127007, NrThrottled: 42335, ThrottledNs: 52241390000, NrBursts: 1, BurstNs: 500000},
			},
		},
	},
}

func TestDiscoverFixtures(t *testing.T) {
	for _, tc := range discoverCases {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join("testdata", tc.name)
			r, err := OpenRoot(base)
			if err != nil {
				t.Fatalf("OpenRoot: %v", err)
			}
			want := Root{Dir: base, Mode: tc.mode, Version: tc.version, CPUDir: filepath.Join(base, tc.cpuDir), AcctDir: filepath.Join(base, tc.acctDir)}
			if *r != want {
				t.Fatalf("OpenRoot = %+v, want %+v", *r, want)
			}
			d, err := r.Discover(Options{})
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if len(d.Skipped) > 0 {
				t.Errorf("Skipped = %v, want none", d.Skipped)
			}
			checkTreeOrder(t, d.Groups)
			byPath := map[string]Group{}
			for _, g := range d.Groups {
				byPath[g.Path] = g
			}
			for _, w := range tc.groups {
				if _, ok := byPath[w.path]; !ok {
					t.Errorf("group %s not found", w.path)
				}
			}
			if len(d.Groups) != len(tc.groups) {
				var got []string
				for _, g := range d.Groups {
					got = append(got, g.Path)
				}
				t.Errorf("Discover found %d groups, want %d:\n%s", len(got), len(tc.groups), strings.Join(got, "\n"))
			}
			for _, w := range tc.groups {
				g, ok := byPath[w.path]
				if !ok {
					continue
				}
				checkGroup(t, r, g, w)
			}
		})
	}
}

// checkGroup checks a found group against what the fixture holds.
func checkGroup(t *testing.T, r *Root, g Group, w wantGroup) {
	t.Helper()
	if g.ID != w.id {
		t.Errorf("%s: ID\n got %+v\nwant %+v", w.path, g.ID, w.id)
	}
	if g.Version != r.Version {
		t.Errorf("%s: Version = %d, want %d", w.path, g.Version, r.Version)
	}
	if want := filepath.Join(r.CPUDir, w.path); g.CPUDir != want {
		t.Errorf("%s: CPUDir = %s, want %s", w.path, g.CPUDir, want)
	}
	wantAcct := filepath.Join(r.AcctDir, w.path)
	if w.unknown != "" {
		wantAcct = ""
	}
	if g.AcctDir != wantAcct {
		t.Errorf("%s: AcctDir = %q, want %q", w.path, g.AcctDir, wantAcct)
	}
	if u := g.UsageUnknown(); u != w.unknown {
		t.Errorf("%s: UsageUnknown = %q, want %q", w.path, u, w.unknown)
	}
	lim, err := g.Limits()
	if err != nil {
		t.Errorf("%s: Limits: %v", w.path, err)
	} else if lim != w.lim {
		t.Errorf("%s: Limits = %+v, want %+v", w.path, lim, w.lim)
	}
	st, err := g.Stat()
	if err != nil {
		t.Errorf("%s: Stat: %v", w.path, err)
	} else if st != w.stat {
		t.Errorf("%s: Stat\n got %+v\nwant %+v", w.path, st, w.stat)
	}
}

// checkTreeOrder checks that groups come parents first, siblings by name.
func checkTreeOrder(t *testing.T, gs []Group) {
	t.Helper()
	for i := 1; i < len(gs); i++ {
		a, b := strings.Split(gs[i-1].Path, "/"), strings.Split(gs[i].Path, "/")
		if slices.Compare(a, b) >= 0 {
			t.Errorf("groups out of tree order: %s before %s", gs[i-1].Path, gs[i].Path)
		}
	}
}

// treeDirs lists the directories below a fixture's cpu hierarchy as group
// paths, found independently of Discover.
func treeDirs(t *testing.T, cpuDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(cpuDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(cpuDir, p)
			out = append(out, filepath.Join("/", rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With All, Discover returns every directory of the cpu hierarchy, the
// root included, and each one's counters and limits can be read.
func TestDiscoverAll(t *testing.T) {
	for _, tc := range discoverCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := OpenRoot(filepath.Join("testdata", tc.name))
			if err != nil {
				t.Fatal(err)
			}
			d, err := r.Discover(Options{All: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Skipped) > 0 {
				t.Errorf("Skipped = %v, want none", d.Skipped)
			}
			checkTreeOrder(t, d.Groups)
			var got []string
			limited := 0
			for _, g := range d.Groups {
				got = append(got, g.Path)
				lim, err := g.Limits()
				if err != nil {
					t.Errorf("%s: Limits: %v", g.Path, err)
				}
				if !lim.Unlimited() {
					limited++
				}
				if _, err := g.Stat(); err != nil {
					t.Errorf("%s: Stat: %v", g.Path, err)
				}
			}
			want := treeDirs(t, r.CPUDir)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("Discover(All) found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if limited != len(tc.groups) {
				t.Errorf("%d groups have a quota by Limits, want %d", limited, len(tc.groups))
			}
		})
	}
}

// Groups without a quota, as All shows them: the root, a v2 group without
// the cpu controller, conmon and crun's nested group.
func TestDiscoverAllUnlimited(t *testing.T) {
	unlimited := cgroup.Limits{Period: 100 * ms}
	cases := []struct {
		fixture string
		want    wantGroup
	}{
		{"k8s-systemd-v2-containerd", wantGroup{
			path: "/",
			id:   Identity{Kind: KindCgroup, Name: "/"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 4488123456000},
		}},
		{"k8s-systemd-v2-containerd", wantGroup{
			path: "/user.slice/user-1000.slice",
			id:   Identity{Kind: KindSystemd, Name: "user-1000.slice", Unit: "user-1000.slice"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 5925924000},
		}},
		{"k8s-systemd-v2-containerd", wantGroup{
			path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice/cri-containerd-" + pauseA + ".scope",
			id: Identity{Kind: KindKubernetes, Name: "pod 48118e8f/containerd 8b1f4a8326ff", PodUID: podA, QoS: QoSBurstable,
				ContainerID: pauseA, Runtime: RuntimeContainerd, Unit: "cri-containerd-" + pauseA + ".scope"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 10864194000},
		}},
		{"k8s-systemd-v2-crio", wantGroup{
			path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-conmon-" + ctrE + ".scope",
			id: Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/conmon 89f590d96fb2", PodUID: podE, QoS: QoSBurstable,
				Runtime: RuntimeCRIO, Unit: "crio-conmon-" + ctrE + ".scope"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 36543198000},
		}},
		{"k8s-systemd-v2-crio", wantGroup{
			path: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podE) + ".slice/crio-" + ctrE + ".scope/container",
			id: Identity{Kind: KindKubernetes, Name: "pod d81d8bf8/cri-o 89f590d96fb2/container", PodUID: podE, QoS: QoSBurstable,
				ContainerID: ctrE, Runtime: RuntimeCRIO, Unit: "crio-" + ctrE + ".scope"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 35555544000},
		}},
		{"k8s-systemd-v1-containerd", wantGroup{
			path: "/",
			id:   Identity{Kind: KindCgroup, Name: "/"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 64197510123},
		}},
		{"cpu-only-v1-apart", wantGroup{
			path:    "/scratch",
			id:      Identity{Kind: KindCgroup, Name: "/scratch"},
			lim:     unlimited,
			unknown: UsageNoCpuacctGroup,
		}},
		{"cpu-only-v1-apart", wantGroup{
			path: "/tenant",
			id:   Identity{Kind: KindCgroup, Name: "/tenant"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 12345678123},
		}},
		{"k8s-cgroupfs-v1-docker", wantGroup{
			path: "/kubepods/burstable/pod" + podH + "/" + pauseH,
			id:   Identity{Kind: KindKubernetes, Name: "pod 0dea1949/container 750d4546acbd", PodUID: podH, QoS: QoSBurstable, ContainerID: pauseH},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 52345662123},
		}},
		{"podman-v2", wantGroup{
			path: "/machine.slice/libpod-conmon-" + pA + ".scope",
			id:   Identity{Kind: KindPodman, Name: "podman conmon 92237a12e542", Runtime: RuntimePodman, Unit: "libpod-conmon-" + pA + ".scope"},
			lim:  unlimited,
			stat: cgroup.Stat{UsageNs: 90864168000},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture+tc.want.path, func(t *testing.T) {
			r, err := OpenRoot(filepath.Join("testdata", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			d, err := r.Discover(Options{All: true})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(d.Groups, func(g Group) bool { return g.Path == tc.want.path })
			if i < 0 {
				t.Fatalf("group %s not found", tc.want.path)
			}
			checkGroup(t, r, d.Groups[i], tc.want)
		})
	}
}

// GroupAt pairs a group with its cpuacct directory as Discover does: none
// for a group made in the cpu hierarchy alone.
func TestGroupAtCPUOnly(t *testing.T) {
	r, err := OpenRoot(filepath.Join("testdata", "cpu-only-v1-apart"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range discoverCases[slices.IndexFunc(discoverCases, func(c discoverCase) bool { return c.name == "cpu-only-v1-apart" })].groups {
		g, err := r.GroupAt(w.path)
		if err != nil {
			t.Errorf("GroupAt(%s): %v", w.path, err)
			continue
		}
		checkGroup(t, r, g, w)
	}
}

func TestDiscoverMaxDepth(t *testing.T) {
	r, err := OpenRoot(filepath.Join("testdata", "k8s-systemd-v2-containerd"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		opts Options
		want []string
	}{
		{Options{All: true, MaxDepth: 1}, []string{"/", "/init.scope", "/kubepods.slice", "/system.slice", "/user.slice"}},
		{Options{All: true, MaxDepth: 2}, []string{"/", "/init.scope", "/kubepods.slice",
			"/kubepods.slice/kubepods-besteffort.slice", "/kubepods.slice/kubepods-burstable.slice", "/kubepods.slice/kubepods-pod" + esc(podC) + ".slice",
			"/system.slice", "/system.slice/containerd.service", "/system.slice/kubelet.service",
			"/user.slice", "/user.slice/user-1000.slice"}},
		{Options{MaxDepth: 2}, []string{"/kubepods.slice/kubepods-pod" + esc(podC) + ".slice"}},
		{Options{MaxDepth: 3}, []string{
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + esc(podA) + ".slice",
			"/kubepods.slice/kubepods-pod" + esc(podC) + ".slice",
			"/kubepods.slice/kubepods-pod" + esc(podC) + ".slice/cri-containerd-" + ctrC + ".scope"}},
	}
	for _, tc := range cases {
		d, err := r.Discover(tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range d.Groups {
			got = append(got, g.Path)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Discover(%+v) =\n%s\nwant\n%s", tc.opts, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

func TestParseQuotaSet(t *testing.T) {
	cases := []struct {
		in      string
		version int
		want    bool
		err     bool
	}{
		{"-1\n", 1, false, false},
		{"50000\n", 1, true, false},
		{"0\n", 1, false, false},
		{"", 1, false, true},
		{"max\n", 1, false, true},
		{"max 100000\n", 2, false, false},
		{"max\n", 2, false, false},
		{"50000 100000\n", 2, true, false},
		{"50000\t100000", 2, true, false},
		{"", 2, false, true},
		{"lots 100000", 2, false, true},
		{"-1", 2, false, false},
	}
	for _, tc := range cases {
		got, err := parseQuotaSet([]byte(tc.in), tc.version)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("parseQuotaSet(%q, v%d) = %v, %v; want %v, error %v", tc.in, tc.version, got, err, tc.want, tc.err)
		}
	}
}

// FuzzParseQuotaSet checks that a quota is set exactly when the kernel's
// own parser (cgroup.ReadLimits') reads a positive quota from the same text.
func FuzzParseQuotaSet(f *testing.F) {
	for _, s := range []string{"-1\n", "50000\n", "max 100000\n", "50000 100000\n", "max\n", "0", " 7 "} {
		f.Add([]byte(s), 1)
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, b []byte, version int) {
		if version != 1 {
			version = 2
		}
		set, err := parseQuotaSet(b, version)
		if err != nil {
			if set {
				t.Fatalf("parseQuotaSet(%q) = true with error %v", b, err)
			}
			return
		}
		// Cross-check with cgroup.ReadLimits on the same contents.
		dir := t.TempDir()
		if version == 2 {
			writeFile(t, filepath.Join(dir, "cpu.max"), string(b))
		} else {
			writeFile(t, filepath.Join(dir, "cpu.cfs_quota_us"), string(b))
			writeFile(t, filepath.Join(dir, "cpu.cfs_period_us"), "100000\n")
		}
		m, err := cgroup.ReadLimits(dir, version)
		if err == nil && m.Unlimited() == set {
			t.Fatalf("parseQuotaSet(%q, v%d) = %v but ReadLimits gives quota %v", b, version, set, m.Quota)
		}
	})
}

// writeFile writes a file of a test tree, making its directory.
func writeFile(t testing.TB, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// v1Tree makes a cgroup root with cpu and cpuacct apart and the given
// groups (path -> cpu.cfs_quota_us); "" is the root.
func v1Tree(t testing.TB, groups map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, quota := range groups {
		cpu, acct := filepath.Join(root, "cpu", p), filepath.Join(root, "cpuacct", p)
		if quota != "" {
			writeFile(t, filepath.Join(cpu, "cpu.cfs_quota_us"), quota+"\n")
		}
		writeFile(t, filepath.Join(cpu, "cpu.cfs_period_us"), "100000\n")
		writeFile(t, filepath.Join(cpu, "cpu.stat"), "nr_periods 3\nnr_throttled 2\nthrottled_time 1000\n")
		writeFile(t, filepath.Join(acct, "cpuacct.usage"), "12345\n")
	}
	return root
}

// A group whose directory is still listed but whose files are gone (it
// was removed during the walk) is left out without an error; a quota file
// that cannot be parsed or read is recorded and the walk goes on.
func TestDiscoverVanishedAndBroken(t *testing.T) {
	root := v1Tree(t, map[string]string{
		"":             "-1",
		"/a":           "20000",
		"/gone":        "", // no quota file: removed after the listing
		"/gone/child":  "30000",
		"/broken":      "lots",
		"/broken/kid":  "40000",
		"/isdir":       "-1",
		"/isdir/child": "50000",
	})
	// A quota "file" that is a directory: reading it fails with EISDIR.
	isdir := filepath.Join(root, "cpu", "isdir", "cpu.cfs_quota_us")
	if err := os.Remove(isdir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(isdir, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	d, err := r.Discover(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range d.Groups {
		got = append(got, g.Path)
	}
	// /isdir/cpu.cfs_quota_us is a directory, so Discover takes it for a
	// child group without files: gone, silently.
	want := []string{"/a", "/broken/kid", "/gone/child", "/isdir/child"}
	if !slices.Equal(got, want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
	if len(d.Skipped) != 2 {
		t.Fatalf("Skipped = %v, want 2 errors (broken, isdir)", d.Skipped)
	}
	if msg := d.Skipped[0].Error(); !strings.Contains(msg, filepath.Join(root, "cpu", "broken", "cpu.cfs_quota_us")) || !strings.Contains(msg, `"lots\n"`) {
		t.Errorf("Skipped[0] = %q, want the path and the contents", msg)
	}
	if msg := d.Skipped[1].Error(); !strings.Contains(msg, isdir) || !errors.Is(d.Skipped[1], syscall.EISDIR) {
		t.Errorf("Skipped[1] = %q, want EISDIR naming %s", msg, isdir)
	}
}

// A group removed after Discover: Stat and Limits fail with an error for
// which IsGone is true.
func TestGroupGone(t *testing.T) {
	for _, tc := range discoverCases {
		t.Run(tc.name, func(t *testing.T) {
			src := filepath.Join("testdata", tc.name)
			dst := filepath.Join(t.TempDir(), tc.name)
			if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
				t.Fatal(err)
			}
			r, err := OpenRoot(dst)
			if err != nil {
				t.Fatal(err)
			}
			d, err := r.Discover(Options{})
			if err != nil || len(d.Groups) == 0 {
				t.Fatalf("Discover: %d groups, %v", len(d.Groups), err)
			}
			g := d.Groups[len(d.Groups)-1]
			for _, dir := range []string{g.CPUDir, g.AcctDir} {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := g.Stat(); !IsGone(err) {
				t.Errorf("Stat of a removed group: %v, want an error IsGone accepts", err)
			}
			if _, err := g.Limits(); !IsGone(err) {
				t.Errorf("Limits of a removed group: %v, want an error IsGone accepts", err)
			}
		})
	}
}

// dirent encodes one linux_dirent64 record, padded to 8 bytes as the
// kernel does.
func dirent(typ byte, name string) []byte {
	reclen := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[0:], 1)
	binary.NativeEndian.PutUint64(b[8:], uint64(reclen))
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = typ
	copy(b[19:], name)
	return b
}

func TestParseDirents(t *testing.T) {
	var b []byte
	for _, e := range []struct {
		typ  byte
		name string
	}{
		{unix.DT_DIR, "."}, {unix.DT_DIR, ".."}, {unix.DT_REG, "cgroup.procs"}, {unix.DT_DIR, "b.scope"},
		{unix.DT_REG, "cpu.max"}, {unix.DT_DIR, "a.slice"}, {unix.DT_UNKNOWN, "unknown-dir"}, {unix.DT_UNKNOWN, "unknown-file"},
		{unix.DT_LNK, "link"}, {unix.DT_REG, "cpu.max.burst"},
	} {
		b = append(b, dirent(e.typ, e.name)...)
	}
	var asked []string
	isDir := func(name string) bool {
		asked = append(asked, name)
		return name == "unknown-dir"
	}
	subdirs, hasMax := parseDirents(b, nil, false, isDir)
	if want := []string{"b.scope", "a.slice", "unknown-dir"}; !slices.Equal(subdirs, want) || !hasMax {
		t.Errorf("parseDirents = %q, %v; want %q, true", subdirs, hasMax, want)
	}
	if want := []string{"unknown-dir", "unknown-file"}; !slices.Equal(asked, want) {
		t.Errorf("asked about %q, want %q", asked, want)
	}
	// A record claiming more than the buffer holds ends the parse.
	bad := dirent(unix.DT_DIR, "x")
	binary.NativeEndian.PutUint16(bad[16:], 200)
	if subdirs, _ := parseDirents(append(dirent(unix.DT_DIR, "ok"), bad...), nil, false, isDir); !slices.Equal(subdirs, []string{"ok"}) {
		t.Errorf("parseDirents with a bad record = %q, want [ok]", subdirs)
	}
}

// FuzzParseDirents: any bytes parse without panic into names that are
// non-empty, hold neither / nor NUL, and are never . or ..
func FuzzParseDirents(f *testing.F) {
	f.Add(append(dirent(unix.DT_DIR, "kubepods.slice"), dirent(unix.DT_REG, "cpu.max")...))
	f.Add(dirent(unix.DT_UNKNOWN, "x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		subdirs, _ := parseDirents(b, nil, false, func(string) bool { return true })
		for _, s := range subdirs {
			if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\x00") {
				t.Fatalf("parseDirents gave the name %q", s)
			}
		}
	})
}
