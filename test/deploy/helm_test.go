package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/cfsprobe/cfsprobe/internal/exporter"
	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
)

const (
	chartDir = "deploy/helm/cfsprobe"
	// release is the release name under which the chart's objects are
	// named as deploy/kubernetes names them.
	release = "cfsprobe"
)

// The chart's copies of the files a chart cannot read from outside its
// directory: edit deploy/, then `go test ./test/deploy -run
// TestHelmChartFilesMatchDeploy -update`.
var chartCopies = map[string]string{
	chartDir + "/files/rules.yaml":              rulesFile,
	chartDir + "/files/cfsprobe-dashboard.json": dashboardFile,
}

// operatorAPIs are what `helm template` is told a cluster with the
// Prometheus Operator serves: the chart makes its ServiceMonitor and
// PrometheusRule only there.
var operatorAPIs = []string{
	"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
	"--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
}

// helmLabels are the labels the chart adds to deploy/kubernetes' for Helm:
// the release (also in selectors, so that two releases never select each
// other's pods) and its bookkeeping.
var helmLabels = []string{
	"app.kubernetes.io/instance",
	"app.kubernetes.io/managed-by",
	"app.kubernetes.io/version",
	"helm.sh/chart",
}

// rendered is one object of `helm template`'s output.
type rendered struct {
	Doc              yamlDoc
	Source           string // the template, "cfsprobe/templates/daemonset.yaml"
	APIVersion, Kind string
	Name             string
	JSON             []byte
}

func (r rendered) key() string { return r.APIVersion + " " + r.Kind + " " + r.Name }

// helmTemplate renders the chart as release in namespace cfsprobe with
// the values of the YAML text values (none when empty).
func helmTemplate(t *testing.T, h testenv.Helm, name, values string, args ...string) []rendered {
	t.Helper()
	out, err := helmTemplateErr(t, h, name, values, args...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []rendered
	for _, doc := range splitDocs("helm template "+name, out) {
		j, err := yaml.YAMLToJSONStrict(doc.Text)
		if err != nil {
			t.Fatalf("%s: %v\n%s", doc, err, doc.Text)
		}
		var o struct {
			APIVersion, Kind string
			Metadata         struct{ Name string }
		}
		if err := json.Unmarshal(j, &o); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		r := rendered{Doc: doc, APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Metadata.Name, JSON: j}
		for _, l := range strings.Split(string(doc.Text), "\n") {
			if s, ok := strings.CutPrefix(l, "# Source: "); ok {
				r.Source = s
				break
			}
		}
		doc.File = r.Source
		r.Doc = doc
		objs = append(objs, r)
	}
	return objs
}

// helmTemplateErr is helmTemplate's `helm template`: its output, or an
// error with what it printed on stderr.
func helmTemplateErr(t *testing.T, h testenv.Helm, name, values string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := []string{"template", name, repoPath(chartDir), "--namespace", namespace}
	if values != "" {
		cmd = append(cmd, "--values", valuesFile(t, values))
	}
	out, err := exec.Command(h.Bin, append(cmd, args...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(cmd, " "), err, stderr(err))
	}
	return out, nil
}

// valuesFile writes values to a file for helm's --values, which splits
// its argument at commas: the file's path has none, unlike t.TempDir()'s
// for subtests named with one.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cfsprobe-helm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// decode decodes a rendered object strictly into its API type.
func (r rendered) decode(t *testing.T) any {
	t.Helper()
	obj := newObject(r.APIVersion, r.Kind)
	if obj == nil {
		t.Fatalf("%s: no test knows %s %s: add it to newObject", r.Doc, r.APIVersion, r.Kind)
	}
	if err := decodeJSONStrict(r.JSON, obj, r.Doc.String()); err != nil {
		t.Fatal(err)
	}
	return obj
}

// find returns the rendered object of a kind (and name, unless empty).
func find(objs []rendered, kind, name string) (rendered, bool) {
	for _, o := range objs {
		if o.Kind == kind && (name == "" || o.Name == name) {
			return o, true
		}
	}
	return rendered{}, false
}

// noneOf fails for each rendered object of the kinds: there should be none
// (why says when).
func noneOf(t *testing.T, objs []rendered, why string, kinds ...string) {
	t.Helper()
	for _, o := range objs {
		if slices.Contains(kinds, o.Kind) {
			t.Errorf("%s: a %s %s", o.Doc, o.Kind, why)
		}
	}
}

func mustFind[T any](t *testing.T, objs []rendered, kind string) T {
	t.Helper()
	o, ok := find(objs, kind, "")
	if !ok {
		t.Fatalf("the chart renders no %s", kind)
	}
	v, ok := o.decode(t).(T)
	if !ok {
		t.Fatalf("%s: %s decodes to %T", o.Doc, kind, o.decode(t))
	}
	return v
}

// The chart's copies of deploy/prometheus/rules.yaml and the dashboard
// are the files themselves.
func TestHelmChartFilesMatchDeploy(t *testing.T) {
	for chartFile, file := range chartCopies {
		golden.Check(t, repoPath(chartFile), readFile(t, file))
	}
}

// helm lint passes, strictly, with the defaults and with TLS and basic
// auth.
func TestHelmLint(t *testing.T) {
	h := testenv.NeedHelm(t, root)
	for _, c := range []struct{ name, values string }{
		{"defaults", ""},
		{"tls and basic auth", tlsAuthValues},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"lint", "--strict", repoPath(chartDir), "--namespace", namespace}
			if c.values != "" {
				args = append(args, "--values", valuesFile(t, c.values))
			}
			out, err := exec.Command(h.Bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			t.Logf("helm lint: %s", lineWith(string(out), "1 chart(s) linted"))
		})
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// normalize returns an object's JSON as YAML (keys sorted) without the
// labels the chart adds for Helm, checking their values on the way.
func normalize(t *testing.T, r rendered, name string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.JSON, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, l := range helmLabels {
				if val, ok := v[l]; ok {
					if l == "app.kubernetes.io/instance" && val != name {
						t.Errorf("%s: %s%s is %v, want the release's name %s", r.Doc, path, l, val, name)
					}
					delete(v, l)
				}
			}
			for k, e := range v {
				walk(path+k+".", e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s%d.", path, i), e)
			}
		}
	}
	walk("", v)
	y, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(y)
}

// The chart rendered with its defaults, as the release cfsprobe in the
// namespace cfsprobe of a cluster with the Prometheus Operator, is
// deploy/kubernetes' exporter, deploy/prometheus/prometheusrule.yaml and
// deploy/grafana's dashboard, but for the labels Helm adds: change one,
// change the other. Selectors name the release.
func TestHelmChartMatchesManifests(t *testing.T) {
	h := testenv.NeedHelm(t, root)
	objs := helmTemplate(t, h, release, "", operatorAPIs...)

	plain := map[string]rendered{}
	for _, file := range []string{exporterFile, monitorFile, ruleCRFile} {
		for _, doc := range splitYAML(t, file) {
			objs := parseDocs(t, doc)
			plain[objs.key()] = objs
		}
	}
	seen := map[string]bool{}
	for _, o := range objs {
		if o.Kind == "ConfigMap" && o.Source == "cfsprobe/templates/dashboard.yaml" {
			checkDashboardConfigMap(t, o)
			continue
		}
		p, ok := plain[o.key()]
		if !ok {
			t.Errorf("%s: the chart makes %s, which deploy/ does not have", o.Doc, o.key())
			continue
		}
		seen[o.key()] = true
		if got, want := normalize(t, o, release), normalize(t, p, release); got != want {
			t.Errorf("%s (%s) differs from %s (the chart's labels for Helm aside):\n%s", o.Doc, o.key(), p.Doc, golden.Diff(want, got))
		}
	}
	for k, p := range plain {
		if !seen[k] {
			t.Errorf("%s: the chart does not make %s", p.Doc, k)
		}
	}

	// Selectors are the manifests' and the release's.
	ds := mustFind[*appsv1.DaemonSet](t, objs, "DaemonSet")
	svc := mustFind[*corev1.Service](t, objs, "Service")
	sm := mustFind[*serviceMonitor](t, objs, "ServiceMonitor")
	for what, sel := range map[string]map[string]string{
		"DaemonSet selector":      ds.Spec.Selector.MatchLabels,
		"Service selector":        svc.Spec.Selector,
		"ServiceMonitor selector": sm.Spec.Selector.MatchLabels,
	} {
		if sel["app.kubernetes.io/instance"] != release {
			t.Errorf("%s %v does not select the release %s (app.kubernetes.io/instance)", what, sel, release)
		}
	}
	if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) || !matches(svc.Spec.Selector, ds.Spec.Template.Labels) {
		t.Errorf("the ServiceMonitor %v, Service %v and pods %v do not select each other", sm.Spec.Selector.MatchLabels, svc.Labels, ds.Spec.Template.Labels)
	}
	t.Logf("helm template %s: %d objects, the same as deploy/ but for Helm's labels", release, len(objs))
}

// parseDocs reads a document of a deploy/ file as helmTemplate reads the
// chart's.
func parseDocs(t *testing.T, doc yamlDoc) rendered {
	t.Helper()
	j, err := yaml.YAMLToJSONStrict(doc.Text)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	var o struct {
		APIVersion, Kind string
		Metadata         struct{ Name string }
	}
	if err := json.Unmarshal(j, &o); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return rendered{Doc: doc, APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Metadata.Name, JSON: j}
}

// checkDashboardConfigMap checks the dashboard's ConfigMap: the dashboard
// file as it is, under the label Grafana's sidecar looks for.
func checkDashboardConfigMap(t *testing.T, o rendered) {
	t.Helper()
	cm := o.decode(t).(*corev1.ConfigMap)
	if cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("%s: dashboard ConfigMap labels %v, want grafana_dashboard: \"1\" (kube-prometheus-stack's sidecar)", o.Doc, cm.Labels)
	}
	if cm.Namespace != namespace {
		t.Errorf("%s: dashboard ConfigMap in %q, want the release's namespace %s", o.Doc, cm.Namespace, namespace)
	}
	got, want := cm.Data["cfsprobe-dashboard.json"], string(readFile(t, dashboardFile))
	if got != want {
		t.Errorf("%s: the ConfigMap's cfsprobe-dashboard.json differs from %s:\n%s", o.Doc, dashboardFile, golden.Diff(want, got))
	}
}

// tlsAuthValues serve TLS with a certificate from a Secret and ask for
// basic auth (the password "example"), and have the ServiceMonitor send
// both.
const tlsAuthValues = `
web:
  tls:
    secretName: cfsprobe-tls
  basicAuthUsers:
    prometheus: $2a$10$52.2S0H2Y4ZtNElQ/2bA8u8fhI10E44mibYzXEBrbXslch8pqDg9C
serviceMonitor:
  tlsConfig:
    ca:
      secret: {name: cfsprobe-tls, key: ca.crt}
    serverName: cfsprobe-exporter.cfsprobe.svc
  basicAuth:
    username: {name: cfsprobe-scrape, key: username}
    password: {name: cfsprobe-scrape, key: password}
`

// webConfigOf returns the web configuration the chart's Secret holds,
// checks that the exporter takes it (with certificates of a test at the
// paths it names) and that the pods mount it and pass it with
// --web.config.file.
func webConfigOf(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) map[string]any {
	t.Helper()
	secret := mustFind[*corev1.Secret](t, objs, "Secret")
	text, ok := secret.StringData["web-config.yml"]
	if !ok {
		t.Fatalf("Secret %s has no web-config.yml: %v", secret.Name, secret.StringData)
	}
	var c map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &c); err != nil {
		t.Fatalf("Secret %s: web-config.yml: %v\n%s", secret.Name, err, text)
	}
	pki, err := testenv.NewPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := pki.Issue("server", "localhost", nil, nil, []string{"localhost"}); err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer("/etc/cfsprobe/tls/tls.crt", pki.Path("server", "crt"), "/etc/cfsprobe/tls/tls.key", pki.Path("server", "key"),
		"/etc/cfsprobe/tls/ca.crt", pki.Path("ca", "crt")).Replace(text)
	f := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(f, []byte(local), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := exporter.CheckWebConfig(f); err != nil {
		t.Errorf("the exporter refuses the chart's web config: %v\n%s", err, text)
	}
	ps := ds.Spec.Template.Spec
	ctr := ps.Containers[0]
	if i := slices.Index(ctr.Args, "--web.config.file"); i < 0 || i+1 == len(ctr.Args) || ctr.Args[i+1] != "/etc/cfsprobe/web/web-config.yml" {
		t.Errorf("exporter args %v: want --web.config.file /etc/cfsprobe/web/web-config.yml", ctr.Args)
	}
	mounted := false
	for _, v := range ps.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secret.Name {
			for _, m := range ctr.VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/cfsprobe/web" && m.ReadOnly)
			}
		}
	}
	if !mounted {
		t.Errorf("the Secret %s is not mounted read-only at /etc/cfsprobe/web", secret.Name)
	}
	if ds.Spec.Template.Annotations["checksum/web-config"] == "" {
		t.Errorf("the pod template has no checksum/web-config annotation: a changed web config would not roll the pods")
	}
	return c
}

// probes returns how the kubelet probes the exporter: "HTTP", "HTTPS" or
// "tcp", failing when liveness and readiness differ.
func probes(t *testing.T, ds *appsv1.DaemonSet) string {
	t.Helper()
	ctr := ds.Spec.Template.Spec.Containers[0]
	kind := func(p *corev1.Probe) string {
		switch {
		case p == nil:
			return "none"
		case p.TCPSocket != nil:
			return "tcp"
		case p.HTTPGet != nil && p.HTTPGet.Scheme == corev1.URISchemeHTTPS:
			return "HTTPS"
		case p.HTTPGet != nil:
			return "HTTP"
		}
		return "other"
	}
	l, r := kind(ctr.LivenessProbe), kind(ctr.ReadinessProbe)
	if l != r {
		t.Errorf("liveness probe %s, readiness probe %s", l, r)
	}
	return l
}

func hasArgs(args []string, want ...string) bool {
	for i := range args {
		if slices.Equal(args[i:min(i+len(want), len(args))], want) {
			return true
		}
	}
	return false
}

// Each value does what values.yaml says, and everything rendered decodes
// strictly into its API type.
func TestHelmTemplateValues(t *testing.T) {
	h := testenv.NeedHelm(t, root)
	cases := []struct {
		name, release, values string
		noOperator            bool // render for a cluster without the Prometheus Operator
		noToken               bool // the exporter asks no API server
		check                 func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet)
	}{{
		name:   "image digest and pull policy",
		values: "image: {repository: registry.example/cfsprobe, tag: v1, digest: 'sha256:" + strings.Repeat("ab", 32) + "', pullPolicy: IfNotPresent}\nimagePullSecrets: [{name: regcred}]",
		check: func(t *testing.T, _ []rendered, ds *appsv1.DaemonSet) {
			c := ds.Spec.Template.Spec.Containers[0]
			if want := "registry.example/cfsprobe@sha256:" + strings.Repeat("ab", 32); c.Image != want || c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("image %s pull policy %q, want %s IfNotPresent", c.Image, c.ImagePullPolicy, want)
			}
			if ps := ds.Spec.Template.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != "regcred" {
				t.Errorf("imagePullSecrets %v, want regcred", ps)
			}
		},
	}, {
		name:   "image tag",
		values: "image: {tag: v1.2.3}",
		check: func(t *testing.T, _ []rendered, ds *appsv1.DaemonSet) {
			if c := ds.Spec.Template.Spec.Containers[0]; c.Image != "ghcr.io/cfsprobe/cfsprobe:v1.2.3" || c.ImagePullPolicy != "" {
				t.Errorf("image %s pull policy %q, want ghcr.io/cfsprobe/cfsprobe:v1.2.3 and the default policy", c.Image, c.ImagePullPolicy)
			}
		},
	}, {
		name:   "sampler limits and port",
		values: "exporter: {port: 9999, samplerMaxGroups: 0, scanInterval: 30s, all: true, goMaxProcs: 4, extraArgs: [--cgroup-root-extra]}",
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			c := ds.Spec.Template.Spec.Containers[0]
			for _, want := range [][]string{{"--listen", ":9999"}, {"--sampler-max-groups", "0"}, {"--scan-interval", "30s"}, {"--all"}, {"--cgroup-root-extra"}} {
				if !hasArgs(c.Args, want...) {
					t.Errorf("exporter args %v lack %v", c.Args, want)
				}
			}
			if c.Ports[0].ContainerPort != 9999 {
				t.Errorf("container port %d, want 9999", c.Ports[0].ContainerPort)
			}
			if svc := mustFind[*corev1.Service](t, objs, "Service"); svc.Spec.Ports[0].Port != 9999 {
				t.Errorf("Service port %d, want 9999", svc.Spec.Ports[0].Port)
			}
			for _, e := range c.Env {
				if e.Name == "GOMAXPROCS" && e.Value != "4" {
					t.Errorf("GOMAXPROCS %q, want 4", e.Value)
				}
			}
		},
	}, {
		name:   "sampler limit default",
		values: "exporter: {samplerMaxGroups: 5000}",
		check: func(t *testing.T, _ []rendered, ds *appsv1.DaemonSet) {
			if c := ds.Spec.Template.Spec.Containers[0]; !hasArgs(c.Args, "--sampler-max-groups", "5000") || hasArgs(c.Args, "--all") {
				t.Errorf("exporter args %v: want --sampler-max-groups 5000 and no --all", c.Args)
			}
		},
	}, {
		name: "node selection and resources",
		values: `nodeSelector: {kubernetes.io/os: linux, pool: web}
tolerations: []
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]}}}
priorityClassName: system-node-critical
resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {memory: 128Mi}}
podAnnotations: {example.com/a: b}
cgroup: {recursiveReadOnly: ""}`,
		check: func(t *testing.T, _ []rendered, ds *appsv1.DaemonSet) {
			ps := ds.Spec.Template.Spec
			if !reflect.DeepEqual(ps.NodeSelector, map[string]string{"kubernetes.io/os": "linux", "pool": "web"}) || len(ps.Tolerations) != 0 ||
				ps.Affinity == nil || ps.Affinity.NodeAffinity == nil || ps.PriorityClassName != "system-node-critical" {
				t.Errorf("nodeSelector %v tolerations %v affinity %v priorityClassName %q: want the values'", ps.NodeSelector, ps.Tolerations, ps.Affinity, ps.PriorityClassName)
			}
			r := ps.Containers[0].Resources
			if r.Requests.Cpu().String() != "100m" || r.Requests.Memory().String() != "64Mi" || r.Limits.Memory().String() != "128Mi" || !r.Limits.Cpu().IsZero() {
				t.Errorf("resources %v, want the values' (and no CPU limit)", r)
			}
			if ds.Spec.Template.Annotations["example.com/a"] != "b" {
				t.Errorf("pod annotations %v", ds.Spec.Template.Annotations)
			}
			if m := ps.Containers[0].VolumeMounts[0]; m.RecursiveReadOnly != nil || !m.ReadOnly {
				t.Errorf("cgroup mount %+v: want read-only without recursiveReadOnly", m)
			}
		},
	}, {
		name:    "without the API server",
		values:  "kubeAPI: {enabled: false}",
		noToken: true,
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			noneOf(t, objs, "without kubeAPI", "ClusterRole", "ClusterRoleBinding")
			ps := ds.Spec.Template.Spec
			if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken || !hasArgs(ps.Containers[0].Args, "--kube-api", "none") {
				t.Errorf("automountServiceAccountToken %v args %v: want no token and --kube-api none", ps.AutomountServiceAccountToken, ps.Containers[0].Args)
			}
		},
	}, {
		name:    "another release",
		release: "monitoring",
		values:  "serviceAccount: {name: watcher}",
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			for _, o := range objs {
				if !strings.HasPrefix(o.Name, "monitoring-cfsprobe") && o.Name != "watcher" {
					t.Errorf("%s: %s %s is not named after the release", o.Doc, o.Kind, o.Name)
				}
			}
			crb := mustFind[*rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding")
			if ds.Spec.Template.Spec.ServiceAccountName != "watcher" || len(crb.Subjects) != 1 || crb.Subjects[0].Name != "watcher" {
				t.Errorf("service account %s, bound %v: want watcher", ds.Spec.Template.Spec.ServiceAccountName, crb.Subjects)
			}
			if ds.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "monitoring" {
				t.Errorf("selector %v does not name the release", ds.Spec.Selector.MatchLabels)
			}
		},
	}, {
		name:       "without the Prometheus Operator",
		noOperator: true,
		check: func(t *testing.T, objs []rendered, _ *appsv1.DaemonSet) {
			noneOf(t, objs, "where the cluster does not serve its kind", "ServiceMonitor", "PrometheusRule")
		},
	}, {
		name:   "no dashboard, dashboard elsewhere",
		values: "dashboard: {namespace: monitoring, labels: {grafana_dashboard: '1', team: x}}",
		check: func(t *testing.T, objs []rendered, _ *appsv1.DaemonSet) {
			cm := mustFind[*corev1.ConfigMap](t, objs, "ConfigMap")
			if cm.Namespace != "monitoring" || cm.Labels["team"] != "x" || cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboard ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
			}
		},
	}, {
		name:   "plain HTTP has no web config",
		values: "",
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			noneOf(t, objs, "without web settings", "Secret")
			if c := ds.Spec.Template.Spec.Containers[0]; slices.Contains(c.Args, "--web.config.file") {
				t.Errorf("args %v: --web.config.file without web settings", c.Args)
			}
			if p := probes(t, ds); p != "HTTP" {
				t.Errorf("probes %s, want HTTP", p)
			}
		},
	}, {
		name:   "tls",
		values: "web: {tls: {secretName: cfsprobe-tls}, config: {tls_server_config: {min_version: TLS13}}}",
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			c := webConfigOf(t, objs, ds)
			want := map[string]any{"tls_server_config": map[string]any{
				"cert_file": "/etc/cfsprobe/tls/tls.crt", "key_file": "/etc/cfsprobe/tls/tls.key", "min_version": "TLS13",
			}}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("web config %v, want %v", c, want)
			}
			if p := probes(t, ds); p != "HTTPS" {
				t.Errorf("probes %s, want HTTPS (the kubelet does not verify the certificate)", p)
			}
			checkTLSVolume(t, ds)
			sm := mustFind[*serviceMonitor](t, objs, "ServiceMonitor")
			if sm.Spec.Endpoints[0].Scheme != "https" {
				t.Errorf("ServiceMonitor scheme %q, want https", sm.Spec.Endpoints[0].Scheme)
			}
		},
	}, {
		name:   "tls and basic auth",
		values: tlsAuthValues,
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			c := webConfigOf(t, objs, ds)
			users, _ := c["basic_auth_users"].(map[string]any)
			if len(users) != 1 || !strings.HasPrefix(fmt.Sprint(users["prometheus"]), "$2a$10$") || c["tls_server_config"] == nil {
				t.Errorf("web config %v: want the user prometheus's bcrypt hash and TLS", c)
			}
			if p := probes(t, ds); p != "tcp" {
				t.Errorf("probes %s, want tcp: the kubelet's probes carry no credentials", p)
			}
			sm := mustFind[*serviceMonitor](t, objs, "ServiceMonitor")
			ep := sm.Spec.Endpoints[0]
			if ep.Scheme != "https" || ep.BasicAuth == nil || ep.TLSConfig == nil {
				t.Errorf("ServiceMonitor endpoint scheme %q basicAuth %v tlsConfig %v: want https with both", ep.Scheme, ep.BasicAuth, ep.TLSConfig)
			}
		},
	}, {
		name:   "client certificates",
		values: "web: {tls: {secretName: cfsprobe-tls, clientCA: true}}",
		check: func(t *testing.T, objs []rendered, ds *appsv1.DaemonSet) {
			c := webConfigOf(t, objs, ds)
			tls, _ := c["tls_server_config"].(map[string]any)
			if tls["client_ca_file"] != "/etc/cfsprobe/tls/ca.crt" || tls["client_auth_type"] != "RequireAndVerifyClientCert" {
				t.Errorf("tls_server_config %v: want the Secret's ca.crt, required", tls)
			}
			if p := probes(t, ds); p != "tcp" {
				t.Errorf("probes %s, want tcp: the kubelet has no client certificate", p)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := c.release
			if name == "" {
				name = release
			}
			var args []string
			if !c.noOperator {
				args = operatorAPIs
			}
			objs := helmTemplate(t, h, name, c.values, args...)
			for _, o := range objs {
				obj := o.decode(t)
				if ps := podSpec(obj); ps != nil {
					checkPodSpec(t, o.Doc.String(), ps, !c.noToken)
				}
			}
			c.check(t, objs, mustFind[*appsv1.DaemonSet](t, objs, "DaemonSet"))
		})
	}
}

// checkTLSVolume checks that the certificate's Secret is mounted
// read-only where the web config names its files.
func checkTLSVolume(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	for _, v := range ps.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "cfsprobe-tls" {
			for _, m := range ps.Containers[0].VolumeMounts {
				if m.Name == v.Name && m.MountPath == "/etc/cfsprobe/tls" && m.ReadOnly {
					return
				}
			}
		}
	}
	t.Errorf("the Secret cfsprobe-tls is not mounted read-only at /etc/cfsprobe/tls: volumes %v", ps.Volumes)
}

// values.schema.json refuses what the chart would otherwise ignore or
// pass on broken: a misspelt value, a password where its bcrypt hash
// belongs, a digest that is not one.
func TestHelmValuesSchema(t *testing.T) {
	h := testenv.NeedHelm(t, root)
	for _, c := range []struct{ name, values, want string }{
		{"misspelt value", "web: {tls: {secretname: cfsprobe-tls}}", "secretname"},
		{"misspelt top-level value", "nodeselector: {pool: web}", "nodeselector"},
		{"password, not its hash", "web: {basicAuthUsers: {prometheus: hunter2}}", "basicAuthUsers"},
		{"digest without its algorithm", "image: {digest: " + strings.Repeat("ab", 32) + "}", "digest"},
		{"negative sampler limit", "exporter: {samplerMaxGroups: -1}", "samplerMaxGroups"},
		{"scan interval without a unit", "exporter: {scanInterval: '10'}", "scanInterval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := helmTemplateErr(t, h, release, c.values)
			if err == nil {
				t.Fatalf("helm template took %s", c.values)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template's error does not name %s: %v", c.want, err)
			}
			t.Logf("%s: %s", c.values, lineWith(err.Error(), c.want))
		})
	}
}
