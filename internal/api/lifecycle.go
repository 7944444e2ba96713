package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"ray-service/internal/ray"
	"ray-service/internal/writes"
)

// MaxBatchItems is the most items one batch delete takes.
const MaxBatchItems = 100

// batchInParallel bounds the deletes of one batch that run at once.
const batchInParallel = 8

// start starts an object.
//
//	@Summary		Start
//	@ID				startObject
//	@Description	Starts the object; starting what already runs returns 200 and changes nothing, and is not recorded in
//	@Description	the audit trail. Nothing to do still needs the right to do it, as a patch that changes nothing does:
//	@Description	patch on the kind (create for a RayService kept as a template), else 403.
//	@Description	RayCluster: spec.suspend=false. RayJob: a suspended job resumes, a template is created, a finished
//	@Description	job (Succeeded, Failed, Stopped) runs again: it is re-created from its spec under the same name.
//	@Description	RayService: where the installed CRD declares spec.suspend (KubeRay v1.7), spec.suspend=false;
//	@Description	a template (KubeRay v1.5, v1.6) is created. A template is removed once its object exists; if a start is
//	@Description	interrupted, starting again completes it. Answers the object as it is afterwards. Templates are
//	@Description	trusted only as the service signed them: a ConfigMap of a template's name that the service did
//	@Description	not write, or that was changed since, is 409 and is never followed; what a template creates is
//	@Description	always the kind, namespace and name of the path. An object in a Kueue or Volcano queue (its label
//	@Description	kueue.x-k8s.io/queue-name or volcano.sh/queue-name) is handed to its queue manager, and runs once
//	@Description	admitted: the answer's queued says so, unless the manager admitted it already. Kueue's objects are
//	@Description	started as Kueue documents, by activating their Workload (spec.active), never by spec.suspend,
//	@Description	which Kueue owns: 409 until Kueue made the Workload.
//	@Tags			lifecycle
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409,422	{object}	Envelope
//	@Failure		503,504					{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/start [post]
func (s *Server) start(c *gin.Context) (*response, error) {
	return s.lifecycle(c, (*writes.Path[Detail]).Start)
}

// stop stops an object.
//
//	@Summary		Stop
//	@ID				stopObject
//	@Description	Stops the object; stopping what is stopped (or stopping) returns 200 and changes nothing, and is not
//	@Description	recorded in the audit trail. Nothing to do still needs the right to do it: patch on the kind where
//	@Description	KubeRay suspends it, update for a RayJob stopped through its dashboard, delete for a RayService kept
//	@Description	as a template; else 403.
//	@Description	RayCluster: spec.suspend=true. RayJob: spec.suspend=true where KubeRay allows it
//	@Description	(shutdownAfterJobFinishes true, no clusterSelector); otherwise its Ray job is stopped through the
//	@Description	cluster's Ray dashboard, for callers allowed to update the RayJob, with the cluster's token where it
//	@Description	takes one (from the Secret KubeRay made for it, which the caller may get; else 409). The dashboard's
//	@Description	answer is not passed on: a refusal is 503 naming its status only, and a redirect is not followed
//	@Description	(503 naming it). A dashboard that requires a token where the cluster spec sets no authOptions
//	@Description	(Ray's token authentication, on by default from Ray 2.61) is 409 saying so and what to set (the
//	@Description	authOptions field, in details). RayService: where the installed CRD declares spec.suspend
//	@Description	(KubeRay v1.7), spec.suspend=true, the object kept, Stopping until KubeRay says Suspended; on
//	@Description	KubeRay v1.5 and v1.6, the manifest is stored as a template, then the instance is deleted. A finished RayJob is 409, as is a job not yet submitted,
//	@Description	and a ConfigMap of the template's name that the service did not write (it is never adopted), and an
//	@Description	object being deleted (its finalizers not yet done): it stays deleted.
//	@Tags			lifecycle
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name				path		string	true	"name"
//	@Success		200					{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409	{object}	Envelope
//	@Failure		503,504				{object}	Envelope	"503: the Ray dashboard is unreachable, refused (its status) or redirected"
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/stop [post]
func (s *Server) stop(c *gin.Context) (*response, error) {
	return s.lifecycle(c, (*writes.Path[Detail]).Stop)
}

// lifecycle answers a start or a stop of the path's object, op, made through the write path.
func (s *Server) lifecycle(c *gin.Context, op func(*writes.Path[Detail], context.Context, string, string) (Detail, error)) (*response, error) {
	d, err := op(s.writePath(c, req(c)), c.Request.Context(), c.Param("namespace"), c.Param("name"))
	if err != nil {
		return nil, err
	}
	return ok(d), nil
}

// BatchDeleteRequest names the objects to delete.
type BatchDeleteRequest struct {
	Items []BatchItem `json:"items"`
	// Force deletes Running objects too.
	Force bool `json:"force"`
}

// BatchItem is one object of a batch delete.
type BatchItem struct {
	Namespace string `json:"namespace" example:"default"`
	Name      string `json:"name" example:"raycluster-demo"`
}

// BatchResult is the outcome for one item: code and msg as a single delete would answer.
type BatchResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Code      int    `json:"code" example:"200"`
	Msg       string `json:"msg" example:"OK"`
	Reason    string `json:"reason,omitempty" example:"Conflict"`
	// Deleting: the object is still there, being deleted until its finalizers are done (see the
	// single delete).
	Deleting bool `json:"deleting,omitempty"`
}

// batchDelete deletes many objects of a kind.
//
//	@Summary		Batch delete
//	@ID				batchDeleteObjects
//	@Description	Deletes up to 100 objects of a kind, each as a single delete would (Running ones only with force).
//	@Description	One item's failure does not stop the others: the answer is 200 with one result per item, in the
//	@Description	order given. Duplicate items are deleted once and answered for each. An item still being
//	@Description	deleted when answered (finalizers) says deleting.
//	@Tags			lifecycle
//	@Accept			json
//	@Produce		json
//	@Security		Bearer
//	@Param			kind				path		string				true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			body				body		BatchDeleteRequest	true	"what to delete"
//	@Success		200					{object}	Envelope{data=[]BatchResult}
//	@Failure		400,401,404,413,415	{object}	Envelope
//	@Router			/rest/ray/v1/{kind}/batch-delete [post]
func (s *Server) batchDelete(c *gin.Context) (*response, error) {
	batch, err := readBatch(c)
	if err != nil {
		return nil, err
	}
	// Duplicate items are deleted once and answered for each.
	var items []writes.Item
	outcome := map[BatchItem]*BatchResult{}
	for _, it := range batch.Items {
		if outcome[it] == nil {
			outcome[it] = &BatchResult{Namespace: it.Namespace, Name: it.Name, Code: http.StatusOK, Msg: http.StatusText(http.StatusOK)}
			items = append(items, writes.Item{Namespace: it.Namespace, Name: it.Name})
		}
	}
	pending, errs := s.writePath(c, req(c)).DeleteEach(c.Request.Context(), items, batch.Force, batchInParallel)
	for i, it := range items {
		s.Store.ForgetManifest(req(c).kind, it.Namespace, it.Name)
		if errs[i] == nil {
			outcome[BatchItem(it)].Deleting = pending[i]
			continue
		}
		env, internal := errorEnvelope(errs[i])
		if internal {
			logger(c).Error("batch delete item failed", zap.Error(errs[i]))
		}
		r := outcome[BatchItem(it)]
		r.Code, r.Msg, r.Reason = env.Code, env.Msg, env.Reason
	}
	results := make([]BatchResult, len(batch.Items))
	for i, it := range batch.Items {
		results[i] = *outcome[it]
	}
	return ok(results), nil
}

func readBatch(c *gin.Context) (*BatchDeleteRequest, error) {
	var req BatchDeleteRequest
	if err := readJSON(c, "batch", &req); err != nil {
		return nil, err
	}
	switch {
	case len(req.Items) == 0:
		return nil, badRequest("items is empty: name at least one {namespace, name}")
	case len(req.Items) > MaxBatchItems:
		return nil, badRequest("items has %d entries: at most %d per request", len(req.Items), MaxBatchItems)
	}
	for i, it := range req.Items {
		if it.Namespace == "" || it.Name == "" {
			return nil, badRequest("items[%d]: namespace and name are required", i)
		}
		if p := namespaceProblem(it.Namespace); p != "" {
			return nil, badRequest("items[%d].namespace %q is not a namespace name: %s", i, it.Namespace, p)
		}
		if p := nameProblem(it.Name); p != "" {
			return nil, badRequest("items[%d].name %q is not a Kubernetes object name: %s", i, it.Name, p)
		}
	}
	return &req, nil
}

// ScaleResult is the object after a scale, and what the caller should know about the change.
type ScaleResult struct {
	Detail
	Warnings []string `json:"warnings"`
}

// scale sets a worker group's replicas and bounds.
//
//	@Summary		Scale a worker group
//	@ID				scaleObject
//	@Description	Sets replicas, minReplicas and maxReplicas (each optional; at least one) of one worker group: of
//	@Description	the RayCluster, or of the cluster spec of a RayJob (spec.rayClusterSpec) or RayService
//	@Description	(spec.rayClusterConfig); of the stored manifest for a template. Written as the caller, as an
//	@Description	update of the object read: on a conflict (a change made in between, such as the operator's status)
//	@Description	it reads again and retries, 5 times at most, then answers 409; nothing is lost. 422 names the field: an unknown
//	@Description	group, or bounds that do not hold afterwards (minReplicas ≤ replicas ≤ maxReplicas, each 0 to
//	@Description	2147483647). When the Ray autoscaler owns the group (enableInTreeAutoscaling), the answer warns
//	@Description	that it may change the replicas given. Answers the object afterwards, as start does.
//	@Tags			lifecycle
//	@Accept			json
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string				true	"namespace"
//	@Param			kind					path		string				true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name					path		string				true	"name"
//	@Param			body					body		ray.ScaleRequest	true	"the group and its new figures"
//	@Success		200						{object}	Envelope{data=ScaleResult}
//	@Failure		400,401,403,404,409,413	{object}	Envelope
//	@Failure		415,422,503,504			{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/scale [post]
func (s *Server) scale(c *gin.Context) (*response, error) {
	var sr ray.ScaleRequest
	if err := readJSON(c, "scale request", &sr); err != nil {
		return nil, err
	}
	d, warnings, err := s.writePath(c, req(c)).Scale(c.Request.Context(), c.Param("namespace"), c.Param("name"), sr)
	if err != nil {
		return nil, err
	}
	return ok(ScaleResult{Detail: d, Warnings: warnings}), nil
}
