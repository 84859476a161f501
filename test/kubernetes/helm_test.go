package kubernetes

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/testenv/dockerd"
)

const (
	chart       = "deploy/helm/cfsprobe"
	helmRelease = "cfsprobe" // the release whose objects deploy/kubernetes names
	// exporterDNS is the exporter Service's name in the cluster, which
	// the exporter's test certificate is for.
	exporterDNS  = "cfsprobe-exporter.cfsprobe.svc"
	tlsSecret    = "cfsprobe-exporter-tls"
	scrapeSecret = "cfsprobe-scrape"
)

// helm runs helm against the node as its admin, with helm's own files
// (cache, configuration, data, the API's discovery cache) in the node's
// directory.
func (n *Node) helm(h testenv.Helm, args ...string) (string, error) {
	cmd := exec.Command(h.Bin, append([]string{"--kubeconfig", n.Kubeconfig}, args...)...)
	home := filepath.Join(n.Dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data",
		"KUBECACHEDIR="+home+"/kube-cache")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// checkHelmChart installs deploy/helm/cfsprobe as its README says, in the
// secure setup: the release cfsprobe in the namespace cfsprobe, on a
// cluster that serves the Prometheus Operator's ServiceMonitor and
// PrometheusRule (their CRDs, from the operator's module), with TLS (a
// certificate of the node's CA in a Secret) and basic auth. The exporter's
// pod must run and be scraped over TLS with the password, naming the
// static pod's container; without the password it answers 401, without
// TLS not at all. Then `helm uninstall` must leave nothing of the release.
// deploy/kubernetes' exporter must be gone first: the release makes the
// same cluster-wide names.
func checkHelmChart(t *testing.T, n *Node) {
	h := testenv.NeedHelm(t, repoPath(""))
	for _, f := range []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_prometheusrules.yaml"} {
		crd := filepath.Join(h.CRDs, f)
		n.Kubectl(t, "create", "-f", crd)
		defer func() {
			if _, err := n.KubectlErr("delete", "-f", crd, "--wait=true", "--timeout=60s"); err != nil {
				t.Error(err)
			}
		}()
	}
	n.Kubectl(t, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")

	// The exporter's certificate, for its Service's name, and the
	// password of the user Prometheus scrapes as.
	if err := n.pki.Issue("exporter", exporterDNS, nil, nil, []string{exporterDNS}); err != nil {
		t.Fatal(err)
	}
	password := rand.Text()
	n.Kubectl(t, "-n", ns, "create", "secret", "tls", tlsSecret, "--cert", n.pki.Path("exporter", "crt"), "--key", n.pki.Path("exporter", "key"))
	defer n.KubectlErr("-n", ns, "delete", "secret", tlsSecret)
	// What the ServiceMonitor tells Prometheus: the CA, the user and the
	// password.
	n.Kubectl(t, "-n", ns, "create", "secret", "generic", scrapeSecret, "--from-file=ca.crt="+n.pki.Path("ca", "crt"),
		"--from-literal=username=prometheus", "--from-literal=password="+password)
	defer n.KubectlErr("-n", ns, "delete", "secret", scrapeSecret)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(dockerd.ImageRef, ":")
	values := fmt.Sprintf(`image: {repository: %q, tag: %q}
web:
  tls: {secretName: %s}
  basicAuthUsers: {prometheus: %q}
serviceMonitor:
  tlsConfig:
    ca: {secret: {name: %[6]s, key: ca.crt}}
    serverName: %[5]s
  basicAuth:
    username: {name: %[6]s, key: username}
    password: {name: %[6]s, key: password}
`, repo, tag, tlsSecret, hash, exporterDNS, scrapeSecret)
	valuesFile := filepath.Join(n.Dir, "helm-values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}

	t0 := time.Now()
	installed := true
	if _, err := n.helm(h, "install", helmRelease, repoPath(chart), "-n", ns, "--values", valuesFile, "--wait", "--timeout", "3m"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if installed {
			n.helm(h, "uninstall", helmRelease, "-n", ns, "--wait")
		}
	}()
	// helm's --wait holds a DaemonSet ready once desired - maxUnavailable
	// pods are: on one node with maxUnavailable 1 that is none, so it can
	// return before the pod has even been made. kubectl's rollout status
	// waits until the controller has seen the DaemonSet and its pod is
	// available.
	n.Kubectl(t, "-n", ns, "rollout", "status", "ds/cfsprobe-exporter", "--timeout=3m")
	installTime := time.Since(t0)
	exp := n.onlyPod(t, ns, "app.kubernetes.io/instance="+helmRelease+",app.kubernetes.io/component=exporter")
	t.Logf("helm install --wait, kubectl rollout status: %.1f s until the exporter pod %s was Ready", installTime.Seconds(), exp.Metadata.Name)
	checkExporterPrivileges(t, n, exp)
	made := n.Kubectl(t, "-n", ns, "get", "daemonset,service,serviceaccount,secret,configmap,servicemonitor,prometheusrule", "-l", "app.kubernetes.io/instance="+helmRelease, "-o", "name")
	for _, want := range []string{"daemonset.apps/cfsprobe-exporter", "service/cfsprobe-exporter", "serviceaccount/cfsprobe-exporter", "secret/cfsprobe-exporter-web-config",
		"configmap/cfsprobe-dashboard", "servicemonitor.monitoring.coreos.com/cfsprobe-exporter", "prometheusrule.monitoring.coreos.com/cfsprobe"} {
		if !strings.Contains(made, want+"\n") {
			t.Errorf("the release made no %s; it made:\n%s", want, made)
		}
	}

	// Scraped over TLS with the password (the URL's user): the static
	// pod's container by its pod's name.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.pki.Pool(), ServerName: exporterDNS}}}
	url := fmt.Sprintf("https://%s:%d/metrics", exp.Status.PodIP, metricsPort)
	authURL := fmt.Sprintf("https://prometheus:%s@%s:%d/metrics", password, exp.Status.PodIP, metricsPort)
	want := `pod_name="` + staticPod + "-" + nodeName + `"`
	var info string
	if err := n.waitFor(60*time.Second, "the chart's exporter naming the static pod", func() (bool, error) {
		for _, l := range scrape(t, client, authURL) {
			if strings.HasPrefix(l, "cfsprobe_cgroup_info{") && strings.Contains(l, want) && strings.Contains(l, `container_name="`+staticCtr+`"`) {
				info = l
			}
		}
		return info != "", nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("scraped over TLS with basic auth %.1f s after the start: %s", time.Since(t0).Seconds(), info)
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s without a password: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET %s without a password: %s, want 401", url, resp.Status)
	}
	plainURL := strings.Replace(authURL, "https://", "http://", 1)
	if resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(plainURL); err == nil {
		resp.Body.Close()
		t.Logf("GET without TLS: %s", resp.Status)
		if resp.StatusCode == http.StatusOK {
			t.Errorf("GET %s without TLS: %s, want no metrics", url, resp.Status)
		}
	} else {
		t.Logf("GET without TLS: %v", err)
	}

	// Uninstalled, nothing of the release is left.
	t1 := time.Now()
	if _, err := n.helm(h, "uninstall", helmRelease, "-n", ns, "--wait", "--timeout", "2m"); err != nil {
		t.Fatal(err)
	}
	installed = false
	uninstallTime := time.Since(t1)
	if err := n.waitFor(90*time.Second, "the release's pods gone", func() (bool, error) {
		var list struct{ Items []pod }
		err := n.GetJSON("/api/v1/namespaces/"+ns+"/pods?labelSelector=app.kubernetes.io/instance%3D"+helmRelease, &list)
		return err == nil && len(list.Items) == 0, err
	}); err != nil {
		t.Error(err)
	}
	t.Logf("helm uninstall: %.1f s (--wait), its pods gone %.1f s after", uninstallTime.Seconds(), time.Since(t1).Seconds())
	checkReleaseGone(t, n, h)
}

// checkReleaseGone fails when anything of the release is left: an object
// with its label in any namespace, its cluster-wide RBAC, helm's record
// of it, or the exporter's container's group.
func checkReleaseGone(t *testing.T, n *Node, h testenv.Helm) {
	t.Helper()
	left := n.Kubectl(t, "get", "all,serviceaccount,secret,configmap,servicemonitor,prometheusrule,clusterrole,clusterrolebinding",
		"-A", "-l", "app.kubernetes.io/instance="+helmRelease, "-o", "name")
	if strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left:\n%s", left)
	}
	for _, p := range []string{"/apis/rbac.authorization.k8s.io/v1/clusterroles/cfsprobe-exporter", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cfsprobe-exporter"} {
		if err := n.GetJSON(p, &struct{}{}); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("GET %s after helm uninstall: %v, want 404 Not Found", p, err)
		}
	}
	if out, err := n.helm(h, "list", "-A", "--all", "-q"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("helm list after helm uninstall: %q, %v; want no release", out, err)
	}
	if records := n.Kubectl(t, "get", "secret", "-A", "-l", "owner=helm", "-o", "name"); strings.TrimSpace(records) != "" {
		t.Errorf("helm's release records left: %s", records)
	}
}
