package api

import (
	"context"

	"github.com/gin-gonic/gin"

	"ray-service/internal/cache"
	"ray-service/internal/queues"
	"ray-service/internal/ray"
)

// Queues lists the queue managers' queues as a caller sees them (queues.Lister).
type Queues interface {
	// List lists them; forbidden tells that the caller may not list them (then none are listed).
	List(ctx context.Context, token string) (qs []queues.Queue, forbidden bool, err error)
}

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
//	@Description	Kueue's LocalQueues (ClusterQueue, Workloads pending, reserving and admitted, usage by flavor),
//	@Description	read as the caller, and in each the Ray objects waiting in it (not yet admitted) among those
//	@Description	the caller may list. A caller who may list neither is shown, for each queue an object it may
//	@Description	list waits in, the queue's name and the objects alone, and withheld says why.
//	@Tags			overview
//	@Produce		json
//	@Security		Bearer
//	@Success		200					{object}	Envelope{data=QueueList}
//	@Failure		401,403,503,504		{object}	Envelope
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
		sc, err := s.visibleScopes(ctx, tok, k, "", false)
		if err != nil {
			return nil, err
		}
		items, _ := s.Store.Matching(k, sc, &cache.Query{Type: ray.TypeInstance, SortBy: cache.SortByName})
		for _, it := range items {
			sum := &it.Summary
			if sch := sum.Scheduling; sum.WaitingInQueue() {
				key := queues.Key(sch.Manager, sum.Namespace, sch.Queue)
				waiting[key] = append(waiting[key], queues.Waiting{Kind: k.Kind, Namespace: sum.Namespace, Name: sum.Name,
					Phase: sch.Phase, Reason: sch.Reason, Message: sch.Message})
			}
		}
	}
	return ok(QueueList{Items: queues.WithWaiting(qs, waiting, forbidden)}), nil
}
