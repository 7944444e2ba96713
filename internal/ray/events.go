package ray

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// EventInfo is one Kubernetes event.
type EventInfo struct {
	Type           string            `json:"type" example:"Warning"`
	Reason         string            `json:"reason" example:"FailedScheduling"`
	Message        string            `json:"message"`
	Count          int32             `json:"count"`
	FirstTime      *time.Time        `json:"firstTime,omitempty"`
	LastTime       *time.Time        `json:"lastTime,omitempty"`
	InvolvedObject InvolvedObjectRef `json:"involvedObject"`
}

// InvolvedObjectRef names what an event is about.
type InvolvedObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// EventRefs names, each once, the objects whose events are those of the object name of k: itself, the
// Ray clusters it runs on, the named pods and its submitter Job.
func (k *Kind) EventRefs(name string, clusters, pods []string) []InvolvedObjectRef {
	refs := make([]InvolvedObjectRef, 0, 2+len(clusters)+len(pods))
	add := func(kind, name string) {
		ref := InvolvedObjectRef{Kind: kind, Name: name}
		if !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	add(k.Kind, name)
	for _, c := range clusters {
		add(ClusterKind, c)
	}
	for _, p := range pods {
		add("Pod", p)
	}
	if k.HasSubmitter {
		add("Job", name)
	}
	return refs
}

// EventsOf returns those of events that concern the object name of k (see EventRefs), newest first.
func (k *Kind) EventsOf(name string, clusters, pods []string, events []corev1.Event) []EventInfo {
	want := map[InvolvedObjectRef]bool{}
	for _, ref := range k.EventRefs(name, clusters, pods) {
		want[ref] = true
	}
	out := []EventInfo{}
	for _, e := range events {
		ref := InvolvedObjectRef{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name}
		if !want[ref] {
			continue
		}
		info := EventInfo{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, InvolvedObject: ref}
		first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.IsZero() {
			last = e.CreationTimestamp.Time
		}
		if first.IsZero() {
			first = last
		}
		if info.Count == 0 {
			info.Count = 1
		}
		first, last = first.UTC(), last.UTC()
		info.FirstTime, info.LastTime = &first, &last
		out = append(out, info)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTime.After(*out[j].LastTime) })
	return out
}

// WarningSources visits the objects whose Warning events tell about object s of kind k: the object
// itself, the Ray clusters it runs on and the pods given (those of its current cluster). A visit, not
// a slice: the cache asks it for every object it publishes.
func (k *Kind) WarningSources(s *Summary, pods []*corev1.Pod, visit func(InvolvedObjectRef)) {
	visit(InvolvedObjectRef{Kind: k.Kind, Name: s.Name})
	for _, c := range k.ClustersOf(s) {
		if c != "" && (!k.IsCluster || c != s.Name) {
			visit(InvolvedObjectRef{Kind: ClusterKind, Name: c})
		}
	}
	for _, p := range pods {
		visit(InvolvedObjectRef{Kind: "Pod", Name: p.Name})
	}
}
