package ray

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// StopMode is how a kind is stopped when it cannot be suspended in place.
type StopMode int

const (
	// StopBySuspendOnly is the default: nothing but suspension stops it (the zero value: RayCluster).
	StopBySuspendOnly StopMode = iota
	// StopViaDashboard stops the Ray job through its cluster's Ray dashboard (RayJob).
	StopViaDashboard
	// StopToTemplate stores the manifest as a template and deletes the instance (RayService).
	StopToTemplate
)

// Suspendable tells whether KubeRay can suspend this object in place.
func (k *Kind) Suspendable(o *unstructured.Unstructured) bool {
	return k.suspendDeclared() || k.CanSuspend != nil && k.CanSuspend(o)
}

// suspendDeclared tells whether the installed CRD gave the kind a spec.suspend it lacked before.
func (k *Kind) suspendDeclared() bool { return k.SuspendDeclared != nil && k.SuspendDeclared() }

// Status is the normalized status of an instance.
func (k *Kind) Status(o *unstructured.Unstructured) string { return k.StatusOf(o) }

// Reruns tells whether a start runs an object of this status again (see Kind.RerunsFrom).
func (k *Kind) Reruns(status string) bool { return k.RerunsFrom != nil && k.RerunsFrom(status) }

// Ended tells whether a status is an end: Succeeded or Failed.
func Ended(status string) bool {
	return status == StatusSucceeded || status == StatusFailed
}

// StartVerb is the right a start needs: create for a kind started from a template, patch otherwise.
func (k *Kind) StartVerb() string {
	if k.StopBy == StopToTemplate && !k.suspendDeclared() {
		return "create"
	}
	return "patch"
}

// StopVerb is the right a stop of an instance that cannot be suspended needs: update for a Ray job stopped
// through its dashboard (see stopRayJob), delete for one stopped to a template, patch otherwise.
func (k *Kind) StopVerb() string {
	if k.suspendDeclared() {
		return "patch"
	}
	switch k.StopBy {
	case StopViaDashboard:
		return "update"
	case StopToTemplate:
		return "delete"
	}
	return "patch"
}
