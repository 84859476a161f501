package containers

import (
	"context"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// DefaultCRIEndpoints are the CRI sockets of containerd and CRI-O where
// they put them; CRIEndpoints tries those that exist.
var DefaultCRIEndpoints = []string{
	"unix:///run/containerd/containerd.sock",
	"unix:///run/crio/crio.sock",
}

// CRIEndpoints is the endpoints to ask: endpoint when given, else those
// of DefaultCRIEndpoints whose socket exists.
func CRIEndpoints(endpoint string) []string {
	if endpoint != "" {
		return []string{endpoint}
	}
	var out []string
	for _, e := range DefaultCRIEndpoints {
		if _, err := os.Stat(strings.TrimPrefix(e, "unix://")); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// CRI lists the containers and pod sandboxes of a Kubernetes container
// runtime (containerd, CRI-O) through the CRI's RuntimeService
// (ListContainers, ListPodSandbox: read-only), naming each by the labels
// the kubelet gave it.
type CRI struct {
	endpoint string
	conn     *grpc.ClientConn
	client   cri.RuntimeServiceClient
}

// NewCRI returns the source of the runtime at endpoint
// (unix:///run/containerd/containerd.sock). It connects lazily: a runtime
// that is not there makes List fail, not NewCRI.
func NewCRI(endpoint string) (*CRI, error) {
	if !strings.HasPrefix(endpoint, "unix://") || len(endpoint) == len("unix://") {
		return nil, fmt.Errorf("CRI endpoint %q: give the runtime's socket as unix:///PATH (unix:///run/containerd/containerd.sock)", endpoint)
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("CRI endpoint %q: %w", endpoint, err)
	}
	return &CRI{endpoint: endpoint, conn: conn, client: cri.NewRuntimeServiceClient(conn)}, nil
}

func (c *CRI) String() string { return "cri " + c.endpoint }

// Close closes the connection.
func (c *CRI) Close() error { return c.conn.Close() }

// List lists the runtime's pod sandboxes and containers.
func (c *CRI) List(ctx context.Context) ([]Entry, error) {
	pods, err := c.client.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListPodSandbox: %w", err)
	}
	ctrs, err := c.client.ListContainers(ctx, &cri.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListContainers: %w", err)
	}
	return criEntries(pods.GetItems(), ctrs.GetContainers()), nil
}

// criEntries names the sandboxes (each as its pod, and its own group as
// the pod's "POD" container, as cAdvisor does) and the containers (by
// their labels, or their sandbox's metadata and their own).
func criEntries(pods []*cri.PodSandbox, ctrs []*cri.Container) []Entry {
	type pod struct{ uid, namespace, name string }
	sandbox := map[string]pod{}
	var out []Entry
	for _, p := range pods {
		m := p.GetMetadata()
		if p.GetId() == "" || m.GetUid() == "" {
			continue
		}
		sp := pod{m.GetUid(), m.GetNamespace(), m.GetName()}
		sandbox[p.GetId()] = sp
		names := trace.Names{PodNamespace: sp.namespace, PodName: sp.name}
		out = append(out, Entry{PodUID: sp.uid, Names: names})
		names.ContainerName = "POD"
		out = append(out, Entry{ContainerID: p.GetId(), PodUID: sp.uid, Names: names})
	}
	for _, c := range ctrs {
		if c.GetId() == "" {
			continue
		}
		e := Entry{ContainerID: c.GetId(), Names: trace.Names{ContainerName: c.GetMetadata().GetName(), Image: criImage(c)}}
		if uid, ok := kubeNames(c.GetLabels(), &e.Names); ok {
			e.PodUID = uid
		}
		if sp, ok := sandbox[c.GetPodSandboxId()]; ok {
			if e.PodUID == "" {
				e.PodUID = sp.uid
			}
			if e.Names.PodName == "" {
				e.Names.PodNamespace, e.Names.PodName = sp.namespace, sp.name
			}
		}
		out = append(out, e)
	}
	return out
}

// criImage is the image as the pod's spec gave it when the runtime says,
// else the runtime's reference.
func criImage(c *cri.Container) string {
	if img := c.GetImage(); img != nil {
		if s := img.GetUserSpecifiedImage(); s != "" {
			return s
		}
		if s := img.GetImage(); s != "" {
			return s
		}
	}
	return c.GetImageRef()
}
