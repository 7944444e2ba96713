package api

import (
	"context"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"ray-service/internal/cache"
	"ray-service/internal/queues"
	"ray-service/internal/ray"
)

// Queues lists the queue managers' queues as a caller sees them (queues.Lister).
type Queues interface {
	// List lists them; forbidden tells that the caller may not list them (then none are listed).
	List(ctx context.Context, token string) (qs []queues.Queue, forbidden bool, err error)
	// Use finds the queue name of ns that the caller may put work in, of manager or, "", of either, and
	// answers its manager (see queues.Lister.Use).
	Use(ctx context.Context, token, ns, manager, name string) (string, error)
	// Positions reads the place in line of the pending Workloads of Kueue's LocalQueue ns/name, by
	// Workload name; none where Kueue's visibility API is not served.
	Positions(ctx context.Context, token, ns, name string) (map[string]queues.Position, error)
}

// maxPositionReads bounds the LocalQueues whose visibility API one answer of the queues route reads.
const maxPositionReads = 32

// QueueList is the answer of the queues route.
type QueueList struct {
	Items []queues.Queue `json:"items"`
}

// queueList lists the queues and the Ray objects waiting in each.
//
//	@Summary		Queues
//	@ID				listQueues
//	@Description	The queues of the queue managers that admit Ray work, where the cluster has their CRDs (none
//	@Description	elsewhere): Volcano's Queues (capability, deserved, guarantee, allocated, PodGroups by phase) and
//	@Description	Kueue's LocalQueues (ClusterQueue, Workloads pending, reserving and admitted, usage by flavor, and
//	@Description	for a caller who may list ClusterQueues, the ClusterQueue's quota and use in quota),
//	@Description	read as the caller, and in each the Ray objects waiting in it (not yet admitted) among those
//	@Description	the caller may list, with a Kueue Workload's place in line where Kueue's visibility API serves it
//	@Description	(visibility.kueue.x-k8s.io/v1beta2, localqueues/pendingworkloads, read as the caller; the first 32
//	@Description	LocalQueues where objects wait). A caller who may list neither is shown, for each queue an object it may
//	@Description	list waits in, the queue's name and the objects alone, and withheld says why.
//	@Tags			overview
//	@Produce		json
//	@Security		Bearer
//	@Success		200				{object}	Envelope{data=QueueList}
//	@Failure		401,403,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/queues [get]
func (s *Server) queueList(c *gin.Context) (*response, error) {
	ctx, tok := c.Request.Context(), token(c)
	var qs []queues.Queue
	forbidden := false
	if s.Queues != nil {
		var err error
		if qs, forbidden, err = s.Queues.List(ctx, tok); err != nil {
			return nil, err
		}
	}
	waiting := map[string][]queues.Waiting{}
	for _, k := range s.Kinds.All() {
		if !s.Store.Serves(k) {
			continue
		}
		sc, err := s.rules.Visible(ctx, tok, k, "", false)
		if err != nil {
			return nil, err
		}
		items, _ := s.Store.Matching(k, sc, &cache.Query{Type: ray.TypeInstance, SortBy: cache.SortByName})
		for _, it := range items {
			sum := &it.Summary
			// The Kubernetes scheduler's gangs wait in no queue of a manager's: not listed here.
			if sch := sum.Scheduling; sum.WaitingInQueue() && sch.Manager != ray.ManagerKubernetes {
				key := queues.Key(sch.Manager, sum.Namespace, sch.Queue)
				waiting[key] = append(waiting[key], queues.Waiting{Kind: k.Kind, Namespace: sum.Namespace, Name: sum.Name,
					Group: sch.Group, Phase: sch.Phase, Reason: sch.Reason, Message: sch.Message})
			}
		}
	}
	qs = queues.WithWaiting(qs, waiting, forbidden)
	if err := s.withPositions(ctx, tok, qs); err != nil {
		return nil, err
	}
	return ok(QueueList{Items: qs}), nil
}

// withPositions adds to the objects waiting in Kueue's LocalQueues their place in line, read from Kueue's
// visibility API as the caller, for the first maxPositionReads LocalQueues where any wait.
func (s *Server) withPositions(ctx context.Context, tok string, qs []queues.Queue) error {
	reads := 0
	for i := range qs {
		q := &qs[i]
		if s.Queues == nil || q.Manager != ray.ManagerKueue || len(q.Waiting) == 0 || reads == maxPositionReads {
			continue
		}
		reads++
		pos, err := s.Queues.Positions(ctx, tok, q.Namespace, q.Name)
		if err != nil {
			return err
		}
		for j := range q.Waiting {
			if p, ok := pos[q.Waiting[j].Group]; ok {
				q.Waiting[j].Position = &p
			}
		}
	}
	return nil
}

// intoQueue puts obj, to be created in the path's namespace, in the queue the create names (parameters
// queue and queueManager) by the label its queue manager reads, once the caller may use the queue.
func (s *Server) intoQueue(c *gin.Context, r *request, obj *unstructured.Unstructured) error {
	name, manager := c.Query("queue"), c.Query("queueManager")
	managers := []string{ray.ManagerVolcano, ray.ManagerKueue}
	switch {
	case name == "" && manager == "":
		return nil
	case name == "":
		return badRequest("queueManager is given without queue")
	case manager != "" && !slices.Contains(managers, manager):
		return badRequest("queueManager %q: one of %s", manager, strings.Join(managers, ", "))
	case len(validation.IsValidLabelValue(name)) > 0:
		return badRequest("queue %q: %s", name, strings.Join(validation.IsValidLabelValue(name), "; "))
	}
	invalid := func(msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: ray.RayGroupVersion.Group, Kind: r.kind.Kind}, obj.GetName(),
			field.ErrorList{field.Invalid(field.NewPath("queue"), name, msg)})
	}
	if len(r.kind.QueueManagers) == 0 {
		return invalid("a " + r.kind.Kind + " cannot be put in a queue: KubeRay does not pass its labels to what it runs")
	}
	if manager != "" && !slices.Contains(r.kind.QueueManagers, manager) {
		return invalid("a " + r.kind.Kind + " cannot be put in a " + manager + " queue")
	}
	if s.Queues == nil {
		return invalid("the service knows of no queue manager")
	}
	found, err := s.Queues.Use(c.Request.Context(), token(c), c.Param("namespace"), manager, name)
	if err != nil {
		return err
	}
	if !slices.Contains(r.kind.QueueManagers, found) {
		return invalid("a " + r.kind.Kind + " cannot be put in a " + found + " queue")
	}
	label := queues.Label(found)
	labels := obj.GetLabels()
	if cur, ok := labels[label]; ok && cur != name {
		return apierrors.NewInvalid(schema.GroupKind{Group: ray.RayGroupVersion.Group, Kind: r.kind.Kind}, obj.GetName(),
			field.ErrorList{field.Invalid(field.NewPath("metadata", "labels").Key(label), cur, "the manifest names another queue than queue "+name)})
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[label] = name
	obj.SetLabels(labels)
	return nil
}
