package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/history"
	"ray-service/internal/ray"
)

// History reads the history of the Ray objects the service saw (history.Store).
type History interface {
	List(ctx context.Context, q history.Query) ([]history.Record, int, error)
	Get(ctx context.Context, uid string) (*history.Record, error)
	Namespaces(ctx context.Context, kind string) ([]string, error)
}

// HistoryDetail is one record: what it was (its manifest as last seen), its timeline and how it ended.
type HistoryDetail struct {
	history.Record
	Manifest map[string]any `json:"manifest"`
}

var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func (s *Server) historyOn() error {
	if s.History == nil {
		return statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			"the history is off: the service runs without a history database (history-dsn)")
	}
	return nil
}

// historyList lists the records of a kind.
//
//	@Summary		History
//	@ID				listHistory
//	@Description	The RayClusters, RayJobs or RayServices the service saw, kept after they finished or were deleted:
//	@Description	kind, namespace, name, creator, the last status with its reason and message, and when the object
//	@Description	was created, finished (a RayJob that Succeeded or Failed) and deleted. Objects still there are
//	@Description	listed too (neither time set). Only namespaces where the caller may list the kind now are shown
//	@Description	(403 when it asks for one where it may not). Filters combine with AND; status and creator take
//	@Description	comma-separated values that combine with OR; finishedAfter and finishedBefore (RFC 3339) bound when
//	@Description	the object finished or, for one that never finished, was deleted. Ties in the sort order are broken
//	@Description	by namespace, name and UID, in the same direction. 503 when the service runs without a history
//	@Description	database.
//	@Tags			history
//	@Produce		json
//	@Security		Bearer
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			namespace			query		string	false	"only this namespace"
//	@Param			search				query		string	false	"case-insensitive substring of the name"
//	@Param			status				query		string	false	"last normalized status, comma-separated"
//	@Param			creator				query		string	false	"creator user name, comma-separated"
//	@Param			finishedAfter		query		string	false	"RFC 3339 time: ended at or after it"
//	@Param			finishedBefore		query		string	false	"RFC 3339 time: ended before it"
//	@Param			sortBy				query		string	false	"sort key"			Enums(name, createdAt, finishedAt, status)	default(createdAt)
//	@Param			order				query		string	false	"sort order"		Enums(asc, desc)							default(desc)
//	@Param			page				query		int		false	"page, from 1"		default(1)
//	@Param			pageSize			query		int		false	"items per page"	default(20)	maximum(500)
//	@Success		200					{object}	Envelope{data=Page[history.Record]}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/history/{kind} [get]
func (s *Server) historyList(c *gin.Context) (*response, error) {
	if err := s.historyOn(); err != nil {
		return nil, err
	}
	k := req(c).kind
	q, err := parseHistoryQuery(c, k)
	if err != nil {
		return nil, err
	}
	ns, err := namespaceQuery(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	candidates, err := s.History.Namespaces(ctx, k.Kind)
	if err != nil {
		return nil, err
	}
	scope, err := s.Authz.Scope(ctx, token(c), auth.Attributes{Verb: "list", Group: ray.RayGroupVersion.Group, Resource: k.Resource, Namespace: ns}, candidates)
	if err != nil {
		return nil, err
	}
	if ns != "" && scope.IsEmpty() {
		return nil, access.Forbidden(k, "list", ns)
	}
	if !scope.IsAll() {
		// The namespaces allowed (the one asked for, or those of the records the caller may list).
		q.Namespaces = append([]string{}, scope.List()...)
	}
	items, total, err := s.History.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return ok(Page[history.Record]{Items: items, Total: total, Page: q.Page, PageSize: q.PageSize}), nil
}

// historyRecord reads the record of the path's uid that the caller may see: one of the path's kind
// in a namespace where the caller may list the kind now. Any other is NotFound, whether it exists or not.
func (s *Server) historyRecord(c *gin.Context) (*history.Record, error) {
	if err := s.historyOn(); err != nil {
		return nil, err
	}
	k, uid := req(c).kind, c.Param("uid")
	if !uidPattern.MatchString(uid) {
		return nil, badRequest("uid %q: want a Kubernetes UID such as 3f1c9a4e-0b7d-4c1e-9a57-2d8e6f0b1c3a", uid)
	}
	ctx := c.Request.Context()
	notFound := statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no %s of uid %s in the history", k.Kind, uid))
	r, err := s.History.Get(ctx, uid)
	switch {
	case errors.Is(err, history.ErrNotFound):
		return nil, notFound
	case err != nil:
		return nil, err
	case r.Kind != k.Kind:
		return nil, notFound
	}
	allowed, err := s.Authz.Allowed(ctx, token(c), auth.Attributes{Verb: "list", Group: ray.RayGroupVersion.Group, Resource: k.Resource, Namespace: r.Namespace})
	if err != nil {
		return nil, err
	}
	if !allowed {
		return nil, notFound
	}
	return r, nil
}

// historyGet shows one record.
//
//	@Summary		History record
//	@ID				getHistoryRecord
//	@Description	One object of the history, by its UID: the record, its manifest as last seen (what a rerun
//	@Description	creates; one past 64 KiB is kept in part: its apiVersion, kind, name and namespace, and
//	@Description	manifestTruncated gives the whole one's size and sha256 and why), the timeline of its normalized
//	@Description	statuses as the service saw them (the first and the last 10; transitionsDropped counts those
//	@Description	between), and its ending, read when it finished or was deleted. Each part of the ending is shown
//	@Description	only to a caller who may read it live in the namespace now, else left out: its last events (of it,
//	@Description	its Ray clusters, their pods and its submitter) need list events; each pod's last state with each
//	@Description	container's exit code, reason (OOMKilled among them) and message needs list pods; the tail of the
//	@Description	log its logs default to (a RayJob's submitter, else the head), or why it could not be read, needs
//	@Description	get pods/log. 404 when there is no such record or it is in a namespace where the caller may not
//	@Description	list the kind.
//	@Tags			history
//	@Produce		json
//	@Security		Bearer
//	@Param			kind			path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			uid				path		string	true	"the object's UID"
//	@Success		200				{object}	Envelope{data=HistoryDetail}
//	@Failure		400,401,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/history/{kind}/{uid} [get]
func (s *Server) historyGet(c *gin.Context) (*response, error) {
	r, err := s.historyRecord(c)
	if err != nil {
		return nil, err
	}
	if r.Ending != nil {
		// Each part only to who may read it live there: events, pods' states, the log.
		for _, part := range []struct {
			attrs auth.Attributes
			hide  func(*ray.Ending)
		}{
			{auth.Attributes{Verb: "list", Resource: "events", Namespace: r.Namespace}, func(e *ray.Ending) { e.Events = nil }},
			{auth.Attributes{Verb: "list", Resource: "pods", Namespace: r.Namespace}, func(e *ray.Ending) { e.Pods, e.PodsOmitted = nil, 0 }},
			{auth.Attributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: r.Namespace}, func(e *ray.Ending) { e.Log, e.LogOmitted = nil, "" }},
		} {
			allowed, err := s.Authz.Allowed(c.Request.Context(), token(c), part.attrs)
			if err != nil {
				return nil, err
			}
			if !allowed {
				part.hide(r.Ending)
			}
		}
	}
	d := HistoryDetail{Record: *r, Manifest: map[string]any{}}
	if r.Spec != "" {
		if err := json.Unmarshal([]byte(r.Spec), &d.Manifest); err != nil {
			return nil, fmt.Errorf("the recorded manifest of %s: %w", r.UID, err)
		}
	}
	return ok(d), nil
}

// historyRerun creates the object again from its record.
//
//	@Summary		Rerun from the history
//	@ID				rerunFromHistory
//	@Description	Creates the object again, as the caller, from its manifest as last seen: in its namespace, under its
//	@Description	name, with the caller as creator, and started; the same checks as a create (403 when the caller may
//	@Description	not create it there, 409 when an object of that name exists). 409 also when the history kept its
//	@Description	manifest only in part (manifestTruncated): nothing is made of a part. The answer is the new
//	@Description	object's detail.
//	@Tags			history
//	@Produce		json
//	@Security		Bearer
//	@Param			kind				path		string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			uid					path		string	true	"the recorded object's UID"
//	@Success		201					{object}	Envelope{data=Detail}
//	@Failure		400,401,403,404,409	{object}	Envelope
//	@Failure		422					{object}	Envelope	"the recorded manifest is no longer valid: details name the fields"
//	@Failure		503,504				{object}	Envelope
//	@Router			/rest/ray/v1/history/{kind}/{uid}/rerun [post]
func (s *Server) historyRerun(c *gin.Context) (*response, error) {
	rec, err := s.historyRecord(c)
	if err != nil {
		return nil, err
	}
	r := req(c)
	obj := &unstructured.Unstructured{}
	if cut := rec.Cut; cut != nil {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf(
			"the history kept the manifest of %s only in part (%s; the whole one was %d bytes, sha256 %s): it cannot be rerun",
			rec.UID, cut.Reason, cut.Size, cut.SHA256))
	}
	if err := json.Unmarshal([]byte(rec.Spec), &obj.Object); err != nil || rec.Spec == "" {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, fmt.Sprintf("the history holds no manifest of %s", rec.UID))
	}
	d, err := s.writePath(c, r).Create(c.Request.Context(), obj, rec.Namespace, true, false, "rerun of "+rec.UID)
	if err != nil {
		return nil, err
	}
	return withCode(http.StatusCreated, d), nil
}
