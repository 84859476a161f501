package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criServer is a CRI runtime service that lists the pods and containers
// of makeNode's groups, as containerd would list a node's, and counts the
// listings it answers: the exporter must name every group from memory
// and ask the runtime only when it meets a group it does not know.
type criServer struct {
	cri.UnimplementedRuntimeServiceServer
	pods     []*cri.PodSandbox
	ctrs     []*cri.Container
	listings atomic.Int64
}

func (s *criServer) ListPodSandbox(context.Context, *cri.ListPodSandboxRequest) (*cri.ListPodSandboxResponse, error) {
	s.listings.Add(1)
	return &cri.ListPodSandboxResponse{Items: s.pods}, nil
}

func (s *criServer) ListContainers(context.Context, *cri.ListContainersRequest) (*cri.ListContainersResponse, error) {
	return &cri.ListContainersResponse{Containers: s.ctrs}, nil
}

// newCRIServer describes the pods and containers among paths (makeNode's
// groups, named as the kubelet's systemd driver names them).
func newCRIServer(paths []string) *criServer {
	s := &criServer{}
	sandbox := map[string]string{} // pod UID -> sandbox ID
	for _, p := range paths {
		base := filepath.Base(p)
		switch {
		case strings.HasPrefix(base, "cri-containerd-"):
			id := strings.TrimSuffix(strings.TrimPrefix(base, "cri-containerd-"), ".scope")
			uid := podUID(filepath.Base(filepath.Dir(p)))
			ns, pod := "bench", "pod-"+uid[:8]
			name := fmt.Sprintf("c%d", len(s.ctrs)%3)
			s.ctrs = append(s.ctrs, &cri.Container{
				Id: id, PodSandboxId: sandbox[uid],
				Metadata: &cri.ContainerMetadata{Name: name},
				Image:    &cri.ImageSpec{Image: "registry.local/bench:1"}, ImageRef: "sha256:" + id,
				Labels: map[string]string{
					"io.kubernetes.pod.namespace": ns, "io.kubernetes.pod.name": pod,
					"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name,
				},
			})
		case strings.Contains(base, "-pod"):
			uid := podUID(base)
			id := fmt.Sprintf("%064x", len(s.pods)+1<<40)
			sandbox[uid] = id
			s.pods = append(s.pods, &cri.PodSandbox{Id: id, Metadata: &cri.PodSandboxMetadata{Name: "pod-" + uid[:8], Uid: uid, Namespace: "bench"}})
		}
	}
	return s
}

// podUID is the UID of a pod's group, kubepods-burstable-pod<uid>.slice
// with the UID's dashes as underscores.
func podUID(base string) string {
	base = strings.TrimSuffix(base, ".slice")
	return strings.ReplaceAll(base[strings.LastIndex(base, "-pod")+len("-pod"):], "_", "-")
}

// serve answers the CRI on a unix socket in dir until stop is called.
func (s *criServer) serve(dir string) (endpoint string, stop func(), err error) {
	sock := filepath.Join(dir, "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return "", nil, err
	}
	srv := grpc.NewServer()
	cri.RegisterRuntimeServiceServer(srv, s)
	go srv.Serve(ln)
	return "unix://" + sock, srv.Stop, nil
}

// names measures what naming costs: the exporter of the scrapes section,
// sampler off, with a CRI runtime that names all the node's pods and
// containers, scraped back to back and at a 1 s cadence, with the
// runtime's listings counted.
func (b *bench) names(bin string, paths []string) error {
	s := newCRIServer(paths)
	endpoint, stop, err := s.serve(b.tmp)
	if err != nil {
		return err
	}
	defer stop()
	n := 40
	if *quickFlag {
		n = 8
	}
	b.printf("### Names from the runtime, %d groups\n\n", len(paths))
	b.printf("The exporter of the first row above (sampler off) with `--cri-endpoint` naming every pod and container (a CRI server in the benchmark lists %d pods and %d containers as containerd would).\n\n", len(s.pods), len(s.ctrs))
	e, err := b.startExporter(bin, "--sampler-max-groups", "0", "--docker-host", "none", "--kube-api", "none", "--cri-endpoint", endpoint)
	if err != nil {
		return err
	}
	defer b.kill(e.cmd)
	// The first scrape meets unknown groups and starts a listing.
	want := float64(len(paths))
	var named float64
	for deadline := time.Now().Add(20 * time.Second); named < want; time.Sleep(200 * time.Millisecond) {
		_, v, err := e.scrape(false, true)
		if err != nil {
			return err
		}
		if named = v["named"]; time.Now().After(deadline) {
			return fmt.Errorf("%v of %v groups named after 20s", named, want)
		}
	}
	l0 := s.listings.Load()
	r, err := b.measureScrapes(e, n)
	if err != nil {
		return err
	}
	win := b.window(30 * time.Second)
	c0, t0 := procCPU(e.pid), time.Now()
	tick := time.NewTicker(time.Second)
	for time.Since(t0) < win {
		<-tick.C
		if _, _, err := e.scrape(true, false); err != nil {
			tick.Stop()
			return err
		}
	}
	tick.Stop()
	cadence := pct(procCPU(e.pid)-c0, time.Since(t0))
	b.printf("| groups named | scrapes | runtime listings during them | CPU per scrape | CPU gzip | exposition | CPU at a 1 s cadence |\n|---|---|---|---|---|---|---|\n")
	b.printf("| %.0f of %.0f | %d | %d | **%v** | %v | %.1f MB | %.2f %% of a CPU |\n\n",
		named, want, 2*n+2+int(win/time.Second), s.listings.Load()-l0, r.cpu.Round(100*time.Microsecond), r.cpuGzip.Round(100*time.Microsecond),
		float64(r.bytes)/1e6, cadence)
	if b.scrapeCPU > 0 {
		b.printf("Against %v per scrape without names (first row above).\n\n", b.scrapeCPU.Round(100*time.Microsecond))
	}
	return nil
}
