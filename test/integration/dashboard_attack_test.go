//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardAsBrowser asks path of the service at base as a browser would: on the console's origin
// first and, where that sends it to another origin, there once; the dashboard's own redirects are not
// followed. It returns the answer (its body read), and the URL that gave it.
func dashboardAsBrowser(t *testing.T, base, method, path, token string, header map[string]string) (*http.Response, *url.URL) {
	t.Helper()
	target, err := url.Parse(base + path)
	require.NoError(t, err)
	for hop := 0; ; hop++ {
		res := dashboardHop(t, method, target.String(), token, header, strings.NewReader(`{}`))
		next, err := url.Parse(res.Header.Get("Location"))
		if hop > 0 || (res.StatusCode != 307 && res.StatusCode != 308) || err != nil || next.Host == "" || next.Host == target.Host {
			return res, target
		}
		target = next
	}
}

// dashboardHop asks target once, as the holder of token with header, following no redirect, and returns
// the answer (its body read).
func dashboardHop(t *testing.T, method, target, token string, header map[string]string, body io.Reader) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// runningDashboard makes, in a new namespace named after prefix, the running RayCluster name, and
// returns the namespace and the path of the cluster's dashboard.
func runningDashboard(t *testing.T, prefix, name string) (ns, base string) {
	t.Helper()
	ns = namespace(t, prefix)
	runningCluster(t, ns, name)
	return ns, itemPath(ns, "rayclusters", name) + "/dashboard"
}

// browserResolve resolves a Location as a browser does: tabs and newlines are dropped, a backslash is a
// slash, and a percent-encoded dot segment is a dot segment.
func browserResolve(t *testing.T, from *url.URL, loc string) *url.URL {
	t.Helper()
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	ref, err := url.Parse(loc)
	require.NoError(t, err, loc)
	u := from.ResolveReference(ref)
	if u.Path != "" {
		clean := path.Clean(u.Path)
		if strings.HasSuffix(u.Path, "/") && clean != "/" {
			clean += "/"
		}
		u.Path, u.RawPath = clean, ""
	}
	return u
}

// Attack: the proxy served what a tenant's head answers on the console's own origin, where a script of
// its page runs with the session of whoever opens it. By default the console's origin now sends the
// dashboard to an origin of its own (307), which serves nothing but Ray dashboards, and the detail names
// the dashboard there.
func TestAttackDashboardIsNotServedOnTheConsoleOrigin(t *testing.T) {
	t.Parallel()
	ns, base := runningDashboard(t, "ownorigin", "oo")
	admin := env.tokens["admin"]

	res := dashboardHop(t, "GET", env.serviceURL+base+"/hostile", admin, nil, nil)
	require.Equal(t, 307, res.StatusCode, "the console's origin serves no page a tenant's head answers")
	console, err := url.Parse(env.serviceURL)
	require.NoError(t, err)
	there, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	assert.NotEqual(t, console.Host, there.Host, "the dashboard is on an origin of its own")
	assert.Equal(t, base+"/hostile", there.Path)
	origin := there.Scheme + "://" + there.Host

	r := call(t, "GET", itemPath(ns, "rayclusters", "oo"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	var detail struct {
		DashboardURL string `json:"dashboardURL"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &detail))
	assert.Equal(t, origin+base+"/", detail.DashboardURL, "the console finds the dashboard on its origin")

	page, at := dashboardAsBrowser(t, env.serviceURL, "GET", base+"/hostile", admin, nil)
	assert.Equal(t, 200, page.StatusCode)
	assert.Equal(t, there.Host, at.Host)
	assert.Empty(t, page.Header.Values("Set-Cookie"))
	assert.Contains(t, page.Header.Get("Content-Security-Policy"), "connect-src "+origin+base+"/;")
	// The dashboards' origin serves nothing else, whatever the request says of its origin.
	for _, p := range []string{"/rest/ray/v1/rayclusters", "/rest/ray/v1/audit", itemPath(ns, "rayclusters", "oo")} {
		res, _ := dashboardAsBrowser(t, origin, "GET", p, admin, map[string]string{"X-Forwarded-Host": console.Host})
		assert.Equal(t, 404, res.StatusCode, "%s on the dashboards' origin", p)
	}
}

// Attack: a head answered a redirect the proxy passed on (a relative one), or prefixed unnormalised
// (a path-absolute one with dot segments), or a browser reads as another host (a backslash): the page
// went out of its cluster's box, to the console's API, keeping POST on a 307. Every Location is now
// resolved against the request's URL and kept under the proxy path of that cluster.
func TestAttackDashboardRedirectsStayInTheirBox(t *testing.T) {
	t.Parallel()
	_, base := runningDashboard(t, "redirects", "rd")
	admin := env.tokens["admin"]
	up := strings.Repeat("../", 8)
	for _, loc := range []string{
		up + "rest/ray/v1/audit",
		"/" + up + "rest/ray/v1/audit",
		strings.Repeat("/%2e%2e", 8) + "/rest/ray/v1/audit",
		`\\evil.example/phish`,
		`/\evil.example/phish`,
		"/\t/evil.example/phish",
		"//evil.example/phish",
		"https://evil.example/phish",
		"javascript:alert(document.domain)",
		"../other",
		"./api/version",
	} {
		for _, method := range []string{"GET", "POST", "DELETE"} {
			q := url.Values{"to": {loc}, "code": {"307"}}.Encode()
			res, at := dashboardAsBrowser(t, env.serviceURL, method, base+"/redirect-to?"+q, admin, nil)
			got := res.Header.Get("Location")
			if !assert.NotEmpty(t, got, "%s %q: a redirect", method, loc) {
				continue
			}
			to := browserResolve(t, at, got)
			assert.True(t, to.Scheme == at.Scheme && to.Host == at.Host && strings.HasPrefix(to.Path, base+"/"),
				"%s %q: answered %d to %q, which a browser reads as %s, out of %s", method, loc, res.StatusCode, got, to, base+"/")
		}
	}
	res, at := dashboardAsBrowser(t, env.serviceURL, "GET", base+"/redirect-to?"+url.Values{"to": {"./api/version?x=1"}}.Encode(), admin, nil)
	assert.Equal(t, base+"/api/version?x=1", browserResolve(t, at, res.Header.Get("Location")).RequestURI(), "a redirect within the box is kept")
}

// Attack: the origin in the dashboard's policy and redirects was taken from X-Forwarded-Host and
// X-Forwarded-Proto, whoever sent them. They are now believed only from the configured proxies (none by
// default).
func TestAttackForwardedHeadersAreNotTrusted(t *testing.T) {
	t.Parallel()
	_, base := runningDashboard(t, "forwarded", "fw")
	admin := env.tokens["admin"]
	forged := map[string]string{"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"}

	res := dashboardHop(t, "GET", env.serviceURL+base+"/api/version", admin, forged, nil)
	said := res.Header.Get("Content-Security-Policy") + " " + res.Header.Get("Location")
	assert.NotContains(t, said, "evil.example", "a client's X-Forwarded-Host names no origin")

	res, at := dashboardAsBrowser(t, env.serviceURL, "GET", base+"/api/version", admin, forged)
	require.Equal(t, 200, res.StatusCode)
	csp := res.Header.Get("Content-Security-Policy")
	assert.NotContains(t, csp, "evil.example", "nor on the dashboards' origin")
	assert.Contains(t, csp, "connect-src "+at.Scheme+"://"+at.Host+base+"/;")
}

// Attack: the proxy passed every request header but the caller's token and cookies on to the tenant's
// head: a gateway's X-Forwarded-Access-Token, X-Auth-Request-*, X-Remote-User, Proxy-Authorization
// reached whoever runs the cluster. Only the headers a dashboard needs are passed on now.
func TestAttackDashboardGetsOnlyAllowedHeaders(t *testing.T) {
	t.Parallel()
	ns, base := runningDashboard(t, "headers", "hd")
	admin := env.tokens["admin"]
	secrets := map[string]string{
		"X-Forwarded-Access-Token": "gateway-access-token", "X-Auth-Request-Access-Token": "gateway-access-token",
		"X-Auth-Request-User": "admin", "X-Auth-Request-Email": "admin@example.com", "X-Remote-User": "admin",
		"X-Remote-Group": "system:masters", "Proxy-Authorization": "Basic c2VjcmV0", "Cookie": "console-session=secret",
		"X-OpenFuyao-Authorization": "Bearer " + admin, "X-Csrf-Token": "console-csrf",
	}
	header := map[string]string{"Accept": "application/json", "Accept-Language": "en"}
	maps.Copy(header, secrets)
	res, _ := dashboardAsBrowser(t, env.serviceURL, "GET", base+"/api/version", admin, header)
	require.Equal(t, 200, res.StatusCode)
	seen := env.dashboards.headersSeen("hd-head-svc."+ns, "/api/version")
	require.NotEmpty(t, seen)
	for _, h := range seen {
		for name := range secrets {
			assert.Empty(t, h.Values(name), "%s reaches no tenant's head", name)
		}
		assert.Empty(t, h.Values("Authorization"))
		assert.Equal(t, "application/json", h.Get("Accept"), "what a dashboard needs is passed on")
	}
}

// Attack: a caller could hold any number of proxied requests open, each as long as the dashboard
// kept it. Each caller now has a bound on those open at once (429 past it), and each a longest duration.
func TestAttackDashboardProxyIsBounded(t *testing.T) {
	ns, base := runningDashboard(t, "proxybounds", "pb")
	admin := env.tokens["admin"]
	svc := startInstance(t, "ray-service-proxybounds.log", "--max-dashboard-requests-per-caller=2", "--max-dashboard-duration=3s")
	host := "pb-head-svc." + ns

	var wg sync.WaitGroup
	statuses := make([]int, 2)
	elapsed := make([]time.Duration, 2)
	for i := range 2 {
		wg.Go(func() {
			start := time.Now()
			res, _ := dashboardAsBrowser(t, svc.url, "GET", base+"/slow", admin, nil)
			statuses[i], elapsed[i] = res.StatusCode, time.Since(start)
		})
	}
	eventually(t, 20*time.Second, "two slow requests held by the dashboard", func() bool {
		return env.dashboards.seen("GET", host, "/slow") >= 2
	})
	res, _ := dashboardAsBrowser(t, svc.url, "GET", base+"/api/version", admin, nil)
	assert.Equal(t, 429, res.StatusCode, "a third request of the same caller at once is refused")
	wg.Wait()
	for i := range 2 {
		assert.Equal(t, 504, statuses[i], "a request held past the longest duration ends")
		assert.Less(t, elapsed[i], 15*time.Second, "long before the dashboard would have answered")
	}
	res, _ = dashboardAsBrowser(t, svc.url, "GET", base+"/api/version", admin, nil)
	assert.Equal(t, 200, res.StatusCode, "once they ended, the caller may ask again")
}
