// Package api is the HTTP side of ray-service: routes, handlers, request parsing and the mapping of
// errors to statuses.
package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/dashproxy"
	"ray-service/internal/k8s"
	"ray-service/internal/metrics"
	"ray-service/internal/notify"
	"ray-service/internal/promql"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
	"ray-service/internal/writes"
)

// BasePath is the prefix of every API route.
const BasePath = "/rest/ray/v1"

// MaxHeaderBytes bounds what the server reads of a request line and its headers.
const MaxHeaderBytes = 64 << 10

// The handlers' dependencies are the small interfaces below, implemented by internal/cache, internal/k8s, internal/dashboard, internal/auth
// and internal/promql and wired in internal/app; a handler test builds Deps from fakes.

// Authorizer answers who a caller is and what the caller may do, asking with the caller's token
// (auth.Reviewer).
type Authorizer interface {
	Allowed(ctx context.Context, token string, a auth.Attributes) (bool, error)
	// AllowedAll is Allowed for each of asks at once, in their order.
	AllowedAll(ctx context.Context, token string, asks []auth.Attributes) ([]bool, error)
	// Scope returns where the caller may do a: everywhere, or those of candidates where it may.
	Scope(ctx context.Context, token string, a auth.Attributes, candidates []string) (auth.Scope, error)
	UserName(ctx context.Context, token string) (string, error)
	// Identity is who the apiserver authenticates token as: its user name and groups.
	Identity(ctx context.Context, token string) (auth.Identity, error)
}

// Store is the watch cache as the handlers read it (cache.Store).
type Store interface {
	// Serves tells whether the cluster serves kind k: an optional kind only while its CRD is installed.
	Serves(k *ray.Kind) bool
	// Count counts the published instances and templates of a kind in two scopes, and those active.
	Count(k *ray.Kind, sc cache.Scopes) ray.KindCount
	// List returns the page a query asks for of the same, and how many match in all.
	List(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, int)
	// Namespaces returns the namespaces that hold instances or templates of a kind.
	Namespaces(k *ray.Kind) []string
	// Allocated sums the requests of the Ray pods in the scope, of one Ray cluster when cluster is set.
	Allocated(scope auth.Scope, cluster string) cache.Allocation
	// Pending sums what the objects in their scopes request while a queue manager has not admitted them.
	Pending(scopes map[*ray.Kind]cache.Scopes) ray.Resources
	// IdleTotals counts the idle Ray clusters in scope and what they hold.
	IdleTotals(scope auth.Scope) (int64, ray.Resources)

	// What watch streams read: the store's run, a channel closed at its next change, the visible items
	// a query matches, in its order, and the number of the last change, and what changed since a number.
	Epoch() string
	Changed() <-chan struct{}
	// KindChanged is closed at the next change of what a kind publishes, which its list streams follow.
	KindChanged(k *ray.Kind) <-chan struct{}
	Matching(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, uint64)
	Since(k *ray.Kind, seq uint64, before, now cache.Scopes) ([]cache.Change, uint64, error)
	// Version is the number of the last change of a kind's published objects.
	Version(k *ray.Kind) uint64
	// Published is the item of one object (its instance, else its template), nil without one.
	Published(k *ray.Kind, ns, name string) *cache.Item
	// SummarizeManifest is the whole summary of a manifest the cache keeps, as the cache would publish it.
	SummarizeManifest(k *ray.Kind, m *cache.Manifest) ray.Summary
	// CachedPods describes the cached Ray pods of an object's clusters.
	CachedPods(k *ray.Kind, s *ray.Summary) []ray.PodInfo
	// Manifest is the whole manifest of an instance, as the cache holds it now, when it keeps it (not to
	// be changed); KeepManifest asks it to keep one just read from the apiserver for a detail.
	// ManifestWrites is read before the apiserver read that KeepManifest is given; ForgetManifest is
	// told of every write through the service (see cache.Store).
	Manifest(k *ray.Kind, ns, name string) (*cache.Manifest, bool)
	ManifestWrites() uint64
	KeepManifest(k *ray.Kind, u *unstructured.Unstructured, writes uint64)
	ForgetManifest(k *ray.Kind, ns, name string)
}

// Objects are the objects of one kind as one caller reads and writes them (k8s.Objects); the writes go
// through the write path (internal/writes).
type Objects interface {
	writes.Objects
	Resolve(ctx context.Context, ns, name string) (*k8s.Current, error)
	// ResolveWithEvents is Resolve and Events at once; events the caller may not list are nil.
	ResolveWithEvents(ctx context.Context, ns, name string) (*k8s.Current, []ray.EventInfo, error)
	// Summarize is the whole summary of what Resolve returned.
	Summarize(cur *k8s.Current) ray.Summary
	// Pods, Events and OpenLogs read the instance cur holds, summarized once (Summarize) for all.
	Pods(ctx context.Context, cur *k8s.Current) ([]corev1.Pod, error)
	Events(ctx context.Context, cur *k8s.Current) ([]ray.EventInfo, error)
	OpenLogs(ctx context.Context, cur *k8s.Current, pod, container string, opts *corev1.PodLogOptions) (*k8s.LogStream, error)
	// DashboardToken is the token the dashboard of the instance's Ray cluster takes, as the caller may
	// read it: "" where it takes none; a Forbidden or k8s.ErrNoRayToken where there is none to send.
	DashboardToken(ctx context.Context, obj *unstructured.Unstructured) (string, error)
}

// ObjectsFor returns the objects of kind k as the holder of token reads and writes them.
type ObjectsFor func(k *ray.Kind, token string) (Objects, error)

// Dashboards reaches Ray dashboards (dashboard.Dashboards).
type Dashboards interface {
	// Address is host:port of the Ray dashboard of the cluster an instance runs on (s is its summary),
	// "" without one.
	Address(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary) string
	// Transport is how the proxy reaches them.
	Transport() http.RoundTripper
	// GCSEventStats reads the main-loop event stats gcs_server printed on the head node at nodeIP,
	// through the dashboard at addr, with its Ray token ("": none).
	GCSEventStats(ctx context.Context, addr, nodeIP, rayToken string) ([]promql.LoopPrint, error)
}

// Usage answers the overview's Prometheus questions (promql.Querier).
type Usage interface {
	Usage(ctx context.Context, w promql.Window, sc promql.Scope) (promql.Used, promql.Series, []string)
}

// ClusterHealth answers the cluster health tab from Ray's own metrics (promql.Querier).
type ClusterHealth interface {
	ClusterHealth(ctx context.Context, w promql.Window, namespace, cluster string) promql.ClusterHealth
}

// Deps are what the handlers need; internal/app wires them.
type Deps struct {
	Kinds   *ray.Kinds
	Store   Store
	Objects ObjectsFor
	// Dashboards reaches the Ray dashboards the proxy route serves.
	Dashboards Dashboards
	// Dashboard says where the Ray dashboard proxy is served: what a dashboard answers never runs on the
	// console's origin. Proxies bounds the proxied requests open at once and how long each lasts.
	Dashboard dashproxy.Site
	Proxies   *stream.Limit
	// TrustedProxies are the peers whose X-Forwarded-Proto and X-Forwarded-Host name the origin a
	// browser sees (gateways in front of the service); none: the request's own.
	TrustedProxies []netip.Prefix
	Authz          Authorizer
	// RightsVersion counts the changes of what the callers' rights are read from besides their
	// verdicts (the RoleBindings); nil: nothing but the verdicts.
	RightsVersion func() uint64
	// PageReuse is how long a list page answers again the same caller's same ask while nothing it is
	// made of changed (see pages.go); 0: never.
	PageReuse time.Duration
	Log       *zap.Logger
	// Gatherer holds the service's own metrics for /metrics (nil: /metrics is served elsewhere); HTTP
	// records requests into it.
	Gatherer prometheus.Gatherer
	HTTP     *metrics.HTTP
	// Queues lists the queue managers' queues as a caller; nil: none.
	Queues Queues
	// Usage answers the overview's Prometheus questions; nil without Prometheus.
	Usage Usage
	// Health answers the cluster health tab; nil without Prometheus.
	Health ClusterHealth
	// Grafana is the target of the overview's deep links.
	Grafana Grafana
	// Shutdown is done when the service shuts down; it ends log streams.
	Shutdown context.Context
	// Follows bounds the log follows open at once and how long each lasts; nil: no bound.
	Follows *stream.Limit
	// Watches bounds the watch streams the same way; Streams shapes them.
	Watches *stream.Limit
	Streams stream.Options
	// Detached, when set, lets HTTP/1.1 watch streams hold their connection themselves once started
	// (see internal/stream), and counts them for the shutdown to wait on; nil: they stay with the server.
	Detached *stream.Detached
	// WatchEvents holds the Kubernetes events of a namespace for object streams; nil: they send none.
	WatchEvents func(ns string) stream.NamespaceEvents
	// DetailEvents holds the Kubernetes events of a namespace for details, without a release: false
	// where it cannot now; nil: details read events from the apiserver.
	DetailEvents func(ns string) (stream.NamespaceEvents, bool)
	// Audit records each write made through the service and lists them; nil: none is recorded, and the
	// audit routes answer 503.
	Audit AuditTrail
	// History reads the records of objects finished and gone; nil: the history routes answer 503.
	History History
	// Subscriptions keeps the subscriptions to notifications; nil: their routes answer 503. Guard
	// checks their webhooks' addresses, resolved by Lookup (nil: the system's resolver).
	Subscriptions Subscriptions
	Guard         *notify.Guard
	Lookup        func(ctx context.Context, host string) ([]netip.Addr, error)
	// IdlePolicies reads and writes the namespaces' idle policies as a caller; nil: their routes
	// answer 503.
	IdlePolicies func(token string) (IdlePolicies, error)
	// Utilization reads the utilization accounting's figures; nil: its routes answer 503. Quotas reads
	// the namespaces' ResourceQuotas shown beside them (nil: none).
	Utilization Utilization
	Quotas      Quotas
	// Ready reports why the service cannot serve yet, or nil.
	Ready func(ctx context.Context) error
}

// Server holds the handlers.
type Server struct {
	Deps

	// dashboardsOnly: this server is the dashboards' own origin, and serves nothing else.
	dashboardsOnly bool

	// rules are what callers may see and do; streams serves the watch streams, proxy the Ray dashboards.
	rules   *access.Rules
	streams *stream.Engine
	proxy   *dashproxy.Proxy

	readyMu     sync.Mutex
	readyReason string
	// pages are the list pages last answered (see pages.go).
	pages *pages
}

// Keys of what the middlewares put into a request's context.
type (
	tokenKey   struct{}
	callerKey  struct{}
	loggerKey  struct{}
	requestKey struct{}
	writerKey  struct{}
)

// NewRouter returns the HTTP handler of the service.
func NewRouter(d Deps) *gin.Engine {
	s := newServer(d, false)
	s.pages = newPages(PageBytes, min(d.PageReuse, MaxPageReuse))
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.ContextWithFallback = true
	r.HandleMethodNotAllowed = true
	r.Use(s.observe, s.recover)
	r.NoRoute(s.handle(func(c *gin.Context) (*response, error) {
		return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("no route %s %s", c.Request.Method, c.Request.URL.Path))
	}))
	r.NoMethod(s.handle(func(c *gin.Context) (*response, error) {
		return nil, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	}))

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	if d.Gatherer != nil {
		r.GET("/metrics", s.metrics(promhttp.HandlerFor(d.Gatherer, promhttp.HandlerOpts{})))
	}

	v1 := r.Group(BasePath)
	s.swaggerRoutes(v1)
	a := v1.Group("", s.authenticate)
	a.GET("/overview", s.handle(s.overview))
	a.GET("/overview/watch", s.handle(s.watchOverview))
	a.GET("/queues", s.handle(s.queueList))
	a.GET("/audit", s.handle(s.auditList))
	a.GET("/audit/verify", s.handle(s.auditVerify))
	a.GET("/utilization", s.handle(s.utilization))
	a.GET("/namespaces/:namespace/utilization", s.handle(s.namespacedUtilization))
	// Routes served from the watch cache or the history read nothing as the caller and build no
	// clients for it; the others take the caller's objects from asCaller.
	h := a.Group("/history/:kind", s.withKind)
	h.GET("", s.handle(s.historyList))
	h.GET("/:uid", s.handle(s.historyGet))
	h.POST("/:uid/rerun", s.asCaller, s.handle(s.historyRerun))
	subs := a.Group("/namespaces/:namespace/subscriptions")
	subs.POST("", s.handle(s.createSubscription))
	subs.GET("", s.handle(s.listSubscriptions))
	subs.GET("/:id", s.handle(s.getSubscription))
	subs.DELETE("/:id", s.handle(s.deleteSubscription))
	subs.GET("/:id/deliveries", s.handle(s.listDeliveries))
	policy := a.Group("/namespaces/:namespace/idle-policy")
	policy.GET("", s.handle(s.getIdlePolicy))
	policy.PUT("", s.handle(s.putIdlePolicy))
	policy.DELETE("", s.handle(s.deleteIdlePolicy))
	all := a.Group("/:kind", s.withKind)
	all.GET("", s.handle(s.listAll))
	all.GET("/watch", s.handle(s.watchAll))
	all.POST("/batch-delete", s.asCaller, s.handle(s.batchDelete))
	ns := a.Group("/namespaces/:namespace/:kind", s.withKind)
	ns.GET("", s.handle(s.list))
	ns.GET("/watch", s.handle(s.watchList))
	// The detail builds the caller's clients only where the watch cache cannot answer it.
	ns.GET("/:name", s.handle(s.get))
	obj := ns.Group("", s.asCaller)
	obj.POST("", s.handle(s.create))
	obj.GET("/:name/watch", s.handle(s.watchObject))
	obj.PUT("/:name", s.writes, s.handle(s.replace))
	obj.DELETE("/:name", s.writes, s.handle(s.delete))
	obj.GET("/:name/yaml", s.handle(s.exportYAML))
	obj.POST("/:name/start", s.writes, s.handle(s.start))
	obj.POST("/:name/stop", s.writes, s.handle(s.stop))
	obj.POST("/:name/scale", s.writes, s.handle(s.scale))
	obj.GET("/:name/pods", s.handle(s.pods))
	ns.GET("/:name/runs", s.handle(s.runs))
	obj.POST("/:name/run", s.handle(s.runNow))
	obj.GET("/:name/events", s.handle(s.events))
	obj.GET("/:name/logs", s.handle(s.logs))
	s.dashboardRoutes(ns)
	obj.GET("/:name/metrics", s.handle(s.clusterMetrics))
	obj.GET("/:name/health", s.handle(s.clusterHealth))
	return r
}

// NewDashboardRouter returns the HTTP handler of the dashboards' own origin: the Ray dashboard proxy
// and nothing else, so that what a tenant's dashboard answers runs on no origin that serves the API.
func NewDashboardRouter(d Deps) *gin.Engine {
	s := newServer(d, true)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.ContextWithFallback = true
	r.Use(s.observe, s.recover)
	r.NoRoute(s.handle(func(*gin.Context) (*response, error) {
		return nil, statusError(http.StatusNotFound, metav1.StatusReasonNotFound, "this origin serves Ray dashboards only")
	}))
	s.dashboardRoutes(r.Group(BasePath, s.authenticate).Group("/namespaces/:namespace/:kind", s.withKind))
	return r
}

// dashboardRoutes adds the dashboard proxy's routes to ns, the group of a namespace's kind.
func (s *Server) dashboardRoutes(ns *gin.RouterGroup) {
	ns.GET("/:name/dashboard", s.handle(s.dashboardRoot))
	obj := ns.Group("", s.asCaller)
	for _, method := range dashproxy.Methods() {
		obj.Handle(method, "/:name/dashboard/*path", s.handle(s.dashboard))
	}
}

// newServer is the server of the handlers d needs: the rules of access, the stream engine and the
// dashboard proxy over d; dashboardsOnly for the dashboards' own origin.
func newServer(d Deps, dashboardsOnly bool) *Server {
	rules := &access.Rules{Kinds: d.Kinds, Authz: d.Authz, Store: d.Store}
	return &Server{Deps: d, dashboardsOnly: dashboardsOnly, rules: rules,
		streams: &stream.Engine{Store: d.Store, Authz: d.Authz, Rules: rules, Events: d.WatchEvents,
			RecentEvents: RecentEvents, Limit: d.Watches, Options: d.Streams, Detached: d.Detached,
			Shutdown: d.Shutdown, Envelope: errorData},
		proxy: &dashproxy.Proxy{Site: d.Dashboard, TrustedProxies: d.TrustedProxies, Limit: d.Proxies, Own: dashboardsOnly}}
}

// observe gives each request an id and a logger, and records its metrics and an access log line.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader("X-Request-ID")
	if !validRequestID(id) {
		id = uuid.NewString()
	}
	c.Header("X-Request-ID", id)
	log := &requestLog{base: s.Log, id: id}
	c.Set(loggerKey{}, log)
	s.HTTP.InFlight.Inc()
	defer s.HTTP.InFlight.Dec()

	c.Next()

	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	elapsed := time.Since(start)
	code := c.Writer.Status()
	method := metrics.MethodLabel(c.Request.Method)
	s.HTTP.Requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	s.HTTP.Duration.WithLabelValues(method, route).Observe(elapsed.Seconds())
	if route == "/healthz" || route == "/readyz" || route == "/metrics" {
		return
	}
	s.Log.Info("request", zap.String("requestID", id), zap.String("method", c.Request.Method), zap.String("path", c.Request.URL.Path),
		zap.String("route", route), zap.Int("status", code), zap.Duration("elapsed", elapsed),
		zap.String("caller", c.GetString(callerKey{})))
}

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			logger(c).Error("panic while serving", zap.Any("panic", v), zap.Stack("stack"))
			if c.Writer.Written() {
				c.Abort()
				return
			}
			s.abort(c, errors.New("panic while serving"))
		}
	}()
	c.Next()
}

// authenticate requires a bearer token. The token is checked by the apiserver at its first use.
func (s *Server) authenticate(c *gin.Context) {
	token := auth.TokenFromRequest(c.Request)
	if token == "" {
		s.abort(c, statusError(http.StatusUnauthorized, metav1.StatusReasonUnauthorized,
			"no bearer token: send X-OpenFuyao-Authorization or Authorization: Bearer <token>"))
		return
	}
	c.Set(tokenKey{}, token)
	c.Set(callerKey{}, auth.TokenHash(token))
	c.Next()
}

// request is what the kind routes' middlewares resolve once for a handler: the kind of the path
// (withKind) and, for a route that reads or writes as the caller, its objects of that kind as the
// caller reads and writes them (asCaller; nil on routes served from the watch cache).
type request struct {
	kind    *ray.Kind
	objects Objects
}

// withKind resolves the {kind} path parameter (anything but the Ray kinds, or an optional kind the
// cluster does not serve, is 404) and checks the path's names.
func (s *Server) withKind(c *gin.Context) {
	k, ok := s.Kinds.Lookup(c.Param("kind"))
	if !ok {
		var names []string
		for _, k := range s.Kinds.All() {
			names = append(names, k.Resource)
		}
		s.abort(c, statusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("unknown kind %q: use %s", c.Param("kind"), strings.Join(names, ", "))))
		return
	}
	if !s.Store.Serves(k) {
		s.abort(c, statusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("this cluster does not serve %s.%s: %s needs %s", k.Resource, k.GVR().Group, k.Kind, k.Requires)))
		return
	}
	if err := checkPathNames(c.Param("namespace"), c.Param("name")); err != nil {
		s.abort(c, err)
		return
	}
	c.Set(requestKey{}, &request{kind: k})
	c.Next()
}

// asCaller makes the caller's objects of the path's kind (its clients), after withKind.
func (s *Server) asCaller(c *gin.Context) {
	if err := s.callerObjects(c); err != nil {
		s.abort(c, err)
		return
	}
	c.Next()
}

// callerObjects makes the caller's objects of the path's kind, for a route that needs them only when
// the watch cache cannot answer (the detail).
func (s *Server) callerObjects(c *gin.Context) error {
	r := req(c)
	if r.objects != nil {
		return nil
	}
	objs, err := s.Objects(r.kind, token(c))
	if err != nil {
		return err
	}
	r.objects = objs
	return nil
}

// writes marks a route that may write the object of its path: once it has answered, whatever it
// answered, the watch cache stops serving the object's detail until it is read again (read your writes).
func (s *Server) writes(c *gin.Context) {
	c.Next()
	s.Store.ForgetManifest(req(c).kind, c.Param("namespace"), c.Param("name"))
}

// req returns what withKind and asCaller resolved.
func req(c *gin.Context) *request { return c.MustGet(requestKey{}).(*request) }

func token(c *gin.Context) string { return c.GetString(tokenKey{}) }

// healthz answers 200 while the process serves.
//
//	@Summary	Liveness
//	@ID			checkLive
//	@Tags		service
//	@Produce	plain
//	@Success	200	{string}	string	"ok"
//	@Router		/healthz [get]
func (s *Server) healthz(c *gin.Context) { c.String(http.StatusOK, "ok") }

// metrics serves the service's own metrics.
//
//	@Summary		The service's own metrics
//	@ID				getServiceMetrics
//	@Description	Unauthenticated, as Prometheus scrapes it. With metrics-listen set (as the chart sets it) it is
//	@Description	served only on that address, apart from the API, and this address answers 404.
//	@Tags			service
//	@Produce		plain
//	@Success		200	{string}	string		"Prometheus text format"
//	@Failure		404	{object}	Envelope	"served on the metrics address instead"
//	@Router			/metrics [get]
func (s *Server) metrics(h http.Handler) gin.HandlerFunc { return gin.WrapH(h) }

// readyz answers 200 once the caches have synced and the apiserver and the KubeRay CRDs are there.
// Anyone may ask, so the answer says no more than "not ready"; the reason goes to the log, once each
// time it changes.
//
//	@Summary	Readiness
//	@ID			checkReady
//	@Tags		service
//	@Produce	plain
//	@Success	200	{string}	string	"ok"
//	@Failure	503	{string}	string	"not ready (the reason is in the service's log)"
//	@Router		/readyz [get]
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	err := s.Ready(ctx)
	s.noteReadiness(err)
	if err != nil {
		c.String(http.StatusServiceUnavailable, "not ready\n")
		return
	}
	c.String(http.StatusOK, "ok")
}

// noteReadiness logs the readiness reason when it changes.
func (s *Server) noteReadiness(err error) {
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	s.readyMu.Lock()
	changed := reason != s.readyReason
	s.readyReason = reason
	s.readyMu.Unlock()
	switch {
	case changed && err != nil:
		s.Log.Warn("not ready", zap.Error(err))
	case changed:
		s.Log.Info("ready")
	}
}

func logger(c *gin.Context) *zap.Logger {
	if l, ok := c.Get(loggerKey{}); ok {
		return l.(*requestLog).logger()
	}
	return zap.NewNop()
}

// requestLog is the logger of a request, made at its first use: a logger with a field costs a copy of
// its encoder, which most requests, logging nothing, need not pay.
type requestLog struct {
	base *zap.Logger
	id   string
	once sync.Once
	log  *zap.Logger
}

func (r *requestLog) logger() *zap.Logger {
	r.once.Do(func() { r.log = r.base.With(zap.String("requestID", r.id)) })
	return r.log
}
