package deploy

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	namespace     = "cfsprobe"
	cgroupMount   = "/host/sys/fs/cgroup"
	exporterFile  = "deploy/kubernetes/exporter-daemonset.yaml"
	monitorFile   = "deploy/kubernetes/exporter-servicemonitor.yaml"
	exporterJob   = "cfsprobe-exporter" // the job label the rules expect
	nobody        = int64(65534)
	kubernetesDir = "deploy/kubernetes"
)

// serviceMonitor mirrors the fields of monitoring.coreos.com/v1
// ServiceMonitor that the file uses.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames,omitempty"`
			Any        bool     `json:"any,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		JobLabel  string `json:"jobLabel,omitempty"`
		Endpoints []struct {
			Port   string `json:"port"`
			Path   string `json:"path,omitempty"`
			Scheme string `json:"scheme,omitempty"`
			// SafeTLSConfig and BasicAuth: Secret references, checked
			// on a real API server by the CRD's schema (test/kubernetes).
			TLSConfig     map[string]any `json:"tlsConfig,omitempty"`
			BasicAuth     map[string]any `json:"basicAuth,omitempty"`
			Interval      string         `json:"interval,omitempty"`
			ScrapeTimeout string         `json:"scrapeTimeout,omitempty"`
			Relabelings   []struct {
				SourceLabels []string `json:"sourceLabels,omitempty"`
				Separator    string   `json:"separator,omitempty"`
				TargetLabel  string   `json:"targetLabel,omitempty"`
				Regex        string   `json:"regex,omitempty"`
				Replacement  string   `json:"replacement,omitempty"`
				Action       string   `json:"action,omitempty"`
			} `json:"relabelings,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// object is a decoded manifest.
type object struct {
	Doc  yamlDoc
	Kind string
	Obj  any // *appsv1.DaemonSet, *batchv1.Job, *corev1.Service, ...
}

// newObject returns the Go type for a manifest's apiVersion and kind.
func newObject(apiVersion, kind string) any {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1/Service":
		return &corev1.Service{}
	case "apps/v1/DaemonSet":
		return &appsv1.DaemonSet{}
	case "batch/v1/Job":
		return &batchv1.Job{}
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &serviceMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &prometheusRule{}
	case "v1/Secret":
		return &corev1.Secret{}
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}
	}
	return nil
}

// loadManifests decodes every document of every file in deploy/kubernetes
// strictly into its API type.
func loadManifests(t *testing.T) map[string][]object {
	t.Helper()
	files, err := filepath.Glob(repoPath(kubernetesDir + "/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", kubernetesDir, err)
	}
	out := map[string][]object{}
	for _, f := range files {
		p := kubernetesDir + "/" + filepath.Base(f)
		for _, doc := range splitYAML(t, p) {
			j, err := yaml.YAMLToJSONStrict(doc.Text)
			if err != nil {
				t.Fatalf("%s: %v", doc, err)
			}
			var tm metav1.TypeMeta
			if err := json.Unmarshal(j, &tm); err != nil {
				t.Fatalf("%s: %v", doc, err)
			}
			obj := newObject(tm.APIVersion, tm.Kind)
			if obj == nil {
				t.Fatalf("%s: no test knows %s %s: add it to newObject", doc, tm.APIVersion, tm.Kind)
			}
			if err := decodeJSONStrict(j, obj, doc.String()); err != nil {
				t.Fatal(err)
			}
			out[p] = append(out[p], object{Doc: doc, Kind: tm.Kind, Obj: obj})
		}
	}
	return out
}

// only returns the single object of type T in a file.
func only[T any](t *testing.T, m map[string][]object, file string) T {
	t.Helper()
	var found []T
	for _, o := range m[file] {
		if v, ok := o.Obj.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%s: want one %T, found %d", file, zero, len(found))
	}
	return found[0]
}

func meta(o any) metav1.Object {
	switch v := o.(type) {
	case *serviceMonitor:
		return &v.Metadata
	case metav1.Object:
		return v
	}
	return nil
}

// Every manifest decodes strictly, lives in the namespace namespace.yaml
// makes, and the pod templates match their selectors.
func TestManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t)
	ns := only[*corev1.Namespace](t, m, kubernetesDir+"/namespace.yaml")
	if ns.Name != namespace {
		t.Fatalf("namespace.yaml makes %q, want %q", ns.Name, namespace)
	}
	if lvl := ns.Labels["pod-security.kubernetes.io/enforce"]; lvl != "privileged" {
		t.Errorf("namespace.yaml: pod-security enforce %q: hostPath volumes and the privileged check need the privileged level", lvl)
	}
	for file, objs := range m {
		for _, o := range objs {
			md := meta(o.Obj)
			clusterScoped := o.Kind == "Namespace" || o.Kind == "ClusterRole" || o.Kind == "ClusterRoleBinding"
			if !clusterScoped && md.GetNamespace() != namespace {
				t.Errorf("%s: %s %s is in namespace %q, want %q", o.Doc, o.Kind, md.GetName(), md.GetNamespace(), namespace)
			}
			if md.GetLabels()["app.kubernetes.io/name"] != "cfsprobe" {
				t.Errorf("%s: %s %s lacks the label app.kubernetes.io/name: cfsprobe", file, o.Kind, md.GetName())
			}
			var sel *metav1.LabelSelector
			var tmpl *corev1.PodTemplateSpec
			switch v := o.Obj.(type) {
			case *appsv1.DaemonSet:
				sel, tmpl = v.Spec.Selector, &v.Spec.Template
			case *batchv1.Job:
				sel, tmpl = v.Spec.Selector, &v.Spec.Template
				if sel != nil {
					t.Errorf("%s: a Job's selector is generated; do not set it", o.Doc)
				}
			}
			if tmpl == nil {
				continue
			}
			if sel != nil && !matches(sel.MatchLabels, tmpl.Labels) {
				t.Errorf("%s: selector %v does not match the pod template's labels %v", o.Doc, sel.MatchLabels, tmpl.Labels)
			}
			checkPodSpec(t, o.Doc.String(), &tmpl.Spec, file == exporterFile)
		}
	}
}

// checkPodSpec checks what the API server would refuse and what every pod
// here must do. Only the exporter (token) calls the API server.
func checkPodSpec(t *testing.T, where string, ps *corev1.PodSpec, token bool) {
	t.Helper()
	switch automount := ps.AutomountServiceAccountToken; {
	case token && (automount == nil || !*automount):
		t.Errorf("%s: automountServiceAccountToken must be true: the exporter lists its node's pods to name them", where)
	case !token && (automount == nil || *automount):
		t.Errorf("%s: automountServiceAccountToken must be false: nothing but the exporter calls the API server", where)
	}
	if ps.HostNetwork {
		t.Errorf("%s: hostNetwork is not needed", where)
	}
	vols := map[string]bool{}
	for _, v := range ps.Volumes {
		vols[v.Name] = true
	}
	for _, c := range ps.Containers {
		cw := where + ": container " + c.Name
		if c.Image == "" {
			t.Errorf("%s: no image", cw)
		}
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
			t.Errorf("%s: no CPU request", cw)
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory request", cw)
		}
		if _, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory limit", cw)
		}
		for res, lim := range c.Resources.Limits {
			if req, ok := c.Resources.Requests[res]; ok && req.Cmp(lim) > 0 {
				t.Errorf("%s: %s request %s above its limit %s", cw, res, req.String(), lim.String())
			}
		}
		for _, vm := range c.VolumeMounts {
			if !vols[vm.Name] {
				t.Errorf("%s: mounts volume %s, which the pod does not have", cw, vm.Name)
			}
		}
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", cw)
			continue
		}
		// The API server refuses privileged together with
		// allowPrivilegeEscalation: false.
		if sc.Privileged != nil && *sc.Privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			t.Errorf("%s: privileged with allowPrivilegeEscalation false is invalid", cw)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem must be true: cfsprobe writes no files in its image", cw)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if len(p.Name) > 15 {
				t.Errorf("%s: port name %q is longer than 15 characters", cw, p.Name)
			}
			ports[p.Name] = true
		}
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" && !ports[pr.HTTPGet.Port.StrVal] {
				t.Errorf("%s: a probe uses port %q, which the container does not name", cw, pr.HTTPGet.Port.StrVal)
			}
		}
	}
}

func matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The exporter reads the host's cgroup tree read-only as nobody, with no
// privileges, no token and no CPU limit, on every node.
func TestExporterDaemonSet(t *testing.T) {
	m := loadManifests(t)
	ds := only[*appsv1.DaemonSet](t, m, exporterFile)
	sa := only[*corev1.ServiceAccount](t, m, exporterFile)
	ps := ds.Spec.Template.Spec
	if len(ps.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(ps.Containers))
	}
	c := ps.Containers[0]

	if ps.ServiceAccountName != sa.Name {
		t.Errorf("serviceAccountName %q, want the file's own %q", ps.ServiceAccountName, sa.Name)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("the ServiceAccount must not automount a token: the exporter's pods ask for theirs")
	}
	nodeName := false
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeName = true
		}
	}
	if !nodeName {
		t.Errorf("env: want NODE_NAME from the downward API's spec.nodeName: the pods of that node name the groups")
	}
	if ps.HostPID || ps.HostIPC || ps.HostNetwork {
		t.Errorf("the exporter needs no host namespace")
	}
	if !slices.ContainsFunc(ps.Tolerations, func(t corev1.Toleration) bool {
		return t.Operator == corev1.TolerationOpExists && t.Key == "" && t.Effect == ""
	}) {
		t.Errorf("tolerations %v: want operator Exists with no key and no effect, to run on every node", ps.Tolerations)
	}

	// The cgroup tree: hostPath /sys/fs/cgroup at /host/sys/fs/cgroup,
	// read-only (recursively: v1's hierarchies are submounts), and the
	// exporter pointed at it.
	var vol *corev1.Volume
	for i := range ps.Volumes {
		if hp := ps.Volumes[i].HostPath; hp != nil && hp.Path == "/sys/fs/cgroup" {
			vol = &ps.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("no hostPath volume of /sys/fs/cgroup")
	}
	if len(ps.Volumes) != 1 {
		t.Errorf("volumes %v: the exporter needs only the cgroup tree", ps.Volumes)
	}
	var mount *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == vol.Name {
			mount = &c.VolumeMounts[i]
		}
	}
	switch {
	case mount == nil:
		t.Errorf("the cgroup volume is not mounted")
	case mount.MountPath != cgroupMount:
		t.Errorf("cgroup tree mounted at %s, want %s", mount.MountPath, cgroupMount)
	case !mount.ReadOnly:
		t.Errorf("the cgroup tree must be mounted readOnly")
	case mount.RecursiveReadOnly == nil || *mount.RecursiveReadOnly == corev1.RecursiveReadOnlyDisabled:
		t.Errorf("recursiveReadOnly must be IfPossible or Enabled: on cgroup v1 the hierarchies are submounts")
	case mount.MountPropagation != nil && *mount.MountPropagation != corev1.MountPropagationNone:
		t.Errorf("recursiveReadOnly needs mountPropagation None")
	}
	args := strings.Join(c.Args, " ")
	if !strings.HasPrefix(args, "exporter ") || !strings.Contains(args, "--cgroup-root "+cgroupMount) {
		t.Errorf("args %q: want exporter ... --cgroup-root %s", args, cgroupMount)
	}
	// No runtime's socket is mounted: names come from the API server.
	if !strings.Contains(args, "--docker-host none") || !strings.Contains(args, "--cri-endpoint none") || strings.Contains(args, "--kube-api") {
		t.Errorf("args %q: want --docker-host none and --cri-endpoint none (no socket is mounted), and --kube-api left at in-cluster", args)
	}

	// Non-root, read-only, nothing to escalate to.
	for _, sc := range []struct {
		where      string
		nonRoot    *bool
		user       *int64
		seccompSet bool
	}{
		{"pod", ps.SecurityContext.RunAsNonRoot, ps.SecurityContext.RunAsUser, ps.SecurityContext.SeccompProfile != nil},
		{"container", c.SecurityContext.RunAsNonRoot, c.SecurityContext.RunAsUser, c.SecurityContext.SeccompProfile != nil},
	} {
		if sc.nonRoot == nil || !*sc.nonRoot {
			t.Errorf("%s securityContext: runAsNonRoot must be true", sc.where)
		}
		if sc.user == nil || *sc.user != nobody {
			t.Errorf("%s securityContext: runAsUser must be %d", sc.where, nobody)
		}
		if !sc.seccompSet {
			t.Errorf("%s securityContext: no seccompProfile", sc.where)
		}
	}
	csc := c.SecurityContext
	if csc.SeccompProfile != nil && csc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile %s, want RuntimeDefault", csc.SeccompProfile.Type)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("allowPrivilegeEscalation must be false")
	}
	if csc.Privileged != nil && *csc.Privileged {
		t.Errorf("the exporter must not be privileged")
	}
	if csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(csc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v: want drop [ALL] and nothing added", csc.Capabilities)
	}

	// Resources: requests, a memory limit and no CPU limit.
	if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		t.Errorf("the exporter has a CPU limit: a throttled sampler under-reports the stalls it measures")
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Errorf("want HTTP liveness and readiness probes")
	} else {
		doc := string(readFile(t, "docs/metrics.md"))
		for _, p := range []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path} {
			if !strings.Contains(doc, "`GET "+p+"`") {
				t.Errorf("probe path %s is not an endpoint docs/metrics.md documents", p)
			}
		}
	}
}

// The exporter's service account may get and list pods, and nothing
// else: that is how it names the groups of its node.
func TestExporterRBAC(t *testing.T) {
	m := loadManifests(t)
	sa := only[*corev1.ServiceAccount](t, m, exporterFile)
	role := only[*rbacv1.ClusterRole](t, m, exporterFile)
	binding := only[*rbacv1.ClusterRoleBinding](t, m, exporterFile)
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}
	if !reflect.DeepEqual(role.Rules, want) || role.AggregationRule != nil {
		t.Errorf("ClusterRole %s rules %+v, want exactly %+v", role.Name, role.Rules, want)
	}
	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("ClusterRoleBinding %s binds %+v, want the ClusterRole %s", binding.Name, binding.RoleRef, role.Name)
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}}
	if !reflect.DeepEqual(binding.Subjects, wantSubject) {
		t.Errorf("ClusterRoleBinding %s subjects %+v, want %+v", binding.Name, binding.Subjects, wantSubject)
	}
}

// The Service selects the exporter's pods by a named port; the
// ServiceMonitor selects the Service, scrapes that port, sets the node
// label, and the job label is the one the rules expect.
func TestExporterServiceAndMonitor(t *testing.T) {
	m := loadManifests(t)
	ds := only[*appsv1.DaemonSet](t, m, exporterFile)
	svc := only[*corev1.Service](t, m, exporterFile)
	sm := only[*serviceMonitor](t, m, monitorFile)

	if !matches(svc.Spec.Selector, ds.Spec.Template.Labels) {
		t.Errorf("Service selector %v does not select the exporter's pods %v", svc.Spec.Selector, ds.Spec.Template.Labels)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("the Service should be headless: each exporter pod is a target")
	}
	ports := map[string]bool{}
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = true
	}
	svcPorts := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = true
		if !ports[p.TargetPort.String()] {
			t.Errorf("Service port %s targets %q, which the container does not name", p.Name, p.TargetPort.String())
		}
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Kind != "ServiceMonitor" {
		t.Errorf("%s: %s %s", monitorFile, sm.APIVersion, sm.Kind)
	}
	if !matches(sm.Spec.Selector.MatchLabels, svc.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the Service %v", sm.Spec.Selector.MatchLabels, svc.Labels)
	}
	if len(sm.Spec.Endpoints) == 0 {
		t.Fatalf("ServiceMonitor has no endpoints")
	}
	for _, ep := range sm.Spec.Endpoints {
		if !svcPorts[ep.Port] {
			t.Errorf("ServiceMonitor scrapes port %q, which the Service does not name", ep.Port)
		}
		node := false
		for _, r := range ep.Relabelings {
			node = node || (r.TargetLabel == "node" && slices.Equal(r.SourceLabels, []string{"__meta_kubernetes_pod_node_name"}))
		}
		if !node {
			t.Errorf("ServiceMonitor endpoint %s does not set the node label the dashboard and fallback alert use", ep.Port)
		}
	}
	// The operator names the job after the Service unless jobLabel says
	// otherwise; the rules' up{job=...} must match.
	if sm.Spec.JobLabel != "" || svc.Name != exporterJob {
		t.Errorf("job label would be %q (Service %s, jobLabel %q); the rules expect %q", svc.Name, svc.Name, sm.Spec.JobLabel, exporterJob)
	}
	jobRE := regexp.MustCompile(`job="([^"]+)"`)
	for _, f := range []string{rulesFile, dashboardFile} {
		for _, mm := range jobRE.FindAllStringSubmatch(string(readFile(t, f)), -1) {
			if mm[1] != exporterJob {
				t.Errorf("%s: uses job=%q, but the exporter's job is %q", f, mm[1], exporterJob)
			}
		}
	}
}

// checkPairs are the check's manifests without and with a CPU limit, like
// seed 002's.
var checkPairs = [][2]string{
	{"deploy/kubernetes/check-job.yaml", "deploy/kubernetes/check-job-quota.yaml"},
	{"deploy/kubernetes/check-daemonset.yaml", "deploy/kubernetes/check-daemonset-quota.yaml"},
}

// Each pair differs only in the pod's CPU limit (and the names that let
// both exist at once).
func TestCheckPairsDifferOnlyInCPULimit(t *testing.T) {
	m := loadManifests(t)
	for _, pair := range checkPairs {
		base, quota := m[pair[0]], m[pair[1]]
		if len(base) != 1 || len(quota) != 1 {
			t.Fatalf("%s, %s: want one object each, got %d and %d", pair[0], pair[1], len(base), len(quota))
		}
		bname, qname := meta(base[0].Obj).GetName(), meta(quota[0].Obj).GetName()
		if qname != bname+"-quota" {
			t.Errorf("%s is named %q, want %q", pair[1], qname, bname+"-quota")
		}
		bspec, qspec := podSpec(base[0].Obj), podSpec(quota[0].Obj)
		for _, c := range bspec.Containers {
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
				t.Errorf("%s: container %s has a CPU limit; this is the variant without", pair[0], c.Name)
			}
		}
		for _, c := range qspec.Containers {
			if _, ok := c.Resources.Limits[corev1.ResourceCPU]; !ok {
				t.Errorf("%s: container %s has no CPU limit", pair[1], c.Name)
			}
		}
		// Remove the limit and the name: what is left must be equal.
		qj, err := json.Marshal(quota[0].Obj)
		if err != nil {
			t.Fatal(err)
		}
		qj = []byte(strings.ReplaceAll(string(qj), `"`+qname+`"`, `"`+bname+`"`))
		stripped := reflect.New(reflect.TypeOf(quota[0].Obj).Elem()).Interface()
		if err := json.Unmarshal(qj, stripped); err != nil {
			t.Fatal(err)
		}
		for _, c := range podSpec(stripped).Containers {
			delete(c.Resources.Limits, corev1.ResourceCPU)
		}
		bj, _ := json.Marshal(base[0].Obj)
		sj, _ := json.Marshal(stripped)
		if a, b := string(bj), string(sj); a != b {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			from := max(0, i-60)
			t.Errorf("%s and %s differ in more than the CPU limit and the name, first here:\n  %s\n  %s",
				pair[0], pair[1], a[from:min(len(a), i+40)], b[from:min(len(b), i+40)])
		}
	}
}

// mountsEmptyDir reports whether container c of ps mounts an emptyDir
// volume at path, writable.
func mountsEmptyDir(ps *corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path || m.ReadOnly {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

func podSpec(o any) *corev1.PodSpec {
	switch v := o.(type) {
	case *appsv1.DaemonSet:
		return &v.Spec.Template.Spec
	case *batchv1.Job:
		return &v.Spec.Template.Spec
	}
	return nil
}

// The check runs privileged as root in the host's PID namespace (it makes
// cgroups; see the files' comments), once: a Job that is not retried, a
// DaemonSet that waits after its check and turns ready when done.
func TestCheckWorkloads(t *testing.T) {
	m := loadManifests(t)
	for _, pair := range checkPairs {
		for _, f := range pair {
			o := m[f][0]
			ps := podSpec(o.Obj)
			if ps == nil {
				t.Fatalf("%s: a %s, want a Job or a DaemonSet", f, o.Kind)
			}
			if !ps.HostPID {
				t.Errorf("%s: hostPID: the group names carry host PIDs for cfsprobe cleanup", f)
			}
			if ps.HostNetwork || ps.HostIPC {
				t.Errorf("%s: no host network or IPC is needed", f)
			}
			for _, v := range ps.Volumes {
				if v.HostPath != nil {
					t.Errorf("%s: volume %s is a hostPath; the privileged container has its own cgroup mount", f, v.Name)
				}
			}
			if len(ps.Containers) != 1 {
				t.Fatalf("%s: want one container", f)
			}
			c := ps.Containers[0]
			if !mountsEmptyDir(ps, c, "/tmp") {
				t.Errorf("%s: mount an emptyDir at /tmp: the root filesystem is read-only and cfsprobe writes the engine it runs there", f)
			}
			sc := c.SecurityContext
			if sc.Privileged == nil || !*sc.Privileged || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
				t.Errorf("%s: the check needs privileged and runAsUser 0", f)
			}
			cmd := strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")
			switch v := o.Obj.(type) {
			case *batchv1.Job:
				if cmd != "check" {
					t.Errorf("%s: runs %q, want the image's entrypoint with check", f, cmd)
				}
				if ps.RestartPolicy != corev1.RestartPolicyNever || v.Spec.BackoffLimit == nil || *v.Spec.BackoffLimit != 0 {
					t.Errorf("%s: restartPolicy Never and backoffLimit 0: a verdict is not retried", f)
				}
				if v.Spec.TTLSecondsAfterFinished == nil || v.Spec.ActiveDeadlineSeconds == nil {
					t.Errorf("%s: set ttlSecondsAfterFinished and activeDeadlineSeconds", f)
				}
			case *appsv1.DaemonSet:
				if !strings.HasPrefix(cmd, "/busybox/sh -c") || !strings.Contains(cmd, "/cfsprobe check") ||
					!strings.Contains(cmd, "/cfsprobe cleanup") || !strings.Contains(cmd, "trap") {
					t.Errorf("%s: want a shell that runs cleanup and check, traps SIGTERM and then waits; got %q", f, cmd)
				}
				if !strings.HasSuffix(c.Image, "-debug") {
					t.Errorf("%s: image %s: the shell is in the Dockerfile's debug target (tag -debug)", f, c.Image)
				}
				if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil {
					t.Errorf("%s: want an exec readiness probe that turns ready when the check is done", f)
				}
				if !slices.ContainsFunc(ps.Tolerations, func(t corev1.Toleration) bool { return t.Operator == corev1.TolerationOpExists && t.Key == "" }) {
					t.Errorf("%s: tolerate every taint to run on every node", f)
				}
			}
		}
	}
}
