package dashproxy

import (
	"crypto/tls"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/ray"
)

func TestConfineLocation(t *testing.T) {
	const prefix = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard"
	const addr = "x-head-svc.a.svc.cluster.local:8265"
	const at = prefix + "/jobs/list"
	kept := map[string]string{
		"/api/jobs/":               prefix + "/api/jobs/",
		"/#/overview?x=1":          prefix + "/#/overview?x=1",
		"/jobs?state=RUNNING":      prefix + "/jobs?state=RUNNING",
		"jobs/":                    prefix + "/jobs/jobs/",
		"../other":                 prefix + "/other",
		"./x/../y":                 prefix + "/jobs/y",
		"?page=2":                  prefix + "/jobs/list?page=2",
		"http://" + addr + "/logs": prefix + "/logs",
		"//" + addr + "/logs":      prefix + "/logs",
		"/../../../../../../audit": prefix + "/audit",
		"/%2e%2e/%2e%2e/audit":     prefix + "/audit",
	}
	for loc, want := range kept {
		got, ok := confineLocation(loc, at, prefix, addr)
		assert.True(t, ok, loc)
		assert.Equal(t, want, got, loc)
	}
	for _, loc := range []string{
		"../../other",
		"../../../../../../../../rest/ray/v1/audit",
		"../%2e%2e/%2e%2e/audit",
		`\\evil.example/phish`,
		`/\evil.example/phish`,
		`/\api`,
		"/\t/evil.example/phish",
		"/\n/evil.example",
		"http://attacker.example/phish",
		"//attacker.example/phish",
		"javascript:alert(1)",
		"data:text/html,<script>",
		"https://" + addr + ".attacker.example",
		"http://user@" + addr + "/x",
		"http://[::1",
	} {
		got, ok := confineLocation(loc, at, prefix, addr)
		assert.False(t, ok, loc)
		assert.Equal(t, prefix+"/", got, loc)
	}
}

// A redirect that would leave the box goes to the dashboard's root as a GET; one within keeps its status.
func TestConfineRedirectStatus(t *testing.T) {
	const prefix = "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard"
	res := &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"../../../../audit"}}}
	confine(res, prefix+"/p", "https://dash.example", prefix, "x:8265", false)
	assert.Equal(t, http.StatusSeeOther, res.StatusCode)
	assert.Equal(t, prefix+"/", res.Header.Get("Location"))
	res = &http.Response{StatusCode: http.StatusTemporaryRedirect, Header: http.Header{"Location": {"./q"}}}
	confine(res, prefix+"/p", "https://dash.example", prefix, "x:8265", false)
	assert.Equal(t, http.StatusTemporaryRedirect, res.StatusCode)
	assert.Equal(t, prefix+"/q", res.Header.Get("Location"))
}

func TestDashboardCSP(t *testing.T) {
	own := dashboardCSP("https://dash.example/p/", false)
	assert.Contains(t, own, "connect-src https://dash.example/p/;")
	assert.Contains(t, own, "frame-ancestors 'none'", "no other dashboard of the origin frames it")
	assert.NotContains(t, own, "sandbox")
	same := dashboardCSP("https://console.example/p/", true)
	assert.Contains(t, same, "sandbox allow-scripts")
	assert.NotContains(t, same, "allow-same-origin", "an opaque origin on the console's")
	assert.NotContains(t, same, "allow-top-navigation")
	assert.NotContains(t, same, "allow-popups-to-escape-sandbox")
}

func TestRequestOrigin(t *testing.T) {
	p := &Proxy{}
	r := httptest.NewRequest("GET", "http://svc.local:8080/x", nil)
	r.RemoteAddr = "10.0.0.7:4000"
	assert.Equal(t, "http://svc.local:8080", p.RequestOrigin(r))
	r.TLS = &tls.ConnectionState{}
	assert.Equal(t, "https://svc.local:8080", p.RequestOrigin(r))
	r.Header.Set("X-Forwarded-Proto", "http, https")
	r.Header.Set("X-Forwarded-Host", "console.example.com, inner")
	assert.Equal(t, "https://svc.local:8080", p.RequestOrigin(r), "no proxy is trusted by default")
	p.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
	assert.Equal(t, "http://console.example.com", p.RequestOrigin(r), "the first of each, from a trusted gateway")
	r.RemoteAddr = "10.0.1.7:4000"
	assert.Equal(t, "https://svc.local:8080", p.RequestOrigin(r), "not from another peer")
	r.RemoteAddr = "10.0.0.7:4000"
	r.Header.Set("X-Forwarded-Host", "evil.example; script-src *")
	r.Header.Set("X-Forwarded-Proto", "javascript")
	assert.Equal(t, "https://svc.local:8080", p.RequestOrigin(r), "a malformed forwarded value is not used")
}

// The headers passed on are those a dashboard needs.
func TestPassedHeaders(t *testing.T) {
	in := http.Header{}
	for _, h := range []string{"Authorization", "X-OpenFuyao-Authorization", "Cookie", "Proxy-Authorization",
		"X-Forwarded-Access-Token", "X-Auth-Request-User", "X-Remote-User", "X-Csrf-Token", "Referer", "Origin"} {
		in.Set(h, "secret")
	}
	in.Set("Accept", "text/html")
	in.Set("X-Ray-Authorization", "Bearer ray")
	in.Set("Sec-WebSocket-Key", "k")
	out := passedHeaders(in)
	assert.Equal(t, http.Header{"Accept": {"text/html"}, "X-Ray-Authorization": {"Bearer ray"}, "Sec-Websocket-Key": {"k"}}, out)
}

// A dashboard's 401 to a request that carried no token is the target's TokenRequired (the cluster's
// spec gives the service no token); with a token sent by the caller, or without a TokenRequired, the
// dashboard's own 401 comes back.
func TestTokenRequiredAnswersTheDashboards401(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ray.AuthHeader) == "" {
			http.Error(w, "Unauthorized: Missing authentication token", http.StatusUnauthorized)
			return
		}
		http.Error(w, "Forbidden: Invalid authentication token", http.StatusForbidden)
	}))
	defer srv.Close()
	required := &ray.TokenRequiredError{Field: "spec.authOptions"}
	p := &Proxy{Site: Site{SameOrigin: true}}
	serve := func(target Target, header http.Header) (int, error) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/x/dashboard/api/version", nil)
		maps.Copy(req.Header, header)
		target.Addr, target.Prefix, target.Path = strings.TrimPrefix(srv.URL, "http://"), "/x/dashboard", "/api/version"
		err := p.Serve(rec, req, target, zap.NewNop)
		return rec.Code, err
	}
	code, err := serve(Target{TokenRequired: required}, nil)
	require.ErrorIs(t, err, required)
	require.ErrorIs(t, err, ray.ErrTokenRequired)
	assert.Equal(t, http.StatusOK, code, "nothing written: the API answers the error")
	code, err = serve(Target{TokenRequired: required}, http.Header{"X-Ray-Authorization": {"Bearer mine"}})
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, code, "the caller's own token gets the dashboard's answer")
	code, err = serve(Target{}, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "a token-mode cluster's dashboard keeps its own login")
}
