package testenv

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Helm is helm as `make k8s-bins` builds it with the Kubernetes node
// (test/kubernetes/build/build.sh), with the Prometheus Operator's CRDs
// beside it.
type Helm struct {
	Bin  string // the helm binary
	CRDs string // the ServiceMonitor and PrometheusRule CRDs' directory
}

// NeedHelm returns the helm of the repository whose root is root. Without
// it the test skips, or fails under CFSPROBE_REQUIRE_CGROUPS=1: tests never
// build it.
func NeedHelm(t testing.TB, root string) Helm {
	t.Helper()
	out, err := exec.Command(filepath.Join(root, "test/kubernetes/build/build.sh"), "--check").Output()
	if err != nil {
		const why = "helm is not built (run `make k8s-bins`, 5 to 10 minutes once per machine)"
		if Required() {
			t.Fatalf("%s=1 but %s", RequireEnv, why)
		}
		t.Skipf("%s; set %s=1 to make this a failure", why, RequireEnv)
	}
	dir := strings.TrimSpace(string(out))
	return Helm{Bin: filepath.Join(dir, "helm"), CRDs: filepath.Join(dir, "crds")}
}
