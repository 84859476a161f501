package monitor

import (
	"regexp"
	"strings"
)

// Kind is what made a group.
type Kind string

const (
	KindKubernetes Kind = "kubernetes" // the kubelet: kubepods, a QoS class, a pod or a container of a pod
	KindDocker     Kind = "docker"     // a Docker container (or Docker's parent group)
	KindPodman     Kind = "podman"     // a Podman container, its conmon, or a Podman pod
	KindSystemd    Kind = "systemd"    // a systemd unit: service, scope or slice
	KindCgroup     Kind = "cgroup"     // none of the above: the path is all there is to say
)

// QoS is a Kubernetes pod's quality-of-service class.
type QoS string

const (
	QoSGuaranteed QoS = "guaranteed"
	QoSBurstable  QoS = "burstable"
	QoSBestEffort QoS = "besteffort"
)

// Runtime is the container engine that made a container's group.
type Runtime string

const (
	RuntimeContainerd Runtime = "containerd"
	RuntimeCRIO       Runtime = "cri-o"
	RuntimeDocker     Runtime = "docker"
	RuntimePodman     Runtime = "podman"
)

// Identity is what a group's path says about it. Fields that the path does
// not tell are empty (a container's runtime under the kubelet's cgroupfs
// driver, the QoS class of a pod seen from inside a cgroup namespace).
type Identity struct {
	Kind        Kind    // always set
	Name        string  // short, for people: "pod 1b2c3d4e/containerd 4f5e6a7b8c9d", "docker 4f5e6a7b8c9d", "nginx.service"
	PodUID      string  // Kubernetes pod UID, with dashes
	QoS         QoS     // Kubernetes QoS class
	ContainerID string  // full container ID; empty for a conmon group (it is not the container)
	Runtime     Runtime // engine of the container (or conmon)
	Unit        string  // the deepest systemd unit (service, scope or slice) of the path
}

// Short forms in names: pod UIDs by their first group, container IDs as
// docker ps shows them.
const (
	shortPod = 8
	shortID  = 12
)

var (
	// kubeSliceRE matches the kubelet's systemd slices: kubepods.slice,
	// kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice,
	// kubepods-pod<uid>.slice (guaranteed), with any prefix a
	// --cgroup-root adds (kubelet-kubepods...). The UID has _ for -.
	kubeSliceRE = regexp.MustCompile(`^(?:[A-Za-z0-9_.:@\\-]+-)?kubepods(?:-(burstable|besteffort))?(?:-pod([0-9a-f]{8}(?:_[0-9a-f]{4}){3}_[0-9a-f]{12}|[0-9a-f]{32}))?\.slice$`)
	// podDirRE matches the kubelet's cgroupfs pod directories: pod<uid>.
	podDirRE = regexp.MustCompile(`^pod([0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{32})$`)
	// scopeRE matches a container's group named by its engine: a systemd
	// scope, or the same name without .scope under the cgroupfs drivers.
	scopeRE = regexp.MustCompile(`^(cri-containerd|crio-conmon|crio|docker|libpod-conmon|libpod)-([0-9a-f]{12,128})(\.scope)?$`)
	// hexIDRE matches a bare container ID (cgroupfs drivers).
	hexIDRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// podmanPodRE matches the slice of a Podman pod.
	podmanPodRE = regexp.MustCompile(`^machine-libpod_pod_([0-9a-f]{12,128})\.slice$`)
)

// systemdSuffixes are the unit types that have a cgroup.
var systemdSuffixes = []string{".service", ".scope", ".slice", ".socket", ".mount", ".swap"}

// state is what the components read so far have been recognised as.
type state int

const (
	stNone      state = iota // nothing recognised yet
	stKube                   // kubepods or a QoS class
	stPod                    // a Kubernetes pod
	stContainer              // a container or conmon
	stDocker                 // Docker's cgroupfs parent, /docker
	stSystemd                // a systemd unit
	stPodmanPod              // a Podman pod's slice
)

// Identify says what a group is from its path alone ("/kubepods.slice/...",
// relative to the hierarchy's root). It reads the path component by
// component, so a path seen from inside a container, whose cgroup
// namespace root is below kubepods (the path starts at the pod or at the
// QoS class), is identified by what it still says. Components below the
// deepest recognised one are appended to Name, so nested groups (crun's
// "container" below a CRI-O scope) keep names of their own.
func Identify(path string) Identity {
	var (
		id    Identity
		st    = stNone
		tail  []string // components after the last recognised one
		prev  string   // the previous component
		comps = strings.Split(path, "/")
	)
	for i := 0; i < len(comps); i++ {
		c := comps[i]
		if c == "" || c == "." {
			continue
		}
		next := ""
		for _, n := range comps[i+1:] {
			if n != "" && n != "." {
				next = n
				break
			}
		}
		nid, nst, ok := step(id, st, len(tail) == 0, c, prev, next)
		if ok {
			id, st, tail = nid, nst, tail[:0]
		} else {
			tail = append(tail, c)
		}
		prev = c
	}
	if st == stNone {
		name := path
		if strings.Trim(name, "/.") == "" {
			name = "/"
		}
		return Identity{Kind: KindCgroup, Name: name}
	}
	if len(tail) > 0 {
		id.Name += "/" + strings.Join(tail, "/")
	}
	return id
}

// step reads one component c given what was recognised so far (id, st;
// adjacent when c comes right after the last recognised component). It
// returns the new identity and whether c was recognised.
func step(id Identity, st state, adjacent bool, c, prev, next string) (Identity, state, bool) {
	// The kubelet's systemd slices name themselves fully.
	if m := kubeSliceRE.FindStringSubmatch(c); m != nil {
		qos, uid := QoS(m[1]), m[2]
		switch {
		case uid != "":
			if qos == "" {
				qos = QoSGuaranteed
			}
			uid = strings.ReplaceAll(uid, "_", "-")
			return Identity{Kind: KindKubernetes, Name: "pod " + short(uid, shortPod), PodUID: uid, QoS: qos, Unit: c}, stPod, true
		case qos != "":
			return Identity{Kind: KindKubernetes, Name: "kubepods/" + string(qos), QoS: qos, Unit: c}, stKube, true
		default:
			return Identity{Kind: KindKubernetes, Name: "kubepods", Unit: c}, stKube, true
		}
	}

	// The kubelet's cgroupfs directories: kubepods[/burstable|/besteffort]/pod<uid>.
	if c == "kubepods" {
		return Identity{Kind: KindKubernetes, Name: "kubepods"}, stKube, true
	}
	if (c == "burstable" || c == "besteffort") && (prev == "kubepods" || podDirRE.MatchString(next)) {
		return Identity{Kind: KindKubernetes, Name: "kubepods/" + c, QoS: QoS(c)}, stKube, true
	}
	if m := podDirRE.FindStringSubmatch(c); m != nil {
		var qos QoS
		switch prev {
		case "burstable", "besteffort":
			qos = QoS(prev)
		case "kubepods":
			qos = QoSGuaranteed
		}
		return Identity{Kind: KindKubernetes, Name: "pod " + short(m[1], shortPod), PodUID: m[1], QoS: qos}, stPod, true
	}

	// A container named by its engine.
	if m := scopeRE.FindStringSubmatch(c); m != nil {
		prefix, cid := m[1], m[2]
		unit := ""
		if m[3] != "" {
			unit = c
		}
		var rt Runtime
		switch prefix {
		case "cri-containerd":
			rt = RuntimeContainerd
		case "crio", "crio-conmon":
			rt = RuntimeCRIO
		case "docker":
			rt = RuntimeDocker
		default: // libpod, libpod-conmon
			rt = RuntimePodman
		}
		n := Identity{ContainerID: cid, Runtime: rt, Unit: unit}
		what := string(rt)
		if strings.HasSuffix(prefix, "-conmon") {
			// conmon watches the container from a group of its own: the
			// ID is in the name, but this is not the container.
			what, n.ContainerID = "conmon", ""
		}
		switch {
		case st == stPod && adjacent:
			n.Kind, n.PodUID, n.QoS = KindKubernetes, id.PodUID, id.QoS
			n.Name = id.Name + "/" + what + " " + short(cid, shortID)
		case rt == RuntimeDocker:
			n.Kind, n.Name = KindDocker, "docker "+short(cid, shortID)
		case rt == RuntimePodman:
			n.Kind, n.Name = KindPodman, "podman "+short(cid, shortID)
			if what == "conmon" {
				n.Name = "podman conmon " + short(cid, shortID)
			}
		default: // a CRI runtime's container without its pod in the path
			n.Kind, n.Name = KindKubernetes, what+" "+short(cid, shortID)
		}
		return n, stContainer, true
	}

	// A bare container ID: the kubelet's or Docker's cgroupfs drivers.
	if hexIDRE.MatchString(c) {
		switch {
		case st == stPod && adjacent:
			return Identity{Kind: KindKubernetes, Name: id.Name + "/container " + short(c, shortID), PodUID: id.PodUID, QoS: id.QoS, ContainerID: c}, stContainer, true
		case st == stDocker && adjacent:
			return Identity{Kind: KindDocker, Name: "docker " + short(c, shortID), ContainerID: c, Runtime: RuntimeDocker}, stContainer, true
		case st == stNone:
			return Identity{Kind: KindCgroup, Name: "container " + short(c, shortID), ContainerID: c}, stContainer, true
		}
		return id, st, false
	}
	if c == "docker" {
		return Identity{Kind: KindDocker, Name: "docker"}, stDocker, true
	}

	if m := podmanPodRE.FindStringSubmatch(c); m != nil {
		return Identity{Kind: KindPodman, Name: "podman pod " + short(m[1], shortID), Unit: c}, stPodmanPod, true
	}

	// Any other systemd unit, unless it is inside a container or a pod
	// (a container's own systemd): then it is part of that group's name.
	if isUnit(c) && st != stContainer && st != stPod {
		return Identity{Kind: KindSystemd, Name: c, Unit: c}, stSystemd, true
	}
	return id, st, false
}

func isUnit(c string) bool {
	for _, s := range systemdSuffixes {
		if len(c) > len(s) && strings.HasSuffix(c, s) {
			return true
		}
	}
	return false
}

// short returns the first n bytes of s (all of it when shorter).
func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
