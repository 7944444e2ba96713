package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/audit"
	"ray-service/internal/auth"
	"ray-service/internal/k8s"
	"ray-service/internal/notify"
	"ray-service/internal/ray"
)

// Subscriptions keeps the namespaces' subscriptions to notifications and their deliveries
// (history.Store).
type Subscriptions interface {
	CreateSubscription(ctx context.Context, sub notify.Subscription) (notify.Subscription, error)
	Subscriptions(ctx context.Context, ns string) ([]notify.Subscription, error)
	Subscription(ctx context.Context, ns, id string) (*notify.Subscription, error)
	DeleteSubscription(ctx context.Context, ns, id string) error
	Deliveries(ctx context.Context, id string, page, pageSize int) ([]notify.Delivery, int, error)
}

// IdlePolicies reads and writes the namespaces' idle policies as one caller (k8s.IdlePolicies).
type IdlePolicies interface {
	Get(ctx context.Context, ns string) (*k8s.IdlePolicy, error)
	Put(ctx context.Context, ns, stopAfter, user string) (*k8s.IdlePolicy, bool, error)
	Delete(ctx context.Context, ns string) error
}

// MaxSubscriptions bounds a namespace's subscriptions: each is a worker and a look-up every poll.
const MaxSubscriptions = 20

// SubscriptionRequest asks for a namespace's notifications at a webhook.
type SubscriptionRequest struct {
	// URL is the webhook's, http or https, at a public address: private, shared, loopback, link-local,
	// unique-local and the other special-purpose ranges, and the cluster's own, are refused unless the
	// operator allows them.
	URL string `json:"url" binding:"required" example:"https://hooks.example.com/ray"`
	// Events are the notification types wanted (all when empty).
	Events []string `json:"events" enums:"job.succeeded,job.failed,job.stopped,cluster.failed,cluster.idle,cluster.idle-stop-planned,cluster.stopped-by-policy,service.unhealthy,service.upgrade-finished"`
	// Kinds are the kinds wanted (all when empty).
	Kinds []string `json:"kinds" example:"RayJob"`
	// Selector is a label selector of the objects wanted.
	Selector string `json:"selector" example:"team=a"`
}

// SubscriptionList is the answer of the subscriptions' list.
type SubscriptionList struct {
	Items []notify.Subscription `json:"items"`
}

// IdlePolicyRequest sets a namespace's idle policy.
type IdlePolicyRequest struct {
	// StopAfter is how long a RayCluster of the namespace may idle before it is stopped: a Go duration
	// of a minute or more.
	StopAfter string `json:"stopAfter" example:"2h"`
}

// notifying answers the namespace of the path, once the caller is seen to hold verb on events there:
// who may write a namespace's events decides what is told of it.
func (s *Server) notifying(c *gin.Context, verb string) (string, error) {
	ns := c.Param("namespace")
	if err := checkPathNames(ns, ""); err != nil {
		return "", err
	}
	allowed, err := s.Authz.Allowed(c.Request.Context(), token(c), auth.Attributes{Verb: verb, Resource: "events", Namespace: ns})
	if err != nil {
		return "", err
	}
	if !allowed {
		return "", statusError(http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("the caller may not %s events in namespace %q, which the namespace's subscriptions need", verb, ns))
	}
	if s.Subscriptions == nil {
		return "", statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			"notifications are off: the service runs without a history database (history-dsn), where they are kept")
	}
	return ns, nil
}

// readKinds are the group and resource of each kind sub carries: its kinds, or every kind served.
func (s *Server) readKinds(sub *notify.Subscription) []auth.Attributes {
	var out []auth.Attributes
	for _, k := range s.Kinds.All() {
		// All kinds: those the cluster serves now; one served later is asked at each delivery.
		if len(sub.Kinds) == 0 && s.Store.Serves(k) || slices.Contains(sub.Kinds, k.Kind) {
			out = append(out, auth.Attributes{Group: ray.RayGroupVersion.Group, Resource: k.Resource})
		}
	}
	return out
}

// mayRead answers 403 unless the caller may read what sub carries (notify.Rights): a subscription tells
// of objects' names, statuses, messages and creators, and its delivery log names them.
func (s *Server) mayRead(c *gin.Context, sub *notify.Subscription) error {
	needs := notify.Rights(sub.Namespace, s.readKinds(sub))
	allowed, err := s.Authz.AllowedAll(c.Request.Context(), token(c), needs)
	if err != nil {
		return err
	}
	var missing []string
	for i, a := range needs {
		if !allowed[i] {
			missing = append(missing, a.Verb+" "+a.Resource)
		}
	}
	if len(missing) > 0 {
		return statusError(http.StatusForbidden, metav1.StatusReasonForbidden, fmt.Sprintf(
			"the caller may not %s in namespace %q, which the subscription's notices tell of", strings.Join(missing, ", "), sub.Namespace))
	}
	return nil
}

// shown is sub as read back after its create: its URL's scheme and host alone, since a webhook's path
// and query often hold its own secret (a chat service's hook token), and whoever may create the
// namespace's events reads its subscriptions.
func shown(sub *notify.Subscription) *notify.Subscription {
	sub.URL = notify.Redacted(sub.URL)
	return sub
}

func noSubscription(ns, id string) error {
	return statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("namespace %q has no subscription %s", ns, id))
}

// createSubscription subscribes a webhook to a namespace's notifications.
//
//	@Summary		Subscribe
//	@ID				createSubscription
//	@Description	Subscribes a webhook to the namespace's notifications, delivered from now on as CloudEvents 1.0
//	@Description	(structured JSON, application/cloudevents+json; type com.openfuyao.ray.<event>, subject
//	@Description	<Kind>/<name>) by POST, signed in the header X-Ray-Service-Signature: sha256= and the hex HMAC-SHA256
//	@Description	of the body with the subscription's secret, which this answer alone shows, with the whole URL. Each is
//	@Description	retried with backoff for a bounded time, in order, at least once; a redirect is not followed. The caller
//	@Description	must be allowed to create events in the namespace and to list each kind subscribed to (every kind
//	@Description	served, when kinds is empty); each delivery is made only while the caller still may (asked as its user
//	@Description	name and groups). 422 for a URL whose host is (or resolves to) an address that is not public (private,
//	@Description	shared, loopback, link-local, unique-local, documentation, ...) or in the cluster's own ranges, unless the
//	@Description	operator allows it; 409 past 20 subscriptions in the namespace. 503 without a history database.
//	@Tags			notifications
//	@Accept			json
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace						path		string				true	"namespace"
//	@Param			body							body		SubscriptionRequest	true	"the subscription"
//	@Success		201								{object}	Envelope{data=notify.Subscription}
//	@Failure		400,401,403,409,413,415,422,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/subscriptions [post]
func (s *Server) createSubscription(c *gin.Context) (*response, error) {
	ns, err := s.notifying(c, "create")
	if err != nil {
		return nil, err
	}
	var in SubscriptionRequest
	if err := readJSON(c, "subscription", &in); err != nil {
		return nil, err
	}
	if in.URL == "" {
		return nil, badRequest("url: a webhook URL is required")
	}
	ctx := c.Request.Context()
	sub := notify.Subscription{ID: uuid.NewString(), Namespace: ns, URL: in.URL, Events: in.Events, Kinds: in.Kinds,
		Selector: in.Selector, CreatedAt: time.Now().UTC()}
	if sub.Events == nil {
		sub.Events = []string{}
	}
	if sub.Kinds == nil {
		sub.Kinds = []string{}
	}
	var known []string
	for _, k := range s.Kinds.All() {
		known = append(known, k.Kind)
	}
	if err := sub.Check(known); err != nil {
		return nil, badRequest("%v", err)
	}
	if err := s.mayRead(c, &sub); err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Guard.CheckURL(lctx, in.URL, s.Lookup); err != nil {
		return nil, statusError(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
	}
	existing, err := s.Subscriptions.Subscriptions(ctx, ns)
	if err != nil {
		return nil, err
	}
	if len(existing) >= MaxSubscriptions {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict,
			fmt.Sprintf("namespace %q has %d subscriptions, the most it may have: delete one first", ns, len(existing)))
	}
	// Who the deliveries are authorized as, each time (notify.Rights): the creator's name and groups,
	// never its token.
	id, err := s.Authz.Identity(ctx, token(c))
	if err != nil {
		return nil, err
	}
	sub.Creator, sub.CreatorGroups = id.Name, id.Groups
	if sub.Secret, err = notify.NewSecret(); err != nil {
		return nil, err
	}
	if sub, err = s.Subscriptions.CreateSubscription(ctx, sub); err != nil {
		return nil, err
	}
	s.audit(c).Record(ctx, audit.Create, "Subscription", ns, sub.ID, "", "to "+notify.Redacted(sub.URL))
	// The one answer that holds the secret and the whole URL: kept by no cache on its way.
	res := withCode(http.StatusCreated, sub)
	res.header = http.Header{"Cache-Control": {"no-store"}}
	return res, nil
}

// listSubscriptions lists a namespace's subscriptions.
//
//	@Summary		Subscriptions
//	@ID				listSubscriptions
//	@Description	The namespace's subscriptions, oldest first, without their secrets, each URL shown as its scheme and
//	@Description	host alone (scheme://host/…). The caller must be allowed to create events in the namespace.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace		path		string	true	"namespace"
//	@Success		200				{object}	Envelope{data=SubscriptionList}
//	@Failure		400,401,403,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/subscriptions [get]
func (s *Server) listSubscriptions(c *gin.Context) (*response, error) {
	ns, err := s.notifying(c, "create")
	if err != nil {
		return nil, err
	}
	subs, err := s.Subscriptions.Subscriptions(c.Request.Context(), ns)
	if err != nil {
		return nil, err
	}
	for i := range subs {
		shown(&subs[i])
	}
	return ok(SubscriptionList{Items: subs}), nil
}

// subscription reads the path's subscription.
func (s *Server) subscription(c *gin.Context) (*notify.Subscription, error) {
	ns, err := s.notifying(c, "create")
	if err != nil {
		return nil, err
	}
	id := c.Param("id")
	if !uidPattern.MatchString(id) {
		return nil, badRequest("subscription %q: want the id its create answered, such as 3f1c9a4e-0b7d-4c1e-9a57-2d8e6f0b1c3a", id)
	}
	sub, err := s.Subscriptions.Subscription(c.Request.Context(), ns, id)
	if errors.Is(err, notify.ErrNoSubscription) {
		return nil, noSubscription(ns, id)
	}
	return sub, err
}

// getSubscription reads a subscription.
//
//	@Summary		Subscription
//	@ID				getSubscription
//	@Description	One subscription of the namespace, without its secret, its URL shown as its scheme and host alone.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			id					path		string	true	"subscription id"
//	@Success		200					{object}	Envelope{data=notify.Subscription}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/subscriptions/{id} [get]
func (s *Server) getSubscription(c *gin.Context) (*response, error) {
	sub, err := s.subscription(c)
	if err != nil {
		return nil, err
	}
	return ok(shown(sub)), nil
}

// deleteSubscription ends a subscription.
//
//	@Summary		Unsubscribe
//	@ID				deleteSubscription
//	@Description	Ends the subscription: nothing more is delivered to it, and its delivery log goes with it.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			id					path		string	true	"subscription id"
//	@Success		200					{object}	Envelope{data=notify.Subscription}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/subscriptions/{id} [delete]
func (s *Server) deleteSubscription(c *gin.Context) (*response, error) {
	sub, err := s.subscription(c)
	if err != nil {
		return nil, err
	}
	switch err := s.Subscriptions.DeleteSubscription(c.Request.Context(), sub.Namespace, sub.ID); {
	case errors.Is(err, notify.ErrNoSubscription):
		return nil, noSubscription(sub.Namespace, sub.ID)
	case err != nil:
		return nil, err
	}
	s.audit(c).Record(c.Request.Context(), audit.Delete, "Subscription", sub.Namespace, sub.ID, "", "to "+notify.Redacted(sub.URL))
	return ok(shown(sub)), nil
}

// listDeliveries lists what became of a subscription's notifications.
//
//	@Summary		Deliveries
//	@ID				listDeliveries
//	@Description	The subscription's delivery log, newest notice first: each notice's number, type and object, its
//	@Description	status (retrying, delivered, failed: given up once its retries' time ran out, or its address was
//	@Description	refused when dialed, or its creator may no longer read it), the attempts and the last error: a
//	@Description	receiver's status code alone, never its answer, and one same message for a try that got no answer.
//	@Description	The caller must be allowed to list the kinds the subscription carries.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Param			id					path		string	true	"subscription id"
//	@Param			page				query		int		false	"page, from 1"		default(1)
//	@Param			pageSize			query		int		false	"items per page"	default(20)	maximum(500)
//	@Success		200					{object}	Envelope{data=Page[notify.Delivery]}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/subscriptions/{id}/deliveries [get]
func (s *Server) listDeliveries(c *gin.Context) (*response, error) {
	sub, err := s.subscription(c)
	if err != nil {
		return nil, err
	}
	// The log names the objects told of: only to who may read them.
	if err := s.mayRead(c, sub); err != nil {
		return nil, err
	}
	page, size, err := pageParams(c)
	if err != nil {
		return nil, err
	}
	items, total, err := s.Subscriptions.Deliveries(c.Request.Context(), sub.ID, page, size)
	if err != nil {
		return nil, err
	}
	return ok(Page[notify.Delivery]{Items: items, Total: total, Page: page, PageSize: size}), nil
}

// idlePolicies answers the path's namespace and the caller's view of the idle policies.
func (s *Server) idlePolicies(c *gin.Context) (string, IdlePolicies, error) {
	ns := c.Param("namespace")
	if err := checkPathNames(ns, ""); err != nil {
		return "", nil, err
	}
	if s.IdlePolicies == nil {
		// Off: the caller learns it only once seen to hold what the route would need (to read the policy's
		// ConfigMap, or to stop the namespace's RayClusters).
		a := auth.Attributes{Verb: "get", Resource: "configmaps", Namespace: ns}
		if c.Request.Method != http.MethodGet {
			a = auth.Attributes{Verb: "patch", Group: ray.RayGroupVersion.Group, Resource: "rayclusters", Namespace: ns}
		}
		allowed, err := s.Authz.Allowed(c.Request.Context(), token(c), a)
		if err != nil {
			return "", nil, err
		}
		if !allowed {
			return "", nil, statusError(http.StatusForbidden, metav1.StatusReasonForbidden,
				fmt.Sprintf("the caller may not %s %s in namespace %q, which the namespace's idle policy needs", a.Verb, a.Resource, ns))
		}
		return "", nil, statusError(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
			"the stop of idle clusters by policy is off: the service runs without its identity for it (idle-stop-identity), or without idle detection")
	}
	p, err := s.IdlePolicies(token(c))
	return ns, p, err
}

// getIdlePolicy reads a namespace's idle policy.
//
//	@Summary		Idle policy
//	@ID				getIdlePolicy
//	@Description	The namespace's idle policy: its RayClusters that idle stopAfter are stopped (see putIdlePolicy).
//	@Description	Read as the caller (its ConfigMaps); 404 where the namespace has none.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Success		200					{object}	Envelope{data=k8s.IdlePolicy}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/idle-policy [get]
func (s *Server) getIdlePolicy(c *gin.Context) (*response, error) {
	ns, p, err := s.idlePolicies(c)
	if err != nil {
		return nil, err
	}
	pol, err := p.Get(c.Request.Context(), ns)
	if err != nil {
		return nil, err
	}
	return ok(pol), nil
}

// putIdlePolicy sets a namespace's idle policy.
//
//	@Summary		Set the idle policy
//	@ID				putIdlePolicy
//	@Description	Sets the namespace's idle policy: each of its RayClusters that stays idle stopAfter (idle as the
//	@Description	list's idle shows) is stopped, through the normal stop, by the service's identity for it, recorded in
//	@Description	the audit trail as the policy's, and announced ahead by a Warning event (IdleStopPlanned) and a
//	@Description	notification (cluster.idle-stop-planned). Excepted: a RayCluster a RayJob or a RayService made, and one
//	@Description	annotated ray.openfuyao.com/idle-stop-after (its own policy, a duration, or never). The caller must
//	@Description	be allowed to patch RayClusters and to create RoleBindings in the namespace (its admins); the policy is
//	@Description	a ConfigMap written as the caller and signed by the service (one of its name written otherwise is no
//	@Description	policy). 201 when there was none.
//	@Tags			notifications
//	@Accept			json
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string				true	"namespace"
//	@Param			body					body		IdlePolicyRequest	true	"the policy"
//	@Success		200,201					{object}	Envelope{data=k8s.IdlePolicy}
//	@Failure		400,401,403,409,415,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/idle-policy [put]
func (s *Server) putIdlePolicy(c *gin.Context) (*response, error) {
	ns, p, err := s.idlePolicies(c)
	if err != nil {
		return nil, err
	}
	var in IdlePolicyRequest
	if err := readJSON(c, "idle policy", &in); err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	user, err := s.caller(c).Name(ctx)
	if err != nil {
		return nil, err
	}
	pol, created, err := p.Put(ctx, ns, in.StopAfter, user)
	if err != nil {
		return nil, err
	}
	s.audit(c).Record(ctx, audit.Replace, "IdlePolicy", ns, "idle-policy", "", "stopAfter "+pol.StopAfter)
	if created {
		return withCode(http.StatusCreated, pol), nil
	}
	return ok(pol), nil
}

// deleteIdlePolicy removes a namespace's idle policy.
//
//	@Summary		Remove the idle policy
//	@ID				deleteIdlePolicy
//	@Description	Removes the namespace's idle policy: its RayClusters are no longer stopped for idling, except those
//	@Description	annotated with a policy of their own. The caller must be allowed to patch RayClusters and to create
//	@Description	RoleBindings there.
//	@Tags			notifications
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace			path		string	true	"namespace"
//	@Success		200					{object}	Envelope{data=k8s.IdlePolicy}
//	@Failure		400,401,403,404,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/idle-policy [delete]
func (s *Server) deleteIdlePolicy(c *gin.Context) (*response, error) {
	ns, p, err := s.idlePolicies(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request.Context()
	pol, err := p.Get(ctx, ns)
	if err != nil {
		return nil, err
	}
	if err := p.Delete(ctx, ns); err != nil {
		return nil, err
	}
	s.audit(c).Record(ctx, audit.Delete, "IdlePolicy", ns, "idle-policy", "", "stopAfter "+pol.StopAfter)
	return ok(pol), nil
}
