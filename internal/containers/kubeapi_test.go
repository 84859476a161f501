package containers

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

const (
	staticHash = "d41d8cd98f00b204e9800998ecf8427e"
	etcdID     = "4f5e6a7b8c9d00112233445566778899aabbccddeeff00112233445566778899"
	migrateID  = "0a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223242526272829"
	pendingUID = "77777777-8888-4999-aaaa-bbbbbbbbbbbb"
)

// podsWant is what testdata/kubeapi/pods.json lists: every pod, and every
// container that has started (sidecar has not), with its spec's image; the
// static pod by its config hash.
var podsWant = []Entry{
	{PodUID: podUID, Names: trace.Names{PodNamespace: "shop", PodName: "api-7d9f"}},
	{ContainerID: k8sID, PodUID: podUID, Names: trace.Names{ContainerName: "app", Image: "shop/api:1.4", PodNamespace: "shop", PodName: "api-7d9f"}},
	{ContainerID: migrateID, PodUID: podUID, Names: trace.Names{ContainerName: "migrate", Image: "shop/migrate:3", PodNamespace: "shop", PodName: "api-7d9f"}},
	{PodUID: staticHash, Names: trace.Names{PodNamespace: "kube-system", PodName: "etcd-node-a"}},
	{ContainerID: etcdID, PodUID: staticHash, Names: trace.Names{ContainerName: "etcd", Image: "registry.k8s.io/etcd:3.5.21-0", PodNamespace: "kube-system", PodName: "etcd-node-a"}},
	{PodUID: pendingUID, Names: trace.Names{PodNamespace: "shop", PodName: "pending"}},
}

func TestParsePodList(t *testing.T) {
	f, err := os.Open("testdata/kubeapi/pods.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parsePodList(f)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, podsWant) {
		t.Errorf("got  %+v\nwant %+v", got, podsWant)
	}
	for _, bad := range []string{`{"kind": "Status", "items": []}`, `[`, `{"kind": "PodList", "items": {}}`} {
		if _, err := parsePodList(strings.NewReader(bad)); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// fakeAPIServer serves the pods of testdata/kubeapi/pods.json on node-a
// to the bearer of a token "token-N", and the pod podName's node.
// It writes the service account's files (token, ca.crt, namespace) into
// dir and counts the pod lists.
func fakeAPIServer(t *testing.T, dir, podName string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	body, err := os.ReadFile("testdata/kubeapi/pods.json")
	if err != nil {
		t.Fatal(err)
	}
	var lists atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer token-") {
			http.Error(w, `{"kind":"Status","reason":"Forbidden"}`, http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/api/v1/pods":
			if r.URL.Query().Get("fieldSelector") != "spec.nodeName=node-a" {
				http.Error(w, "fieldSelector "+r.URL.Query().Get("fieldSelector"), http.StatusBadRequest)
				return
			}
			lists.Add(1)
			w.Write(body)
		case "/api/v1/namespaces/cfsprobe/pods/" + podName:
			w.Write([]byte(`{"kind":"Pod","spec":{"nodeName":"node-a"}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for name, data := range map[string]string{"ca.crt": string(ca), "token": "token-1\n", "namespace": "cfsprobe"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return srv, &lists
}

func TestKubeAPIList(t *testing.T) {
	dir := t.TempDir()
	srv, lists := fakeAPIServer(t, dir, "none")
	k, err := NewKubeAPI(KubeAPIConfig{Server: srv.URL, Dir: dir, Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, podsWant) {
		t.Errorf("got  %+v\nwant %+v", got, podsWant)
	}
	// The kubelet rotates the token: each listing reads it again.
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.List(context.Background()); err != nil {
		t.Errorf("after the token's rotation: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("expired"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.List(context.Background()); err == nil {
		t.Error("a token the server refuses: no error (the token was not read again)")
	}
	if n := lists.Load(); n != 2 {
		t.Errorf("%d pod lists, want 2", n)
	}
}

// Without a node name, the source asks for the pod it runs in (its
// hostname) and lists that pod's node.
func TestKubeAPIFindsItsNode(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, _ := fakeAPIServer(t, dir, host)
	k, err := NewKubeAPI(KubeAPIConfig{Server: srv.URL, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got, err := k.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(podsWant) {
		t.Errorf("%d entries, want %d", len(got), len(podsWant))
	}
}

// A service account without the RBAC to list pods: the error says what
// grants it, and the Resolver passes the source over (path identity).
func TestKubeAPIForbidden(t *testing.T) {
	dir := t.TempDir()
	srv, _ := fakeAPIServer(t, dir, "none")
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := NewKubeAPI(KubeAPIConfig{Server: srv.URL, Dir: dir, Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver([]Source{k}, Options{})
	err = r.Refresh(context.Background())
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "ClusterRole") {
		t.Errorf("Refresh: %v, want a 403 that names the ClusterRole", err)
	}
	if names, ok := r.Names(monitor.Identity{PodUID: podUID, ContainerID: k8sID}); ok {
		t.Errorf("Names = %+v from a source that failed", names)
	}
}

// Names through a Resolver: a container by its ID, a static pod's
// container by its config hash, a sandbox (not in the API) by its pod.
func TestKubeAPIResolverNames(t *testing.T) {
	dir := t.TempDir()
	srv, _ := fakeAPIServer(t, dir, "none")
	k, err := NewKubeAPI(KubeAPIConfig{Server: srv.URL, Dir: dir, Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	r := NewResolver([]Source{k}, Options{})
	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	sandbox := strings.Repeat("ab", 32)
	for _, c := range []struct {
		id   monitor.Identity
		want string
	}{
		{monitor.Identity{PodUID: podUID, ContainerID: k8sID}, "shop/api-7d9f/app"},
		{monitor.Identity{PodUID: staticHash, ContainerID: etcdID}, "kube-system/etcd-node-a/etcd"},
		{monitor.Identity{PodUID: podUID, ContainerID: sandbox}, "shop/api-7d9f"},
		{monitor.Identity{PodUID: pendingUID}, "shop/pending"},
	} {
		names, _ := r.Names(c.id)
		if got := names.Label("?"); got != c.want {
			t.Errorf("Names(%s/%s).Label = %q, want %q", c.id.PodUID, c.id.ContainerID, got, c.want)
		}
	}
}

func TestNewKubeAPIBadConfig(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []KubeAPIConfig{
		{Server: "http://10.0.0.1:443", Dir: dir},
		{Server: "https://", Dir: dir},
		{Server: "https://10.0.0.1:443", Dir: dir}, // no ca.crt
	} {
		if _, err := NewKubeAPI(c); err == nil {
			t.Errorf("NewKubeAPI(%+v) gave no error", c)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewKubeAPI(KubeAPIConfig{Server: "https://10.0.0.1:443", Dir: dir}); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("a CA file without a certificate: %v", err)
	}
}

// Outside a pod there is no in-cluster configuration, and Sources adds no
// Kubernetes source.
func TestInClusterConfigOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, ok := InClusterConfig(); ok {
		t.Error("InClusterConfig without KUBERNETES_SERVICE_HOST: ok")
	}
	s, err := Sources(Config{DockerHost: Off, CRIEndpoint: Off})
	if err != nil || len(s) != 0 {
		t.Errorf("Sources outside a pod = %v, %v", s, err)
	}
}
