package deploy

import (
	"regexp"
	"strings"
	"testing"
)

// No Docker engine runs the tests: check the Dockerfile's promises as text,
// and that .dockerignore keeps what the build needs.
func TestDockerfile(t *testing.T) {
	text := string(readFile(t, "Dockerfile"))
	stages := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?\s*$`).FindAllStringSubmatch(text, -1)
	if len(stages) < 2 {
		t.Fatalf("want a build stage and a final stage, got %d FROM lines", len(stages))
	}
	if !strings.HasPrefix(stages[0][1], "golang:1.26") {
		t.Errorf("builder %s, want golang:1.26", stages[0][1])
	}
	final := stages[len(stages)-1]
	if final[1] != "gcr.io/distroless/static:nonroot" && final[1] != "scratch" {
		t.Errorf("the default (last) stage is %s, want gcr.io/distroless/static:nonroot", final[1])
	}
	debug := false
	for _, s := range stages {
		debug = debug || s[2] == "debug"
	}
	if !debug {
		t.Errorf("no debug stage: check-daemonset*.yaml needs its shell")
	}
	for _, want := range []string{"make native", "CGO_ENABLED=0", "-trimpath", "./cmd/cfsprobe", "USER 65534", `ENTRYPOINT ["/cfsprobe"]`} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %s", want)
		}
	}
	if n := strings.Count(text, "USER 65534"); n != len(stages)-1 {
		t.Errorf("%d USER 65534 lines for %d image stages", n, len(stages)-1)
	}

	for _, l := range strings.Split(string(readFile(t, ".dockerignore")), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "!") {
			continue
		}
		for _, need := range []string{"go.mod", "go.sum", "cmd", "internal", "native", "Makefile"} {
			if l == need || strings.HasPrefix(need, strings.TrimSuffix(l, "/")+"/") || l == "*" || l == "**" {
				t.Errorf(".dockerignore excludes %s (pattern %q), which the build needs", need, l)
			}
		}
	}
}
