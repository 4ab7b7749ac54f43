package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperplane-ml/hyperplane/config"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// jetstreamDir holds the manifests of a model learned from a partitioned
// JetStream stream by a StatefulSet, one object per file.
const jetstreamDir = "kubernetes-jetstream"

// jetstreamObjects are the objects of deploy/kubernetes-jetstream, each
// decoded strictly into its official Go type.
type jetstreamObjects struct {
	configMap      corev1.ConfigMap
	secret         corev1.Secret
	statefulSet    appsv1.StatefulSet
	service        corev1.Service
	pdb            policyv1.PodDisruptionBudget
	serviceMonitor monitoringv1.ServiceMonitor
}

// files are the manifests and the object each one decodes into. A file in
// jetstreamDir that is not here fails
// TestKubernetesJetStreamKustomization: give it a type.
func (o *jetstreamObjects) files() []kubeFile {
	return []kubeFile{
		{"configmap.yaml", &o.configMap},
		{"secret.yaml", &o.secret},
		{"statefulset.yaml", &o.statefulSet},
		{"service.yaml", &o.service},
		{"pdb.yaml", &o.pdb},
		{"servicemonitor.yaml", &o.serviceMonitor},
	}
}

// readJetStream decodes every manifest of jetstreamDir strictly, or fails
// the test naming the file.
func readJetStream(t *testing.T) *jetstreamObjects {
	t.Helper()
	o := new(jetstreamObjects)
	readManifests(t, jetstreamDir, o.files())
	return o
}

// pod is the StatefulSet's pod of the given ordinal, named as the
// StatefulSet names it: <name>-<ordinal>, which is also its host name.
func (o *jetstreamObjects) pod(ordinal int) podObjects {
	return podObjects{
		file:      "statefulset.yaml",
		template:  &o.statefulSet.Spec.Template,
		configMap: &o.configMap,
		secret:    &o.secret,
		podName:   fmt.Sprintf("%s-%d", o.statefulSet.Name, ordinal),
	}
}

// replicas is the StatefulSet's spec.replicas, which must be set.
func (o *jetstreamObjects) replicas(t *testing.T) int {
	t.Helper()
	r := o.statefulSet.Spec.Replicas
	if r == nil || *r < 1 {
		t.Fatalf("statefulset.yaml: spec.replicas is %s, want R of source.partitions: [replicas:R] set explicitly", ptrString(r))
	}
	return int(*r)
}

// TestKubernetesJetStreamKustomization: kustomization.yaml lists exactly
// the manifest files of the directory, and the tests check each of them.
func TestKubernetesJetStreamKustomization(t *testing.T) {
	checkKustomization(t, jetstreamDir, new(jetstreamObjects).files(), "jetstreamObjects.files")
}

// TestKubernetesJetStreamManifestsDecode decodes every manifest of the
// directory strictly.
func TestKubernetesJetStreamManifestsDecode(t *testing.T) {
	readJetStream(t)
}

// TestKubernetesJetStreamMetadata: names and labels the API server
// accepts, every object carries the pods' selector labels, and no object
// has the name of one of deploy/kubernetes of its kind, so that both
// directories can be applied to one namespace.
func TestKubernetesJetStreamMetadata(t *testing.T) {
	o := readJetStream(t)
	sel := o.statefulSet.Spec.Selector
	if sel == nil || len(sel.MatchLabels) == 0 {
		t.Fatal("statefulset.yaml: spec.selector.matchLabels is empty")
	}
	checkMetadata(t, "statefulset.yaml", sel.MatchLabels, []objectMeta{
		{"configmap.yaml", o.configMap.ObjectMeta, validation.IsDNS1123Subdomain},
		{"secret.yaml", o.secret.ObjectMeta, validation.IsDNS1123Subdomain},
		// The pods' host names are <name>-<ordinal>: a label.
		{"statefulset.yaml", o.statefulSet.ObjectMeta, validation.IsDNS1123Label},
		{"service.yaml", o.service.ObjectMeta, validation.IsDNS1035Label},
		{"pdb.yaml", o.pdb.ObjectMeta, validation.IsDNS1123Subdomain},
		{"servicemonitor.yaml", o.serviceMonitor.ObjectMeta, validation.IsDNS1123Subdomain},
		{"statefulset.yaml spec.template", o.statefulSet.Spec.Template.ObjectMeta, nil},
	})
	if o.statefulSet.Labels["app.kubernetes.io/name"] != "hyperplane" {
		t.Errorf("statefulset.yaml: metadata.labels[app.kubernetes.io/name] is %q, want hyperplane", o.statefulSet.Labels["app.kubernetes.io/name"])
	}

	k := readKube(t)
	for _, pair := range []struct {
		file       string
		name, kafk string
	}{
		{"configmap.yaml", o.configMap.Name, k.configMap.Name},
		{"secret.yaml", o.secret.Name, k.secret.Name},
		{"service.yaml", o.service.Name, k.service.Name},
		{"pdb.yaml", o.pdb.Name, k.pdb.Name},
		{"servicemonitor.yaml", o.serviceMonitor.Name, k.serviceMonitor.Name},
	} {
		if pair.name == pair.kafk {
			t.Errorf("%s: metadata.name %q is also %s's in %s: applied to one namespace, one would replace the other", pair.file, pair.name, pair.file, kubeDir)
		}
	}
	if o.statefulSet.Spec.Template.Labels["app.kubernetes.io/instance"] == k.deployment.Spec.Template.Labels["app.kubernetes.io/instance"] {
		t.Errorf("statefulset.yaml: the pods' app.kubernetes.io/instance is %s's too: the Services and budgets of one would select the pods of the other", kubeDir)
	}
}

// TestKubernetesJetStreamStatefulSet: pods that start together, named
// <name>-0 to <name>-(R-1) as source.partitions: [replicas:R] needs,
// governed by the headless Service, replaced one at a time, with nothing
// on disk; and the same pod as the Deployment's: the image's user, the
// image's entrypoint and config path, probes on the routes the binary
// serves, the same resources.
func TestKubernetesJetStreamStatefulSet(t *testing.T) {
	o := readJetStream(t)
	ss := o.statefulSet
	o.replicas(t)

	if ss.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("statefulset.yaml: podManagementPolicy is %q, want Parallel: each pod waits for the others at every epoch's end, so OrderedReady only delays the start (and a pod that waits is still ready)", ss.Spec.PodManagementPolicy)
	}
	if ss.Spec.ServiceName != o.service.Name {
		t.Errorf("statefulset.yaml: serviceName is %q, want service.yaml's %q, the headless Service that governs the pods", ss.Spec.ServiceName, o.service.Name)
	}
	if ord := ss.Spec.Ordinals; ord != nil && ord.Start != 0 {
		t.Errorf("statefulset.yaml: ordinals.start is %d, want 0: source.partitions replicas:R deals the partitions to the ordinals 0 to R-1", ord.Start)
	}
	switch us := ss.Spec.UpdateStrategy; {
	case us.Type != "" && us.Type != appsv1.RollingUpdateStatefulSetStrategyType:
		t.Errorf("statefulset.yaml: updateStrategy.type is %s, want RollingUpdate: with OnDelete a changed template reaches no pod until someone deletes it", us.Type)
	case us.RollingUpdate != nil && us.RollingUpdate.Partition != nil && *us.RollingUpdate.Partition > 0:
		t.Errorf("statefulset.yaml: updateStrategy.rollingUpdate.partition is %d: the pods below it would keep the old template", *us.RollingUpdate.Partition)
	case us.RollingUpdate != nil && us.RollingUpdate.MaxUnavailable != nil:
		if n, err := intstr.GetScaledValueFromIntOrPercent(us.RollingUpdate.MaxUnavailable, o.replicas(t), false); err != nil || n > 1 {
			t.Errorf("statefulset.yaml: updateStrategy.rollingUpdate.maxUnavailable %s stops %d pods at once (%v): their partitions have no other owner, so replace one at a time", us.RollingUpdate.MaxUnavailable.String(), n, err)
		}
	}
	if len(ss.Spec.VolumeClaimTemplates) > 0 {
		t.Errorf("statefulset.yaml: %d volumeClaimTemplates: the worker keeps nothing on disk, its model is in snapshot.url", len(ss.Spec.VolumeClaimTemplates))
	}
	spec := ss.Spec.Template.Spec
	if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
		t.Error("statefulset.yaml: setHostnameAsFQDN is true: the worker reads its ordinal from the end of its host name, which must be the pod's name")
	}
	if spec.Hostname != "" {
		t.Errorf("statefulset.yaml: hostname %q: the worker reads its ordinal from its host name, which the StatefulSet makes the pod's name", spec.Hostname)
	}
	sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("statefulset.yaml: spec.selector %v: %v (or empty)", ss.Spec.Selector, err)
	}
	if !sel.Matches(labels.Set(ss.Spec.Template.Labels)) {
		t.Errorf("statefulset.yaml: spec.selector %s does not match spec.template.metadata.labels %v", sel, ss.Spec.Template.Labels)
	}
	checkPod(t, o.pod(0), o.service.Name)

	// The same pod as the Deployment's, but for its names, environment
	// and volumes.
	d := readKube(t).deployment.Spec.Template.Spec
	c, dc := worker(t, o.pod(0)), d.Containers[0]
	for _, same := range []struct {
		what       string
		here, kafk any
	}{
		{"terminationGracePeriodSeconds", spec.TerminationGracePeriodSeconds, d.TerminationGracePeriodSeconds},
		{"automountServiceAccountToken", spec.AutomountServiceAccountToken, d.AutomountServiceAccountToken},
		{"enableServiceLinks", spec.EnableServiceLinks, d.EnableServiceLinks},
		{"securityContext", spec.SecurityContext, d.SecurityContext},
		{"the container's image", c.Image, dc.Image},
		{"the container's command", c.Command, dc.Command},
		{"the container's args", c.Args, dc.Args},
		{"the container's ports", c.Ports, dc.Ports},
		{"the container's startupProbe", c.StartupProbe, dc.StartupProbe},
		{"the container's livenessProbe", c.LivenessProbe, dc.LivenessProbe},
		{"the container's readinessProbe", c.ReadinessProbe, dc.ReadinessProbe},
		{"the container's resources", c.Resources, dc.Resources},
		{"the container's securityContext", c.SecurityContext, dc.SecurityContext},
	} {
		if !equality.Semantic.DeepEqual(same.here, same.kafk) {
			t.Errorf("statefulset.yaml: %s differs from %s/deployment.yaml's: keep the two workers' pods alike (%+v, there %+v)", same.what, kubeDir, same.here, same.kafk)
		}
	}
}

// loadJetStreamConfig is the configuration of the StatefulSet's pod of
// the given ordinal, as it loads it, validated. Each file it names
// (nats.credentials_file, TLS files) must be a key of the Secret that the
// container sees at that path; for validation it is a copy of that key.
func loadJetStreamConfig(t *testing.T, o *jetstreamObjects, ordinal int) kubeConfig {
	t.Helper()
	p := o.pod(ordinal)
	kc := loadKubeConfig(t, p)
	c := worker(t, p)
	secret := secretValues(*p.secret)
	dir := t.TempDir()
	cfg := &kc.cfg
	for _, f := range []struct {
		key  string
		path *string
	}{
		{"nats.credentials_file", &cfg.NATS.CredentialsFile},
		{"nats.nkey_file", &cfg.NATS.NKeyFile},
		{"nats.tls.ca_file", &cfg.NATS.TLS.CAFile},
		{"nats.tls.cert_file", &cfg.NATS.TLS.CertFile},
		{"nats.tls.key_file", &cfg.NATS.TLS.KeyFile},
		{"kafka.tls.ca_file", &cfg.Kafka.TLS.CAFile},
		{"kafka.tls.cert_file", &cfg.Kafka.TLS.CertFile},
		{"kafka.tls.key_file", &cfg.Kafka.TLS.KeyFile},
	} {
		if *f.path == "" {
			continue
		}
		kind, key, m := mountedKey(t, p, c, *f.path)
		if kind != "Secret" {
			t.Fatalf("%s is %s, but no volume of statefulset.yaml puts a key of secret.yaml (%s) there", f.key, *f.path, p.secret.Name)
		}
		if !m.ReadOnly {
			t.Errorf("statefulset.yaml: volumeMount %s at %s (%s) is not readOnly", m.Name, m.MountPath, f.key)
		}
		copied := filepath.Join(dir, strings.ReplaceAll(f.key, ".", "_"))
		if err := os.WriteFile(copied, []byte(secret[key]), 0o600); err != nil {
			t.Fatal(err)
		}
		*f.path = copied
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("configmap.yaml %s in pod %s (files from the Secret): %v", kc.key, p.podName, err)
	}
	return kc
}

// TestKubernetesJetStreamConfig: the ConfigMap's config.yaml, as every pod
// of the StatefulSet loads it, validates with the real config package and
// reads a stream partitioned by its subject transform, whose N partitions
// the R pods share out, each partition learned by exactly one pod, with R
// the StatefulSet's replicas; the outputs are outside the stream's
// subject; and the rest as for the Deployment (the writer from the pod's
// name, no secret in the file, one port, memory for the model and every
// partition's result at an epoch's end).
func TestKubernetesJetStreamConfig(t *testing.T) {
	o := readJetStream(t)
	replicas := o.replicas(t)
	kc := loadJetStreamConfig(t, o, 0)
	cfg := kc.cfg
	checkPodConfig(t, o.pod(0), kc)

	s := cfg.Source
	if s.Kind != config.KindJetStream || s.Stream == "" {
		t.Fatalf("source.kind is %q, source.stream %q: want jetstream and the partitioned stream", s.Kind, s.Stream)
	}
	prefix, ok := strings.CutSuffix(s.Subject, ".*")
	if !ok || prefix == "" || strings.ContainsAny(prefix, "*>") {
		t.Errorf("source.subject is %q, want <prefix>.*: the stream's transform hashes the last token into the partition (<prefix>.{{partition(N,1)}}.{{wildcard(1)}})", s.Subject)
	}
	if s.StreamPartitions < 1 {
		t.Fatalf("source.stream_partitions is %d, want N, the partitions of the stream's subject transform: an unpartitioned stream is one worker's", s.StreamPartitions)
	}

	// R: equal to spec.replicas.
	if len(s.Partitions) != 1 || !strings.HasPrefix(s.Partitions[0], "replicas:") {
		t.Fatalf("source.partitions is %q, want [replicas:R] with R the StatefulSet's spec.replicas", s.Partitions)
	}
	r, err := strconv.Atoi(strings.TrimPrefix(s.Partitions[0], "replicas:"))
	if err != nil {
		t.Fatalf("source.partitions %q: %v", s.Partitions[0], err)
	}
	if r != replicas {
		t.Fatalf("configmap.yaml's source.partitions is replicas:%d but statefulset.yaml's spec.replicas is %d: they must be equal (change both together), or the partitions of the missing ordinals are learned by no pod and every epoch waits for them, or the pods beyond R stop", r, replicas)
	}
	if r > s.StreamPartitions {
		t.Errorf("replicas:%d for %d partitions: keep R at most source.stream_partitions, or some pods have no partition to learn", r, s.StreamPartitions)
	}

	// Each partition has exactly one owner among the pods, as each pod
	// loads the configuration with its own name.
	owners := map[int][]string{}
	for i := range replicas {
		pc := cfg
		if i > 0 {
			pc = loadJetStreamConfig(t, o, i).cfg
		}
		pod := o.pod(i).podName
		if pc.Snapshot.Writer != pod {
			t.Errorf("pod %s writes its snapshots as %q, want its name", pod, pc.Snapshot.Writer)
		}
		owned, err := pc.OwnedPartitions(pod)
		if err != nil {
			t.Errorf("pod %s: %v", pod, err)
			continue
		}
		if owned == nil {
			t.Errorf("pod %s learns every partition: want its share by source.partitions", pod)
		}
		for _, k := range owned {
			owners[k] = append(owners[k], pod)
		}
	}
	for k := range s.StreamPartitions {
		if len(owners[k]) != 1 {
			t.Errorf("partition %d of %d is learned by %v, want exactly one pod", k, s.StreamPartitions, owners[k])
		}
	}

	// The worker must not read its own events.
	for _, d := range cfg.Outputs.Destinations() {
		if d.Dest.Kind == config.KindJetStream && subjectMatches(s.Subject, d.Dest.Topic) {
			t.Errorf("%s is %s, which source.subject %s matches: the stream would store the worker's events as examples", d.Key, d.Dest, s.Subject)
		}
	}

	// At the end of an epoch a pod holds the mixed model, every
	// partition's result and the models of its own partitions, each with
	// two copies of the weights (the averaged perceptron's), and 64 MiB
	// for the rest.
	owned := (s.StreamPartitions + replicas - 1) / replicas
	need := 2*int64(1+s.StreamPartitions+owned+1)*weightBytes(cfg) + 64<<20
	c := worker(t, o.pod(0))
	if mem, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || mem.Value() < need {
		t.Errorf("statefulset.yaml: resources.requests.memory is %s, want at least %d MiB for 2^%d weights × %d outputs and %d partitions", mem.String(), need>>20, cfg.Model.Learner.HashBits, modelOutputs(cfg), s.StreamPartitions)
	}
}

// subjectMatches reports whether the NATS subject pattern (with * and a
// final >) matches subject.
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) || (p != "*" && p != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// TestSubjectMatches: the matcher the config test relies on.
func TestSubjectMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, subject string
		want             bool
	}{
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.*", "a", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a.b", "a.b", true},
		{"a.*.c", "a.b.d", false},
		{"sensors.examples.*", "sensors.predictions", false},
	} {
		if got := subjectMatches(tc.pattern, tc.subject); got != tc.want {
			t.Errorf("subjectMatches(%q, %q) = %v, want %v", tc.pattern, tc.subject, got, tc.want)
		}
	}
}

// TestKubernetesJetStreamServiceAndBudget: the Service is headless, as a
// StatefulSet's governing Service is, and selects the StatefulSet's pods
// on the container's named port; the budget lets a drain evict one pod
// but not all.
func TestKubernetesJetStreamServiceAndBudget(t *testing.T) {
	o := readJetStream(t)
	if o.service.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("service.yaml: clusterIP is %q, want None: the StatefulSet's governing Service is headless, a DNS name for each pod", o.service.Spec.ClusterIP)
	}
	checkServiceSelects(t, "service.yaml", o.service, o.pod(0))
	checkBudget(t, "pdb.yaml", o.pdb, o.pod(0), o.replicas(t))
}

// TestKubernetesJetStreamServiceMonitor: Prometheus scrapes every pod's
// /metrics through the headless Service's named port.
func TestKubernetesJetStreamServiceMonitor(t *testing.T) {
	o := readJetStream(t)
	checkServiceMonitor(t, o.serviceMonitor, o.service)
}

// TestKubernetesJetStreamSecretKeys: every key of the Secret is one the
// API server accepts, and the pod uses it, as a variable or a file.
func TestKubernetesJetStreamSecretKeys(t *testing.T) {
	o := readJetStream(t)
	secret := secretValues(o.secret)
	c := worker(t, o.pod(0))
	used := map[string]bool{}
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil && from.SecretRef.Name == o.secret.Name {
			for k := range secret {
				used[k] = true
			}
		}
	}
	for _, e := range c.Env {
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Name == o.secret.Name {
			used[ref.SecretKeyRef.Key] = true
		}
	}
	for _, v := range o.statefulSet.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != o.secret.Name {
			continue
		}
		for k := range secret {
			used[k] = used[k] || len(v.Secret.Items) == 0
		}
		for _, it := range v.Secret.Items {
			used[it.Key] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(secret)) {
		for _, e := range validation.IsConfigMapKey(k) {
			t.Errorf("secret.yaml: key %q: %s", k, e)
		}
		if !used[k] {
			t.Errorf("secret.yaml: key %s is given to the pod neither as a variable nor as a file (statefulset.yaml)", k)
		}
	}
}
