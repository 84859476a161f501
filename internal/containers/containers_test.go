package containers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

const (
	webID  = "4f5e6a7b8c9d00112233445566778899aabbccddeeff00112233445566778899"
	dbID   = "0a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223242526272829"
	k8sID  = "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"
	podUID = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
)

func TestParseDockerContainers(t *testing.T) {
	f, err := os.Open("testdata/docker/containers.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := parseDockerContainers(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{ContainerID: webID, Names: trace.Names{ContainerName: "web", Image: "nginx:1.25"}},
		{ContainerID: dbID, Names: trace.Names{ContainerName: "db", Image: "postgres:16"}},
		{ContainerID: k8sID, PodUID: podUID, Names: trace.Names{ContainerName: "app", Image: "sha256:aaaa", PodNamespace: "shop", PodName: "api-7d9f"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	if _, err := parseDockerContainers(strings.NewReader(`{"message": "no"}`)); err == nil {
		t.Error("an object instead of a list parsed")
	}
}

// serveUnix serves h on a unix socket in a temporary directory and
// returns its path.
func serveUnix(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestDockerList(t *testing.T) {
	body, err := os.ReadFile("testdata/docker/containers.json")
	if err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int32
	sock := serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/containers/json" || r.URL.Query().Get("all") != "1" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.String(), http.StatusBadRequest)
			return
		}
		gets.Add(1)
		w.Write(body)
	}))
	d, err := NewDocker("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Names.ContainerName != "web" || gets.Load() != 1 {
		t.Errorf("List: %+v after %d GETs", got, gets.Load())
	}

	// A daemon that answers with an error, and none at all.
	sock = serveUnix(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"page not found"}`, http.StatusNotFound)
	}))
	d, _ = NewDocker("unix://" + sock)
	if _, err := d.List(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("List of a failing daemon: %v", err)
	}
	d, _ = NewDocker("unix://" + filepath.Join(t.TempDir(), "none.sock"))
	if _, err := d.List(context.Background()); err == nil {
		t.Error("List of no daemon: no error")
	}
}

func TestNewDockerAddresses(t *testing.T) {
	for host, ok := range map[string]bool{
		"unix:///var/run/docker.sock": true,
		"tcp://127.0.0.1:2375":        true,
		"unix://":                     false,
		"tcp://":                      false,
		"ssh://me@host":               false,
		"npipe:////./pipe/docker":     false,
		"::":                          false,
	} {
		_, err := NewDocker(host)
		if (err == nil) != ok {
			t.Errorf("NewDocker(%q): %v", host, err)
		}
	}
}

// fakeCRI is a CRI runtime service with fixed sandboxes and containers.
type fakeCRI struct {
	cri.UnimplementedRuntimeServiceServer
	pods []*cri.PodSandbox
	ctrs []*cri.Container
}

func (f *fakeCRI) ListPodSandbox(context.Context, *cri.ListPodSandboxRequest) (*cri.ListPodSandboxResponse, error) {
	return &cri.ListPodSandboxResponse{Items: f.pods}, nil
}

func (f *fakeCRI) ListContainers(context.Context, *cri.ListContainersRequest) (*cri.ListContainersResponse, error) {
	return &cri.ListContainersResponse{Containers: f.ctrs}, nil
}

// TestCRIList asks a CRI server (over gRPC on a unix socket) for a pod
// with two containers: one labelled by the kubelet, one whose names come
// from its sandbox and metadata.
func TestCRIList(t *testing.T) {
	const sandboxID = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a"
	const sideID = "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
	fake := &fakeCRI{
		pods: []*cri.PodSandbox{{Id: sandboxID, Metadata: &cri.PodSandboxMetadata{Name: "api-7d9f", Uid: podUID, Namespace: "shop"}}},
		ctrs: []*cri.Container{
			{Id: k8sID, PodSandboxId: sandboxID, Metadata: &cri.ContainerMetadata{Name: "app"},
				Image: &cri.ImageSpec{Image: "sha256:bbbb", UserSpecifiedImage: "registry.local/api:2"}, ImageRef: "sha256:bbbb",
				Labels: map[string]string{LabelPodNamespace: "shop", LabelPodName: "api-7d9f", LabelPodUID: podUID, LabelContainerName: "app"}},
			{Id: sideID, PodSandboxId: sandboxID, Metadata: &cri.ContainerMetadata{Name: "sidecar"}, ImageRef: "sha256:cccc"},
		},
	}
	sock := filepath.Join(t.TempDir(), "cri.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cri.RegisterRuntimeServiceServer(srv, fake)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)

	c, err := NewCRI("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := c.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pod := trace.Names{PodNamespace: "shop", PodName: "api-7d9f"}
	want := []Entry{
		{PodUID: podUID, Names: pod},
		{ContainerID: sandboxID, PodUID: podUID, Names: trace.Names{ContainerName: "POD", PodNamespace: "shop", PodName: "api-7d9f"}},
		{ContainerID: k8sID, PodUID: podUID, Names: trace.Names{ContainerName: "app", Image: "registry.local/api:2", PodNamespace: "shop", PodName: "api-7d9f"}},
		{ContainerID: sideID, PodUID: podUID, Names: trace.Names{ContainerName: "sidecar", Image: "sha256:cccc", PodNamespace: "shop", PodName: "api-7d9f"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}

	// A runtime without the CRI (Docker's containerd) fails to list.
	sock2 := filepath.Join(t.TempDir(), "nocri.sock")
	ln2, err := net.Listen("unix", sock2)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := grpc.NewServer()
	go srv2.Serve(ln2)
	t.Cleanup(srv2.Stop)
	c2, _ := NewCRI("unix://" + sock2)
	defer c2.Close()
	if _, err := c2.List(context.Background()); err == nil {
		t.Error("List of a runtime without the CRI: no error")
	}
	if _, err := NewCRI("/run/containerd/containerd.sock"); err == nil {
		t.Error("NewCRI of a path without unix://: no error")
	}
}

// fakeSource lists fixed entries (or fails) and counts its listings.
type fakeSource struct {
	mu      sync.Mutex
	entries []Entry
	err     error
	lists   int
}

func (f *fakeSource) String() string { return "fake" }

func (f *fakeSource) List(context.Context) ([]Entry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	return append([]Entry(nil), f.entries...), f.err
}

func (f *fakeSource) set(e []Entry, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries, f.err = e, err
}

func (f *fakeSource) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// waitNames polls r until it names id (the background listing ran).
func waitNames(t *testing.T, r *Resolver, id monitor.Identity) trace.Names {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n, ok := r.Names(id); ok {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%+v never named", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestResolverCachesAndRefreshesOnMiss(t *testing.T) {
	web := Entry{ContainerID: webID, Names: trace.Names{ContainerName: "web", Image: "nginx:1.25"}}
	app := Entry{ContainerID: k8sID, PodUID: podUID, Names: trace.Names{ContainerName: "app", PodNamespace: "shop", PodName: "api-7d9f"}}
	src := &fakeSource{entries: []Entry{web}}
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	r := NewResolver([]Source{src}, Options{MinRefresh: 10 * time.Second})
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	if err := r.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	webGroup := monitor.Identify("/docker/" + webID)
	for range 100 {
		if n, ok := r.Names(webGroup); !ok || n != web.Names {
			t.Fatalf("Names(web) = %+v, %v", n, ok)
		}
	}
	if n := src.count(); n != 1 {
		t.Errorf("%d listings for 100 lookups of a known container, want 1", n)
	}
	// Groups without a container or pod are not looked up.
	if _, ok := r.Names(monitor.Identify("/system.slice/nginx.service")); ok || src.count() != 1 {
		t.Errorf("a systemd unit was named, or listed for (%d listings)", src.count())
	}

	// A new container: the first miss (MinRefresh after the last
	// listing) lists again in the background; misses before do not.
	src.set([]Entry{web, app}, nil)
	appGroup := monitor.Identify("/kubepods/burstable/pod" + podUID + "/" + k8sID)
	if _, ok := r.Names(appGroup); ok {
		t.Fatal("named before the runtime was asked again")
	}
	if n := src.count(); n != 1 {
		t.Errorf("%d listings: a miss within MinRefresh listed", n)
	}
	advance(11 * time.Second)
	if n := waitNames(t, r, appGroup); n != app.Names {
		t.Errorf("Names(app) = %+v", n)
	}
	if n, ok := r.Names(monitor.Identify("/kubepods/burstable/pod" + podUID)); !ok || n != (trace.Names{PodNamespace: "shop", PodName: "api-7d9f"}) {
		t.Errorf("the pod's own group: %+v, %v", n, ok)
	}
	// An ID no runtime knows lists at most once per MinRefresh.
	lists := src.count()
	unknown := monitor.Identify("/docker/" + strings.Repeat("e", 64))
	advance(11 * time.Second)
	for range 50 {
		r.Names(unknown)
	}
	deadline := time.Now().Add(5 * time.Second)
	for src.count() < lists+1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if n := src.count() - lists; n != 1 {
		t.Errorf("%d listings for 50 lookups of an unknown container, want 1", n)
	}

	// A runtime that stops answering: nothing is named, nothing fails.
	src.set(nil, errors.New("connection refused"))
	if err := r.Refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "fake: connection refused") {
		t.Errorf("Refresh of a failing source: %v", err)
	}
	if _, ok := r.Names(webGroup); ok {
		t.Error("a failing source's container is still named")
	}
	if errs := r.Errors(); len(errs) != 1 {
		t.Errorf("Errors() = %v", errs)
	}
}

func TestResolverFind(t *testing.T) {
	a := &fakeSource{entries: []Entry{
		{ContainerID: webID, Names: trace.Names{ContainerName: "web"}},
		{ContainerID: dbID, Names: trace.Names{ContainerName: "db"}},
	}}
	b := &fakeSource{entries: []Entry{
		{PodUID: podUID, Names: trace.Names{PodNamespace: "shop", PodName: "api-7d9f"}},
		{ContainerID: k8sID, PodUID: podUID, Names: trace.Names{ContainerName: "app", PodNamespace: "shop", PodName: "api-7d9f"}},
		{ContainerID: "0a0b0c0d" + strings.Repeat("1", 56), PodUID: "other", Names: trace.Names{ContainerName: "app", PodNamespace: "shop", PodName: "worker"}},
	}}
	down := &fakeSource{err: errors.New("down")}
	r := NewResolver([]Source{a, b, down}, Options{})
	ctx := context.Background()
	if err := r.Refresh(ctx); err == nil {
		t.Error("Refresh with a source down: no error")
	}
	for ref, want := range map[string]string{"web": webID, "/db": dbID, "4f5e6a7b": webID, "9f8e": k8sID} {
		if got, err := r.FindContainer(ref); err != nil || got != want {
			t.Errorf("FindContainer(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	for ref, want := range map[string]error{"app": ErrAmbiguous, "0a0b0c0d": ErrAmbiguous, "nginx": ErrNotFound} {
		if _, err := r.FindContainer(ref); !errors.Is(err, want) {
			t.Errorf("FindContainer(%q): %v, want %v", ref, err, want)
		}
	}
	if uid, err := r.FindPod("shop", "api-7d9f"); err != nil || uid != podUID {
		t.Errorf("FindPod = %q, %v", uid, err)
	}
	if _, err := r.FindPod("default", "api-7d9f"); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindPod of another namespace: %v", err)
	}
	r = NewResolver([]Source{down}, Options{})
	r.Refresh(ctx)
	if _, err := r.FindContainer("web"); !errors.Is(err, ErrNoRuntime) || !strings.Contains(err.Error(), "fake: down") {
		t.Errorf("FindContainer with no runtime answering: %v", err)
	}
	if _, err := NewResolver(nil, Options{}).FindPod("shop", "api"); !errors.Is(err, ErrNoRuntime) {
		t.Errorf("FindPod with no runtime: %v", err)
	}
}

func TestSources(t *testing.T) {
	s, err := Sources(Config{DockerHost: "unix:///x/docker.sock", CRIEndpoint: "unix:///x/cri.sock"})
	if err != nil || len(s) != 2 || s[0].String() != "docker unix:///x/docker.sock" || s[1].String() != "cri unix:///x/cri.sock" {
		t.Errorf("Sources = %v, %v", s, err)
	}
	if s, err := Sources(Config{DockerHost: Off, CRIEndpoint: Off}); err != nil || len(s) != 0 {
		t.Errorf("Sources(off) = %v, %v", s, err)
	}
	if _, err := Sources(Config{DockerHost: "ssh://h"}); err == nil {
		t.Error("Sources(ssh://) gave no error")
	}
}

// An ID that a listing made after it was asked about did not know asks
// for a listing once per MissedRefresh, not once per MinRefresh; while a
// source fails, it is not taken for missed. Once it is named, or not
// asked about for MissedRefresh, it is forgotten.
func TestResolverMissedIDs(t *testing.T) {
	web := Entry{ContainerID: webID, Names: trace.Names{ContainerName: "web", Image: "nginx:1.25"}}
	src := &fakeSource{entries: []Entry{web}}
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	r := NewResolver([]Source{src}, Options{MinRefresh: 10 * time.Second, MissedRefresh: time.Minute})
	r.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	// ask asks about id and waits for the listing it started, if any: the
	// listings made.
	ask := func(id monitor.Identity) int {
		t.Helper()
		before := src.count()
		r.Names(id)
		deadline := time.Now().Add(5 * time.Second)
		for {
			r.mu.Lock()
			busy := r.refreshing
			r.mu.Unlock()
			if !busy {
				return src.count() - before
			}
			if time.Now().After(deadline) {
				t.Fatal("the listing never ended")
			}
			time.Sleep(time.Millisecond)
		}
	}
	foreign := monitor.Identify("/docker/" + strings.Repeat("f", 64))
	if n := ask(foreign); n != 1 {
		t.Fatalf("the first lookup of an unknown container made %d listings, want 1", n)
	}
	// Missed: asked every 11 s for 55 s, no listing.
	for i := range 5 {
		advance(11 * time.Second)
		if n := ask(foreign); n != 0 {
			t.Errorf("lookup %d, %ds after the listing that missed it: %d listings, want none", i+2, 11*(i+1), n)
		}
	}
	advance(11 * time.Second) // 66 s after the miss
	if n := ask(foreign); n != 1 {
		t.Errorf("a lookup MissedRefresh after the miss made %d listings, want 1", n)
	}
	// Another unknown ID still lists after MinRefresh.
	advance(11 * time.Second)
	other := monitor.Identify("/docker/" + strings.Repeat("e", 64))
	if n := ask(other); n != 1 {
		t.Errorf("a new unknown container made %d listings, want 1", n)
	}
	// A failing source misses nothing: its container is asked for again
	// after MinRefresh.
	src.set(nil, errors.New("connection refused"))
	advance(11 * time.Second)
	late := monitor.Identify("/docker/" + strings.Repeat("d", 64))
	if n := ask(late); n != 1 {
		t.Fatalf("%d listings, want 1", n)
	}
	src.set([]Entry{web, {ContainerID: strings.Repeat("d", 64), Names: trace.Names{ContainerName: "late"}}}, nil)
	advance(11 * time.Second)
	if n := ask(late); n != 1 {
		t.Errorf("a container asked about while its runtime failed: %d listings MinRefresh later, want 1", n)
	}
	if n, ok := r.Names(late); !ok || n.ContainerName != "late" {
		t.Errorf("Names(late) = %+v, %v", n, ok)
	}
	r.mu.Lock()
	_, kept := r.unknown[unknownID{id: strings.Repeat("d", 64)}]
	r.mu.Unlock()
	if kept {
		t.Error("a named container is still among the unknown")
	}
	// Not asked about for MissedRefresh: forgotten at the next listing.
	advance(2 * time.Minute)
	ask(other)
	r.mu.Lock()
	_, kept = r.unknown[unknownID{id: strings.Repeat("f", 64)}]
	r.mu.Unlock()
	if kept {
		t.Error("an unknown container not asked about for MissedRefresh is still remembered")
	}
}
