package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
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

// recordWrite records a write that succeeded. The entry is appended to the trail's store before the
// answer goes, so that no write the service answered for is missing from the trail; only its mirror
// event is written in the background.
func (s *Server) recordWrite(c *gin.Context, action string, k *ray.Kind, ns, name string, uid types.UID, detail string) {
	s.recordKindWrite(c, action, k.Kind, ns, name, uid, detail)
}

// recordKindWrite is recordWrite of anything the service writes, named by its kind: a Ray kind, or a
// Subscription or an IdlePolicy.
func (s *Server) recordKindWrite(c *gin.Context, action, kind, ns, name string, uid types.UID, detail string) {
	if s.Audit == nil {
		return
	}
	user, err := s.Authz.UserName(c.Request.Context(), token(c))
	if err != nil {
		user = "unknown (" + err.Error() + ")"
	}
	s.Audit.Record(c.Request.Context(), audit.Write{Action: action, Kind: kind, Namespace: ns, Name: name, UID: uid, User: user,
		RequestID: c.Writer.Header().Get("X-Request-ID"), Detail: detail})
}

// recordCurrent records a write of what cur is after it.
func (s *Server) recordCurrent(c *gin.Context, action string, r *request, cur *k8s.Current, detail string) {
	switch {
	case cur == nil:
	case cur.Instance != nil:
		s.recordWrite(c, action, r.kind, cur.Instance.GetNamespace(), cur.Instance.GetName(), cur.Instance.GetUID(), detail)
	case cur.Template != nil:
		s.recordWrite(c, action, r.kind, cur.Template.ConfigMap.Namespace, cur.Template.Manifest.GetName(), "", detail)
	}
}

func scaleDetail(r ray.ScaleRequest) string {
	var d strings.Builder
	d.WriteString("group " + r.Group)
	for _, f := range []struct {
		name string
		v    *int64
	}{{"replicas", r.Replicas}, {"minReplicas", r.MinReplicas}, {"maxReplicas", r.MaxReplicas}} {
		if f.v != nil {
			fmt.Fprintf(&d, ", %s %d", f.name, *f.v)
		}
	}
	return d.String()
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
