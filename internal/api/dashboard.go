package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"path"
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
//	@Description	Kubernetes token is sent to a dashboard, including one with enableK8sTokenAuth. What the
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
	// The bound is taken once the caller may proxy: what it refuses costs nothing.
	release, err := s.acquireFor(c, s.Proxies)
	if err != nil {
		return nil, err
	}
	defer release()
	prefix := dashboardPath(ns, r.kind.Resource, c.Param("name"))
	origin := s.requestOrigin(c.Request)
	target := c.Param("path")
	sandboxed := !s.dashboardsOnly
	// What keeps the dashboard from answering is answered as any error is, once the proxy returns: the
	// proxy calls ErrorHandler only before it writes anything.
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Transport:     s.Dashboards.Transport(),
		FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", addr, addr
			pr.Out.URL.Path, pr.Out.URL.RawPath = target, ""
			pr.Out.Header = passedHeaders(pr.Out.Header)
			if rayToken != "" {
				pr.Out.Header.Set(ray.AuthHeader, "Bearer "+rayToken)
			}
		},
		ModifyResponse: func(res *http.Response) error {
			confine(res, c.Request.URL.Path, origin, prefix, addr, sandboxed)
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
	// the transport bounds the wait for the dashboard's answer and max-dashboard-duration the whole.
	liftDeadlines(c.Writer)
	in := c.Request
	if d := s.Proxies.maxDuration(); d > 0 {
		ctx, cancel := context.WithTimeout(in.Context(), d)
		defer cancel()
		in = in.WithContext(ctx)
	}
	rp.ServeHTTP(c.Writer, in)
	return nil, proxyErr
}

// passedHeaders are the request headers a Ray dashboard needs, and nothing else: the caller's
// credentials and cookies for the console, and what a gateway adds about the caller (its access token,
// X-Auth-Request-*, X-Remote-*, Proxy-Authorization), never reach whoever runs the cluster. The
// hop-by-hop headers of an upgrade are the proxy's own, set again before this.
func passedHeaders(in http.Header) http.Header {
	out := http.Header{}
	for _, name := range passedRequestHeaders {
		if v := in.Values(name); len(v) > 0 {
			out[http.CanonicalHeaderKey(name)] = v
		}
	}
	return out
}

var passedRequestHeaders = []string{"Accept", "Accept-Encoding", "Accept-Language", "Cache-Control", "Pragma",
	"Content-Type", "Content-Encoding", "Content-Language", "If-Match", "If-None-Match", "If-Modified-Since",
	"If-Unmodified-Since", "If-Range", "Range", "User-Agent", "X-Requested-With", ray.AuthHeader,
	"Connection", "Upgrade", "Te", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Protocol",
	"Sec-WebSocket-Extensions"}

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

// originHeaders are response headers that act on the whole origin (its cookies, storage, service
// workers' reach, transport and cross-origin grants) rather than on the page: a dashboard may not send
// them, on an origin other dashboards share.
var originHeaders = []string{"Set-Cookie", "Set-Cookie2", "Clear-Site-Data", "Service-Worker-Allowed",
	"Strict-Transport-Security", "Alt-Svc", "Refresh", "Link",
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Allow-Headers",
	"Access-Control-Allow-Methods", "Access-Control-Expose-Headers"}

// confine keeps what a Ray dashboard answers to its own box under prefix, the request's path being
// reqPath on origin; sandboxed, on the API's origin, its pages get an opaque origin of their own.
func confine(res *http.Response, reqPath, origin, prefix, dashboardAddr string, sandboxed bool) {
	h := res.Header
	for _, name := range originHeaders {
		h.Del(name)
	}
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", dashboardCSP(origin+prefix+"/", sandboxed))
	if _, ok := h["Location"]; ok {
		loc, kept := confineLocation(h.Get("Location"), reqPath, prefix, dashboardAddr)
		h.Set("Location", loc)
		if !kept && res.StatusCode >= 300 && res.StatusCode < 400 {
			// To the dashboard's root, as a GET: a 307 or 308 would send a POST or DELETE along.
			res.StatusCode, res.Status = http.StatusSeeOther, ""
		}
	}
}

// dashboardSandbox is what a sandboxed dashboard page may still do: without allow-same-origin its
// origin is opaque, so that its scripts reach nothing of the origin it is served on.
const dashboardSandbox = "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads"

// dashboardCSP lets a proxied page load, connect, frame and submit only under box (an absolute URL
// ending in "/"): its own dashboard. Scripts run (the Ray dashboard needs them). On the dashboards'
// origin no page frames it (a page of another dashboard there would reach into it); sandboxed, on the
// API's origin, the console may frame it.
func dashboardCSP(box string, sandboxed bool) string {
	directives := []string{
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
	}
	if sandboxed {
		return strings.Join(append(directives, "frame-ancestors 'self'", dashboardSandbox), "; ")
	}
	return strings.Join(append(directives, "frame-ancestors 'none'"), "; ")
}

// confineLocation maps a dashboard's redirect under the proxy path prefix, as a browser would read it
// on the request's path reqPath, and says whether it stayed there: a dashboard-absolute path, or an
// absolute URL of the dashboard itself, keeps its path under prefix; a relative one is resolved against
// reqPath. Dot segments (encoded too) are resolved and a backslash is a slash, as browsers read them;
// anything that would leave prefix, or name another host or scheme, is the dashboard's root instead.
func confineLocation(loc, reqPath, prefix, dashboardAddr string) (string, bool) {
	refused := prefix + "/"
	if strings.ContainsFunc(loc, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return refused, false // browsers drop tabs and newlines: "/\t/host" is "//host" to them
	}
	u, err := url.Parse(strings.ReplaceAll(loc, `\`, "/"))
	if err != nil || u.Opaque != "" || u.User != nil {
		return refused, false
	}
	var p string
	switch {
	case u.Scheme != "" || u.Host != "":
		if u.Host != dashboardAddr || u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "" {
			return refused, false
		}
		p = prefix + cleanPath("/"+u.Path)
	case strings.HasPrefix(u.Path, "/"):
		p = prefix + cleanPath(u.Path)
	case u.Path == "":
		p = cleanPath(reqPath)
	default:
		p = cleanPath(reqPath[:strings.LastIndex(reqPath, "/")+1] + u.Path)
	}
	if !strings.HasPrefix(p, prefix+"/") {
		return refused, false
	}
	return (&url.URL{Path: p, RawQuery: u.RawQuery, Fragment: u.Fragment}).String(), true
}

// cleanPath resolves the dot segments of an absolute path and joins repeated slashes, keeping a
// trailing slash.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

var (
	forwardedHost = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)
)

// requestOrigin is the origin the browser sees: the request's own, or where the peer is a trusted proxy
// its X-Forwarded-Proto and X-Forwarded-Host (the first of each, where well-formed).
func (s *Server) requestOrigin(r *http.Request) string {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	host := r.Host
	if s.trustedPeer(r) {
		if p := firstValue(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
			proto = p
		}
		if h := firstValue(r.Header.Get("X-Forwarded-Host")); forwardedHost.MatchString(h) {
			host = h
		}
	}
	return proto + "://" + host
}

// trustedPeer tells whether the request comes straight from one of the trusted proxies.
func (s *Server) trustedPeer(r *http.Request) bool {
	if len(s.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range s.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

// dashboardOrigin is the origin the dashboards are served on, for a request to the API: the one
// configured, else the request's with the dashboards' port; "" where they have no origin of their own.
func (s *Server) dashboardOrigin(r *http.Request) string {
	if s.Dashboard.Origin != "" || s.Dashboard.Port == "" {
		return s.Dashboard.Origin
	}
	u, err := url.Parse(s.requestOrigin(r))
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), s.Dashboard.Port)
}

// redirectToDashboardOrigin sends a dashboard request made on the API's origin to target (a path and
// query) on the dashboards' own, unless the operator has the API's origin serve them (or they have no
// origin of their own: then they are served here sandboxed), and tells whether it did.
func (s *Server) redirectToDashboardOrigin(c *gin.Context, target string) bool {
	if s.dashboardsOnly || s.Dashboard.SameOrigin {
		return false
	}
	origin := s.dashboardOrigin(c.Request)
	if origin == "" {
		return false
	}
	c.Redirect(http.StatusTemporaryRedirect, origin+target)
	return true
}
