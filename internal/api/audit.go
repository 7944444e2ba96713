package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
	"ray-service/internal/writes"
)

// AuditTrail records the writes made through the service and reads them back (audit.Trail).
type AuditTrail interface {
	// Record appends a write to the trail before it returns; it never fails the write.
	Record(ctx context.Context, w audit.Write)
	List(ctx context.Context, q audit.Query) ([]audit.Entry, int, error)
	// Namespaces are those the trail has entries of.
	Namespaces(ctx context.Context) ([]string, error)
	Verify(ctx context.Context) (audit.Verification, error)
}

// caller is who writes in this request, asked of the apiserver at most once however many steps of the
// request need it (the creator of what it creates, the user of its audit records).
func (s *Server) caller(c *gin.Context) *writes.Caller {
	if w, ok := c.Get(writerKey{}); ok {
		return w.(*writes.Caller)
	}
	tok := token(c)
	w := writes.NewCaller(func(ctx context.Context) (string, error) { return s.Authz.UserName(ctx, tok) })
	c.Set(writerKey{}, w)
	return w
}

// audit is the audit hook of the request's writes.
func (s *Server) audit(c *gin.Context) writes.Audit {
	return writes.Audit{Trail: s.Audit, Caller: s.caller(c), RequestID: c.Writer.Header().Get("X-Request-ID")}
}

// writePath is the write path of the request's objects of kind r.kind: its answers are details of what a
// write left, a start's saying whether it was queued.
func (s *Server) writePath(c *gin.Context, r *request) *writes.Path[Detail] {
	return &writes.Path[Detail]{Kind: r.kind, Objects: r.objects, Audit: s.audit(c),
		Decorate: func(action string, cur *k8s.Current) Detail {
			d := s.detail(c, r, cur)
			if action == audit.Start && cur.Template == nil && cur.Instance != nil {
				d.Queued = ray.QueuedByStart(cur.Instance.GetLabels(), d.Scheduling)
			}
			return d
		}}
}

// auditOn answers 503 without a trail (a trail without a store answers so too).
func (s *Server) auditOn() error {
	if s.Audit == nil {
		return audit.ErrOff
	}
	return nil
}

// auditList lists the writes made through the service.
//
//	@Summary		Audit trail
//	@ID				listAuditEntries
//	@Description	The writes made through the service (create, replace, delete, start, stop, scale, and each item of a
//	@Description	batch delete that succeeded), newest first: who (the caller's user name), what, when, and the
//	@Description	request id. The trail is kept in the service's own store (the history database), append-only: each
//	@Description	entry has a sequence number and is chained to the one before by a hash keyed with the service's audit
//	@Description	key (GET /rest/ray/v1/audit/verify checks it). Each entry is mirrored as a Kubernetes Event on the object
//	@Description	(a deleted object's stays in its namespace), labelled ray.openfuyao.com/audit=true, with a reason
//	@Description	RayService<Action>, signed with the audit key; the mirror is only a view: events deleted, copied or
//	@Description	expired change nothing here. The trail starts when the service first ran with its store: the events
//	@Description	of earlier versions are not read. Only namespaces where the caller may list events are shown (403 when
//	@Description	it asks for one where it may not); the caller's rights are checked before the trail is read. 503 when
//	@Description	the service runs without a history database.
//	@Tags			audit
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace		query		string	false	"only this namespace"
//	@Param			page			query		int		false	"page, from 1"		default(1)
//	@Param			pageSize		query		int		false	"entries per page"	default(20)	maximum(500)
//	@Success		200				{object}	Envelope{data=Page[audit.Entry]}
//	@Failure		400,401,403,503	{object}	Envelope
//	@Router			/rest/ray/v1/audit [get]
func (s *Server) auditList(c *gin.Context) (*response, error) {
	ns, err := namespaceQuery(c)
	if err != nil {
		return nil, err
	}
	page, size, err := pageParams(c)
	if err != nil {
		return nil, err
	}
	if err := s.auditOn(); err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	// The caller's rights first: the namespaces it may list events in, among those the trail has
	// entries of (a small table of their own); nothing of the trail is read for a caller who may see
	// none of it.
	var candidates []string
	if ns == "" {
		if candidates, err = s.Audit.Namespaces(ctx); err != nil {
			return nil, err
		}
	}
	scope, err := s.Authz.Scope(ctx, token(c), auth.Attributes{Verb: "list", Resource: "events", Namespace: ns}, candidates)
	if err != nil {
		return nil, err
	}
	switch {
	case ns != "" && scope.IsEmpty():
		return nil, statusError(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("the caller may not list events in namespace %q", ns))
	case scope.IsEmpty():
		return ok(Page[audit.Entry]{Items: []audit.Entry{}, Page: page, PageSize: size}), nil
	}
	q := audit.Query{Page: page, PageSize: size}
	if !scope.IsAll() {
		q.Namespaces = scope.List()
	}
	entries, total, err := s.Audit.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return ok(Page[audit.Entry]{Items: entries, Total: total, Page: page, PageSize: size}), nil
}

// auditVerify checks the trail's chain.
//
//	@Summary		Check the audit trail
//	@ID				verifyAuditTrail
//	@Description	Walks the whole trail in sequence order and checks each entry's hash, keyed with the service's audit
//	@Description	key, against its content and the previous entry's hash, and the last entry against the head every
//	@Description	append moves: an entry changed, removed or added in the database other than by the service is
//	@Description	reported, with the first sequence number where the chain breaks (brokenAt) and how (problem); intact
//	@Description	is true when there is no such break. Entries appended while it runs are left for the next check.
//	@Description	Only a caller who may list events in every namespace (cluster-wide) may ask: 403 otherwise. 503
//	@Description	when the service runs without a history database.
//	@Tags			audit
//	@Produce		json
//	@Security		Bearer
//	@Success		200			{object}	Envelope{data=audit.Verification}
//	@Failure		401,403,503	{object}	Envelope
//	@Router			/rest/ray/v1/audit/verify [get]
func (s *Server) auditVerify(c *gin.Context) (*response, error) {
	if err := s.auditOn(); err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	allowed, err := s.Authz.Allowed(ctx, token(c), auth.Attributes{Verb: "list", Resource: "events"})
	if err != nil {
		return nil, err
	}
	if !allowed {
		return nil, statusError(http.StatusForbidden, metav1.StatusReasonForbidden,
			"checking the audit trail needs the right to list events in every namespace")
	}
	v, err := s.Audit.Verify(ctx)
	if err != nil {
		return nil, err
	}
	return ok(v), nil
}

// validRequestID tells whether a client's X-Request-ID is kept as the request's id: 1 to 64
// letters, digits and dashes. Anything else would be signed into the audit trail as sent.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
