package ray

import (
	"ray-service/internal/auth"
)

// Actions a caller may take on an object, as list items and details name them.
const (
	ActionStart     = "start"
	ActionStop      = "stop"
	ActionDelete    = "delete"
	ActionEdit      = "edit"
	ActionScale     = "scale"
	ActionLogs      = "logs"
	ActionDashboard = "dashboard"
)

// ActionOrder is the order actions are named in.
var ActionOrder = []string{ActionStart, ActionStop, ActionDelete, ActionEdit, ActionScale, ActionLogs, ActionDashboard}

// Possible returns the actions the object's state allows now, each with the permissions its route
// needs in the object's namespace: the same rules the routes follow, so that an action named is one
// that will not be refused for a reason known beforehand (what only the apiserver or a Ray dashboard
// can tell, such as a conflicting change or a dashboard that does not answer, remains possible).
func (k *Kind) Possible(s *Summary) map[string][]auth.Attributes {
	ray := func(verb string) auth.Attributes {
		return auth.Attributes{Verb: verb, Group: RayGroupVersion.Group, Resource: k.Resource, Namespace: s.Namespace, Name: s.Name}
	}
	cms := func(verb string) auth.Attributes {
		return auth.Attributes{Verb: verb, Resource: "configmaps", Namespace: s.Namespace}
	}
	out := map[string][]auth.Attributes{}
	if s.Type == TypeTemplate {
		// Started: the object created, the template read and deleted. Edited and scaled: the template
		// updated after a server-side dry run of the object's creation.
		out[ActionStart] = []auth.Attributes{ray("create"), cms("get"), cms("delete")}
		out[ActionDelete] = []auth.Attributes{cms("get"), cms("delete")}
		out[ActionEdit] = []auth.Attributes{cms("get"), cms("update"), ray("create")}
		if len(s.WorkerGroups) > 0 {
			out[ActionScale] = out[ActionEdit]
		}
		return withGet(out, cms("get"))
	}
	rerun := []auth.Attributes{ray("delete"), ray("create"), cms("create"), cms("get"), cms("delete")}
	suspended := s.Status == StatusStopped || s.Status == StatusStopping
	switch {
	case s.Status == StatusStopped && k.StoppedInPlace != nil && !k.StoppedInPlace(s):
		out[ActionStart] = rerun // stopped for good (a Ray job through its dashboard): it runs again from its spec
	case suspended:
		out[ActionStart] = []auth.Attributes{ray("patch")}
	case k.Reruns(s.Status):
		out[ActionStart] = rerun
	}
	if !suspended && !Ended(s.Status) {
		switch {
		case k.StopBy == StopToTemplate:
			out[ActionStop] = []auth.Attributes{cms("create"), cms("get"), cms("update"), ray("delete")}
		case k.StopBy == StopViaDashboard:
			// Suspended when KubeRay allows it, else its Ray job is stopped through the dashboard after
			// checking the caller may update it: update covers both (a patch is an update).
			out[ActionStop] = []auth.Attributes{ray("update"), ray("patch")}
		case k.CanSuspend != nil:
			out[ActionStop] = []auth.Attributes{ray("patch")}
		}
	}
	if s.Status != StatusRunning {
		out[ActionDelete] = []auth.Attributes{ray("delete")}
	}
	out[ActionEdit] = []auth.Attributes{ray("update")}
	if len(s.WorkerGroups) > 0 {
		out[ActionScale] = []auth.Attributes{ray("update")}
	}
	if s.Status == StatusRunning || s.Status == StatusUpgrading || s.Status == StatusRetrying {
		out[ActionLogs] = []auth.Attributes{{Verb: "list", Resource: "pods", Namespace: s.Namespace},
			{Verb: "get", Resource: "pods", Subresource: "log", Namespace: s.Namespace}}
		if k.CurrentCluster(s) != "" {
			out[ActionDashboard] = []auth.Attributes{{Verb: "get", Resource: "services", Subresource: "proxy", Namespace: s.Namespace}}
		}
	}
	return withGet(out, ray("get"))
}

// withGet adds to every action the right to read the object, which each route does first.
func withGet(out map[string][]auth.Attributes, get auth.Attributes) map[string][]auth.Attributes {
	for a, needs := range out {
		out[a] = append(append([]auth.Attributes{}, needs...), get)
	}
	return out
}
