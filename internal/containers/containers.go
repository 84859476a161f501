// Package containers tells the names of the containers and pods whose
// cgroups cfsprobe reads, as their runtimes know them: a Docker container's
// name and image (the Engine API), a Kubernetes container's namespace, pod
// and container name (the CRI's labels, or, from inside a pod, the API
// server's pods of the node: KubeAPI). A group's path has only IDs
// (monitor.Identify); this package maps them to names, and names back to
// IDs for selecting a group by name.
//
// Sources list what one runtime knows; a Resolver keeps what they listed
// and answers from memory, listing again when asked about an ID it does
// not know, at most once every MinRefresh: a scrape of the exporter or a
// refresh of top makes no call to a runtime when nothing has changed, and
// one call per MinRefresh at most when something has. An ID that a
// listing made after it was first asked about did not know (a container
// of a runtime no source speaks to) asks for a listing once per
// MissedRefresh only. A source that does not answer is passed over
// silently: its groups keep their path identity.
package containers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/monitor"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Entry is one container, or one pod, a source knows.
type Entry struct {
	// ContainerID is the container's full ID, as its group's path has it;
	// "" for an entry that names a pod only.
	ContainerID string
	// PodUID is the Kubernetes pod's UID as its group's path has it (with
	// dashes; a static pod's config hash); "" outside Kubernetes.
	PodUID string
	Names  trace.Names
}

// Source lists the containers and pods one runtime knows: the Docker
// Engine API (Docker), the CRI (CRI), or anything else that can (the
// Kubernetes API server for the pods of a node).
type Source interface {
	// String names the source for messages: "docker unix:///var/run/docker.sock".
	String() string
	// List returns every container and pod the source knows now.
	List(ctx context.Context) ([]Entry, error)
}

// Options tune a Resolver.
type Options struct {
	// MinRefresh is the least time between two listings made because an
	// ID was not known (default DefaultMinRefresh).
	MinRefresh time.Duration
	// MissedRefresh is the least time between two listings made because
	// of an ID that a listing made after it was first asked about did
	// not know (default DefaultMissedRefresh).
	MissedRefresh time.Duration
	// Timeout bounds one listing of one source (default DefaultTimeout).
	Timeout time.Duration
}

// Defaults of Options.
const (
	DefaultMinRefresh    = 5 * time.Second
	DefaultMissedRefresh = time.Minute
	DefaultTimeout       = 2 * time.Second
)

// Resolver answers what the sources call a group, from what they listed
// last. It is safe for concurrent use.
type Resolver struct {
	sources []Source
	opts    Options
	now     func() time.Time

	mu         sync.Mutex
	byID       map[string]trace.Names // container ID -> names
	byPod      map[string]trace.Names // pod UID -> namespace and name
	entries    []Entry                // the last listing, for Find*
	last       time.Time              // when the last listing started
	refreshing bool
	errs       map[string]error // the last listing's error by source
	// unknown are the IDs asked about and not known.
	unknown map[unknownID]*miss
}

// unknownID is a container ID, or with pod a pod UID.
type unknownID struct {
	id  string
	pod bool
}

// miss is an ID asked about that no listing knew.
type miss struct {
	asked  time.Time // first asked about
	missed time.Time // when a listing that started after asked did not know it (zero: none yet)
	seen   time.Time // last asked about
}

// NewResolver returns a Resolver of the sources; none: it knows nothing
// and every group keeps its path identity.
func NewResolver(sources []Source, opts Options) *Resolver {
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.MissedRefresh <= 0 {
		opts.MissedRefresh = DefaultMissedRefresh
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	return &Resolver{sources: sources, opts: opts, now: time.Now, byID: map[string]trace.Names{}, byPod: map[string]trace.Names{}, errs: map[string]error{}, unknown: map[unknownID]*miss{}}
}

// Refresh lists every source now and waits for them. What a source that
// fails knew is forgotten; the error joins the failures (each naming its
// source), nil when every source answered.
func (r *Resolver) Refresh(ctx context.Context) error {
	if len(r.sources) == 0 {
		return nil
	}
	r.mu.Lock()
	r.last = r.now()
	started := r.last
	r.mu.Unlock()
	return r.list(ctx, started)
}

// list lists every source, concurrently, and replaces what is known;
// the listing started at started.
func (r *Resolver) list(ctx context.Context, started time.Time) error {
	type result struct {
		entries []Entry
		err     error
	}
	results := make([]result, len(r.sources))
	var wg sync.WaitGroup
	for i, s := range r.sources {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, r.opts.Timeout)
			defer cancel()
			e, err := s.List(c)
			if err != nil {
				err = fmt.Errorf("%s: %w", s, err)
			}
			results[i] = result{e, err}
		})
	}
	wg.Wait()
	byID, byPod := map[string]trace.Names{}, map[string]trace.Names{}
	var entries []Entry
	var errs []error
	errOf := map[string]error{}
	for i, res := range results {
		if res.err != nil {
			errs = append(errs, res.err)
			errOf[r.sources[i].String()] = res.err
			continue
		}
		for _, e := range res.entries {
			entries = append(entries, e)
			if e.ContainerID != "" {
				byID[e.ContainerID] = e.Names
			}
			if e.PodUID != "" && e.Names.PodName != "" {
				byPod[e.PodUID] = trace.Names{PodNamespace: e.Names.PodNamespace, PodName: e.Names.PodName}
			}
		}
	}
	r.mu.Lock()
	r.byID, r.byPod, r.entries, r.errs = byID, byPod, entries, errOf
	r.noteMisses(started, len(errs) > 0)
	r.mu.Unlock()
	return errors.Join(errs...)
}

// Names returns what the runtimes call the group of id: its container's
// names, or its pod's for a pod's own group. It answers from memory; when
// the group has a container ID or pod UID that is not known, it starts a
// listing in the background (at most one per MinRefresh, and per
// MissedRefresh for an ID a listing already missed), whose answer the
// next call sees. ok is false when nothing is known.
func (r *Resolver) Names(id monitor.Identity) (names trace.Names, ok bool) {
	if id.ContainerID == "" && id.PodUID == "" || len(r.sources) == 0 {
		return trace.Names{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := unknownID{id: id.PodUID, pod: true}
	if id.ContainerID != "" {
		key = unknownID{id: id.ContainerID}
		names, ok = r.byID[id.ContainerID]
		if !ok && id.PodUID != "" {
			// A container the listing has not seen yet, in a pod it
			// has: the pod's names meanwhile.
			names, _ = r.byPod[id.PodUID]
		}
	} else {
		names, ok = r.byPod[id.PodUID]
	}
	if !ok && r.wantListing(key) {
		r.refreshing, r.last = true, r.now()
		go func(started time.Time) {
			_ = r.list(context.Background(), started)
			r.mu.Lock()
			r.refreshing = false
			r.mu.Unlock()
		}(r.last)
	}
	return names, ok || !names.IsZero()
}

// wantListing notes that the ID key was asked about and not known, and
// says whether to list for it now (r.mu held).
func (r *Resolver) wantListing(key unknownID) bool {
	now := r.now()
	m := r.unknown[key]
	if m == nil {
		m = &miss{asked: now}
		r.unknown[key] = m
	}
	m.seen = now
	if r.refreshing || now.Sub(r.last) < r.opts.MinRefresh {
		return false
	}
	return m.missed.IsZero() || now.Sub(m.missed) >= r.opts.MissedRefresh
}

// noteMisses updates the unknown IDs after a listing that started at
// started (r.mu held): an ID it knows is forgotten; one asked about
// before it started and still unknown is missed, unless a source failed
// (it may be that source's); one not asked about for MissedRefresh is
// forgotten (its group is gone, most likely).
func (r *Resolver) noteMisses(started time.Time, failed bool) {
	now := r.now()
	for key, m := range r.unknown {
		known := r.byID
		if key.pod {
			known = r.byPod
		}
		_, isKnown := known[key.id]
		switch {
		case isKnown, now.Sub(m.seen) >= r.opts.MissedRefresh:
			delete(r.unknown, key)
		case !failed && !m.asked.After(started):
			m.missed = now
		}
	}
}

// Errors are the errors of the sources that failed in the last listing,
// each naming its source; none when every source answered.
func (r *Resolver) Errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []error
	for _, k := range slices.Sorted(maps.Keys(r.errs)) {
		out = append(out, r.errs[k])
	}
	return out
}

// ErrNotFound is returned by FindContainer and FindPod when no runtime
// knows the name.
var ErrNotFound = errors.New("not found")

// ErrAmbiguous is returned by FindContainer when a name or ID prefix
// matches several containers.
var ErrAmbiguous = errors.New("ambiguous")

// ErrNoRuntime is returned by FindContainer and FindPod when no source
// answered the last listing.
var ErrNoRuntime = errors.New("no container runtime answered")

// FindContainer returns, from the last listing (Refresh first), the full
// ID of the container called ref (a Docker container's name, or a
// Kubernetes container's name when only one pod has a container of that
// name), or whose ID starts with ref.
func (r *Resolver) FindContainer(ref string) (string, error) {
	if err := r.noRuntime(); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ref = strings.TrimPrefix(ref, "/")
	var byName, byPrefix []string
	for _, e := range r.entries {
		if e.ContainerID == "" {
			continue
		}
		if e.Names.ContainerName == ref && e.Names.ContainerName != "POD" {
			byName = appendNew(byName, e.ContainerID)
		}
		if strings.HasPrefix(e.ContainerID, ref) {
			byPrefix = appendNew(byPrefix, e.ContainerID)
		}
	}
	for _, ids := range [][]string{byName, byPrefix} {
		switch len(ids) {
		case 0:
			continue
		case 1:
			return ids[0], nil
		}
		return "", fmt.Errorf("%w: %q names %d containers (%s)", ErrAmbiguous, ref, len(ids), strings.Join(ids, ", "))
	}
	return "", fmt.Errorf("%w: no container named %q", ErrNotFound, ref)
}

// FindPod returns, from the last listing (Refresh first), the UID of the
// Kubernetes pod namespace/name.
func (r *Resolver) FindPod(namespace, name string) (string, error) {
	if err := r.noRuntime(); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.PodUID != "" && e.Names.PodNamespace == namespace && e.Names.PodName == name {
			return e.PodUID, nil
		}
	}
	return "", fmt.Errorf("%w: no pod %s/%s", ErrNotFound, namespace, name)
}

// noRuntime is ErrNoRuntime, wrapping the sources' errors, when there
// are none or none answered the last listing.
func (r *Resolver) noRuntime() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.sources) == 0 {
		return fmt.Errorf("%w: none is asked", ErrNoRuntime)
	}
	if len(r.errs) < len(r.sources) {
		return nil
	}
	errs := make([]error, 0, len(r.errs))
	for _, k := range slices.Sorted(maps.Keys(r.errs)) {
		errs = append(errs, r.errs[k])
	}
	return fmt.Errorf("%w: %w", ErrNoRuntime, errors.Join(errs...))
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// Kubernetes labels that the kubelet puts on the containers it creates
// (the CRI's labels; Docker's when the kubelet ran containers through
// it).
const (
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
)

// kubeNames fills a container's Kubernetes names from its labels; ok is
// false when they do not name a pod.
func kubeNames(labels map[string]string, n *trace.Names) (podUID string, ok bool) {
	if labels[LabelPodName] == "" {
		return "", false
	}
	n.PodNamespace, n.PodName = labels[LabelPodNamespace], labels[LabelPodName]
	if c := labels[LabelContainerName]; c != "" {
		n.ContainerName = c
	}
	return labels[LabelPodUID], true
}

// Off is the value of Config's fields that turns a runtime off.
const Off = "none"

// Config says which runtimes to ask, as the flags give them.
type Config struct {
	// DockerHost is the Docker daemon's address (DockerHostFromEnv by
	// default); Off: do not ask Docker.
	DockerHost string
	// CRIEndpoint is a CRI runtime's socket; "": those of
	// DefaultCRIEndpoints that exist; Off: do not ask a CRI runtime.
	CRIEndpoint string
	// KubeAPI is KubeAPIInCluster (or ""): ask the Kubernetes API server
	// for the pods of this node when the process runs in a pod with a
	// service account token (InClusterConfig); Off: do not.
	KubeAPI string
}

// Sources makes the sources config names. An address that cannot be used
// (an unknown scheme) is an error naming it; a runtime that is not
// running is not (its source fails to list, and is passed over).
func Sources(config Config) ([]Source, error) {
	var out []Source
	if config.DockerHost != Off && config.DockerHost != "" {
		d, err := NewDocker(config.DockerHost)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if config.CRIEndpoint != Off {
		for _, e := range CRIEndpoints(config.CRIEndpoint) {
			c, err := NewCRI(e)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	switch config.KubeAPI {
	case Off:
	case "", KubeAPIInCluster:
		if kc, ok := InClusterConfig(); ok {
			k, err := NewKubeAPI(kc)
			if err != nil {
				return nil, err
			}
			out = append(out, k)
		}
	default:
		return nil, fmt.Errorf("Kubernetes API %q: cfsprobe asks the API server of the pod it runs in (%s) or none", config.KubeAPI, KubeAPIInCluster)
	}
	return out, nil
}
