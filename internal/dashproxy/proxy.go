// Package dashproxy is the reverse proxy to the Ray dashboards: what a request may pass on to a
// dashboard, what its answer may do (kept to its own box under the proxy path: no origin-wide headers,
// redirects confined, a Content-Security-Policy, a sandbox on the API's origin), and where the
// dashboards are served (an origin of their own). The API's handlers check the caller's rights, find the
// dashboard and hand the request to a Proxy.
package dashproxy

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
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// verbs is the verb the apiserver asks on services/proxy for each method it proxies.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodOptions: "get",
	http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "update", http.MethodDelete: "delete",
}

// Verb is the verb the apiserver asks on services/proxy for a request of method; false for a method
// that is not proxied.
func Verb(method string) (string, bool) {
	v, ok := verbs[method]
	return v, ok
}

// Methods are the methods proxied.
func Methods() []string {
	out := make([]string, 0, len(verbs))
	for m := range verbs {
		out = append(out, m)
	}
	return out
}

// ReasonBadGateway is the reason of a 502: a Ray dashboard behind the proxy did not answer. Kubernetes
// has no reason for it.
const ReasonBadGateway metav1.StatusReason = "BadGateway"

// Site is where the Ray dashboard proxy is served.
type Site struct {
	// Origin (scheme://host[:port]) is where browsers reach the dashboards' own listener; empty: the
	// origin of each request to the API, with the port Port.
	Origin string
	// Port is the port of the dashboards' own listener; empty: there is none.
	Port string
	// SameOrigin has the API's origin serve the proxy too, its pages sandboxed, instead of sending
	// callers to the dashboards' origin.
	SameOrigin bool
}

// Proxy proxies requests to Ray dashboards, on the API's origin or on the dashboards' own.
type Proxy struct {
	Site Site
	// TrustedProxies are the peers whose X-Forwarded-Proto and X-Forwarded-Host name the origin a
	// browser sees (gateways in front of the service); none: the request's own.
	TrustedProxies []netip.Prefix
	// Limit bounds how long a proxied request lasts (its places are taken by the caller); nil: no bound.
	Limit *stream.Limit
	// Own: this proxy serves the dashboards' own origin, which serves nothing else.
	Own bool
}

// Target is the dashboard a request goes to: its address (host:port), the proxy path of the object it
// serves (without the trailing slash), the path asked of the dashboard, the Ray token it takes ("":
// none), and how it is reached.
type Target struct {
	Addr, Prefix, Path, RayToken string
	Transport                    http.RoundTripper
	// TokenRequired is answered instead of the dashboard's 401 to a request that carried no token (none
	// of the service's, none of the caller's): the cluster's dashboard requires one its spec gives none
	// for (ray.Kind.TokenRequired). nil: the dashboard's 401 is passed on, with its login.
	TokenRequired error
}

// Serve proxies r to the dashboard t and writes its answer to w. What keeps the dashboard from
// answering is returned (502, 504), and t.TokenRequired for its 401 to a request without a token, to be
// answered as any error is; log is the request's logger.
func (p *Proxy) Serve(w http.ResponseWriter, r *http.Request, t Target, log func() *zap.Logger) error {
	origin := p.RequestOrigin(r)
	sandboxed := !p.Own
	addr, prefix, target, rayToken := t.Addr, t.Prefix, t.Path, t.RayToken
	tokenless := rayToken == "" && r.Header.Get(ray.AuthHeader) == ""
	// What keeps the dashboard from answering is answered as any error is, once the proxy returns: the
	// proxy calls ErrorHandler only before it writes anything.
	var proxyErr error
	rp := &httputil.ReverseProxy{
		Transport:     t.Transport,
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
			if res.StatusCode == http.StatusUnauthorized && tokenless && t.TokenRequired != nil {
				return t.TokenRequired
			}
			confine(res, r.URL.Path, origin, prefix, addr, sandboxed)
			return nil
		},
		ErrorHandler: func(_ http.ResponseWriter, _ *http.Request, err error) {
			if t.TokenRequired != nil && errors.Is(err, t.TokenRequired) {
				log().Info("a Ray dashboard requires a token its cluster's spec gives none for", zap.String("address", addr))
				proxyErr = err
				return
			}
			log().Warn("Ray dashboard unreachable", zap.String("address", addr), zap.Error(err))
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
	stream.LiftDeadlines(w)
	in := r
	if d := p.Limit.MaxDuration(); d > 0 {
		ctx, cancel := context.WithTimeout(in.Context(), d)
		defer cancel()
		in = in.WithContext(ctx)
	}
	rp.ServeHTTP(w, in)
	return proxyErr
}

// statusError is an error of the proxy, as a Kubernetes status error: the API maps every error so.
func statusError(code int, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: msg,
	}}
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

// RequestOrigin is the origin the browser sees: the request's own, or where the peer is a trusted proxy
// its X-Forwarded-Proto and X-Forwarded-Host (the first of each, where well-formed).
func (p *Proxy) RequestOrigin(r *http.Request) string {
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	host := r.Host
	if p.trustedPeer(r) {
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
func (p *Proxy) trustedPeer(r *http.Request) bool {
	if len(p.TrustedProxies) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, pr := range p.TrustedProxies {
		if pr.Contains(ip) {
			return true
		}
	}
	return false
}

func firstValue(v string) string {
	first, _, _ := strings.Cut(v, ",")
	return strings.TrimSpace(first)
}

// Origin is the origin the dashboards are served on, for a request to the API: the one configured,
// else the request's with the dashboards' port; "" where they have no origin of their own.
func (p *Proxy) Origin(r *http.Request) string {
	if p.Site.Origin != "" || p.Site.Port == "" {
		return p.Site.Origin
	}
	u, err := url.Parse(p.RequestOrigin(r))
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + net.JoinHostPort(u.Hostname(), p.Site.Port)
}

// Redirect is where a dashboard request made on the API's origin to target (a path and query) is sent:
// to the same on the dashboards' own, unless the operator has the API's origin serve them (or they have
// no origin of their own: then they are served here sandboxed); false where it is served here.
func (p *Proxy) Redirect(r *http.Request, target string) (string, bool) {
	if p.Own || p.Site.SameOrigin {
		return "", false
	}
	origin := p.Origin(r)
	if origin == "" {
		return "", false
	}
	return origin + target, true
}

// NewLimit bounds the requests the proxy holds open, in all and per caller, and how long each lasts
// (see stream.Limit).
func NewLimit(maxRequests, perCaller int, duration time.Duration) *stream.Limit {
	return stream.NewLimit("Ray dashboard requests", maxRequests, perCaller, duration)
}
