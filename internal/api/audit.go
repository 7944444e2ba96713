package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/k8s"
)

// AuditTrail records the writes made through the service and reads them back (audit.Trail).
type AuditTrail interface {
	Record(ctx context.Context, w audit.Write)
	List(ctx context.Context, namespace string) ([]audit.Entry, error)
}

// auditInFlight bounds the audit events being written at once; past it a write is logged, not
// recorded, so that a slow apiserver never holds the service's memory.
const auditInFlight = 64

// recordWrite records a write that succeeded, in the background: the answer does not wait for it.
func (s *Server) recordWrite(c *gin.Context, action string, k *k8s.Kind, ns, name string, uid types.UID, detail string) {
	if s.Audit == nil {
		return
	}
	user, err := s.Authz.UserName(c.Request.Context(), token(c))
	if err != nil {
		user = "unknown (" + err.Error() + ")"
	}
	w := audit.Write{Action: action, Kind: k.Kind, Namespace: ns, Name: name, UID: uid, User: user,
		RequestID: c.Writer.Header().Get("X-Request-ID"), Detail: detail}
	select {
	case s.auditSlots <- struct{}{}:
	default:
		logger(c).Warn("too many audit events being written: this write is not recorded", zap.String("action", action),
			zap.String("object", ns+"/"+name), zap.String("user", user))
		return
	}
	ctx := context.WithoutCancel(c.Request.Context())
	go func() {
		defer func() { <-s.auditSlots }()
		s.Audit.Record(ctx, w)
	}()
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

func scaleDetail(r k8s.ScaleRequest) string {
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

// auditList lists the writes made through the service.
//
//	@Summary		Audit trail
//	@Description	The writes made through the service (create, replace, delete, start, stop, scale, and each item of a
//	@Description	batch delete that succeeded), newest first: who (the caller's user name), what, when, and the
//	@Description	request id. Each is a Kubernetes Event the service writes with its own identity and signs, on the
//	@Description	object (a deleted object's stays in its namespace), labelled ray.openfuyao.com/audit=true, with a reason
//	@Description	RayService<Action>; events it did not sign are not shown. Only namespaces where the caller may list
//	@Description	events are shown (403 when it asks for one where it may not). Events live as long as the cluster
//	@Description	keeps events (one hour by default).
//	@Tags			audit
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace		query		string	false	"only this namespace"
//	@Param			page			query		int		false	"page, from 1"		default(1)
//	@Param			pageSize		query		int		false	"entries per page"	default(20)	maximum(500)
//	@Success		200				{object}	Envelope{data=Page[audit.Entry]}
//	@Failure		400,401,403,503	{object}	Envelope
//	@Router			/rest/ray/v1/audit [get]
func (s *Server) auditList(c *gin.Context) {
	ns, err := namespaceQuery(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	page, size, err := pageParams(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	ctx := c.Request.Context()
	var entries []audit.Entry
	if s.Audit != nil {
		if entries, err = s.Audit.List(ctx, ns); err != nil {
			s.fail(c, err)
			return
		}
	}
	var candidates []string
	for _, e := range entries {
		candidates = append(candidates, e.Namespace)
	}
	scope, err := s.Authz.Scope(ctx, token(c), auth.Attributes{Verb: "list", Resource: "events", Namespace: ns}, candidates)
	if err != nil {
		s.fail(c, err)
		return
	}
	if ns != "" && scope.IsEmpty() {
		s.fail(c, statusError(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf("the caller may not list events in namespace %q", ns)))
		return
	}
	shown := entries[:0]
	for _, e := range entries {
		if scope.Contains(e.Namespace) {
			shown = append(shown, e)
		}
	}
	from, to := min((page-1)*size, len(shown)), min(page*size, len(shown))
	s.ok(c, http.StatusOK, Page[audit.Entry]{Items: append([]audit.Entry{}, shown[from:to]...), Total: len(shown), Page: page, PageSize: size})
}
