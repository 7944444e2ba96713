package ray

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Volcano gang scheduling, as KubeRay v1.6 hands a Ray cluster to it (operator flag
// --batch-scheduler=volcano; controllers/ray/batchscheduler/volcano/volcano_scheduler.go): one PodGroup
// (scheduling.volcano.sh/v1beta1, volcano.sh/apis v1.13.0 pkg/apis/scheduling/v1beta1/types.go) per
// RayCluster, or per RayJob for the cluster it makes, named ray-<name>-pg, owned by that object, its
// queue from the object's label volcano.sh/queue-name. Volcano's scheduler writes its phase (Pending,
// Inqueue, Running, Unknown, Completed) and, while the group cannot be placed, an Unschedulable
// condition saying why.
const (
	// ManagerVolcano names Volcano as the queue manager of a Ray object.
	ManagerVolcano = "volcano"
	// VolcanoQueueLabel is the label that puts a Ray object in a Volcano queue.
	VolcanoQueueLabel = "volcano.sh/queue-name"
	// ReasonWaitingInQueue is the health reason of an object a queue manager has not admitted yet.
	ReasonWaitingInQueue = "WaitingInQueue"
)

// PodGroupResource is the resource of Volcano's PodGroups.
func PodGroupResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
}

// Scheduling is where a Ray object stands with the queue manager that admits it.
type Scheduling struct {
	// Manager is the queue manager: volcano, kueue, or kubernetes (the Kubernetes scheduler placing the
	// Ray cluster's pods as one gang, through a scheduling.k8s.io PodGroup; no queue).
	Manager string `json:"manager" enums:"volcano,kueue,kubernetes"`
	// Queue is the queue it waits or runs in (Volcano's Queue, Kueue's LocalQueue; none for kubernetes),
	// cut to 253 bytes.
	Queue string `json:"queue"`
	// ClusterQueue is the Kueue ClusterQueue that admitted it, cut to 253 bytes.
	ClusterQueue string `json:"clusterQueue,omitempty"`
	// Group is Volcano's PodGroup, Kueue's Workload, or the Kubernetes PodGroup of it.
	Group string `json:"group,omitempty"`
	// Phase is the Volcano PodGroup's (Pending, Inqueue, Running, Unknown, Completed), the Workload's
	// (Pending, QuotaReserved, Admitted, Finished), or the Kubernetes PodGroup's (Pending, Scheduled).
	Phase string `json:"phase"`
	// Reason and Message say why it is held back (Volcano's Unschedulable condition; Kueue's
	// QuotaReserved condition, or the eviction that sent it back; the Kubernetes scheduler's
	// PodGroupInitiallyScheduled condition, reason Unschedulable or SchedulerError), cut to 128 and 1024
	// bytes; Since is when that condition began.
	Reason  string     `json:"reason,omitempty" example:"NotEnoughResources"`
	Message string     `json:"message,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	// MinMember is how many pods must be placed at once (Volcano's minMember, the Kubernetes gang's
	// minCount); Running how many run (Volcano).
	MinMember int64 `json:"minMember,omitempty"`
	Running   int64 `json:"running,omitempty"`
}

// Waiting tells whether the manager holds the object back: its group not yet running (Pending or
// Inqueue) and the manager saying why (Volcano's Unschedulable condition, the Kubernetes scheduler's
// PodGroupInitiallyScheduled one). A group KubeRay has just made is Pending before the scheduler looks at
// it, which says nothing yet.
func (s *Scheduling) Waiting() bool {
	return s != nil && (s.Phase == "Pending" || s.Phase == "Inqueue") && s.Reason != ""
}

// GroupOwner names the Ray object a queue manager's group (a Volcano PodGroup, a Kueue Workload) belongs
// to, its controller: kind and name; "" when it belongs to none.
func GroupOwner(g *unstructured.Unstructured) (kind, name string) {
	for _, ref := range g.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.APIVersion == RayGroupVersion.String() {
			return ref.Kind, ref.Name
		}
	}
	return "", ""
}

// PodGroupState reads where a PodGroup stands.
func PodGroupState(pg *unstructured.Unstructured) *Scheduling {
	s := &Scheduling{Manager: ManagerVolcano, Group: pg.GetName()}
	s.Queue, _, _ = unstructured.NestedString(pg.Object, "spec", "queue")
	s.Queue = Clip(s.Queue, MaxNameBytes)
	s.Phase, _, _ = unstructured.NestedString(pg.Object, "status", "phase")
	s.Phase = Clip(s.Phase, MaxWordBytes)
	s.MinMember, _ = nestedInt(pg.Object, "spec", "minMember")
	s.Running, _ = nestedInt(pg.Object, "status", "running")
	for _, c := range nestedSlice(pg.Object, "status", "conditions") {
		cm, _ := c.(map[string]any)
		if cm["type"] != "Unschedulable" || cm["status"] != "True" {
			continue
		}
		s.heldBy(cm)
	}
	return s
}

// heldBy says why the manager holds the object back from the condition that says so (Volcano's
// Unschedulable, Kueue's QuotaReserved or eviction, the Kubernetes scheduler's PodGroup verdict): its
// reason and message, cut to 128 and 1024 bytes, and when it began.
func (s *Scheduling) heldBy(cond map[string]any) {
	s.Reason, _ = cond["reason"].(string)
	s.Message, _ = cond["message"].(string)
	s.Reason, s.Message = Clip(s.Reason, MaxWordBytes), Clip(s.Message, MaxMessageBytes)
	if at, _ := cond["lastTransitionTime"].(string); at != "" {
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			s.Since = &t
		}
	}
}

// WithScheduling returns the summary completed by where the object stands with its queue manager
// (nil: none manages it): the state in the summary, and while the manager has not admitted an object
// on its way, the health says it waits in the queue and why, rather than a bare Pending or the
// unschedulable pods the manager holds back.
func (k *Kind) WithScheduling(base *Summary, sched *Scheduling) *Summary {
	if sched == nil {
		return base
	}
	s := *base
	s.Scheduling = sched
	// Kueue keeps an object it has not admitted suspended: Stopping, then Stopped by its status, waiting all
	// the same.
	onItsWay := s.Type == TypeInstance && (s.Status == StatusPending || (s.Status == StatusRunning && !k.allReady(&s)) ||
		(sched.Manager == ManagerKueue && (s.Status == StatusStopped || s.Status == StatusStopping)))
	if sched.Waiting() && onItsWay && s.Health.State != HealthFailed {
		msg := fmt.Sprintf("waiting in %s queue %s", sched.Manager, sched.Queue)
		if sched.Manager == ManagerKubernetes {
			msg = fmt.Sprintf("waiting for kubernetes to place its %d pods at once (PodGroup %s)", sched.MinMember, sched.Group)
		}
		if sched.Message != "" {
			msg += ": " + sched.Message
		}
		s.Health = Health{State: HealthProgressing, Reason: ReasonWaitingInQueue, Message: msg, Since: sched.Since}
	}
	s.bound()
	return &s
}

// WaitingInQueue tells whether a queue manager holds the object back now, as its health says.
func (s *Summary) WaitingInQueue() bool {
	return s.Scheduling != nil && s.Health.Reason == ReasonWaitingInQueue
}

// Queued says that a start put an object in its queue manager's queue rather than started it: it runs
// once the manager admits it.
type Queued struct {
	Manager string `json:"manager" enums:"volcano,kueue"`
	Queue   string `json:"queue"`
	// Message says so in words.
	Message string `json:"message" example:"queued in kueue queue team: it runs once kueue admits it"`
}

// QueuedByStart tells of an object just started, by its labels and where it stands with its queue
// manager (sched, nil when not known yet), whether the manager rather than the start decides when it
// runs: the queue its label names (Kueue's first: Kueue keeps it suspended until admitted), unless the
// manager has admitted it (a Workload Admitted, a PodGroup Running).
func QueuedByStart(labels map[string]string, sched *Scheduling) *Queued {
	for _, m := range []struct{ manager, label, admitted string }{
		{ManagerKueue, KueueQueueLabel, "Admitted"}, {ManagerVolcano, VolcanoQueueLabel, "Running"},
	} {
		queue := labels[m.label]
		if queue == "" {
			continue
		}
		if sched != nil && sched.Manager == m.manager && sched.Phase == m.admitted {
			return nil
		}
		queue = Clip(queue, MaxNameBytes)
		return &Queued{Manager: m.manager, Queue: queue,
			Message: fmt.Sprintf("queued in %s queue %s: it runs once %s admits it", m.manager, queue, m.manager)}
	}
	return nil
}

// managerOrder ranks the managers of one object when several have a group of it: the gang a Ray cluster
// asked for by its label, then the queue Kueue admits it from, then Volcano's (a KubeRay run with
// --batch-scheduler=volcano makes a Volcano PodGroup for every object, asked for or not).
var managerOrder = []string{ManagerKubernetes, ManagerKueue, ManagerVolcano}

// PickScheduling chooses, of the groups the managers keep of one object (by manager), the one that
// says where it stands: one that holds it back, else the first by managerOrder; nil when none.
func PickScheduling(byManager map[string]*Scheduling) *Scheduling {
	var first *Scheduling
	for _, m := range managerOrder {
		s := byManager[m]
		if s == nil {
			continue
		}
		if s.Waiting() {
			return s
		}
		if first == nil {
			first = s
		}
	}
	return first
}

// OwnGroup tells whether the group is the object's own (name) rather than that of the Ray cluster it
// runs on: KubeRay names a Volcano PodGroup ray-<owner>-pg and a Kubernetes PodGroup <cluster>-cluster;
// Kueue makes a Workload for the object it admits alone.
func (s *Scheduling) OwnGroup(name string) bool {
	switch s.Manager {
	case ManagerKueue:
		return true
	case ManagerKubernetes:
		return s.Group == GangPodGroupName(name)
	}
	return s.Group == "ray-"+name+"-pg"
}
