package ray

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Health states: what a user needs to know first about an object.
const (
	// HealthHealthy: running as asked (or finished successfully).
	HealthHealthy = "Healthy"
	// HealthProgressing: on its way, nothing known to stop it.
	HealthProgressing = "Progressing"
	// HealthDegraded: something stops it from getting or staying where it should (pods that cannot be
	// scheduled, images that cannot be pulled, containers that crash, workers missing).
	HealthDegraded = "Degraded"
	// HealthFailed: it failed and will not recover by itself.
	HealthFailed = "Failed"
	// HealthStopped: stopped, suspended, or a template.
	HealthStopped = "Stopped"
)

// Health says how an object is and, when it is not Healthy, why: the reason and message of the first
// problem found, or of the condition that holds it back, and since when.
//
// A reason read from the object's pods or from Warning events is shown only to a caller who may list
// those in the namespace; anyone else is told Withheld, and which right would show it.
type Health struct {
	State   string     `json:"state" enums:"Healthy,Progressing,Degraded,Failed,Stopped" example:"Degraded"`
	Reason  string     `json:"reason,omitempty" example:"Unschedulable"`
	Message string     `json:"message,omitempty" example:"0/2 nodes are available: 2 Insufficient nvidia.com/gpu."`
	Since   *time.Time `json:"since,omitempty"`
	// seenOn is what the reason was read from (see SeenOn).
	seenOn string
}

// What a health reason or a problem was read from, besides the object's own status: the resource a
// caller must be allowed to list in the namespace to be shown it.
const (
	SeenOnPods   = "pods"
	SeenOnEvents = "events"
)

// ReasonWithheld is the health reason a caller is shown in place of one it may not see.
const ReasonWithheld = "Withheld"

// SeenOn is the resource the reason was read from (SeenOnPods, SeenOnEvents), "" for the object's own
// status: a caller who may not list it in the namespace is shown Withheld instead.
func (h Health) SeenOn() string { return h.seenOn }

// Withheld is h for a caller who may not list what its reason was read from: the state, and why the
// reason is not shown.
func (h Health) Withheld() Health {
	return Health{State: h.State, Reason: ReasonWithheld,
		Message: fmt.Sprintf("the reason was read from the object's %s, which the caller may not list in this namespace", h.seenOn)}
}

// Problem is one thing that holds an object back, and where it was seen.
type Problem struct {
	// Source is the object the problem was seen on: the object itself, or one of its pods.
	Source  InvolvedObjectRef `json:"source"`
	Reason  string            `json:"reason" example:"ImagePullBackOff"`
	Message string            `json:"message"`
	Since   *time.Time        `json:"since,omitempty"`
	// seenOn is what it was read from (see Health.SeenOn).
	seenOn string
}

// EventProblem is the problem a Warning event about source tells, last seen at since.
func EventProblem(source InvolvedObjectRef, reason, message string, since time.Time) Problem {
	return Problem{Source: source, Reason: reason, Message: message, Since: &since, seenOn: SeenOnEvents}
}

// SeenOn is the resource the problem was read from, as Health.SeenOn.
func (p Problem) SeenOn() string { return p.seenOn }

// Problems returns what holds the object back, from its own status and its pods; empty when nothing.
func (s *Summary) Problems() []Problem {
	if s.problems == nil {
		return []Problem{}
	}
	return s.problems
}

// objectSignals records what an object's own status says of its health (see Kind.SignalsOf).
func (k *Kind) objectSignals(o *unstructured.Unstructured, s *Summary) {
	if k.SignalsOf == nil {
		return
	}
	problems, waiting := k.SignalsOf(o, s, InvolvedObjectRef{Kind: k.Kind, Name: o.GetName()})
	s.problems = append(s.problems, problems...)
	if waiting != nil {
		s.waiting = waiting
	}
}

// podProblems returns what the pods say holds them back: a pod that cannot be scheduled, a container
// that cannot start or keeps crashing, one killed for memory, an evicted pod. Head pods come first.
func podProblems(pods []*corev1.Pod) []Problem {
	sorted := slices.Clone(pods)
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int {
		ha, hb := a.Labels[RayNodeTypeLabel] == NodeTypeHead, b.Labels[RayNodeTypeLabel] == NodeTypeHead
		if ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	var out []Problem
	for _, p := range sorted {
		if p.DeletionTimestamp != nil {
			continue
		}
		src := InvolvedObjectRef{Kind: "Pod", Name: p.Name}
		if p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted" {
			out = append(out, Problem{Source: src, Reason: "Evicted", Message: p.Status.Message, seenOn: SeenOnPods})
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				since := c.LastTransitionTime.UTC()
				out = append(out, Problem{Source: src, Reason: c.Reason, Message: c.Message, Since: &since, seenOn: SeenOnPods})
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			last := cs.LastTerminationState.Terminated
			switch {
			case cs.State.Waiting != nil && failingWaitReasons[cs.State.Waiting.Reason]:
				msg := fmt.Sprintf("container %s: %s", cs.Name, cmp.Or(cs.State.Waiting.Message, cs.State.Waiting.Reason))
				var since *time.Time
				if last != nil {
					msg += fmt.Sprintf("; it last ended %s with exit code %d", cmp.Or(last.Reason, "terminated"), last.ExitCode)
					t := last.FinishedAt.UTC()
					since = &t
				}
				out = append(out, Problem{Source: src, Reason: cs.State.Waiting.Reason, Message: msg, Since: since, seenOn: SeenOnPods})
			case last != nil && last.Reason == "OOMKilled" && !cs.Ready:
				t := last.FinishedAt.UTC()
				out = append(out, Problem{Source: src, Reason: "OOMKilled", seenOn: SeenOnPods,
					Message: fmt.Sprintf("container %s was killed for using more memory than its limit (exit code %d)", cs.Name, last.ExitCode), Since: &t})
			}
		}
	}
	return out
}

// deriveHealth sets the summary's health and problems from its own signals, its pods' problems and
// the Warning events about it. The events explain what is not well only: an object Healthy or Stopped by
// its status and pods is not made otherwise by an old warning, and a warning about an object still on
// its way (a pod the operator cannot create, say) makes it Degraded.
func (k *Kind) deriveHealth(s *Summary, podIssues []Problem, warnings ...Problem) {
	problems := append(slices.Clone(s.objectProblems()), podIssues...)
	if len(warnings) > 0 && s.Type == TypeInstance && (s.Status == StatusPending || s.Status == StatusRunning ||
		s.Status == StatusRetrying || s.Status == StatusUpgrading || s.Status == StatusRollingBack || s.Status == StatusFailed) {
		if s.Status != StatusRunning || len(problems) > 0 || !k.allReady(s) {
			problems = append(problems, warnings...)
		}
	}
	s.problems = problems
	first := func(state string) Health {
		if len(problems) == 0 {
			return Health{State: state, Reason: state}
		}
		return Health{State: state, Reason: problems[0].Reason, Message: problems[0].Message, Since: problems[0].Since, seenOn: problems[0].seenOn}
	}
	switch {
	case s.Type == TypeTemplate:
		s.Health = Health{State: HealthStopped, Reason: "Template", Message: "a stored manifest: start creates the object"}
	case s.Status == StatusStopped || s.Status == StatusStopping:
		s.Health = Health{State: HealthStopped, Reason: s.Status}
	case s.Status == StatusFailed:
		s.Health = first(HealthFailed)
	case s.Status == StatusSucceeded:
		s.Health = Health{State: HealthHealthy, Reason: StatusSucceeded, Since: s.EndTime}
	case len(problems) > 0:
		s.Health = first(HealthDegraded)
	case s.Status == StatusRunning:
		if ready, want := readyWorkers(s); !k.allReady(s) {
			s.Health = Health{State: HealthProgressing, Reason: "WorkersNotReady", Message: fmt.Sprintf("%d of %d workers are ready", ready, want)}
		} else {
			s.Health = Health{State: HealthHealthy, Reason: StatusRunning}
		}
	case s.waiting != nil:
		h := *s.waiting
		h.State = HealthProgressing
		s.Health = h
	default:
		s.Health = Health{State: HealthProgressing, Reason: s.Status}
	}
}

// objectProblems are the problems the object's own status names (problems without pod sources).
func (s *Summary) objectProblems() []Problem {
	var out []Problem
	for _, p := range s.problems {
		if p.Source.Kind != "Pod" {
			out = append(out, p)
		}
	}
	return out
}

// readyWorkers counts the ready workers of a summary's groups and the replicas they should have.
func readyWorkers(s *Summary) (ready, want int64) {
	for _, g := range s.WorkerGroups {
		want += g.Replicas
		ready += min(g.ReadyReplicas, g.Replicas)
	}
	return ready, want
}

// allReady tells whether every worker a Ray cluster object should have is ready (other kinds report no
// readiness of their own cluster's workers).
func (k *Kind) allReady(s *Summary) bool {
	ready, want := readyWorkers(s)
	return ready >= want || !k.IsCluster
}
