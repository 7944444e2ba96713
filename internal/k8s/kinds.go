// Package k8s is the Kubernetes side of ray-service: the Ray kinds and what each does differently, the
// objects of a kind as one caller reads and writes them, and the watch cache behind the lists.
package k8s

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RayGroupVersion is the API group and version of the KubeRay CRDs this service manages.
var RayGroupVersion = schema.GroupVersion{Group: "ray.io", Version: "v1"}

// Labels and annotations this service reads and writes.
const (
	// CreatorKey is both the annotation (exact user name) and the label (label-safe form) of the creator.
	CreatorKey = "ray.openfuyao.com/creator"
	// TemplateLabel marks a ConfigMap that holds a template manifest.
	TemplateLabel = "ray.openfuyao.com/template"
	// TemplateKindLabel names the kind of the manifest a template holds.
	TemplateKindLabel = "ray.openfuyao.com/kind"
	// RayNodeLabel is set by KubeRay on every Ray pod.
	RayNodeLabel = "ray.io/is-ray-node"
	// RayClusterLabel is set by KubeRay on every pod of a Ray cluster, naming the RayCluster.
	RayClusterLabel = "ray.io/cluster"
	// RayNodeTypeLabel is "head" or "worker" on a Ray pod.
	RayNodeTypeLabel = "ray.io/node-type"
	// RayGroupLabel names the group of a Ray pod ("headgroup" for the head).
	RayGroupLabel = "ray.io/group"
)

// Kind is one of the Ray kinds: its names, and hooks for everything it does differently from the
// others. Each kind's hooks are set in its own file (raycluster.go, rayjob.go, rayservice.go); the
// code that uses them is the same for the three kinds.
type Kind struct {
	// Resource is the plural resource name used in URLs: "rayclusters".
	Resource string
	// Kind is the object kind: "RayCluster".
	Kind string
	// MaxNameLength is the longest metadata.name KubeRay accepts for the kind (it derives names from it).
	MaxNameLength int
	// IsCluster tells that an object of this kind is a Ray cluster itself: the overview counts Ray
	// clusters and their pods by it.
	IsCluster bool

	// clusterSpecPath is where the Ray cluster spec sits in the object.
	clusterSpecPath []string
	// status returns the normalized status of an object of this kind from its own fields.
	status func(o *unstructured.Unstructured) string
	// summarize adds what only this kind has to a summary.
	summarize func(o *unstructured.Unstructured, s *Summary)
	// clusters names the Ray clusters an object runs on, from its summary: the current one first.
	clusters func(s *Summary) []string
	// headService is the head service the operator recorded in the object's status, if any.
	headService func(o *unstructured.Unstructured) string
	// failsWithHead: a head pod that cannot start makes a Pending or Running object Failed.
	failsWithHead bool
	// hasSubmitter: the object runs a submitter Job of its own name (a RayJob in K8sJobMode).
	hasSubmitter bool
	// suspendable tells whether KubeRay can suspend the object in place (spec.suspend).
	suspendable func(o *unstructured.Unstructured) bool
	// stopMode is how an object that cannot be suspended is stopped.
	stopMode stopMode
	// finishes: an object of the kind runs to an end, Succeeded or Failed, and stays there.
	finishes bool
	// rerunnable tells whether start runs an object of this status again.
	rerunnable func(status string) bool
}

// GVR is the kind's group, version and resource.
func (k *Kind) GVR() schema.GroupVersionResource { return RayGroupVersion.WithResource(k.Resource) }

// APIVersion is the apiVersion string of the kind's objects.
func (k *Kind) APIVersion() string { return RayGroupVersion.String() }

// Clusters returns the Ray clusters an object runs on, the one it runs on now first: a RayCluster
// itself, a RayJob's cluster, a RayService's active and pending clusters.
func (k *Kind) Clusters(s *Summary) []string {
	return slices.DeleteFunc(k.clusters(s), func(c string) bool { return c == "" })
}

// CurrentCluster is the Ray cluster the object runs on now, "" when it has none.
func (k *Kind) CurrentCluster(s *Summary) string {
	if c := k.Clusters(s); len(c) > 0 {
		return c[0]
	}
	return ""
}

// HeadService is the name of the head service of the cluster the object runs on now: as the operator
// recorded it, else the name KubeRay gives it. "" when the object has no cluster.
func (k *Kind) HeadService(o *unstructured.Unstructured, s *Summary) string {
	if k.headService != nil {
		if svc := k.headService(o); svc != "" {
			return svc
		}
	}
	if c := k.CurrentCluster(s); c != "" {
		return c + "-head-svc"
	}
	return ""
}

// Active tells whether an object of this status counts as active: anything but a stopped or finished
// one.
func (k *Kind) Active(status string) bool {
	return status != StatusStopped && status != StatusSucceeded && status != StatusFailed
}

// Kinds holds the Ray kinds this service manages, by resource name.
type Kinds struct {
	byResource map[string]*Kind
	all        []*Kind
}

// NewKinds returns the kinds RayCluster, RayJob and RayService.
func NewKinds() *Kinds {
	all := []*Kind{rayClusterKind(), rayJobKind(), rayServiceKind()}
	slices.SortFunc(all, func(a, b *Kind) int { return strings.Compare(a.Resource, b.Resource) })
	r := &Kinds{byResource: map[string]*Kind{}, all: all}
	for _, k := range all {
		r.byResource[k.Resource] = k
	}
	return r
}

// ByKind returns the kind of that object kind ("RayJob"), nil when it is none of them.
func (r *Kinds) ByKind(kind string) *Kind { return r.byKind(kind) }

// Lookup returns the kind with the given resource name.
func (r *Kinds) Lookup(resource string) (*Kind, bool) {
	k, ok := r.byResource[resource]
	return k, ok
}

// All returns the kinds, ordered by resource name.
func (r *Kinds) All() []*Kind { return r.all }

// Cluster returns the kind whose objects are Ray clusters (RayCluster).
func (r *Kinds) Cluster() *Kind {
	for _, k := range r.all {
		if k.IsCluster {
			return k
		}
	}
	panic("no Ray cluster kind registered")
}

// byKind returns the kind with the given object kind, or nil.
func (r *Kinds) byKind(kind string) *Kind {
	for _, k := range r.all {
		if k.Kind == kind {
			return k
		}
	}
	return nil
}
