package ray

import (
	"slices"

	"ray-service/internal/auth"
)

// Actions a caller may take on an object, as list items and details name them.
const (
	ActionStart = "start"
	ActionStop  = "stop"
	// ActionRun makes one run now (a RayCronJob's RayJob, see Kind.NewRun).
	ActionRun       = "run"
	ActionDelete    = "delete"
	ActionEdit      = "edit"
	ActionScale     = "scale"
	ActionLogs      = "logs"
	ActionDashboard = "dashboard"
)

// ActionOrder is the order actions are named in.
var ActionOrder = actionIndex[:]

// Permission is one right an action may need in the object's namespace.
type Permission uint8

// The permissions actions need: on the object's own kind (PermGet to PermDelete), on the ConfigMaps
// that hold templates, and on what logs, a dashboard and a health reason read.
const (
	PermGet Permission = iota
	PermCreate
	PermPatch
	PermUpdate
	PermDelete
	PermConfigMapGet
	PermConfigMapCreate
	PermConfigMapUpdate
	PermConfigMapDelete
	PermPodsList
	PermPodLogs
	PermServiceProxy
	PermEventsList
	// PermRunCreate is the right to create the kind's runs (Kind.Runs: a RayCronJob's RayJobs).
	PermRunCreate
	permCount
)

// Permissions is a set of permissions.
type Permissions uint16

// Of is the set of the permissions given.
func Of(ps ...Permission) Permissions {
	var set Permissions
	for _, p := range ps {
		set |= 1 << p
	}
	return set
}

// Has tells whether p is in the set.
func (s Permissions) Has(p Permission) bool { return s&(1<<p) != 0 }

// Each calls visit with each permission of the set, in order.
func (s Permissions) Each(visit func(Permission)) {
	for p := range permCount {
		if s.Has(p) {
			visit(p)
		}
	}
}

// Attributes is the access review that asks for p on objects of k in ns.
func (k *Kind) Attributes(p Permission, ns string) auth.Attributes {
	switch p {
	case PermGet, PermCreate, PermPatch, PermUpdate, PermDelete:
		return auth.Attributes{Verb: [...]string{"get", "create", "patch", "update", "delete"}[p], Group: RayGroupVersion.Group,
			Resource: k.Resource, Namespace: ns}
	case PermConfigMapGet, PermConfigMapCreate, PermConfigMapUpdate, PermConfigMapDelete:
		return auth.Attributes{Verb: [...]string{"get", "create", "update", "delete"}[p-PermConfigMapGet], Resource: "configmaps", Namespace: ns}
	case PermPodsList:
		return auth.Attributes{Verb: "list", Resource: "pods", Namespace: ns}
	case PermPodLogs:
		return auth.Attributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: ns}
	case PermServiceProxy:
		return auth.Attributes{Verb: "get", Resource: "services", Subresource: "proxy", Namespace: ns}
	case PermRunCreate:
		var runs string
		if k.Runs != nil {
			runs = k.Runs.Resource
		}
		return auth.Attributes{Verb: "create", Group: RayGroupVersion.Group, Resource: runs, Namespace: ns}
	default:
		return auth.Attributes{Verb: "list", Resource: "events", Namespace: ns}
	}
}

// Seeing is the permission a caller needs to be shown a reason read from seenOn (Health.SeenOn,
// Problem.SeenOn), and whether one is needed: none for what the object's own status says.
func Seeing(seenOn string) (Permission, bool) {
	switch seenOn {
	case SeenOnPods:
		return PermPodsList, true
	case SeenOnEvents:
		return PermEventsList, true
	}
	return 0, false
}

// Needs are the actions an object's state allows now, each with the permissions its route needs in the
// object's namespace (see Kind.Possible).
type Needs struct {
	of [len(actionIndex)]Permissions // by action, in ActionOrder; empty: the action is not possible
}

var actionIndex = [...]string{ActionStart, ActionStop, ActionRun, ActionDelete, ActionEdit, ActionScale, ActionLogs, ActionDashboard}

// Of returns the permissions an action needs, and whether the action is possible at all.
func (n *Needs) Of(action string) (Permissions, bool) {
	for i, a := range actionIndex {
		if a == action {
			return n.of[i], n.of[i] != 0
		}
	}
	return 0, false
}

// All is every permission some possible action needs.
func (n *Needs) All() Permissions {
	var all Permissions
	for _, p := range n.of {
		all |= p
	}
	return all
}

// Allowed names, in ActionOrder, the possible actions whose every permission is granted.
func (n *Needs) Allowed(granted Permissions) []string {
	out := make([]string, 0, len(n.of))
	for i, p := range n.of {
		if p != 0 && p&^granted == 0 {
			out = append(out, actionIndex[i])
		}
	}
	return out
}

func (n *Needs) set(action string, ps ...Permission) {
	n.of[slices.Index(actionIndex[:], action)] = Of(ps...) | Of(PermGet) // each route reads the object first
}

// Possible returns the actions the object's state allows now, each with the permissions its route
// needs in the object's namespace: the same rules the routes follow, so that an action named is one
// that will not be refused for a reason known beforehand (what only the apiserver or a Ray dashboard
// can tell, such as a conflicting change or a dashboard that does not answer, remains possible).
// Every action needs the right to read the object first: the object's kind, or for a template its
// ConfigMap.
func (k *Kind) Possible(s *Summary) Needs {
	var n Needs
	if s.Type == TypeTemplate {
		// Started: the object created, the template read and deleted. Edited and scaled: the template
		// updated after a server-side dry run of the object's creation.
		n.set(ActionStart, PermCreate, PermConfigMapGet, PermConfigMapDelete)
		n.set(ActionDelete, PermConfigMapGet, PermConfigMapDelete)
		n.set(ActionEdit, PermConfigMapGet, PermConfigMapUpdate, PermCreate)
		if len(s.WorkerGroups) > 0 {
			n.set(ActionScale, PermConfigMapGet, PermConfigMapUpdate, PermCreate)
		}
		// A template is read as its ConfigMap, not as the kind.
		for i := range n.of {
			if n.of[i] != 0 {
				n.of[i] = n.of[i]&^Of(PermGet) | Of(PermConfigMapGet)
			}
		}
		return n
	}
	if s.DeletingSince != nil {
		return n // being deleted: what it runs goes with it
	}
	rerun := []Permission{PermDelete, PermCreate, PermConfigMapCreate, PermConfigMapGet, PermConfigMapDelete}
	suspended := s.Status == StatusStopped || s.Status == StatusStopping
	switch {
	case s.Status == StatusStopped && k.StoppedInPlace != nil && !k.StoppedInPlace(s):
		n.set(ActionStart, rerun...) // stopped for good (a Ray job through its dashboard): it runs again from its spec
	case suspended:
		n.set(ActionStart, PermPatch)
	case k.Reruns(s.Status):
		n.set(ActionStart, rerun...)
	}
	if !suspended && !Ended(s.Status) {
		switch {
		case k.suspendDeclared():
			n.set(ActionStop, PermPatch)
		case k.StopBy == StopToTemplate:
			n.set(ActionStop, PermConfigMapCreate, PermConfigMapGet, PermConfigMapUpdate, PermDelete)
		case k.StopBy == StopViaDashboard:
			// Suspended when KubeRay allows it, else its Ray job is stopped through the dashboard after
			// checking the caller may update it: update covers both (a patch is an update).
			n.set(ActionStop, PermUpdate, PermPatch)
		case k.CanSuspend != nil:
			n.set(ActionStop, PermPatch)
		}
	}
	if k.NewRun != nil {
		n.set(ActionRun, PermRunCreate) // suspended or not, as the route does
	}
	if s.Status != StatusRunning {
		n.set(ActionDelete, PermDelete)
	}
	n.set(ActionEdit, PermUpdate)
	if len(s.WorkerGroups) > 0 {
		n.set(ActionScale, PermUpdate)
	}
	running := s.Status == StatusRunning || s.Status == StatusUpgrading || s.Status == StatusRollingBack || s.Status == StatusRetrying
	if running && !k.NoPods {
		n.set(ActionLogs, PermPodsList, PermPodLogs)
		if k.CurrentCluster(s) != "" {
			n.set(ActionDashboard, PermServiceProxy)
		}
	}
	return n
}
