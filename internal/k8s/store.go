package k8s

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Entry is what the watch cache keeps of one Ray object: a little metadata and its summary, computed once
// when the object arrives. The manifest itself is not kept: details are read from the apiserver.
type Entry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Summary           Summary `json:"summary"`
}

// DeepCopyObject implements runtime.Object.
func (e *Entry) DeepCopyObject() runtime.Object {
	c := *e
	e.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Summary.WorkerGroups = append([]WorkerGroup(nil), e.Summary.WorkerGroups...)
	return &c
}

const podsByClusterIndex = "rayCluster"

// Store is the watch cache behind lists and the overview: one informer per Ray kind and one for Ray pods.
type Store struct {
	kinds *Registry
	byRes map[string]cache.SharedIndexInformer
	pods  cache.SharedIndexInformer
	// templates holds the template ConfigMaps of every kind, as entries.
	templates cache.SharedIndexInformer
	start     []func(stop <-chan struct{})
}

// NewStore prepares the informers; nothing is listed until Start. The clients are the service's own.
func NewStore(dyn dynamic.Interface, core kubernetes.Interface, kinds *Registry, resync time.Duration) (*Store, error) {
	s := &Store{kinds: kinds, byRes: map[string]cache.SharedIndexInformer{}}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, resync)
	for _, k := range kinds.All() {
		inf := df.ForResource(k.GVR()).Informer()
		if err := inf.SetTransform(entryTransform(k)); err != nil {
			return nil, err
		}
		s.byRes[k.Resource] = inf
	}
	pf := informers.NewSharedInformerFactoryWithOptions(core, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = RayNodeLabel + "=yes" }))
	s.pods = pf.Core().V1().Pods().Informer()
	if err := s.pods.SetTransform(trimPod); err != nil {
		return nil, err
	}
	if err := s.pods.AddIndexers(cache.Indexers{podsByClusterIndex: func(obj interface{}) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Labels[RayClusterLabel] == "" {
			return nil, nil
		}
		return []string{p.Namespace + "/" + p.Labels[RayClusterLabel]}, nil
	}}); err != nil {
		return nil, err
	}
	tf := informers.NewSharedInformerFactoryWithOptions(core, resync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = TemplateLabel + "=true" }))
	s.templates = tf.Core().V1().ConfigMaps().Informer()
	if err := s.templates.SetTransform(templateTransform(kinds)); err != nil {
		return nil, err
	}
	s.start = []func(<-chan struct{}){df.Start, pf.Start, tf.Start}
	return s, nil
}

// Start runs the informers until ctx ends.
func (s *Store) Start(ctx context.Context) {
	for _, f := range s.start {
		f(ctx.Done())
	}
}

// HasSynced tells whether every informer has listed once.
func (s *Store) HasSynced() bool {
	if !s.pods.HasSynced() || !s.templates.HasSynced() {
		return false
	}
	for _, inf := range s.byRes {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// WaitForSync blocks until every informer has synced or ctx ends.
func (s *Store) WaitForSync(ctx context.Context) bool {
	syncs := []cache.InformerSynced{s.pods.HasSynced, s.templates.HasSynced}
	for _, inf := range s.byRes {
		syncs = append(syncs, inf.HasSynced)
	}
	return cache.WaitForCacheSync(ctx.Done(), syncs...)
}

// List returns the cached objects of a kind in a namespace ("" for all), with their summaries completed
// from the pod cache.
func (s *Store) List(k *Kind, namespace string) []*Entry {
	inf := s.byRes[k.Resource]
	var objs []interface{}
	if namespace == "" {
		objs = inf.GetStore().List()
	} else {
		objs, _ = inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	out := make([]*Entry, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*Entry); ok {
			out = append(out, s.complete(e))
		}
	}
	return out
}

// Templates returns the cached templates of a kind in a namespace ("" for all).
func (s *Store) Templates(k *Kind, namespace string) []*Entry {
	var objs []interface{}
	if namespace == "" {
		objs = s.templates.GetStore().List()
	} else {
		objs, _ = s.templates.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	out := make([]*Entry, 0, len(objs))
	for _, o := range objs {
		if e, ok := o.(*Entry); ok && e.Summary.Kind == k.Kind {
			out = append(out, e)
		}
	}
	return out
}

// TemplateNamespaces returns the namespaces that hold cached templates of a kind, sorted.
func (s *Store) TemplateNamespaces(k *Kind) []string {
	seen := map[string]bool{}
	for _, e := range s.Templates(k, "") {
		seen[e.Namespace] = true
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Get returns one cached object.
func (s *Store) Get(k *Kind, namespace, name string) (*Entry, bool) {
	e, ok := s.entry(k, namespace, name)
	if !ok {
		return nil, false
	}
	return s.complete(e), true
}

// entry returns the cached entry itself: not to be changed.
func (s *Store) entry(k *Kind, namespace, name string) (*Entry, bool) {
	o, ok, _ := s.byRes[k.Resource].GetStore().GetByKey(namespace + "/" + name)
	if !ok {
		return nil, false
	}
	e, ok := o.(*Entry)
	return e, ok
}

// Namespaces returns the namespaces that hold cached objects of a kind, sorted.
func (s *Store) Namespaces(k *Kind) []string {
	seen := map[string]bool{}
	for _, key := range s.byRes[k.Resource].GetStore().ListKeys() {
		ns, _, _ := cache.SplitMetaNamespaceKey(key)
		seen[ns] = true
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// ClusterPods returns the cached pods of one Ray cluster.
func (s *Store) ClusterPods(namespace, cluster string) []*corev1.Pod {
	objs, _ := s.pods.GetIndexer().ByIndex(podsByClusterIndex, namespace+"/"+cluster)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// Pods returns every cached Ray pod matching the selector in a namespace ("" for all).
func (s *Store) Pods(namespace string, sel labels.Selector) []*corev1.Pod {
	var objs []interface{}
	if namespace == "" {
		objs = s.pods.GetStore().List()
	} else {
		objs, _ = s.pods.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && (sel == nil || sel.Matches(labels.Set(p.Labels))) {
			out = append(out, p)
		}
	}
	return out
}

// complete returns a copy of the entry with what depends on pods filled in.
func (s *Store) complete(e *Entry) *Entry {
	c := e.DeepCopyObject().(*Entry)
	s.CompleteSummary(&c.Summary)
	return c
}

// CompleteSummary fills in what depends on the Ray cluster's pods: ready replicas per worker group, and
// Failed for a RayCluster whose head pod cannot start.
func (s *Store) CompleteSummary(sum *Summary) {
	cluster := ClusterName(sum)
	if cluster == "" {
		return
	}
	ready := map[string]int64{}
	headFailing := false
	for _, p := range s.ClusterPods(sum.Namespace, cluster) {
		if p.Labels[RayNodeTypeLabel] == "head" {
			headFailing = headFailing || podFailing(p)
			continue
		}
		if podReady(p) {
			ready[p.Labels[RayGroupLabel]]++
		}
	}
	for i := range sum.WorkerGroups {
		sum.WorkerGroups[i].ReadyReplicas = ready[sum.WorkerGroups[i].Name]
	}
	if headFailing && sum.Kind == "RayCluster" && (sum.Status == StatusPending || sum.Status == StatusRunning) {
		sum.Status = StatusFailed
	}
}

// Items returns the cached instances of k in instanceNS and its templates in templateNS (each a list of
// namespaces, "" for all), leaving out a template whose instance exists: that template is a step of a
// start or stop, and the instance is what runs.
func (s *Store) Items(k *Kind, instanceNS, templateNS []string) []Item {
	items := []Item{}
	instances := map[string]bool{}
	for _, ns := range instanceNS {
		for _, e := range s.List(k, ns) {
			items = append(items, e.Item())
			instances[e.Namespace+"/"+e.Name] = true
		}
	}
	for _, ns := range templateNS {
		for _, e := range s.Templates(k, ns) {
			if !instances[e.Namespace+"/"+e.Summary.Name] {
				items = append(items, e.Item())
			}
		}
	}
	return items
}

// Item is the entry as a list filters it.
func (e *Entry) Item() Item { return Item{Summary: e.Summary, Labels: e.Labels} }

// ClusterName is the Ray cluster an object runs on now: itself, a RayJob's cluster, or a RayService's
// active cluster.
func ClusterName(s *Summary) string {
	switch s.Kind {
	case "RayCluster":
		return s.Name
	case "RayJob":
		return s.RayClusterName
	case "RayService":
		return s.ActiveRayClusterName
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failingWaitReasons are waiting reasons from which a container does not recover by itself.
var failingWaitReasons = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

func podFailing(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && failingWaitReasons[cs.State.Waiting.Reason] {
			return true
		}
	}
	return false
}

// entryTransform turns an object from the watch into its cache entry.
func entryTransform(k *Kind) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // already an entry, or a tombstone
		}
		e := &Entry{
			TypeMeta: metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind},
			ObjectMeta: metav1.ObjectMeta{
				Name:              u.GetName(),
				Namespace:         u.GetNamespace(),
				UID:               u.GetUID(),
				ResourceVersion:   u.GetResourceVersion(),
				CreationTimestamp: u.GetCreationTimestamp(),
				DeletionTimestamp: u.GetDeletionTimestamp(),
				Labels:            u.GetLabels(),
			},
			Summary: k.Summarize(u),
		}
		return e, nil
	}
}

// templateTransform turns a template ConfigMap into an entry of its kind. A ConfigMap that is not a
// readable template of a known kind is kept as an entry without a kind, which lists never show.
func templateTransform(kinds *Registry) cache.TransformFunc {
	byKind := map[string]*Kind{}
	for _, k := range kinds.All() {
		byKind[k.Kind] = k
	}
	return func(obj interface{}) (interface{}, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return obj, nil
		}
		e := &Entry{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID,
			ResourceVersion: cm.ResourceVersion, CreationTimestamp: cm.CreationTimestamp}}
		k := byKind[cm.Labels[TemplateKindLabel]]
		if k == nil || k.templateObjectName(cm.Name) == "" {
			return e, nil
		}
		m, err := templateManifest(cm)
		if err != nil {
			return e, nil
		}
		e.TypeMeta = metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
		e.Labels = m.GetLabels()
		e.Summary = k.templateSummary(cm, m)
		return e, nil
	}
}

// trimPod keeps of a Ray pod what summaries, pod lists and the overview read.
func trimPod(obj interface{}) (interface{}, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			OwnerReferences: p.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead,
			Containers: trimContainers(p.Spec.Containers), InitContainers: trimContainers(p.Spec.InitContainers),
		},
		Status: p.Status,
	}
	return t, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// String helps in logs.
func (e *Entry) String() string { return fmt.Sprintf("%s %s/%s", e.Kind, e.Namespace, e.Name) }
