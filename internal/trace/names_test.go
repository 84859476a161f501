package trace

import "testing"

func TestLabel(t *testing.T) {
	for _, c := range []struct {
		n    Names
		want string
	}{
		{Names{}, "docker 4f5e6a7b8c9d"},
		{Names{ContainerName: "web", Image: "nginx:1.25"}, "web (nginx:1.25)"},
		{Names{ContainerName: "web"}, "web"},
		{Names{ContainerName: "app", Image: "x", PodNamespace: "shop", PodName: "api"}, "shop/api/app"},
		{Names{PodNamespace: "shop", PodName: "api"}, "shop/api"},
	} {
		if got := c.n.Label("docker 4f5e6a7b8c9d"); got != c.want {
			t.Errorf("%+v.Label = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestShort(t *testing.T) {
	for _, c := range []struct {
		n    Names
		want string
	}{
		{Names{}, "/docker/4f5e6a7b8c9d"},
		{Names{ContainerName: "web", Image: "nginx:1.25"}, "web"},
		{Names{ContainerName: "app", Image: "x", PodNamespace: "shop", PodName: "api"}, "app"},
		{Names{PodNamespace: "shop", PodName: "api"}, "shop/api"},
	} {
		if got := c.n.Short("/docker/4f5e6a7b8c9d"); got != c.want {
			t.Errorf("%+v.Short = %q, want %q", c.n, got, c.want)
		}
	}
}
