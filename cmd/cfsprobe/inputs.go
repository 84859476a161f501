package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/containers"
	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/hostfs"
	"github.com/cfsprobe/cfsprobe/internal/lab"
	"github.com/cfsprobe/cfsprobe/internal/monitor"
)

// noEmptyFlags refuses a string flag given as "": an empty value would
// silently stand for the flag's default (another parent group, another
// root, no report), which the user did not ask for.
func noEmptyFlags(c *cobra.Command, _ []string) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err == nil && f.Value.Type() == "string" && f.Value.String() == "" {
			err = usageErr("--%s is empty: give a value, or leave --%s out", f.Name, f.Name)
		}
	})
	return err
}

// interrupted is how a command stopped by SIGINT or SIGTERM exits: with
// 128 + the signal's number (130, 143), after saying what was undone
// ("" says nothing).
func interrupted(sig os.Signal, undone string) error {
	if undone != "" {
		fmt.Fprintf(os.Stderr, "cfsprobe: interrupted by %v: %s\n", sig, undone)
	}
	code := 128 + int(syscall.SIGINT)
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	return &exitError{code, nil}
}

// hostRoots are --proc-root and --fs-root of the commands that read the
// machine's mount table: where proc is mounted, and the root under which
// the table's mount points (and /sys) are found.
type hostRoots struct{ proc, fs string }

func (h *hostRoots) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&h.proc, "proc-root", hostfs.Default().Proc(), "where proc is mounted")
	fl.StringVar(&h.fs, "fs-root", hostfs.Default().Path("/"), "root under which the cgroup mount points of mountinfo (and /sys) are found")
}

// FS is the machine the flags locate.
func (h *hostRoots) FS() hostfs.FS { return hostfs.New(h.fs).WithProc(h.proc) }

// cgroupRoot is the --cgroup-root of the commands that walk a cgroup
// tree (top, record, exporter): the directory the cgroup filesystems are
// mounted in.
type cgroupRoot string

func (r *cgroupRoot) addFlag(fl *pflag.FlagSet) {
	fl.StringVar((*string)(r), "cgroup-root", hostfs.Default().CgroupDir(), "directory the cgroup filesystems are mounted in (in a container: the host's, e.g. /host/sys/fs/cgroup)")
}

// open opens the tree, or says in the flag's words why it cannot.
func (r cgroupRoot) open() (*monitor.Root, error) {
	root, err := monitor.OpenRoot(string(r))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, usageErr("--cgroup-root %s does not exist: pass the directory the cgroup filesystems are mounted in, normally /sys/fs/cgroup (in a container, where the host's is mounted)", r)
	case err != nil:
		return nil, usageErr("--cgroup-root %s: %v", r, err)
	}
	return root, nil
}

// checkParent checks the --parent of run, suite, check and cleanup.
func checkParent(parent string) error {
	if err := cgroup.CheckParent(parent); err != nil {
		return usageErr("--parent %v: give a group path below the hierarchy's root, such as %s or tests/cfsprobe", err, cgroup.DefaultParent)
	}
	return nil
}

// limitErr says a *cgroup.LimitError in the words of run's flags: the
// flag and its value, what is wrong, and what would do. cpus is the
// --cpus given, if it made the quota (nil otherwise). Other errors are
// returned as they are.
func limitErr(err error, cpus *float64) error {
	var le *cgroup.LimitError
	if !errors.As(err, &le) {
		return err
	}
	if cpus != nil {
		le = le.OfCPUs(fmt.Sprint(*cpus))
	}
	flag := "--" + string(le.Field)
	msg := fmt.Sprintf("%s %s %s", flag, le.Value, le.Reason)
	switch want := le.Want(); {
	case want != "":
		msg += ": use " + flag + " " + want
	case errors.Is(le, cgroup.ErrNoBurst):
		msg += ": drop --burst or use Linux 5.14 or newer"
	case le.Field == cgroup.FieldBurst:
		msg += ": add --quota or --cpus, or drop --burst"
	case le.Field == cgroup.FieldCPUs:
		msg += ": give a positive number, e.g. 0.5"
	}
	return &exitError{2, errors.New(msg)}
}

// sampleIntervalErr says a *lab.SampleIntervalError (the hidden
// --sample-interval of run and record) in the flag's words; other errors
// are returned as they are.
func sampleIntervalErr(err error) error {
	var se *lab.SampleIntervalError
	if errors.As(err, &se) {
		return usageErr("--sample-interval %v is outside %v to the %v period: give one in that range, or leave it out", se.Interval, lab.MinSampleInterval, se.Period)
	}
	return err
}

// runtimeFlags say which container runtimes name containers and pods
// (top, exporter, record).
type runtimeFlags struct {
	dockerHost, criEndpoint, kubeAPI string
}

func (r *runtimeFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&r.dockerHost, "docker-host", containers.DockerHostFromEnv(), "Docker daemon whose containers are named by their names and images (unix:///PATH or tcp://HOST:PORT; "+containers.Off+": do not ask)")
	fl.StringVar(&r.criEndpoint, "cri-endpoint", "", "CRI runtime (containerd, CRI-O) whose pods and containers are named, unix:///PATH (default: its usual sockets that exist; "+containers.Off+": do not ask)")
	fl.StringVar(&r.kubeAPI, "kube-api", containers.KubeAPIInCluster, "in a Kubernetes pod, name the pods of its node from the API server with the pod's service account ("+containers.Off+": do not ask)")
}

// resolver makes the runtimes' names resolver, or says in the flags'
// words why it cannot, and lists the runtimes once (each within the
// resolver's timeout), so that the first screen, trace or scrape has the
// names. A runtime that is not running is not an error: groups then keep
// their path identity.
func (r runtimeFlags) resolver() (*containers.Resolver, error) {
	s, err := containers.Sources(containers.Config{DockerHost: r.dockerHost, CRIEndpoint: r.criEndpoint, KubeAPI: r.kubeAPI})
	if err != nil {
		return nil, usageErr("%v: give --docker-host unix:///var/run/docker.sock or tcp://HOST:PORT, --cri-endpoint unix:///PATH, --kube-api %s, or %s to ask none of them", err, containers.KubeAPIInCluster, containers.Off)
	}
	names := containers.NewResolver(s, containers.Options{})
	_ = names.Refresh(context.Background()) // its errors: names.Errors()
	return names, nil
}

// webFlags are prometheus/exporter-toolkit's flags, as node_exporter
// names them, and --listen, the older name of --web.listen-address.
type webFlags struct {
	fl                        *pflag.FlagSet
	listenAddresses, alias    []string
	systemdSocket             bool
	configFile, telemetryPath string
}

func (w *webFlags) addFlags(fl *pflag.FlagSet) {
	w.fl = fl
	fl.StringArrayVar(&w.listenAddresses, "web.listen-address", []string{exporter.DefaultListen}, "host:port to serve on; repeat it to serve on several")
	fl.StringArrayVar(&w.alias, "listen", nil, "alias of --web.listen-address (its older name)")
	fl.BoolVar(&w.systemdSocket, "web.systemd-socket", false, "serve on the sockets systemd passes (socket activation, a .socket unit) instead of --web.listen-address")
	fl.StringVar(&w.configFile, "web.config.file", "", "web configuration enabling TLS, client certificates and basic auth ("+exporter.WebConfigDoc+"); without it, plain HTTP")
	fl.StringVar(&w.telemetryPath, "web.telemetry-path", exporter.DefaultTelemetryPath, "path under which the metrics are served")
}

// addrs are the addresses to listen on and the flag that gave them.
func (w *webFlags) addrs() ([]string, string) {
	switch {
	case w.fl.Changed("listen") && w.fl.Changed("web.listen-address"):
		return append(w.listenAddresses, w.alias...), "--web.listen-address"
	case w.fl.Changed("listen"):
		return w.alias, "--listen"
	}
	return w.listenAddresses, "--web.listen-address"
}

// check validates the web flags and reads --web.config.file as the
// exporter will serve it (certificates included), before anything is
// opened.
func (w *webFlags) check() error {
	if err := exporter.CheckTelemetryPath(w.telemetryPath); err != nil {
		return usageErr("--web.telemetry-path %v: give a path such as %s", err, exporter.DefaultTelemetryPath)
	}
	if w.systemdSocket && (w.fl.Changed("listen") || w.fl.Changed("web.listen-address")) {
		return usageErr("--web.systemd-socket serves on the sockets systemd passes: give it or --web.listen-address, not both")
	}
	if addrs, name := w.addrs(); !w.systemdSocket && (len(addrs) == 0 || slices.Contains(addrs, "")) {
		return usageErr("%s is empty: give a host:port such as %s", name, exporter.DefaultListen)
	}
	if err := exporter.CheckWebConfig(w.configFile); err != nil {
		return usageErr("--web.config.file %v; fix the file (its format: %s)", err, exporter.WebConfigDoc)
	}
	return nil
}

// listen opens the listeners: the addresses given, or systemd's sockets.
func (w *webFlags) listen() ([]net.Listener, error) {
	if w.systemdSocket {
		lns, err := exporter.SystemdListeners()
		if err != nil {
			return nil, usageErr("--web.systemd-socket: %v: start the exporter from a systemd .socket unit (deploy/systemd/README.md) or give --web.listen-address instead", err)
		}
		return lns, nil
	}
	addrs, name := w.addrs()
	lns, err := exporter.Listen(addrs)
	if err != nil {
		return nil, usageErr("%s %v: give a free host:port such as %s", name, err, exporter.DefaultListen)
	}
	return lns, nil
}
