package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"

	"ray-service/internal/k8s"
)

// MaxBatchItems is the most items one batch delete takes.
const MaxBatchItems = 100

// start starts an object.
//
//	@Summary		Start
//	@Description	Starts the object; starting what already runs returns 200 and changes nothing.
//	@Description	RayCluster: spec.suspend=false. RayJob: a suspended job resumes, a template is created, a finished
//	@Description	job (Succeeded, Failed, Stopped) runs again: it is re-created from its spec under the same name.
//	@Description	RayService: the template is created. A template is removed once its object exists; if a start is
//	@Description	interrupted, starting again completes it. Answers the object as it is afterwards.
//	@Tags			lifecycle
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=Detail}
//	@Failure		401,403,404,409,422		{object}	Envelope
//	@Failure		503,504					{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/start [post]
func (s *Server) start(c *gin.Context) { s.lifecycle(c, s.Lifecycle.Start) }

// stop stops an object.
//
//	@Summary		Stop
//	@Description	Stops the object; stopping what is stopped (or stopping) returns 200 and changes nothing.
//	@Description	RayCluster: spec.suspend=true. RayJob: spec.suspend=true where KubeRay allows it
//	@Description	(shutdownAfterJobFinishes true, no clusterSelector); otherwise its Ray job is stopped through the
//	@Description	cluster's Ray dashboard, for callers allowed to update the RayJob. RayService: the manifest is stored
//	@Description	as a template, then the instance is deleted. A finished RayJob is 409, as is a job not yet submitted.
//	@Tags			lifecycle
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string	true	"namespace"
//	@Param			kind					path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			name					path		string	true	"name"
//	@Success		200						{object}	Envelope{data=Detail}
//	@Failure		401,403,404,409			{object}	Envelope
//	@Failure		503,504					{object}	Envelope	"503: the Ray dashboard is unreachable"
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/stop [post]
func (s *Server) stop(c *gin.Context) { s.lifecycle(c, s.Lifecycle.Stop) }

func (s *Server) lifecycle(c *gin.Context, op func(context.Context, *k8s.Clients, *k8s.Kind, string, string) (*k8s.Current, error)) {
	k, ok := s.kind(c)
	if !ok {
		return
	}
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	cur, err := op(c.Request.Context(), cl, k, c.Param("namespace"), c.Param("name"))
	if err != nil {
		s.fail(c, err)
		return
	}
	s.ok(c, http.StatusOK, s.detail(k, cur))
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
}

// batchDelete deletes many objects of a kind.
//
//	@Summary		Batch delete
//	@Description	Deletes up to 100 objects of a kind, each as a single delete would (Running ones only with force).
//	@Description	One item's failure does not stop the others: the answer is 200 with one result per item, in the
//	@Description	order given. Duplicate items are deleted once and answered for each.
//	@Tags			lifecycle
//	@Accept			json
//	@Produce		json
//	@Security		Bearer
//	@Param			kind				path		string				true	"kind"	Enums(rayclusters, rayjobs, rayservices)
//	@Param			body				body		BatchDeleteRequest	true	"what to delete"
//	@Success		200					{object}	Envelope{data=[]BatchResult}
//	@Failure		400,401,404,413,415	{object}	Envelope
//	@Router			/rest/ray/v1/{kind}/batch-delete [post]
func (s *Server) batchDelete(c *gin.Context) {
	k, ok := s.kind(c)
	if !ok {
		return
	}
	req, err := readBatch(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	cl, err := s.clients(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	results := make([]BatchResult, len(req.Items))
	done := map[BatchItem]*sync.Once{}
	outcome := map[BatchItem]*BatchResult{}
	for _, it := range req.Items {
		if done[it] == nil {
			done[it], outcome[it] = &sync.Once{}, &BatchResult{Namespace: it.Namespace, Name: it.Name}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for it, once := range done {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			once.Do(func() {
				r := outcome[it]
				if err := s.Lifecycle.Delete(ctx, cl, k, it.Namespace, it.Name, req.Force); err != nil {
					env, internal := errorEnvelope(err)
					if internal {
						logger(c).Error("batch delete item failed", zap.Error(err))
					}
					r.Code, r.Msg, r.Reason = env.Code, env.Msg, env.Reason
					return
				}
				r.Code, r.Msg = http.StatusOK, http.StatusText(http.StatusOK)
			})
		}()
	}
	wg.Wait()
	for i, it := range req.Items {
		results[i] = *outcome[it]
	}
	s.ok(c, http.StatusOK, results)
}

func readBatch(c *gin.Context) (*BatchDeleteRequest, error) {
	if c.ContentType() != "application/json" {
		return nil, statusError(http.StatusUnsupportedMediaType, "UnsupportedMediaType", "send the batch as application/json")
	}
	body := http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes)
	data, err := io.ReadAll(body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, badRequest("reading the request body: %v", err)
	}
	var req BatchDeleteRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("invalid batch: %v", err)
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
	}
	return &req, nil
}
