package containers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/unixhttp"
)

// DefaultDockerHost is the Docker daemon's address when DOCKER_HOST is not
// set.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// DockerHostFromEnv is DOCKER_HOST, or DefaultDockerHost when it is not
// set.
func DockerHostFromEnv() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return DefaultDockerHost
}

// Docker lists a Docker daemon's containers through its Engine API
// (GET /containers/json, read-only).
type Docker struct {
	host   string
	client *http.Client
	base   string // URL the API's paths are appended to
}

// NewDocker returns the source of the daemon at host: unix:///PATH or
// tcp://HOST:PORT (plain HTTP), as DOCKER_HOST takes it.
func NewDocker(host string) (*Docker, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	d := &Docker{host: host}
	switch u.Scheme {
	case "unix":
		path := u.Path
		if path == "" {
			path = u.Opaque
		}
		if path == "" {
			return nil, fmt.Errorf("docker host %q: no socket path (unix:///var/run/docker.sock)", host)
		}
		d.base = "http://docker"
		d.client = unixhttp.Client(path)
	case "tcp", "http":
		if u.Host == "" {
			return nil, fmt.Errorf("docker host %q: no address (tcp://HOST:PORT)", host)
		}
		d.base = "http://" + u.Host
		d.client = &http.Client{Transport: &http.Transport{}}
	default:
		return nil, fmt.Errorf("docker host %q: cfsprobe speaks to unix:// and tcp:// addresses only", host)
	}
	return d, nil
}

func (d *Docker) String() string { return "docker " + d.host }

// dockerContainer is what GET /containers/json says of a container.
type dockerContainer struct {
	ID     string            `json:"Id"`
	Names  []string          `json:"Names"`
	Image  string            `json:"Image"`
	Labels map[string]string `json:"Labels"`
}

// List lists every container of the daemon, running or not.
func (d *Docker) List(ctx context.Context) ([]Entry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/containers/json?all=1", nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET /containers/json: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return parseDockerContainers(resp.Body)
}

// parseDockerContainers reads the body of GET /containers/json.
func parseDockerContainers(r io.Reader) ([]Entry, error) {
	var list []dockerContainer
	if err := json.NewDecoder(r).Decode(&list); err != nil {
		return nil, fmt.Errorf("parse GET /containers/json: %w", err)
	}
	out := make([]Entry, 0, len(list))
	for _, c := range list {
		if c.ID == "" {
			continue
		}
		e := Entry{ContainerID: c.ID, Names: trace.Names{Image: c.Image}}
		// A container's first name is its own; others are links'
		// (/other/alias).
		for _, n := range c.Names {
			if n = strings.TrimPrefix(n, "/"); n != "" && !strings.Contains(n, "/") {
				e.Names.ContainerName = n
				break
			}
		}
		// A container the kubelet made through Docker (dockershim,
		// cri-dockerd) is named by its pod.
		if uid, ok := kubeNames(c.Labels, &e.Names); ok {
			e.PodUID = uid
		}
		out = append(out, e)
	}
	return out, nil
}
