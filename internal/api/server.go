// Package api is the HTTP side of ray-service: routes, handlers, request parsing and the mapping of
// errors to statuses.
package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"ray-service/internal/auth"
	"ray-service/internal/k8s"
	"ray-service/internal/metrics"
)

// BasePath is the prefix of every API route.
const BasePath = "/rest/ray/v1"

// Authorizer answers who a caller is and what the caller may do, asking with the caller's token.
type Authorizer interface {
	Allowed(ctx context.Context, token string, a auth.Attributes) (bool, error)
	UserName(ctx context.Context, token string) (string, error)
}

// Deps are what the handlers need; cmd/ray-service wires them.
type Deps struct {
	Kinds   *k8s.Registry
	Store   *k8s.Store
	Clients *k8s.ClientFactory
	// Lifecycle starts and stops objects.
	Lifecycle *k8s.Lifecycle
	// Dashboards reaches the Ray dashboards the proxy route serves.
	Dashboards *k8s.Dashboards
	Authz      Authorizer
	Log        *zap.Logger
	// Registry gathers the service's own metrics for /metrics; HTTP records requests into it.
	Registry *prometheus.Registry
	HTTP     *metrics.HTTP
	// Metrics answers the overview's Prometheus questions; nil without Prometheus.
	Metrics *metrics.Querier
	// Grafana is the target of the overview's deep links.
	Grafana Grafana
	// Shutdown is done when the service shuts down; it ends log streams.
	Shutdown context.Context
	// Ready reports why the service cannot serve yet, or nil.
	Ready func(ctx context.Context) error
}

// Server holds the handlers.
type Server struct {
	Deps
}

const (
	ctxToken     = "ray-service/token"
	ctxRequestID = "ray-service/request-id"
	ctxLogger    = "ray-service/logger"
)

// NewRouter returns the HTTP handler of the service.
func NewRouter(d Deps) *gin.Engine {
	s := &Server{Deps: d}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.ContextWithFallback = true
	r.HandleMethodNotAllowed = true
	r.Use(s.observe, s.recover)
	r.NoRoute(func(c *gin.Context) {
		s.fail(c, statusError(http.StatusNotFound, "NotFound", sprintf("no route %s %s", c.Request.Method, c.Request.URL.Path)))
	})
	r.NoMethod(func(c *gin.Context) {
		s.respond(c, Envelope{Code: http.StatusMethodNotAllowed, Msg: sprintf("method %s is not allowed on %s", c.Request.Method, c.Request.URL.Path), Reason: "MethodNotAllowed"})
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", s.metrics(promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{})))

	v1 := r.Group(BasePath)
	s.swaggerRoutes(v1)
	a := v1.Group("", s.authenticate)
	a.GET("/overview", s.overview)
	a.GET("/:kind", s.listAll)
	a.POST("/:kind/batch-delete", s.batchDelete)
	ns := a.Group("/namespaces/:namespace/:kind")
	ns.GET("", s.list)
	ns.POST("", s.create)
	ns.GET("/:name", s.get)
	ns.PUT("/:name", s.replace)
	ns.DELETE("/:name", s.delete)
	ns.GET("/:name/yaml", s.exportYAML)
	ns.POST("/:name/start", s.start)
	ns.POST("/:name/stop", s.stop)
	ns.GET("/:name/pods", s.pods)
	ns.GET("/:name/events", s.events)
	ns.GET("/:name/logs", s.logs)
	ns.GET("/:name/dashboard", s.dashboardRoot)
	ns.Any("/:name/dashboard/*path", s.dashboard)
	ns.GET("/:name/metrics", s.clusterMetrics)
	return r
}

// observe gives each request an id and a logger, and records its metrics and an access log line.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader("X-Request-ID")
	if id == "" || len(id) > 128 {
		id = uuid.NewString()
	}
	c.Header("X-Request-ID", id)
	log := s.Log.With(zap.String("requestID", id))
	c.Set(ctxRequestID, id)
	c.Set(ctxLogger, log)
	s.HTTP.InFlight.Inc()
	defer s.HTTP.InFlight.Dec()

	c.Next()

	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	elapsed := time.Since(start)
	code := c.Writer.Status()
	s.HTTP.Requests.WithLabelValues(c.Request.Method, route, strconv.Itoa(code)).Inc()
	s.HTTP.Duration.WithLabelValues(c.Request.Method, route).Observe(elapsed.Seconds())
	if route == "/healthz" || route == "/readyz" || route == "/metrics" {
		return
	}
	log.Info("request", zap.String("method", c.Request.Method), zap.String("path", c.Request.URL.Path),
		zap.String("route", route), zap.Int("status", code), zap.Duration("elapsed", elapsed),
		zap.String("caller", c.GetString("ray-service/caller")))
}

func (s *Server) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			logger(c).Error("panic while serving", zap.Any("panic", v), zap.Stack("stack"))
			if !c.Writer.Written() {
				s.respond(c, Envelope{Code: http.StatusInternalServerError, Msg: "internal error", Reason: "InternalError"})
			}
			c.Abort()
		}
	}()
	c.Next()
}

// authenticate requires a bearer token. The token is checked by the apiserver at its first use.
func (s *Server) authenticate(c *gin.Context) {
	token := auth.TokenFromRequest(c.Request)
	if token == "" {
		s.fail(c, statusError(http.StatusUnauthorized, "Unauthorized",
			"no bearer token: send X-OpenFuyao-Authorization or Authorization: Bearer <token>"))
		c.Abort()
		return
	}
	c.Set(ctxToken, token)
	c.Set("ray-service/caller", auth.TokenHash(token))
	c.Next()
}

// healthz answers 200 while the process serves.
//
//	@Summary	Liveness
//	@Tags		health
//	@Produce	plain
//	@Success	200	{string}	string	"ok"
//	@Router		/healthz [get]
func (s *Server) healthz(c *gin.Context) { c.String(http.StatusOK, "ok") }

// metrics serves the service's own metrics.
//
//	@Summary	The service's own metrics
//	@Tags		health
//	@Produce	plain
//	@Success	200	{string}	string	"Prometheus text format"
//	@Router		/metrics [get]
func (s *Server) metrics(h http.Handler) gin.HandlerFunc { return gin.WrapH(h) }

// readyz answers 200 once the caches have synced and the apiserver and the KubeRay CRDs are there.
//
//	@Summary	Readiness
//	@Tags		health
//	@Produce	plain
//	@Success	200	{string}	string	"ok"
//	@Failure	503	{string}	string	"why the service is not ready"
//	@Router		/readyz [get]
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		c.String(http.StatusServiceUnavailable, "not ready: %v", err)
		return
	}
	c.String(http.StatusOK, "ok")
}

func logger(c *gin.Context) *zap.Logger {
	if l, ok := c.Get(ctxLogger); ok {
		return l.(*zap.Logger)
	}
	return zap.NewNop()
}

// respond writes an envelope with its code as the HTTP status.
func (s *Server) respond(c *gin.Context, env Envelope) {
	c.JSON(env.Code, env)
}

// ok writes data with the given success status.
func (s *Server) ok(c *gin.Context, code int, data interface{}) {
	s.respond(c, Envelope{Code: code, Msg: http.StatusText(code), Data: data})
}

// fail writes err as errorEnvelope maps it, logging what the client is not told.
func (s *Server) fail(c *gin.Context, err error) {
	env, internal := errorEnvelope(err)
	if internal {
		logger(c).Error("request failed", zap.Error(err))
	} else if env.Code >= 500 {
		logger(c).Warn("request failed", zap.Error(err))
	}
	s.respond(c, env)
}
