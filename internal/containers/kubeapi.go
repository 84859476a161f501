package containers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// ServiceAccountDir is where Kubernetes mounts a pod's service account
// credentials: token, ca.crt, namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// KubeAPIInCluster is Config.KubeAPI's value that asks the API server of
// the pod the process runs in.
const KubeAPIInCluster = "in-cluster"

// annotationMirror is the annotation of a static pod's mirror pod: the
// static pod's UID, which its cgroup is named by (the kubelet's config
// hash), where the mirror pod's own UID is another.
const annotationMirror = "kubernetes.io/config.mirror"

// KubeAPI lists the pods of one node from the Kubernetes API server, as a
// pod's service account: GET /api/v1/pods?fieldSelector=spec.nodeName=NODE
// (read-only; RBAC: get and list on pods). It is how the exporter names
// pods when it runs in a pod with no privileges, which may not open the
// runtime's socket. A pod's sandbox ("POD") is not in the API: its group
// is named by its pod.
type KubeAPI struct {
	server    string // https://host:port
	tokenFile string
	nsFile    string // the pod's namespace, to find its node
	client    *http.Client

	mu   sync.Mutex
	node string // "" until known
}

// KubeAPIConfig says how to reach the API server.
type KubeAPIConfig struct {
	// Server is the API server's URL (https://10.96.0.1:443).
	Server string
	// Dir holds the service account's token, ca.crt and namespace
	// (ServiceAccountDir in a pod).
	Dir string
	// Node is the node whose pods to list; "": the node of the pod this
	// process runs in (GET its pod, named by the hostname).
	Node string
}

// InClusterConfig is the configuration of a process in a pod: the
// API server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT
// (the kubelet sets them in every container), the service account's
// files from ServiceAccountDir, the node from NODE_NAME (the downward
// API's spec.nodeName) when set. ok is false when the process is not in a
// pod that has a service account token.
func InClusterConfig() (KubeAPIConfig, bool) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return KubeAPIConfig{}, false
	}
	if _, err := os.Stat(filepath.Join(ServiceAccountDir, "token")); err != nil {
		return KubeAPIConfig{}, false
	}
	return KubeAPIConfig{
		Server: "https://" + net.JoinHostPort(host, port),
		Dir:    ServiceAccountDir,
		Node:   os.Getenv("NODE_NAME"),
	}, true
}

// NewKubeAPI returns the source of the API server config names. It reads
// the CA now; the token is read at every listing (the kubelet rotates it).
func NewKubeAPI(config KubeAPIConfig) (*KubeAPI, error) {
	u, err := url.Parse(config.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("Kubernetes API server %q: give its URL as https://HOST:PORT", config.Server)
	}
	caFile := filepath.Join(config.Dir, "ca.crt")
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("Kubernetes API server's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("Kubernetes API server's CA %s: no certificate in it", caFile)
	}
	return &KubeAPI{
		server:    strings.TrimSuffix(config.Server, "/"),
		tokenFile: filepath.Join(config.Dir, "token"),
		nsFile:    filepath.Join(config.Dir, "namespace"),
		node:      config.Node,
		// No proxy from the environment: the API server is the
		// cluster's own address.
		client: &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		}},
	}, nil
}

func (k *KubeAPI) String() string { return "kubernetes " + k.server }

// List lists the pods of the node and their containers.
func (k *KubeAPI) List(ctx context.Context) ([]Entry, error) {
	node, err := k.nodeName(ctx)
	if err != nil {
		return nil, err
	}
	// resourceVersion=0: the API server answers from its cache.
	q := url.Values{"fieldSelector": {"spec.nodeName=" + node}, "resourceVersion": {"0"}}
	body, err := k.get(ctx, "/api/v1/pods?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parsePodList(body)
}

// nodeName returns the node to list: the configured one, or the node of
// the pod this process runs in.
func (k *KubeAPI) nodeName(ctx context.Context) (string, error) {
	k.mu.Lock()
	node := k.node
	k.mu.Unlock()
	if node != "" {
		return node, nil
	}
	ns, err := os.ReadFile(k.nsFile)
	if err != nil {
		return "", fmt.Errorf("this pod's namespace (to find its node; or set NODE_NAME): %w", err)
	}
	name, err := os.Hostname()
	if err != nil {
		return "", err
	}
	body, err := k.get(ctx, "/api/v1/namespaces/"+url.PathEscape(strings.TrimSpace(string(ns)))+"/pods/"+url.PathEscape(name))
	if err != nil {
		return "", fmt.Errorf("this pod (to find its node; or set NODE_NAME): %w", err)
	}
	defer body.Close()
	var p struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	if err := json.NewDecoder(body).Decode(&p); err != nil {
		return "", fmt.Errorf("pod %s: %w", name, err)
	}
	if p.Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s: no spec.nodeName", name)
	}
	k.mu.Lock()
	k.node = p.Spec.NodeName
	k.mu.Unlock()
	return p.Spec.NodeName, nil
}

// get makes a GET request as the service account and returns the body of
// a 200 answer.
func (k *KubeAPI) get(ctx context.Context, path string) (io.ReadCloser, error) {
	token, err := os.ReadFile(k.tokenFile)
	if err != nil {
		return nil, fmt.Errorf("service account token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	err = fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	if resp.StatusCode == http.StatusForbidden {
		err = fmt.Errorf("%w (the service account needs get and list on pods: deploy/kubernetes/exporter-daemonset.yaml's ClusterRole)", err)
	}
	return nil, err
}

// apiPod is what cfsprobe reads of a pod (core/v1 Pod).
type apiPod struct {
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		UID         string            `json:"uid"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Containers          []apiContainer `json:"containers"`
		InitContainers      []apiContainer `json:"initContainers"`
		EphemeralContainers []apiContainer `json:"ephemeralContainers"`
	} `json:"spec"`
	Status struct {
		ContainerStatuses          []apiContainerStatus `json:"containerStatuses"`
		InitContainerStatuses      []apiContainerStatus `json:"initContainerStatuses"`
		EphemeralContainerStatuses []apiContainerStatus `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

type apiContainer struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

type apiContainerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"` // containerd://<id>
	Image       string `json:"image"`
}

// parsePodList reads a PodList: each pod as itself (its UID as its
// group's path has it) and each of its containers that has started by its
// ID, with the image its spec gave.
func parsePodList(r io.Reader) ([]Entry, error) {
	var list struct {
		Kind  string   `json:"kind"`
		Items []apiPod `json:"items"`
	}
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, fmt.Errorf("parse the pod list: %w", err)
	}
	if list.Kind != "PodList" {
		return nil, fmt.Errorf("parse the pod list: kind %q, want PodList", list.Kind)
	}
	var out []Entry
	for _, p := range list.Items {
		uid := p.Metadata.UID
		if h := p.Metadata.Annotations[annotationMirror]; h != "" {
			uid = h
		}
		if uid == "" || p.Metadata.Name == "" {
			continue
		}
		pod := trace.Names{PodNamespace: p.Metadata.Namespace, PodName: p.Metadata.Name}
		out = append(out, Entry{PodUID: uid, Names: pod})
		images := map[string]string{}
		for _, cs := range [][]apiContainer{p.Spec.Containers, p.Spec.InitContainers, p.Spec.EphemeralContainers} {
			for _, c := range cs {
				images[c.Name] = c.Image
			}
		}
		for _, ss := range [][]apiContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
			for _, s := range ss {
				_, id, ok := strings.Cut(s.ContainerID, "://")
				if !ok || id == "" {
					continue // not started
				}
				n := pod
				n.ContainerName, n.Image = s.Name, images[s.Name]
				if n.Image == "" {
					n.Image = s.Image
				}
				out = append(out, Entry{ContainerID: id, PodUID: uid, Names: n})
			}
		}
	}
	return out, nil
}
