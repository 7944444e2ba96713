package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/auth"
	"ray-service/internal/dashproxy"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// The Ray dashboard proxy (internal/dashproxy) is mounted here: its handlers check the caller's rights
// and find the dashboard of the object's cluster, and the proxy does the rest.

// dashboard proxies to the Ray dashboard of the object's cluster.
//
//	@Summary		Ray dashboard
//	@ID				proxyDashboard
//	@Description	Reverse proxy to the Ray dashboard of the cluster (a RayJob's or RayService's current
//	@Description	cluster), reached by the head service's in-cluster name and dashboard port, honouring the
//	@Description	HTTP proxy environment variables. Whoever runs a Ray cluster controls what its dashboard
//	@Description	answers, so the proxy is served on an origin of its own (the dashboard-listen address, reached
//	@Description	at dashboard-origin), which serves nothing else: on the API's origin it answers 307 to the same
//	@Description	path there, unless the operator set dashboard-same-origin, where the API's origin serves it with
//	@Description	its pages sandboxed (an opaque origin: their scripts reach neither the console nor the
//	@Description	dashboard's own API). Each method needs the verb the apiserver would ask on services/proxy in
//	@Description	the namespace: get (GET, HEAD, OPTIONS), create (POST), update (PUT, PATCH), delete (DELETE).
//	@Description	Only the request headers a dashboard needs are passed on (Accept*, Content-Type, caching and
//	@Description	range conditions, User-Agent, X-Requested-With, WebSocket upgrades, X-Ray-Authorization): never
//	@Description	the caller's credentials, cookies or what a gateway adds about the caller. A Ray cluster in
//	@Description	token mode (authOptions.mode: token) gets its token in X-Ray-Authorization, as KubeRay sends
//	@Description	it, when the caller may get the Secret holding it (one the cluster owns); otherwise the dashboard's own answer (401,
//	@Description	its login) comes back, and an X-Ray-Authorization the caller sends is passed on. No one's
//	@Description	Kubernetes token is sent to a dashboard, including one with enableK8sTokenAuth. A cluster whose
//	@Description	spec does not set authOptions.mode token, but whose dashboard requires a token (Ray's token
//	@Description	authentication, on by default from Ray 2.61: it answers 401), is answered 409 Conflict saying
//	@Description	so and what to set (the authOptions field of its cluster spec, in details), where neither the
//	@Description	service nor the caller sent a token. What the
//	@Description	dashboard answers is kept to its box: Set-Cookie and headers that act on the whole origin are
//	@Description	dropped; each redirect is resolved against the request's URL (a backslash read as a slash) and
//	@Description	kept under the proxy path of the cluster, and one that would leave it is answered 303 to the
//	@Description	dashboard's root; a Content-Security-Policy lets its pages load and connect only under that
//	@Description	path, and frames them nowhere on the dashboards' origin. The origin named there is the
//	@Description	request's, or X-Forwarded-Proto and X-Forwarded-Host where the peer is one of trusted-proxies.
//	@Description	A caller has at most max-dashboard-requests-per-caller proxied requests open at once, and the
//	@Description	service max-dashboard-requests (429 past either); each lasts at most max-dashboard-duration.
//	@Tags			observe
//	@Security		Bearer
//	@Param			namespace						path	string	true	"namespace"
//	@Param			kind							path	string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name							path	string	true	"name"
//	@Param			path							path	string	true	"path on the dashboard"
//	@Success		200								"what the dashboard answers"
//	@Success		307								"on the API's origin: to the same path on the dashboards' origin"
//	@Failure		400,401,403,404,409,429,502,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [get]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [head]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [options]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [post]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [put]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [patch]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [delete]
func (s *Server) dashboard(c *gin.Context) (*response, error) {
	if s.redirectToDashboardOrigin(c, c.Request.URL.RequestURI()) {
		return nil, nil
	}
	verb, known := dashproxy.Verb(c.Request.Method)
	if !known {
		return nil, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s is not proxied to Ray dashboards", c.Request.Method))
	}
	ns := c.Param("namespace")
	allowed, err := s.Authz.Allowed(c.Request.Context(), token(c), auth.Attributes{Verb: verb, Resource: "services", Subresource: "proxy", Namespace: ns})
	if err != nil {
		return nil, err
	}
	if !allowed {
		return nil, statusError(http.StatusForbidden, metav1.StatusReasonForbidden,
			fmt.Sprintf("the caller may not %s services/proxy in namespace %q", verb, ns))
	}
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	addr := ""
	if cur.Instance != nil {
		// Every asset of a dashboard page is a request of its own: each summarizes the object once, as
		// it says itself (its status and clusters; what its pods add changes neither).
		sum := r.kind.Summarize(cur.Instance)
		if st := sum.Status; st == ray.StatusStopped || st == ray.StatusStopping {
			return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, "it is "+st+": its Ray cluster has no dashboard; start it first")
		}
		addr = s.Dashboards.Address(r.kind, cur.Instance, &sum)
	}
	if addr == "" {
		return nil, statusError(http.StatusConflict, metav1.StatusReasonConflict, "it has no Ray cluster running: start it first")
	}
	// A token-mode Ray cluster's dashboard gets its token as KubeRay sends it, where the caller may read
	// the Secret that holds it; any other caller meets the dashboard's own login (or sends a token they
	// hold themselves). No one's Kubernetes token is passed on, not even where Ray would take one.
	rayToken, err := r.objects.DashboardToken(c.Request.Context(), cur.Instance)
	if err != nil {
		if !apierrors.IsForbidden(err) && !errors.Is(err, k8s.ErrNoRayToken) {
			return nil, err
		}
		logger(c).Debug("no Ray token for the dashboard", zap.Error(err))
	}
	// The bound is taken once the caller may proxy: what it refuses costs nothing.
	release, err := s.Proxies.AcquireFor(c.Request.Context(), s.Authz, token(c))
	if err != nil {
		return nil, err
	}
	defer release()
	t := dashproxy.Target{Addr: addr, Prefix: dashboardPath(ns, r.kind.Resource, c.Param("name")), Path: c.Param("path"),
		RayToken: rayToken, Transport: s.Dashboards.Transport(), TokenRequired: r.kind.TokenRequired(cur.Instance)}
	return nil, s.proxy.Serve(c.Writer, c.Request, t, func() *zap.Logger { return logger(c) })
}

// dashboardRoot sends .../dashboard to .../dashboard/, so that the dashboard's relative links resolve.
//
//	@Summary		Ray dashboard (root)
//	@ID				openDashboard
//	@Description	Redirects to the same path with a trailing slash, where the proxy serves the dashboard: on
//	@Description	the dashboards' own origin (307 from the API's origin, unless dashboard-same-origin is set).
//	@Tags			observe
//	@Security		Bearer
//	@Param			namespace	path	string	true	"namespace"
//	@Param			kind		path	string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name		path	string	true	"name"
//	@Success		301			"to .../dashboard/"
//	@Success		307			"to .../dashboard/ on the dashboards' origin"
//	@Failure		400,401,404	{object}	Envelope
//	@Failure		403			{object}	Envelope	"once the redirect is followed, for a caller without services/proxy"
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard [get]
func (s *Server) dashboardRoot(c *gin.Context) (*response, error) {
	root := strings.TrimSuffix(c.Request.URL.Path, "/") + "/"
	if !s.redirectToDashboardOrigin(c, root) {
		c.Redirect(http.StatusMovedPermanently, root)
	}
	return nil, nil
}

// dashboardPath is the path under which the proxy serves the Ray dashboard of an object, without the
// trailing slash.
func dashboardPath(ns, resource, name string) string {
	return BasePath + "/namespaces/" + ns + "/" + resource + "/" + name + "/dashboard"
}

// redirectToDashboardOrigin sends a dashboard request made on the API's origin to target (a path and
// query) on the dashboards' own where the proxy says so (dashproxy.Proxy.Redirect), and tells whether
// it did.
func (s *Server) redirectToDashboardOrigin(c *gin.Context, target string) bool {
	to, ok := s.proxy.Redirect(c.Request, target)
	if ok {
		c.Redirect(http.StatusTemporaryRedirect, to)
	}
	return ok
}
