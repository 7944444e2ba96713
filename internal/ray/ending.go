package ray

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Finished tells whether an object of this status has run to its end (a RayJob that Succeeded or
// Failed): what explains how it ended is read then, before KubeRay's TTL deletes anything.
func (k *Kind) Finished(status string) bool {
	return k.Finishes && (status == StatusSucceeded || status == StatusFailed)
}

// Ending is what explains how an object ended: the last events of it, its Ray clusters, their pods
// and its submitter; each pod's last state; and the tail of the log an object's logs default to (a
// RayJob's submitter, else the head).
type Ending struct {
	Events []EventInfo `json:"events,omitempty"`
	Pods   []PodEnd    `json:"pods,omitempty"`
	// PodsOmitted counts the pods left out past the history's bounds.
	PodsOmitted int      `json:"podsOmitted,omitempty"`
	Log         *LogTail `json:"log,omitempty"`
	// LogOmitted says why there is no log tail when one was to be read and could not be.
	LogOmitted string `json:"logOmitted,omitempty" example:"the log tail could not be read within 20s"`
}

// PodEnd is the last state of one pod, and how each of its containers last ended.
type PodEnd struct {
	Name       string         `json:"name"`
	NodeType   string         `json:"nodeType" example:"head"`
	Phase      string         `json:"phase" example:"Failed"`
	Containers []ContainerEnd `json:"containers"`
}

// ContainerEnd is how a container last ended (or its state, when it never did).
type ContainerEnd struct {
	Name     string `json:"name"`
	Restarts int32  `json:"restarts"`
	// State is running, waiting or terminated.
	State      string     `json:"state"`
	ExitCode   *int32     `json:"exitCode,omitempty"`
	Reason     string     `json:"reason,omitempty" example:"OOMKilled"`
	Message    string     `json:"message,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// LogTail is the end of one container's log.
type LogTail struct {
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Text      string `json:"text"`
	// Truncated tells that the log was longer than what was kept.
	Truncated bool `json:"truncated"`
}

// EndingLimits bound what an Ending keeps, and how long its log tail is read for.
type EndingLimits struct {
	Events   int
	LogLines int64
	LogBytes int64
	// LogTimeout bounds the reading of the log tail (0: 20 s); at most 4 times LogBytes is read.
	LogTimeout time.Duration
}

// PodEndOf is how pod p ended: its node type, phase and each container's last state.
func PodEndOf(p *corev1.Pod) PodEnd {
	out := PodEnd{Name: p.Name, NodeType: nodeType(p), Phase: string(p.Status.Phase), Containers: []ContainerEnd{}}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		c := ContainerEnd{Name: cs.Name, Restarts: cs.RestartCount, State: "waiting"}
		term := cs.State.Terminated
		switch {
		case term != nil:
			c.State = "terminated"
		case cs.State.Running != nil:
			c.State = "running"
			term = cs.LastTerminationState.Terminated
		default:
			term = cs.LastTerminationState.Terminated
			if cs.State.Waiting != nil {
				c.Reason, c.Message = cs.State.Waiting.Reason, cs.State.Waiting.Message
			}
		}
		if term != nil {
			code := term.ExitCode
			c.ExitCode, c.Reason, c.Message = &code, term.Reason, term.Message
			if !term.FinishedAt.IsZero() {
				t := term.FinishedAt.UTC()
				c.FinishedAt = &t
			}
		}
		out.Containers = append(out.Containers, c)
	}
	return out
}
