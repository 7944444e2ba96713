// Package k8s is the Kubernetes side of ray-service: the registry of Ray kinds, the clients made with the
// caller's token, the watch cache behind the lists, and what each kind does differently.
package k8s

import (
	"sort"

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

// Kind is one of the Ray kinds: its names and what it does differently from the others.
type Kind struct {
	// Resource is the plural resource name used in URLs: "rayclusters".
	Resource string
	// Kind is the object kind: "RayCluster".
	Kind string
	// MaxNameLength is the longest metadata.name KubeRay accepts for the kind (it derives names from it).
	MaxNameLength int
	// clusterSpecPath is where the Ray cluster spec sits in the object.
	clusterSpecPath []string
	// status returns the normalized status of an object of this kind.
	status func(o *unstructured.Unstructured) string
	// summarize adds what only this kind has to a summary.
	summarize func(o *unstructured.Unstructured, s *Summary)
	// suspendable tells whether KubeRay can suspend the object in place (spec.suspend).
	suspendable func(o *unstructured.Unstructured) bool
	// stopMode is how an object that cannot be suspended is stopped.
	stopMode stopMode
	// rerunnable tells whether start runs a finished object again.
	rerunnable func(o *unstructured.Unstructured, status string) bool
}

// GVR is the kind's group, version and resource.
func (k *Kind) GVR() schema.GroupVersionResource { return RayGroupVersion.WithResource(k.Resource) }

// APIVersion is the apiVersion string of the kind's objects.
func (k *Kind) APIVersion() string { return RayGroupVersion.String() }

// Registry holds the kinds this service manages, by resource name.
type Registry struct {
	byResource map[string]*Kind
}

// NewRegistry returns the registry of RayCluster, RayJob and RayService.
func NewRegistry() *Registry {
	r := &Registry{byResource: map[string]*Kind{}}
	for _, k := range []*Kind{rayClusterKind(), rayJobKind(), rayServiceKind()} {
		r.byResource[k.Resource] = k
	}
	return r
}

// Lookup returns the kind with the given resource name.
func (r *Registry) Lookup(resource string) (*Kind, bool) {
	k, ok := r.byResource[resource]
	return k, ok
}

// All returns the kinds, ordered by resource name.
func (r *Registry) All() []*Kind {
	out := make([]*Kind, 0, len(r.byResource))
	for _, k := range r.byResource {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}
