package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"

	"github.com/gin-gonic/gin"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/auth"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// proxyVerbs is the verb the apiserver asks on services/proxy for each method it proxies.
var proxyVerbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodOptions: "get",
	http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "update", http.MethodDelete: "delete",
}

// dashboard proxies to the Ray dashboard of the object's cluster.
//
//	@Summary		Ray dashboard
//	@ID				proxyDashboard
//	@Description	Reverse proxy to the Ray dashboard of the cluster (a RayJob's or RayService's current
//	@Description	cluster), reached by the head service's in-cluster name and dashboard port, honouring the
//	@Description	HTTP proxy environment variables. Each method needs the verb the apiserver would ask on
//	@Description	services/proxy in the namespace: get (GET, HEAD, OPTIONS), create (POST), update (PUT, PATCH),
//	@Description	delete (DELETE). The caller's credentials and cookies are not passed on. A Ray cluster in
//	@Description	token mode (authOptions.mode: token) gets its token in X-Ray-Authorization, as KubeRay sends
//	@Description	it, when the caller may get the Secret holding it (one the cluster owns); otherwise the dashboard's own answer (401,
//	@Description	its login) comes back, and an X-Ray-Authorization the caller sends is passed on. No one's
//	@Description	Kubernetes token is sent to a dashboard, including one with enableK8sTokenAuth. What the dashboard
//	@Description	answers is kept to its own box on the console's origin: Set-Cookie and headers that act on
//	@Description	the whole origin are dropped, redirects stay under the proxy path, and a Content-Security-Policy
//	@Description	lets its pages load and connect only under the proxy path (the origin is the request's, or
//	@Description	X-Forwarded-Proto and X-Forwarded-Host of a gateway). With the dashboard-origin setting the
//	@Description	proxy is served only on that separate origin, and requests for it elsewhere are redirected.
//	@Tags			observe
//	@Security		Bearer
//	@Param			namespace						path	string	true	"namespace"
//	@Param			kind							path	string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name							path	string	true	"name"
//	@Param			path							path	string	true	"path on the dashboard"
//	@Success		200								"what the dashboard answers"
//	@Failure		400,401,403,404,409,429,502,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [get]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [head]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [options]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [post]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [put]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [patch]
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard/{path} [delete]
func (s *Server) dashboard(c *gin.Context) (*response, error) {
	if s.redirectToDashboardOrigin(c) {
		return nil, nil
	}
	verb, known := proxyVerbs[c.Request.Method]
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
	prefix := dashboardPath(ns, r.kind.Resource, c.Param("name"))
	origin := requestOrigin(c.Request)
	path := c.Param("path")
	// What keeps the dashboard from answering is answered as any error is, once the proxy returns: the
	// proxy calls ErrorHandler only before it writes anything.
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Transport:     s.Dashboards.Transport(),
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", addr, addr
			pr.Out.URL.Path, pr.Out.URL.RawPath = path, ""
			for _, h := range []string{auth.OpenFuyaoHeader, auth.StandardHeader, "Cookie"} {
				pr.Out.Header.Del(h)
			}
			if rayToken != "" {
				pr.Out.Header.Set(ray.AuthHeader, "Bearer "+rayToken)
			}
		},
		ModifyResponse: func(res *http.Response) error {
			confine(res.Header, origin, prefix, addr)
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			logger(c).Warn("Ray dashboard unreachable", zap.String("address", addr), zap.Error(err))
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
				proxyErr = statusError(http.StatusGatewayTimeout, metav1.StatusReasonTimeout, fmt.Sprintf("the Ray dashboard at %s did not answer in time", addr))
				return
			}
			proxyErr = statusError(http.StatusBadGateway, ReasonBadGateway, fmt.Sprintf("the Ray dashboard at %s did not answer", addr))
		},
	}
	// A dashboard may stream (job logs, events): the server's deadlines for ordinary requests are lifted,
	// the transport bounds the wait for the dashboard's answer.
	liftDeadlines(c.Writer)
	rp.ServeHTTP(c.Writer, c.Request)
	return nil, proxyErr
}

// dashboardRoot sends .../dashboard to .../dashboard/, so that the dashboard's relative links resolve.
//
//	@Summary		Ray dashboard (root)
//	@ID				openDashboard
//	@Description	Redirects to the same path with a trailing slash, where the proxy serves the dashboard.
//	@Tags			observe
//	@Security		Bearer
//	@Param			namespace	path	string	true	"namespace"
//	@Param			kind		path	string	true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name		path	string	true	"name"
//	@Success		301			"to .../dashboard/"
//	@Success		307			"to the separate dashboard origin, where one is configured"
//	@Failure		400,401,404	{object}	Envelope
//	@Failure		403			{object}	Envelope	"once the redirect is followed, for a caller without services/proxy"
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/dashboard [get]
func (s *Server) dashboardRoot(c *gin.Context) (*response, error) {
	if !s.redirectToDashboardOrigin(c) {
		c.Redirect(http.StatusMovedPermanently, strings.TrimSuffix(c.Request.URL.Path, "/")+"/")
	}
	return nil, nil
}

// dashboardPath is the path under which the proxy serves the Ray dashboard of an object, without the
// trailing slash.
func dashboardPath(ns, resource, name string) string {
	return BasePath + "/namespaces/" + ns + "/" + resource + "/" + name + "/dashboard"
}

// originHeaders are response headers that act on the whole origin (its cookies, storage, service
// workers' reach, transport and cross-origin grants) rather than on the page: a dashboard may not send
// them on the console's origin.
var originHeaders = []string{"Set-Cookie", "Set-Cookie2", "Clear-Site-Data", "Service-Worker-Allowed",
	"Strict-Transport-Security", "Alt-Svc", "Refresh", "Link",
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
	"Access-Control-Allow-Methods", "Access-Control-Expose-Headers"}

// confine keeps what a Ray dashboard answers to its own box under prefix on the console's origin.
func confine(h http.Header, origin, prefix, dashboardAddr string) {
	for _, name := range originHeaders {
		h.Del(name)
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", dashboardCSP(origin+prefix+"/"))
	if loc := h.Get("Location"); loc != "" {
		h.Set("Location", confineLocation(loc, prefix, dashboardAddr))
	}
}

// dashboardCSP lets a proxied page load, connect, frame and submit only under box (an absolute URL
// ending in "/"): its own dashboard. Scripts run (the Ray dashboard needs them), but cannot reach the
// console's API. The page may be framed by the console only.
func dashboardCSP(box string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + box + " 'unsafe-inline' 'unsafe-eval'",
		"style-src " + box + " 'unsafe-inline'",
		"img-src " + box + " data: blob:",
		"font-src " + box + " data:",
		"connect-src " + box,
		"media-src " + box,
		"worker-src " + box,
		"frame-src " + box,
		"manifest-src " + box,
		"form-action " + box,
		"base-uri " + box,
		"object-src 'none'",
		"frame-ancestors 'self'",
	}, "; ")
}

// confineLocation maps a dashboard's redirect under the proxy path: a dashboard-absolute path, or an
// absolute URL of the dashboard itself, keeps its path under prefix; a redirect anywhere else goes to
// the dashboard's root instead; a relative one resolves under the proxy path already.
func confineLocation(loc, prefix, dashboardAddr string) string {
	u, err := url.Parse(loc)
	switch {
	case err != nil:
		return prefix + "/"
	case u.Scheme != "" || u.Host != "" || strings.HasPrefix(loc, "//"):
		if u.Host != dashboardAddr || u.Scheme != "http" && u.Scheme != "https" {
			return prefix + "/"
		}
	case !strings.HasPrefix(u.Path, "/"):
		return loc
	}
	out := &url.URL{Path: prefix + u.Path, RawQuery: u.RawQuery, Fragment: u.Fragment}
	return out.String()
}

var (
	forwardedHost = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)
)

// requestOrigin is the origin the browser sees: a gateway's X-Forwarded-Proto and X-Forwarded-Host
// (the first of each, where well-formed), else the request's own.
func requestOrigin(r *http.Request) string {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
		proto = p
	}
	host := r.Host
	if h := firstValue(r.Header.Get("X-Forwarded-Host")); forwardedHost.MatchString(h) {
		host = h
	}
	return proto + "://" + host
}

func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

// redirectToDashboardOrigin sends a dashboard request made elsewhere than on the separate dashboard
// origin there, when one is configured, and tells whether it did.
func (s *Server) redirectToDashboardOrigin(c *gin.Context) bool {
	if s.DashboardOrigin == "" || requestOrigin(c.Request) == s.DashboardOrigin {
		return false
	}
	c.Redirect(http.StatusTemporaryRedirect, s.DashboardOrigin+c.Request.URL.RequestURI())
	return true
}
