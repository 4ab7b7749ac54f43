package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/consumer"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// kubeDir holds the Kubernetes manifests, one object per file.
const kubeDir = "kubernetes"

// kustomizationFile lists the manifests for kubectl apply -k.
const kustomizationFile = "kustomization.yaml"

// nonrootID is the uid and gid of distroless's nonroot user, the
// Dockerfile's USER.
const nonrootID = 65532

// samplePodName stands for the pod's name wherever the manifests take it
// from the downward API.
const samplePodName = "hyperplane-5d8c7f9b6-x7k2p"

// kubeObjects are the objects of deploy/kubernetes, each decoded strictly
// into its official Go type.
type kubeObjects struct {
	configMap      corev1.ConfigMap
	secret         corev1.Secret
	deployment     appsv1.Deployment
	service        corev1.Service
	pdb            policyv1.PodDisruptionBudget
	serviceMonitor monitoringv1.ServiceMonitor
	rules          monitoringv1.PrometheusRule
}

// kubeFile is a manifest file and the object it must hold.
type kubeFile struct {
	name string
	obj  runtime.Object
}

// files are the manifests and the object each one decodes into. A file in
// kubeDir that is not here fails TestKubernetesKustomization: give it a
// type.
func (o *kubeObjects) files() []kubeFile {
	return []kubeFile{
		{"configmap.yaml", &o.configMap},
		{"secret.yaml", &o.secret},
		{"deployment.yaml", &o.deployment},
		{"service.yaml", &o.service},
		{"pdb.yaml", &o.pdb},
		{"servicemonitor.yaml", &o.serviceMonitor},
		{"prometheusrule.yaml", &o.rules},
	}
}

// pod is the Deployment's pod and what it takes its configuration and
// credentials from.
func (o *kubeObjects) pod() podObjects {
	return podObjects{
		file:      "deployment.yaml",
		template:  &o.deployment.Spec.Template,
		configMap: &o.configMap,
		secret:    &o.secret,
		podName:   samplePodName,
	}
}

// podObjects are a workload's pod template (a Deployment's or a
// StatefulSet's) and the ConfigMap and Secret of its directory, which the
// pod's configuration and credentials must come from.
type podObjects struct {
	file      string // the workload's manifest, such as deployment.yaml
	template  *corev1.PodTemplateSpec
	configMap *corev1.ConfigMap
	secret    *corev1.Secret
	// podName stands for the pod's name wherever the template takes it
	// from the downward API.
	podName string
}

// readKube decodes every manifest strictly, or fails the test naming the
// file.
func readKube(t *testing.T) *kubeObjects {
	t.Helper()
	o := new(kubeObjects)
	readManifests(t, kubeDir, o.files())
	return o
}

// readManifests decodes every file of dir into its object strictly, or
// fails the test naming the file.
func readManifests(t *testing.T, dir string, files []kubeFile) {
	t.Helper()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeManifest(data, f.obj); err != nil {
			t.Fatalf("%s: %v", filepath.Join(dir, f.name), err)
		}
	}
}

// newKubeScheme knows the API groups of the manifests.
func newKubeScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		appsv1.AddToScheme,
		policyv1.AddToScheme,
		monitoringv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// decodeManifest decodes data, one YAML document, into obj the way the API
// server does in strict mode: a duplicate key, an unknown field or one
// spelt in another case (encoding/json would match it case-insensitively),
// or a value of the wrong type is an error naming the field. The file's
// apiVersion and kind must be those of obj's type.
func decodeManifest(data []byte, obj runtime.Object) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	docs := 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(doc.Content) > 0 {
			docs++
		}
	}
	if docs != 1 {
		return fmt.Errorf("%d YAML documents, want one object per file", docs)
	}
	j, err := sigsyaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return fmt.Errorf("as %T: %w", obj, err)
	}
	if len(strict) > 0 {
		return fmt.Errorf("as %T: %w", obj, errors.Join(strict...))
	}
	scheme, err := newKubeScheme()
	if err != nil {
		return err
	}
	want, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		return err
	}
	got := obj.GetObjectKind().GroupVersionKind()
	if !slices.Contains(want, got) {
		apiVersion, kind := want[0].ToAPIVersionAndKind()
		return fmt.Errorf("apiVersion %q, kind %q: want apiVersion %q, kind %q (%T)", got.GroupVersion(), got.Kind, apiVersion, kind, obj)
	}
	return nil
}

// TestManifestDecodingIsStrict: the decoder the other tests rely on
// rejects every kind of mistake it is meant to catch, and accepts a good
// manifest.
func TestManifestDecodingIsStrict(t *testing.T) {
	const good = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n"
	if err := decodeManifest([]byte(good), new(corev1.ConfigMap)); err != nil {
		t.Fatalf("a good ConfigMap: %v", err)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndatas:\n  a: b\n", `unknown field "datas"`},
		{"field in another case", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  Name: x\n", `unknown field "metadata.Name"`},
		{"duplicate key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: b\n  a: c\n", `"a" already set`},
		{"wrong type", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata: [a, b]\n", "cannot unmarshal array"},
		{"wrong kind", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n", `kind "Secret"`},
		{"wrong apiVersion", "apiVersion: v2\nkind: ConfigMap\nmetadata:\n  name: x\n", `apiVersion "v2"`},
		{"no apiVersion or kind", "metadata:\n  name: x\n", `apiVersion "", kind ""`},
		{"two documents", good + "---\n" + good, "2 YAML documents"},
		{"no document", "# nothing\n", "0 YAML documents"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeManifest([]byte(tc.doc), new(corev1.ConfigMap))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decoding\n%s\ngave %v, want an error with %s", tc.doc, err, tc.want)
			}
		})
	}
}

// TestKubernetesKustomization: kustomization.yaml lists exactly the
// manifest files of the directory, and the test checks each of them.
func TestKubernetesKustomization(t *testing.T) {
	checkKustomization(t, kubeDir, new(kubeObjects).files(), "kubeObjects.files")
}

// checkKustomization: dir's kustomization.yaml lists exactly the manifest
// files of dir, and files, which the tests decode and check (listed by
// the function named filesFunc), are those files.
func checkKustomization(t *testing.T, dir string, files []kubeFile, filesFunc string) {
	t.Helper()
	kfile := filepath.Join(dir, kustomizationFile)
	data, err := os.ReadFile(kfile)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Resources  []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("%s: %v", kfile, err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("%s: apiVersion %q, kind %q: want kustomize.config.k8s.io/v1beta1, Kustomization", kfile, k.APIVersion, k.Kind)
	}

	var inDir []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".yaml" && ext != ".yml") || e.Name() == kustomizationFile {
			continue
		}
		inDir = append(inDir, e.Name())
	}
	listed := slices.Sorted(slices.Values(k.Resources))
	for i := 1; i < len(listed); i++ {
		if listed[i] == listed[i-1] {
			t.Errorf("%s lists %s twice", kfile, listed[i])
		}
	}
	for _, f := range inDir {
		if !slices.Contains(listed, f) {
			t.Errorf("%s is in %s but not in %s's resources", f, dir, kfile)
		}
	}
	for _, f := range listed {
		if !slices.Contains(inDir, f) {
			t.Errorf("%s's resources list %s, which is not a manifest file in %s", kfile, f, dir)
		}
	}
	var checked []string
	for _, f := range files {
		checked = append(checked, f.name)
	}
	for _, f := range inDir {
		if !slices.Contains(checked, f) {
			t.Errorf("%s/%s has no type in %s: this test does not check it", dir, f, filesFunc)
		}
	}
	for _, f := range checked {
		if !slices.Contains(inDir, f) {
			t.Errorf("%s has %s, which is not in %s", filesFunc, f, dir)
		}
	}
}

// TestKubernetesManifestsDecode decodes every manifest strictly: an
// unknown or misspelt field, or an apiVersion or kind that is not the
// object's, fails here first.
func TestKubernetesManifestsDecode(t *testing.T) {
	readKube(t)
}

// TestKubernetesMetadata: names and labels the API server accepts, and
// every object carries the pods' selector labels, so that one label
// query (kubectl get ... -l app.kubernetes.io/instance=...) finds them all.
func TestKubernetesMetadata(t *testing.T) {
	o := readKube(t)
	sel := o.deployment.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("deployment.yaml: spec.selector.matchLabels is empty")
	}
	checkMetadata(t, "deployment.yaml", sel.MatchLabels, []objectMeta{
		{"configmap.yaml", o.configMap.ObjectMeta, validation.IsDNS1123Subdomain},
		{"secret.yaml", o.secret.ObjectMeta, validation.IsDNS1123Subdomain},
		{"deployment.yaml", o.deployment.ObjectMeta, validation.IsDNS1123Subdomain},
		{"service.yaml", o.service.ObjectMeta, validation.IsDNS1035Label},
		{"pdb.yaml", o.pdb.ObjectMeta, validation.IsDNS1123Subdomain},
		{"servicemonitor.yaml", o.serviceMonitor.ObjectMeta, validation.IsDNS1123Subdomain},
		{"prometheusrule.yaml", o.rules.ObjectMeta, validation.IsDNS1123Subdomain},
		{"deployment.yaml spec.template", o.deployment.Spec.Template.ObjectMeta, nil},
	})
	if o.deployment.Labels["app.kubernetes.io/name"] != "hyperplane" {
		t.Errorf("deployment.yaml: metadata.labels[app.kubernetes.io/name] is %q, want hyperplane", o.deployment.Labels["app.kubernetes.io/name"])
	}
}

// objectMeta is a manifest's metadata, for checkMetadata.
type objectMeta struct {
	file string
	meta metav1.ObjectMeta
	// isName checks metadata.name; nil for a pod template, which has none.
	isName func(string) []string
}

// checkMetadata: every object has a name and labels the API server
// accepts, no namespace, and the pods' selector labels, selector, of the
// workload in workloadFile.
func checkMetadata(t *testing.T, workloadFile string, selector map[string]string, metas []objectMeta) {
	t.Helper()
	for _, m := range metas {
		if m.isName != nil {
			for _, e := range m.isName(m.meta.Name) {
				t.Errorf("%s: metadata.name %q: %s", m.file, m.meta.Name, e)
			}
		}
		if m.meta.Namespace != "" {
			t.Errorf("%s: metadata.namespace %q: leave it to kubectl -n or kustomize", m.file, m.meta.Namespace)
		}
		for _, e := range metav1validation.ValidateLabels(m.meta.Labels, field.NewPath("metadata", "labels")) {
			t.Errorf("%s: %v", m.file, e)
		}
		for k, v := range selector {
			if m.meta.Labels[k] != v {
				t.Errorf("%s: metadata.labels[%s] is %q, want %q as in %s's selector", m.file, k, m.meta.Labels[k], v, workloadFile)
			}
		}
	}
}

// worker is the pod's one container, or fails the test.
func worker(t *testing.T, p podObjects) corev1.Container {
	t.Helper()
	cs := p.template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%s: %d containers, want the worker alone", p.file, len(cs))
	}
	return cs[0]
}

// TestKubernetesDeployment: several replicas, which share a Kafka
// source's partitions through the consumer group, replaced one pod at a
// time; the distroless image's user, with nothing it does not need; the
// image's entrypoint and the config path of the Dockerfile's CMD; probes
// on the routes the binary serves; resources sized for the model.
func TestKubernetesDeployment(t *testing.T) {
	o := readKube(t)
	d := o.deployment

	replicas := 0
	if r := d.Spec.Replicas; r == nil || *r < 2 {
		t.Errorf("deployment.yaml: spec.replicas is %s, want several (2 or more) set explicitly: the replicas share a Kafka source's partitions through the consumer group and learn one model in epochs (docs/operations.md, \"Scaling out\"); only a source of one partition needs 1, which kustomization.yaml's commented patch sets", ptrString(r))
	} else {
		replicas = int(*r)
	}
	switch st := d.Spec.Strategy; {
	case st.Type != appsv1.RollingUpdateDeploymentStrategyType:
		t.Errorf("deployment.yaml: spec.strategy.type is %q, want RollingUpdate: Recreate stops every replica at once, and the model with them; two owners of a partition during a rollout are benign (they write identical results)", st.Type)
	case st.RollingUpdate == nil || st.RollingUpdate.MaxSurge == nil || st.RollingUpdate.MaxUnavailable == nil:
		t.Errorf("deployment.yaml: spec.strategy.rollingUpdate is %v: set maxSurge and maxUnavailable explicitly (the defaults, 25%%, depend on the replica count)", st.RollingUpdate)
	case replicas > 0:
		// As the Deployment controller scales them: surge rounded up,
		// unavailable rounded down.
		surge, errS := intstr.GetScaledValueFromIntOrPercent(st.RollingUpdate.MaxSurge, replicas, true)
		unavailable, errU := intstr.GetScaledValueFromIntOrPercent(st.RollingUpdate.MaxUnavailable, replicas, false)
		switch {
		case errS != nil || errU != nil:
			t.Errorf("deployment.yaml: rollingUpdate maxSurge %s, maxUnavailable %s: %v", st.RollingUpdate.MaxSurge.String(), st.RollingUpdate.MaxUnavailable.String(), errors.Join(errS, errU))
		case surge+unavailable < 1:
			t.Errorf("deployment.yaml: rollingUpdate maxSurge %d and maxUnavailable %d of %d replicas: a rollout could never progress", surge, unavailable, replicas)
		case surge > 1 || unavailable > 1:
			t.Errorf("deployment.yaml: rollingUpdate maxSurge %d, maxUnavailable %d of %d replicas: want at most 1 each: every pod that joins or leaves rebalances the whole consumer group, so a rollout should move one pod at a time", surge, unavailable, replicas)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("deployment.yaml: spec.selector %v: %v (or empty)", d.Spec.Selector, err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("deployment.yaml: spec.selector %s does not match spec.template.metadata.labels %v", sel, d.Spec.Template.Labels)
	}
	checkPod(t, o.pod(), o.service.Name)
}

// checkPod checks p's pod template: the distroless image's user, with
// nothing it does not need; the image's entrypoint and the config path of
// the Dockerfile's CMD; probes on the routes the binary serves; resources
// set. service is the name of the Service that selects the pods.
func checkPod(t *testing.T, pod podObjects, service string) {
	t.Helper()
	spec := pod.template.Spec
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= 30 {
		t.Errorf("%s: terminationGracePeriodSeconds is %s, want more than the default 30: the worker flushes its outputs and writes a final snapshot on SIGTERM", pod.file, ptrString(g))
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		t.Errorf("%s: enableServiceLinks is %s, want false: service links add HYPERPLANE_* variables (from the Service %q) to the worker's configuration environment", pod.file, ptrString(spec.EnableServiceLinks), service)
	}
	if a := spec.AutomountServiceAccountToken; a == nil || *a {
		t.Errorf("%s: automountServiceAccountToken is %s, want false: the worker never calls the Kubernetes API", pod.file, ptrString(a))
	}

	psc := spec.SecurityContext
	if psc == nil {
		t.Fatalf("%s: spec.template.spec.securityContext is missing", pod.file)
	}
	if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: securityContext.runAsNonRoot is not true", pod.file)
	}
	for _, id := range []struct {
		name string
		v    *int64
	}{{"runAsUser", psc.RunAsUser}, {"runAsGroup", psc.RunAsGroup}, {"fsGroup", psc.FSGroup}} {
		if id.v == nil || *id.v != nonrootID {
			t.Errorf("%s: securityContext.%s is %s, want %d, the image's nonroot user", pod.file, id.name, ptrString(id.v), nonrootID)
		}
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: securityContext.seccompProfile is %v, want type RuntimeDefault", pod.file, psc.SeccompProfile)
	}

	c := worker(t, pod)
	csc := c.SecurityContext
	if csc == nil {
		t.Fatalf("%s: container %s has no securityContext", pod.file, c.Name)
	}
	if csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation {
		t.Errorf("%s: container %s: allowPrivilegeEscalation is %s, want false", pod.file, c.Name, ptrString(csc.AllowPrivilegeEscalation))
	}
	if csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem {
		t.Errorf("%s: container %s: readOnlyRootFilesystem is %s, want true", pod.file, c.Name, ptrString(csc.ReadOnlyRootFilesystem))
	}
	if csc.Privileged != nil && *csc.Privileged {
		t.Errorf("%s: container %s is privileged", pod.file, c.Name)
	}
	if csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") || len(csc.Capabilities.Add) > 0 {
		t.Errorf("%s: container %s: capabilities %v, want drop [ALL] and none added", pod.file, c.Name, csc.Capabilities)
	}

	image := regexp.MustCompile(`^ghcr\.io/hyperplane-ml/hyperplane(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$`)
	if !image.MatchString(c.Image) {
		t.Errorf("%s: image %q, want ghcr.io/hyperplane-ml/hyperplane with a tag or digest", pod.file, c.Image)
	}
	df := readDockerfile(t)
	var entrypoint, cmd []string
	if err := json.Unmarshal([]byte(df.entrypoint), &entrypoint); err != nil {
		t.Fatalf("Dockerfile: ENTRYPOINT %s is not an exec-form list: %v", df.entrypoint, err)
	}
	if err := json.Unmarshal([]byte(df.cmd), &cmd); err != nil {
		t.Fatalf("Dockerfile: CMD %s is not an exec-form list: %v", df.cmd, err)
	}
	if len(c.Command) > 0 && !slices.Equal(c.Command, entrypoint) {
		t.Errorf("%s: command %q replaces the image's ENTRYPOINT %q", pod.file, c.Command, entrypoint)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("%s: args %q, want hyperplane run ...", pod.file, c.Args)
	}
	argPath, ok := configFlag(c.Args)
	if !ok {
		t.Fatalf("%s: args %q have no --config", pod.file, c.Args)
	}
	cmdPath, ok := configFlag(cmd)
	if !ok {
		t.Fatalf("Dockerfile: CMD %q has no --config", cmd)
	}
	if argPath != cmdPath || argPath != ConfigPath {
		t.Errorf("the config path is %s in %s's args, %s in the Dockerfile's CMD: want both %s", argPath, pod.file, cmdPath, ConfigPath)
	}
	key, mount := mountedConfigMapKey(t, pod, c, argPath)
	if key == "" {
		t.Errorf("%s: no volume mounts a key of ConfigMap %s at %s (--config)", pod.file, pod.configMap.Name, argPath)
	} else if !mount.ReadOnly {
		t.Errorf("%s: volumeMount %s at %s is not readOnly", pod.file, mount.Name, mount.MountPath)
	}

	ports := map[string]int32{}
	for _, p := range c.Ports {
		for _, e := range validation.IsValidPortName(p.Name) {
			t.Errorf("%s: port name %q: %s", pod.file, p.Name, e)
		}
		ports[p.Name] = p.ContainerPort
	}
	routes := servedRoutes(t)
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
		{"startupProbe", c.StartupProbe, "/healthz"},
	} {
		p := pr.probe
		if p == nil {
			if pr.name != "startupProbe" {
				t.Errorf("%s: container %s has no %s", pod.file, c.Name, pr.name)
			}
			continue
		}
		if p.HTTPGet == nil {
			t.Errorf("%s: %s is not an httpGet", pod.file, pr.name)
			continue
		}
		if p.HTTPGet.Path != pr.path {
			t.Errorf("%s: %s.httpGet.path is %q, want %s", pod.file, pr.name, p.HTTPGet.Path, pr.path)
		}
		if !slices.Contains(routes, p.HTTPGet.Path) {
			t.Errorf("%s: %s.httpGet.path %s is not served by cmd/hyperplane (it serves %v)", pod.file, pr.name, p.HTTPGet.Path, routes)
		}
		if _, named := ports[p.HTTPGet.Port.StrVal]; p.HTTPGet.Port.Type != intstr.String || !named {
			t.Errorf("%s: %s.httpGet.port is %q, want the name of a container port (%v)", pod.file, pr.name, p.HTTPGet.Port.String(), ports)
		}
	}

	res := c.Resources
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, hasReq := res.Requests[name]
		lim, hasLim := res.Limits[name]
		switch {
		case !hasReq || req.IsZero():
			t.Errorf("%s: resources.requests.%s is not set", pod.file, name)
		case !hasLim || lim.IsZero():
			t.Errorf("%s: resources.limits.%s is not set", pod.file, name)
		case req.Cmp(lim) > 0:
			t.Errorf("%s: resources.requests.%s %s is above its limit %s", pod.file, name, req.String(), lim.String())
		}
	}
}

// ptrString shows a pointer's value, or "unset".
func ptrString[T any](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// configFlag is the value of --config (or -config, --config=, -config=)
// in args.
func configFlag(args []string) (string, bool) {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value, true
		}
		if i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// mountedConfigMapKey is the key of the ConfigMap that container c sees at
// file, and the mount it comes through; "" if none.
func mountedConfigMapKey(t *testing.T, p podObjects, c corev1.Container, file string) (string, corev1.VolumeMount) {
	t.Helper()
	kind, key, m := mountedKey(t, p, c, file)
	if kind != "ConfigMap" {
		return "", corev1.VolumeMount{}
	}
	return key, m
}

// mountedKey is the key of the ConfigMap or Secret (kind) that container
// c sees at file, and the mount it comes through; "" if none. A volume
// must name p's ConfigMap or Secret, and its items keys they hold.
func mountedKey(t *testing.T, p podObjects, c corev1.Container, file string) (kind, key string, mount corev1.VolumeMount) {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range p.template.Spec.Volumes {
		volumes[v.Name] = v
	}
	secret := secretValues(*p.secret)
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("%s: volumeMount %s names no volume", p.file, m.Name)
			continue
		}
		// The keys of the volume's object, and its items.
		var data map[string]string
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			if v.ConfigMap.Name != p.configMap.Name {
				t.Errorf("%s: volume %s mounts ConfigMap %s, but configmap.yaml is %s", p.file, v.Name, v.ConfigMap.Name, p.configMap.Name)
				continue
			}
			kind, data, items = "ConfigMap", p.configMap.Data, v.ConfigMap.Items
		case v.Secret != nil:
			if v.Secret.SecretName != p.secret.Name {
				t.Errorf("%s: volume %s mounts Secret %s, but secret.yaml is %s", p.file, v.Name, v.Secret.SecretName, p.secret.Name)
				continue
			}
			kind, data, items = "Secret", secret, v.Secret.Items
		default:
			continue
		}
		// The files of the volume: every key under its own name, or the
		// items under their paths.
		files := map[string]string{}
		if len(items) == 0 {
			for k := range data {
				files[k] = k
			}
		}
		for _, it := range items {
			if _, ok := data[it.Key]; !ok {
				t.Errorf("%s: volume %s has item %s, which its %s does not have", p.file, v.Name, it.Key, kind)
			}
			files[it.Path] = it.Key
		}
		for f, k := range files {
			at := path.Join(m.MountPath, f)
			if m.SubPath != "" {
				if f != m.SubPath {
					continue
				}
				at = m.MountPath
			}
			if at == file {
				return kind, k, m
			}
		}
	}
	return "", "", corev1.VolumeMount{}
}

// servedRoutes are the paths that cmd/hyperplane's HTTP server handles.
func servedRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "cmd", "hyperplane", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile(`"GET (/[A-Za-z0-9_./-]*)"`)
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range route.FindAllStringSubmatch(string(data), -1) {
			routes = append(routes, m[1])
		}
	}
	if len(routes) == 0 {
		t.Fatal(`cmd/hyperplane registers no "GET /path" route`)
	}
	return routes
}

// podEnv is the environment the worker's container gets: envFrom first,
// then env over it, as the kubelet builds it, with p.podName for the
// pod's name. Every Secret or ConfigMap it references must be one of the
// manifests and hold the key.
func podEnv(t *testing.T, p podObjects, c corev1.Container) map[string]string {
	t.Helper()
	secret := secretValues(*p.secret)
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		var src map[string]string
		switch {
		case from.SecretRef != nil && from.SecretRef.Name == p.secret.Name:
			src = secret
		case from.SecretRef != nil:
			t.Errorf("%s: envFrom names Secret %s; secret.yaml is %s", p.file, from.SecretRef.Name, p.secret.Name)
		case from.ConfigMapRef != nil && from.ConfigMapRef.Name == p.configMap.Name:
			src = p.configMap.Data
		case from.ConfigMapRef != nil:
			t.Errorf("%s: envFrom names ConfigMap %s; configmap.yaml is %s", p.file, from.ConfigMapRef.Name, p.configMap.Name)
		}
		for k, v := range src {
			// The kubelet skips a key that is not a variable name.
			for _, e := range validation.IsEnvVarName(from.Prefix + k) {
				t.Errorf("%s: envFrom gives %s%s, which is not a variable name: %s", p.file, from.Prefix, k, e)
			}
			env[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch vf := e.ValueFrom; {
		case vf == nil:
			env[e.Name] = e.Value
		case vf.FieldRef != nil && vf.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = p.podName
		case vf.FieldRef != nil:
			env[e.Name] = "fieldRef:" + vf.FieldRef.FieldPath
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			v, ok := secret[ref.Key]
			if ref.Name != p.secret.Name || !ok {
				t.Errorf("%s: env %s takes key %s of Secret %s; secret.yaml (%s) has keys %v", p.file, e.Name, ref.Key, ref.Name, p.secret.Name, slices.Sorted(maps.Keys(secret)))
			}
			env[e.Name] = v
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			v, ok := p.configMap.Data[ref.Key]
			if ref.Name != p.configMap.Name || !ok {
				t.Errorf("%s: env %s takes key %s of ConfigMap %s, which configmap.yaml does not have", p.file, e.Name, ref.Key, ref.Name)
			}
			env[e.Name] = v
		default:
			env[e.Name] = "resourceFieldRef"
		}
	}
	for _, v := range p.template.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		if v.Secret.SecretName != p.secret.Name {
			t.Errorf("%s: volume %s mounts Secret %s; secret.yaml is %s", p.file, v.Name, v.Secret.SecretName, p.secret.Name)
		}
		for _, it := range v.Secret.Items {
			if _, ok := secret[it.Key]; !ok {
				t.Errorf("%s: volume %s mounts key %s, which Secret %s does not have", p.file, v.Name, it.Key, p.secret.Name)
			}
		}
	}
	return env
}

// secretValues are s's keys and values as the API server stores them:
// stringData over data.
func secretValues(s corev1.Secret) map[string]string {
	values := map[string]string{}
	for k, v := range s.Data {
		values[k] = string(v)
	}
	maps.Copy(values, s.StringData)
	return values
}

// configKeys are the HYPERPLANE_* variables the configuration reads, from
// config.Usage.
func configKeys() []string {
	var b strings.Builder
	config.Usage(&b)
	return regexp.MustCompile(`\bHYPERPLANE_[A-Z0-9_]+\b`).FindAllString(b.String(), -1)
}

// kubeConfig is the worker's configuration as its pod loads it: the
// ConfigMap's key mounted at the container's --config, read with the
// container's args (the run subcommand dropped) and its environment.
type kubeConfig struct {
	cfg  config.Config
	env  map[string]string
	key  string // the ConfigMap's key mounted at --config
	text string // its value
	file string // a copy of it, which the container's --config names instead
}

func loadKubeConfig(t *testing.T, p podObjects) kubeConfig {
	t.Helper()
	c := worker(t, p)
	configPath, ok := configFlag(c.Args)
	if !ok || len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("%s: args %q, want run --config ...", p.file, c.Args)
	}
	key, _ := mountedConfigMapKey(t, p, c, configPath)
	text, ok := p.configMap.Data[key]
	if !ok {
		t.Fatalf("configmap.yaml: no key of it is mounted at %s (the container's --config)", configPath)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(c.Args[1:])
	for i, a := range args {
		if a == configPath {
			args[i] = file
		} else if strings.HasSuffix(a, "="+configPath) {
			args[i] = strings.TrimSuffix(a, configPath) + file
		}
	}
	env := podEnv(t, p, c)
	cfg, err := config.Load(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("configmap.yaml %s with %s's args and environment: %v", key, p.file, err)
	}
	return kubeConfig{cfg: cfg, env: env, key: key, text: text, file: file}
}

// TestKubernetesConfig: the ConfigMap's config.yaml, read the way the
// container reads it (its args, with the Deployment's environment and the
// Secret), loads and validates, reads a Kafka source, listens on the
// container's port, takes its writer from the pod's name and its password
// only from the Secret.
func TestKubernetesConfig(t *testing.T) {
	o := readKube(t)
	kc := loadKubeConfig(t, o.pod())
	cfg := kc.cfg
	if err := cfg.Validate(); err != nil {
		t.Fatalf("configmap.yaml %s with deployment.yaml's environment: %v", kc.key, err)
	}
	if cfg.Source.Kind != config.KindKafka {
		t.Errorf("source.kind is %s, want kafka: the Deployment's replicas share a Kafka source's partitions through the consumer group (a partitioned JetStream stream is deploy/kubernetes-jetstream's StatefulSet)", cfg.Source.Kind)
	}
	checkPodConfig(t, o.pod(), kc)

	// The file alone holds no secret.
	fileOnly, err := config.Load([]string{"--config", kc.file}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if fileOnly.Kafka.SASL.Password != "" {
		t.Errorf("configmap.yaml %s sets kafka.sasl.password: put it in secret.yaml as HYPERPLANE_KAFKA_SASL_PASSWORD", kc.key)
	}
	if cfg.Kafka.SASL.Mechanism != "none" && cfg.Kafka.SASL.Password == "" {
		t.Errorf("kafka.sasl.mechanism is %s but the pod gets no password", cfg.Kafka.SASL.Mechanism)
	}
}

// checkPodConfig checks kc, the configuration p's pod loads: its key's
// name, the HYPERPLANE_* variables the pod sets, the writer from the pod's
// name, no value of the Secret in the ConfigMap, a snapshot store with its
// credentials, one HTTP port for http.addr, the container and the image,
// and memory for the model.
func checkPodConfig(t *testing.T, p podObjects, kc kubeConfig) {
	t.Helper()
	c := worker(t, p)
	cfg, env := kc.cfg, kc.env
	for _, e := range validation.IsConfigMapKey(kc.key) {
		t.Errorf("configmap.yaml: key %q: %s", kc.key, e)
	}

	keys := configKeys()
	for name := range env {
		if strings.HasPrefix(name, "HYPERPLANE_") && !slices.Contains(keys, name) {
			t.Errorf("%s gives the worker %s, which is not a configuration key (hyperplane run -h lists them)", p.file, name)
		}
	}
	if cfg.Snapshot.Writer != p.podName {
		t.Errorf("snapshot.writer is %q in the pod, want the pod's name: set HYPERPLANE_SNAPSHOT_WRITER from fieldRef metadata.name", cfg.Snapshot.Writer)
	}
	for name, v := range secretValues(*p.secret) {
		if len(v) >= 6 && strings.Contains(kc.text, v) {
			t.Errorf("configmap.yaml %s contains the value of secret.yaml's %s", kc.key, name)
		}
	}

	if cfg.Snapshot.URL == "" {
		t.Error("snapshot.url is empty: a restarted pod would start the model again from source.start")
	}
	if strings.HasPrefix(cfg.Snapshot.URL, "s3://") {
		for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if env[v] == "" {
				t.Errorf("snapshot.url is %s but the pod has no %s", cfg.Snapshot.URL, v)
			}
		}
	}
	if cfg.HTTP.Addr == "" {
		t.Fatal("http.addr is empty: no /metrics, /healthz or /readyz for the probes and Prometheus")
	}

	// One port: http.addr's, the container's and the image's.
	_, port, err := net.SplitHostPort(cfg.HTTP.Addr)
	if err != nil {
		t.Fatalf("http.addr %q: %v", cfg.HTTP.Addr, err)
	}
	var containerPort *corev1.ContainerPort
	for i, cp := range c.Ports {
		if cp.Name == "http" {
			containerPort = &c.Ports[i]
		}
	}
	if containerPort == nil {
		t.Fatalf("%s: container %s has no port named http", p.file, c.Name)
	}
	if strconv.Itoa(int(containerPort.ContainerPort)) != port {
		t.Errorf("%s: port http is %d, but http.addr in configmap.yaml listens on %s", p.file, containerPort.ContainerPort, port)
	}
	df := readDockerfile(t)
	exposed := false
	for _, e := range df.expose {
		exposed = exposed || strings.TrimSuffix(e, "/tcp") == port
	}
	if !exposed {
		t.Errorf("the Dockerfile EXPOSEs %v, not http.addr's port %s", df.expose, port)
	}

	// Memory for four copies of the weights (the weights and the averaged
	// weights, a snapshot's copy and its encoding) and 64 MiB for the rest.
	need := 4*weightBytes(cfg) + 64<<20
	if mem, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || mem.Value() < need {
		t.Errorf("%s: resources.requests.memory is %s, want at least %d MiB for 2^%d weights × %d outputs", p.file, mem.String(), need>>20, cfg.Model.Learner.HashBits, modelOutputs(cfg))
	}
}

// modelOutputs is the number of weight vectors of cfg's model: one per
// class of a multiclass model, else one.
func modelOutputs(cfg config.Config) int {
	if cfg.Model.Learner.Multiclass() {
		return len(cfg.Model.Learner.Classes)
	}
	return 1
}

// weightBytes is the size of one copy of cfg's model's weights: 8 bytes
// a weight.
func weightBytes(cfg config.Config) int64 {
	return 8 * int64(cfg.Model.Learner.Dimension()) * int64(modelOutputs(cfg))
}

// TestKubernetesServiceAndBudget: the Service and the PodDisruptionBudget
// select the Deployment's pods, the Service reaches the container's named
// port, and the budget lets a drain evict a replica, never all of them.
func TestKubernetesServiceAndBudget(t *testing.T) {
	o := readKube(t)
	checkServiceSelects(t, "service.yaml", o.service, o.pod())
	replicas := 1
	if r := o.deployment.Spec.Replicas; r != nil {
		replicas = int(*r)
	}
	checkBudget(t, "pdb.yaml", o.pdb, o.pod(), replicas)
}

// checkServiceSelects: svc, of file, is a ClusterIP Service that selects
// p's pods, and each of its ports targets a named port of the container.
func checkServiceSelects(t *testing.T, file string, svc corev1.Service, p podObjects) {
	t.Helper()
	pod := labels.Set(p.template.Labels)
	c := worker(t, p)
	if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("%s: type %s, want ClusterIP: only Prometheus and prediction clients in the cluster connect to the worker", file, svc.Spec.Type)
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(pod) {
		t.Errorf("%s: selector %v does not select %s's pods %v", file, svc.Spec.Selector, p.file, pod)
	}
	names := map[string]bool{}
	for _, cp := range c.Ports {
		names[cp.Name] = true
	}
	if len(svc.Spec.Ports) == 0 {
		t.Errorf("%s: no ports", file)
	}
	for _, sp := range svc.Spec.Ports {
		for _, e := range validation.IsValidPortName(sp.Name) {
			t.Errorf("%s: port name %q: %s", file, sp.Name, e)
		}
		if sp.TargetPort.Type != intstr.String || !names[sp.TargetPort.StrVal] {
			t.Errorf("%s: port %s has targetPort %q, want the name of a container port (%v)", file, sp.Name, sp.TargetPort.String(), slices.Sorted(maps.Keys(names)))
		}
	}
}

// checkBudget: pdb, of file, selects p's pods, of which there are
// replicas, and lets a drain evict one of them but not all.
func checkBudget(t *testing.T, file string, pdb policyv1.PodDisruptionBudget, p podObjects, replicas int) {
	t.Helper()
	pod := labels.Set(p.template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(pod) {
		t.Errorf("%s: selector %v does not select %s's pods %v (%v)", file, pdb.Spec.Selector, p.file, pod, err)
	}
	switch {
	case pdb.Spec.MinAvailable != nil:
		t.Errorf("%s: minAvailable %s: use maxUnavailable, which follows the replica count; minAvailable blocks every drain once the pods are scaled down to it (to one replica, for a source of one partition)", file, pdb.Spec.MinAvailable.String())
	case pdb.Spec.MaxUnavailable == nil:
		t.Errorf("%s: maxUnavailable is not set", file)
	default:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
		switch {
		case err != nil || n < 1:
			t.Errorf("%s: maxUnavailable %s allows %d of %d pods to be evicted (%v): a drain could never evict a worker", file, pdb.Spec.MaxUnavailable.String(), n, replicas, err)
		case replicas > 1 && n >= replicas:
			t.Errorf("%s: maxUnavailable %s allows all %d pods to be evicted at once: a drain would stop the model", file, pdb.Spec.MaxUnavailable.String(), replicas)
		}
	}
}

// scrapeInterval is the ServiceMonitor's first endpoint's interval.
func scrapeInterval(t *testing.T, sm monitoringv1.ServiceMonitor) time.Duration {
	t.Helper()
	if len(sm.Spec.Endpoints) == 0 {
		t.Fatal("servicemonitor.yaml: no endpoints")
	}
	d, err := model.ParseDuration(string(sm.Spec.Endpoints[0].Interval))
	if err != nil || d <= 0 {
		t.Fatalf("servicemonitor.yaml: endpoints[0].interval %q: want a duration such as 30s (%v)", sm.Spec.Endpoints[0].Interval, err)
	}
	return time.Duration(d)
}

// TestKubernetesServiceMonitor: Prometheus scrapes /metrics through the
// Service's named port.
func TestKubernetesServiceMonitor(t *testing.T) {
	o := readKube(t)
	checkServiceMonitor(t, o.serviceMonitor, o.service)
}

// checkServiceMonitor: sm scrapes /metrics through svc's named port.
func checkServiceMonitor(t *testing.T, sm monitoringv1.ServiceMonitor, svc corev1.Service) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("servicemonitor.yaml: selector %v is empty or invalid (%v): it would scrape every Service of the namespace", sm.Spec.Selector, err)
	}
	if !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("servicemonitor.yaml: selector %s does not match service.yaml's labels %v", sel, svc.Labels)
	}
	var svcPorts []string
	for _, p := range svc.Spec.Ports {
		svcPorts = append(svcPorts, p.Name)
	}
	routes := servedRoutes(t)
	scrapeInterval(t, sm)
	for i, ep := range sm.Spec.Endpoints {
		if !slices.Contains(svcPorts, ep.Port) {
			t.Errorf("servicemonitor.yaml: endpoints[%d].port %q is not a port name of service.yaml (%v)", i, ep.Port, svcPorts)
		}
		if ep.Path != "/metrics" || !slices.Contains(routes, ep.Path) {
			t.Errorf("servicemonitor.yaml: endpoints[%d].path %q, want /metrics, served by cmd/hyperplane (%v)", i, ep.Path, routes)
		}
		if ep.Scheme != nil && ep.Scheme.String() != "http" {
			t.Errorf("servicemonitor.yaml: endpoints[%d].scheme %s: the worker serves plain HTTP", i, ep.Scheme.String())
		}
		if d, err := model.ParseDuration(string(ep.Interval)); err != nil || d <= 0 {
			t.Errorf("servicemonitor.yaml: endpoints[%d].interval %q: want a duration such as 30s", i, ep.Interval)
		}
	}
}

// exportedMetrics are the series names that consumer.NewMetrics exposes:
// each family's name, and a histogram's _bucket, _sum and _count.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	counting := &countingRegisterer{Registerer: reg}
	m := consumer.NewMetrics(counting)
	// A vector has no series until a label value is used.
	m.Examples.WithLabelValues("correct")
	m.Position.WithLabelValues("clicks/0")
	m.Lag.WithLabelValues("clicks/0")
	m.ShardRollingAccuracy.WithLabelValues("clicks/0")
	m.ShardModelVersion.WithLabelValues("clicks/0")
	m.ShardServedVersion.WithLabelValues("clicks/0")
	m.ShardPosition.WithLabelValues("clicks/0")
	sp := m.ShardProbability
	for _, v := range []*prometheus.GaugeVec{sp.LogLoss, sp.RollingLogLoss, sp.Brier, sp.RollingBrier,
		sp.CalibrationError, sp.RollingCalibrationError, sp.AUC, sp.RollingAUC} {
		v.WithLabelValues("clicks/0")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != counting.n {
		t.Fatalf("consumer.NewMetrics registers %d collectors, %d of them gathered: give each new vector a label value in exportedMetrics", counting.n, len(families))
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[f.GetName()+"_bucket"] = true
			fallthrough
		case dto.MetricType_SUMMARY:
			names[f.GetName()+"_sum"] = true
			names[f.GetName()+"_count"] = true
		}
	}
	return names
}

// countingRegisterer counts the collectors registered through it.
type countingRegisterer struct {
	prometheus.Registerer
	n int
}

func (r *countingRegisterer) Register(c prometheus.Collector) error {
	r.n++
	return r.Registerer.Register(c)
}

func (r *countingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		// The challengers' series join the model's families.
		if _, ok := c.(*consumer.ChallengerMetrics); !ok {
			r.n++
		}
	}
	r.Registerer.MustRegister(cs...)
}

// balanced reports whether the brackets of a PromQL expression pair up,
// outside quoted strings.
func balanced(expr string) bool {
	var stack []rune
	var quote rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for i, r := range expr {
		switch {
		case quote != 0:
			if r == quote && (i == 0 || expr[i-1] != '\\') {
				quote = 0
			}
		case r == '"' || r == '\'' || r == '`':
			quote = r
		case r == '(' || r == '[' || r == '{':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && quote == 0
}

// TestKubernetesAlerts: every alert uses only series the worker exports
// (and Prometheus's up of the Service's job), has a severity and says what
// to look at; rate windows span several scrapes, and the snapshot alert
// does not fire between two regular snapshots.
func TestKubernetesAlerts(t *testing.T) {
	o := readKube(t)
	exported := exportedMetrics(t)
	scrape := scrapeInterval(t, o.serviceMonitor)
	job := o.service.Name
	if l := o.serviceMonitor.Spec.JobLabel; l != "" {
		job = o.service.Labels[l]
	}
	cfg := loadKubeConfig(t, o.pod()).cfg

	metricName := regexp.MustCompile(`hyperplane_[a-z_]+`)
	jobMatcher := regexp.MustCompile(`\bjob\s*=~?\s*"([^"]*)"`)
	window := regexp.MustCompile(`\[([0-9]+[a-z]+(?:[0-9]+[a-z]+)*)(?::[^\]]*)?\]`)
	threshold := regexp.MustCompile(`>\s*([0-9]+(?:\.[0-9]+)?)`)
	severities := []string{"critical", "warning", "info"}

	if len(o.rules.Spec.Groups) == 0 {
		t.Fatal("prometheusrule.yaml: no groups")
	}
	alerts := map[string]bool{}
	groups := map[string]bool{}
	snapshotAlert := false
	for gi, g := range o.rules.Spec.Groups {
		if g.Name == "" || groups[g.Name] {
			t.Errorf("prometheusrule.yaml: groups[%d].name %q is empty or repeated", gi, g.Name)
		}
		groups[g.Name] = true
		for ri, r := range g.Rules {
			where := fmt.Sprintf("prometheusrule.yaml: groups[%d].rules[%d] (%s)", gi, ri, r.Alert+r.Record)
			if r.Alert == "" {
				if r.Record == "" {
					t.Errorf("%s: neither alert nor record", where)
				}
			} else {
				if alerts[r.Alert] {
					t.Errorf("%s: alert %s is defined twice", where, r.Alert)
				}
				alerts[r.Alert] = true
				if !slices.Contains(severities, r.Labels["severity"]) {
					t.Errorf("%s: labels.severity is %q, want one of %v", where, r.Labels["severity"], severities)
				}
				for _, a := range []string{"summary", "description"} {
					text := strings.TrimSpace(r.Annotations[a])
					if text == "" {
						t.Errorf("%s: no %s annotation", where, a)
					}
					if strings.Count(text, "{{") != strings.Count(text, "}}") {
						t.Errorf("%s: annotation %s has unpaired {{ }}: %q", where, a, text)
					}
				}
				if r.For != nil {
					if _, err := model.ParseDuration(string(*r.For)); err != nil {
						t.Errorf("%s: for %q: %v", where, *r.For, err)
					}
				}
			}

			if r.Expr.Type != intstr.String || strings.TrimSpace(r.Expr.StrVal) == "" {
				t.Errorf("%s: expr is empty or not a string", where)
				continue
			}
			expr := r.Expr.StrVal
			if !balanced(expr) {
				t.Errorf("%s: unbalanced brackets or quotes in %q", where, expr)
			}
			for _, name := range metricName.FindAllString(expr, -1) {
				if !exported[name] {
					t.Errorf("%s: expr uses %s, which consumer.NewMetrics does not export (it exports %v)", where, name, slices.Sorted(maps.Keys(exported)))
				}
			}
			for _, m := range jobMatcher.FindAllStringSubmatch(expr, -1) {
				if m[1] != job {
					t.Errorf("%s: expr selects job %q, but the ServiceMonitor's job is %q (service.yaml's name)", where, m[1], job)
				}
			}
			for _, m := range window.FindAllStringSubmatch(expr, -1) {
				d, err := model.ParseDuration(m[1])
				if err != nil {
					t.Errorf("%s: range [%s]: %v", where, m[1], err)
					continue
				}
				if time.Duration(d) < 4*scrape {
					t.Errorf("%s: range [%s] is shorter than four scrapes of %v (servicemonitor.yaml): rate() over it is noisy or empty", where, m[1], scrape)
				}
			}
			if strings.Contains(expr, "hyperplane_last_snapshot_timestamp_seconds") {
				snapshotAlert = true
				th := threshold.FindStringSubmatch(expr)
				if th == nil {
					t.Errorf("%s: no `> seconds` threshold in %q", where, expr)
					continue
				}
				secs, _ := strconv.ParseFloat(th[1], 64)
				if interval := cfg.Snapshot.Interval; time.Duration(secs*float64(time.Second)) <= 2*interval {
					t.Errorf("%s: fires after %vs without a snapshot, but snapshot.interval is %v: want more than twice the interval", where, th[1], interval)
				}
			}
		}
	}
	if !snapshotAlert {
		t.Error("prometheusrule.yaml: no alert on hyperplane_last_snapshot_timestamp_seconds")
	}
}

// TestAlertsQuoteTheWorkersLogLines: a log line an alert's description
// quotes for the operator to look for (`"snapshot failed; retrying"`) is
// a message the worker logs, word for word: a search of the logs for one
// it never writes finds nothing during the outage the alert is about.
func TestAlertsQuoteTheWorkersLogLines(t *testing.T) {
	o := readKube(t)
	var src strings.Builder
	for _, dir := range []string{"../consumer", "../cmd", "../serve", "../snapshot"} {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			src.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	code := src.String()
	quoted := regexp.MustCompile(`"([a-z][^"{}]*)"`)
	n := 0
	for _, g := range o.rules.Spec.Groups {
		for _, r := range g.Rules {
			for _, m := range quoted.FindAllStringSubmatch(r.Annotations["description"], -1) {
				n++
				// A message, or how one begins.
				if !strings.Contains(code, `"`+m[1]) {
					t.Errorf("prometheusrule.yaml: %s tells to look for the log line %q, which the worker never logs", r.Alert, m[1])
				}
			}
		}
	}
	if n == 0 {
		t.Error("prometheusrule.yaml: no description quotes a log line: the test reads none")
	}
}
