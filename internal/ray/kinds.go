// Package ray holds what a Ray kind is and everything a kind decides: its status, summary, health,
// allowed actions, what a template holds, scaling rules, pods, events and endings. It makes no calls and
// holds no key: the watch cache (package cache), the caller's operations against the apiserver (package
// k8s) and the API build on it, and package signing signs the creators and templates it describes.
package ray

import (
	"fmt"
	"ray-service/internal/accel"
	"slices"
	"strings"
	"time"

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
	// OriginatedFromCRDLabel names the kind that made a RayCluster (RayJob, RayService), where one did.
	OriginatedFromCRDLabel = "ray.io/originated-from-crd"
	// OriginatedFromCRNameLabel names the object that made a RayCluster (KubeRay ray-operator/controllers/
	// ray/utils/constant.go, v1.5-v1.6).
	OriginatedFromCRNameLabel = "ray.io/originated-from-cr-name"
	// RayNodeTypeLabel is "head" or "worker" on a Ray pod.
	RayNodeTypeLabel = "ray.io/node-type"
	// RayGroupLabel names the group of a Ray pod ("headgroup" for the head).
	RayGroupLabel = "ray.io/group"
)

// Kind is one of the Ray kinds: its names, and everything it does differently from the others. The
// code that reads, summarizes, starts, stops, scales and lists objects is the same for every kind and
// asks the kind through these fields; a kind says them in its own file (raycluster.go, rayjob.go,
// rayservice.go) and nowhere else. A field marked required must be set (NewKinds checks it); every
// other field has the default its comment names when the kind leaves it out.
type Kind struct {
	// Resource (required) is the plural resource name used in URLs: "rayclusters".
	Resource string
	// Kind (required) is the object kind: "RayCluster".
	Kind string
	// MaxNameLength (required) is the longest metadata.name KubeRay accepts for the kind: it derives
	// the names of clusters, pods and services from it.
	MaxNameLength int
	// ClusterSpecPath (required) is where the Ray cluster spec sits in an object: ["spec"] for a
	// RayCluster, ["spec", "rayClusterSpec"] for a RayJob. Summaries, scaling and the dashboard's port
	// read it there.
	ClusterSpecPath []string
	// StatusOf (required) is the normalized status (Status*) of an object, from its own fields.
	StatusOf func(o *unstructured.Unstructured) string
	// ClustersOf (required) names the Ray clusters an object runs on, from its summary: the current one
	// first; empty names are dropped.
	ClustersOf func(s *Summary) []string

	// Makes names the Ray clusters an object's status says KubeRay made for it: a cluster that claims
	// the object as its maker (MadeBy) is counted to it only where this names it too. Default: none.
	Makes func(o *unstructured.Unstructured) []string

	// IsCluster tells that an object of the kind is a Ray cluster itself: the overview counts Ray
	// clusters and their pods by it. Default: false.
	IsCluster bool
	// SummarizeOwn adds what only this kind has to a summary. Default: the summary holds what every
	// kind has (names, cluster spec, status, requests).
	SummarizeOwn func(o *unstructured.Unstructured, s *Summary)
	// SignalsOf reads what an object's own status says of its health: the problems it reports (source
	// self) and, while it is not ready, why it waits. Default: none; the health comes from the status
	// and the pods alone.
	SignalsOf func(o *unstructured.Unstructured, s *Summary, self InvolvedObjectRef) (problems []Problem, waiting *Health)
	// RecordedHeadService is the head service the operator recorded in an object's status. Default, and
	// when it answers "": the name KubeRay gives it, <current cluster>-head-svc.
	RecordedHeadService func(o *unstructured.Unstructured) string
	// FailsWithHead: a head pod that cannot start makes a Pending or Running object Failed. Default:
	// false.
	FailsWithHead bool
	// HasSubmitter: an object runs a submitter Job of its own name (a RayJob in K8sJobMode), whose pods
	// and events are the object's too. Default: false.
	HasSubmitter bool
	// CanSuspend tells whether KubeRay can suspend an object in place (spec.suspend). Default: never;
	// a kind that cannot is created stopped as a template.
	CanSuspend func(o *unstructured.Unstructured) bool
	// SuspendDeclared tells, of a kind whose CRD gained spec.suspend in a KubeRay version (RayService,
	// v1.7), whether the installed CRD declares it: then its objects are suspended in place, and StopBy
	// is how it is stopped on an older KubeRay. Default: CanSuspend alone decides.
	SuspendDeclared func() bool
	// StopBy is how an object that cannot be suspended in place is stopped. Default: StopBySuspendOnly.
	StopBy StopMode
	// StoppedInPlace tells of a Stopped object whether it is suspended (a start resumes it) rather than
	// stopped for good (a start runs it again from its spec). Default: always suspended.
	StoppedInPlace func(s *Summary) bool
	// Finishes: an object of the kind runs to an end, Succeeded or Failed, and stays there. Default:
	// false.
	Finishes bool
	// RerunsFrom tells whether a start runs an object of this status again. Default: never.
	RerunsFrom func(status string) bool
	// Runs: objects of the kind make objects of another kind to run (a RayCronJob's RayJobs), named by
	// a label; NewRun makes one from an object's template now, with the suffix of its name. Default:
	// none.
	Runs   *Runs
	NewRun func(o *unstructured.Unstructured, now time.Time, suffix string) *unstructured.Unstructured
	// QueueManagers are the queue managers (ManagerVolcano, ManagerKueue) that take an object of the
	// kind into one of their queues by its label (VolcanoQueueLabel, KueueQueueLabel): KubeRay or the
	// manager reads the label on the object or on the cluster KubeRay makes of it. Default: none.
	QueueManagers []string
	// Notice is the notification a change of an object's status from prev to next makes for the
	// subscribers ("job.succeeded"; "" for none). Default: none.
	Notice func(prev, next string) string
	// NoPods: an object of the kind runs no pods of its own (a RayCronJob: its runs are RayJobs), so it
	// has no logs. Default: false.
	NoPods bool
	// AtAnswer completes a summary copied for an answer with what changes with time alone (and so is
	// not cached), given the time of the answer; it replaces, never changes, what the summary points to.
	// Default: nothing.
	AtAnswer func(s *Summary, now time.Time)
	// Optional: the kind is served only where the cluster has its CRD (a newer KubeRay's kind, behind
	// a feature gate); elsewhere its paths answer 404 saying so. Default: false, the CRD is required.
	Optional bool
	// Requires names what the cluster needs for an optional kind, for that 404.
	Requires string

	// devices is what the cluster's nodes say of their devices (set by NewKinds for every kind).
	devices *accel.Catalog
}

// check panics when a kind leaves out a field it must say: a kind is a fixed part of the service, and
// one that is incomplete is a programming error found by the first test that builds the kinds.
func (k *Kind) check() {
	missing := []string{}
	for name, unset := range map[string]bool{"Resource": k.Resource == "", "Kind": k.Kind == "", "MaxNameLength": k.MaxNameLength <= 0,
		"ClusterSpecPath": len(k.ClusterSpecPath) == 0, "StatusOf": k.StatusOf == nil, "ClustersOf": k.ClustersOf == nil} {
		if unset {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		panic(fmt.Sprintf("ray kind %q: %s not set", k.Kind, strings.Join(missing, ", ")))
	}
}

// GVR is the kind's group, version and resource.
func (k *Kind) GVR() schema.GroupVersionResource { return RayGroupVersion.WithResource(k.Resource) }

// APIVersion is the apiVersion string of the kind's objects.
func (k *Kind) APIVersion() string { return RayGroupVersion.String() }

// Clusters returns the Ray clusters an object runs on, the one it runs on now first: a RayCluster
// itself, a RayJob's cluster, a RayService's active and pending clusters.
func (k *Kind) Clusters(s *Summary) []string {
	return slices.DeleteFunc(k.ClustersOf(s), func(c string) bool { return c == "" })
}

// MadeClusters are the Ray clusters o's status says KubeRay made for it (Makes); empty names are
// dropped.
func (k *Kind) MadeClusters(o *unstructured.Unstructured) []string {
	if k.Makes == nil {
		return nil
	}
	return slices.DeleteFunc(k.Makes(o), func(c string) bool { return c == "" })
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
	if k.RecordedHeadService != nil {
		if svc := k.RecordedHeadService(o); svc != "" {
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

// Runs names the runs an object makes: the resource of their kind, and the label on each that names
// the object.
type Runs struct {
	Resource, Label string
}

// Kinds holds the Ray kinds this service manages, by resource name.
type Kinds struct {
	byResource map[string]*Kind
	all        []*Kind
	declared   *Declared
	devices    *accel.Catalog
}

// NewKinds returns the kinds RayCluster, RayJob, RayService and RayCronJob (optional).
func NewKinds() *Kinds {
	declared := &Declared{}
	all := []*Kind{rayClusterKind(), rayJobKind(), rayServiceKind(declared), rayCronJobKind(declared)}
	slices.SortFunc(all, func(a, b *Kind) int { return strings.Compare(a.Resource, b.Resource) })
	r := &Kinds{byResource: map[string]*Kind{}, all: all, declared: declared, devices: accel.NewCatalog()}
	for _, k := range all {
		k.check()
		k.devices = r.devices
		r.byResource[k.Resource] = k
	}
	return r
}

// ByKind returns the kind of that object kind ("RayJob"), nil when it is none of them.
func (r *Kinds) ByKind(kind string) *Kind {
	for _, k := range r.all {
		if k.Kind == kind {
			return k
		}
	}
	return nil
}

// Lookup returns the kind with the given resource name.
func (r *Kinds) Lookup(resource string) (*Kind, bool) {
	k, ok := r.byResource[resource]
	return k, ok
}

// Declared is what the installed CRDs declare of the fields KubeRay versions added, which the kinds
// read (package cache learns it).
func (r *Kinds) Declared() *Declared { return r.declared }

// Devices is what the cluster's nodes say of their devices, which summaries count slices by (package
// cache keeps it).
func (r *Kinds) Devices() *accel.Catalog { return r.devices }

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

// DefaultDashboardPort is the Ray dashboard's port when the head container names none "dashboard".
const DefaultDashboardPort = 8265

// DashboardPort is the port of the Ray dashboard of object o's head: the head container's port named
// "dashboard", else DefaultDashboardPort.
func (k *Kind) DashboardPort(o *unstructured.Unstructured) int64 {
	port := int64(DefaultDashboardPort)
	containers := nestedSlice(o.Object, append(slices.Clone(k.ClusterSpecPath), "headGroupSpec", "template", "spec", "containers")...)
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		ports := nestedSlice(cm, "ports")
		for _, p := range ports {
			pm, _ := p.(map[string]any)
			if pm["name"] == "dashboard" {
				if n, ok := nestedInt(pm, "containerPort"); ok {
					port = n
				}
			}
		}
	}
	return port
}

// KindCount counts the objects of a kind: all of them (templates too), and those active (not Stopped,
// Succeeded or Failed).
type KindCount struct {
	Total  int `json:"total"`
	Active int `json:"active"`
	// RunsActive counts, for a kind that makes runs (RayCronJob), the runs of the objects counted that
	// are active now (their RayJobs not stopped or ended); absent for other kinds.
	RunsActive *int `json:"runsActive,omitempty"`
}
