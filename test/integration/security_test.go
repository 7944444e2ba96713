//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// allowConfigMaps lets user create, update and read ConfigMaps in ns, and nothing of Ray.
func allowConfigMaps(t *testing.T, ns, user string) {
	t.Helper()
	grantRole(t, ns, user, "configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"create", "get", "list", "update", "patch"}})
}

// plantedTemplate is a ConfigMap that looks like a template of the service's, written by someone else.
func plantedTemplate(ns, cmName, kind, manifest string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: cmName, Namespace: ns,
			Labels:      map[string]string{"ray.openfuyao.com/template": "true", "ray.openfuyao.com/kind": kind, "ray.openfuyao.com/creator": "alice"},
			Annotations: map[string]string{"ray.openfuyao.com/creator": "alice"}},
		Data: map[string]string{"manifest": manifest},
	}
}

const plantedCluster = `apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: evil
  namespace: PROD
  annotations: {ray.openfuyao.com/creator: alice}
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        serviceAccountName: privileged
        containers:
        - name: ray-head
          image: attacker.example/planted:1
`

// Attack: a user who may only create ConfigMaps plants one that looks like a template. It must not list
// as a template "by" whoever it claims, and an admin's start must not follow it anywhere.
func TestAttackPlantedTemplateIsNotFollowed(t *testing.T) {
	t.Parallel()
	team, prod := namespace(t, "planted"), namespace(t, "prod")
	allowConfigMaps(t, team, "bob")
	ctx := context.Background()
	bob := clientAs(t, "bob")
	manifest := strings.ReplaceAll(plantedCluster, "PROD", prod)
	_, err := bob.CoreV1().ConfigMaps(team).Create(ctx, plantedTemplate(team, "ray-template.raycluster.demo", "RayCluster", manifest), metav1.CreateOptions{})
	require.NoError(t, err, "bob may create ConfigMaps")

	admin := env.tokens["admin"]
	// A template the service writes after it (a RayService created stopped): once it is listed, the
	// service's one watch of template ConfigMaps, which sees them in the order they were written, has seen
	// the planted one too.
	r := call(t, "POST", nsPath(team, "rayservices")+"?start=false", admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "sentinel"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	eventually(t, 60*time.Second, "the service's own template listed", func() bool {
		l := decode[listData](t, call(t, "GET", nsPath(team, "rayservices")+"?type=template", admin, "", nil))
		return l.Total == 1 && l.Items[0].Name == "sentinel"
	})
	l := decode[listData](t, call(t, "GET", nsPath(team, "rayclusters")+"?type=template", admin, "", nil))
	assert.Zero(t, l.Total, "a ConfigMap the service did not write is no template: %+v", l.Items)

	r = call(t, "POST", itemPath(team, "rayclusters", "demo")+"/start", admin, "", nil)
	assert.GreaterOrEqual(t, r.Status, 400, "the admin's start of the planted template must be refused: %s", r.Raw)
	assert.Less(t, r.Status, 500, "%s", r.Raw)
	_, err = getRay(t, rayClusters, prod, "evil")
	assert.True(t, apierrors.IsNotFound(err), "nothing may be created where the planted manifest says: %v", err)
	_, err = getRay(t, rayClusters, team, "demo")
	assert.True(t, apierrors.IsNotFound(err), "nor under the path's name: %v", err)
}

// Attack: a template the service wrote, changed afterwards by someone who may update ConfigMaps, is no
// longer trusted: starting it is refused and creates nothing.
func TestAttackTamperedTemplateIsRefused(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "tampered")
	allowConfigMaps(t, ns, "bob")
	ctx := context.Background()
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	bob := clientAs(t, "bob")
	cm, err := bob.CoreV1().ConfigMaps(ns).Get(ctx, "ray-template.rayservice.minimal-service", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["manifest"] = strings.ReplaceAll(cm.Data["manifest"], "rayproject/ray:", "attacker.example/ray:")
	_, err = bob.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	r = call(t, "POST", itemPath(ns, "rayservices", "minimal-service")+"/start", admin, "", nil)
	assert.Equal(t, 409, r.Status, "a changed template is refused: %s", r.Raw)
	_, err = getRay(t, rayServices, ns, "minimal-service")
	assert.True(t, apierrors.IsNotFound(err), "nothing created from it: %v", err)
}

// Attack: a ConfigMap pre-created under the name of a running RayService's template must not be adopted
// by the owner's stop, which would delete the real spec and keep the attacker's.
func TestAttackStopDoesNotAdoptAPlantedTemplate(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "adopt")
	allowConfigMaps(t, ns, "bob")
	ctx := context.Background()
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	original, err := getRay(t, rayServices, ns, "minimal-service")
	require.NoError(t, err)

	planted := strings.ReplaceAll(string(testdata(t, "rayservice-minimal.yaml")), "rayproject/ray:", "attacker.example/ray:")
	_, err = clientAs(t, "bob").CoreV1().ConfigMaps(ns).Create(ctx,
		plantedTemplate(ns, "ray-template.rayservice.minimal-service", "RayService", planted), metav1.CreateOptions{})
	require.NoError(t, err)

	r = call(t, "POST", itemPath(ns, "rayservices", "minimal-service")+"/stop", admin, "", nil)
	assert.Equal(t, 409, r.Status, "the stop must refuse the ConfigMap in its way: %s", r.Raw)
	still, err := getRay(t, rayServices, ns, "minimal-service")
	require.NoError(t, err, "the instance, with the real spec, is not deleted")
	assert.Equal(t, original.GetUID(), still.GetUID())
}

// Attack: every new request method was a new label value of the request metrics, kept forever, and a
// request line of any length was read. Unknown methods now count as "other", and a request line or
// headers past 64 KiB are refused with 431.
func TestAttackMethodsDoNotGrowMetrics(t *testing.T) {
	before := len(metricsBody(t))
	for i := range 50 {
		method := strings.Repeat("M", 2000) + fmt.Sprint(i)
		req, err := http.NewRequest(method, env.serviceURL+"/rest/ray/v1/rayclusters", nil)
		require.NoError(t, err)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		assert.Less(t, res.StatusCode, 500)
	}
	after := metricsBody(t)
	t.Logf("/metrics: %d bytes before, %d after 50 requests with 2 KB methods", before, len(after))
	assert.NotContains(t, after, strings.Repeat("M", 100), "no method of the attack is a label value")
	assert.Less(t, len(after)-before, 8<<10, "the metrics grew by at most a few series")
	assert.Contains(t, after, `method="other"`)

	req, err := http.NewRequest("GET", env.serviceURL+"/rest/ray/v1/rayclusters?q="+strings.Repeat("a", 1<<20), nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode, "a 1 MiB request line is refused")
}

// dashboardAs calls the dashboard proxy of ns/name on the dashboards' origin without following
// redirects.
func dashboardAs(t *testing.T, method, path, token string) *http.Response {
	t.Helper()
	return dashboardHop(t, method, env.dashboardURL+path, token, nil, strings.NewReader(`{}`))
}

// Attack: whoever controls a head pod answers through the proxy. Its cookies must not be set, its
// redirects must stay under the proxy path, its content must not be sniffed, a Content-Security-Policy
// must keep its scripts to its own dashboard, and it runs on the dashboards' origin, not the console's.
func TestAttackDashboardContentStaysInItsBox(t *testing.T) {
	_, base := runningDashboard(t, "hostile", "hc")
	admin := env.tokens["admin"]

	res := dashboardAs(t, "GET", base+"/hostile", admin)
	require.Equal(t, 200, res.StatusCode)
	assert.Empty(t, res.Header.Values("Set-Cookie"), "no cookie for the dashboards' origin")
	assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	csp := res.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "connect-src "+env.dashboardURL+base+"/;", "scripts reach their own dashboard only: %s", csp)
	assert.Contains(t, csp, "frame-ancestors 'none'", "no other dashboard of the origin frames it")

	res = dashboardAs(t, "GET", base+"/redirect-away", admin)
	assert.Equal(t, 303, res.StatusCode)
	assert.Equal(t, base+"/", res.Header.Get("Location"), "a redirect off-site goes to the dashboard's root")
	res = dashboardAs(t, "GET", base+"/redirect-root", admin)
	assert.Equal(t, base+"/api/version", res.Header.Get("Location"), "a dashboard-absolute redirect is mapped under the proxy")

	// In a browser, behind a gateway that adds the caller's token as the console does, on the dashboards'
	// origin: the page reads its own dashboard, and cannot call the API with the caller's credentials.
	dash := gateway(t, env.dashboardURL, admin, true)
	dom := renderPage(t, dash+base+"/hostile")
	reported := regexp.MustCompile(`<div id="[a-z]+">([a-z]+:[a-z0-9]+)</div>`).FindAllStringSubmatch(dom, -1)
	t.Logf("the hostile page reported: %v", reported)
	assert.Contains(t, dom, `<div id="dash">dashboard:standin</div>`, "the dashboard works through the proxy")
	assert.Contains(t, dom, `<div id="console">console:blocked</div>`, "the console's API is out of the page's reach")
	// Through the console's gateway the page is not served at all: the console's origin sends it away.
	dom = renderPage(t, consoleGateway(t, admin)+base+"/hostile")
	assert.NotContains(t, dom, `id="console"`, "no tenant's page on the console's origin")

	// Where the operator insists on the console's origin, the page is sandboxed: an opaque origin, whose
	// script reaches neither the console's API nor, by the same rule, anything of that origin.
	same := startInstance(t, "ray-service-sameorigin.log", "--dashboard-same-origin")
	res, _ = dashboardAsBrowser(t, same.url, "GET", base+"/hostile", admin, nil)
	require.Equal(t, 200, res.StatusCode, "served on the API's origin")
	assert.Contains(t, res.Header.Get("Content-Security-Policy"), "; sandbox allow-scripts")
	assert.NotContains(t, res.Header.Get("Content-Security-Policy"), "allow-same-origin")
	dom = renderPage(t, gateway(t, same.url, admin, false)+base+"/hostile")
	t.Logf("the sandboxed page reported: %v", regexp.MustCompile(`<div id="[a-z]+">([a-z]+:[a-z0-9]+)</div>`).FindAllStringSubmatch(dom, -1))
	assert.Contains(t, dom, `<div id="console">console:blocked</div>`)
}

// consoleGateway stands in for the openFuyao console in front of the service: it adds the caller's
// token to every request, with the X-Forwarded headers of a gateway. It returns its base URL.
func consoleGateway(t *testing.T, token string) string {
	t.Helper()
	return gateway(t, env.serviceURL, token, false)
}

// gateway stands in for a gateway in front of the service at base that adds the caller's token to every
// request, with the X-Forwarded headers of a gateway; keepHost passes the Host the browser asked for
// on, as gateways in front of the dashboards' origin do. It returns its base URL.
func gateway(t *testing.T, base, token string, keepHost bool) string {
	t.Helper()
	target, err := url.Parse(base)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.SetXForwarded()
		if keepHost {
			pr.Out.Host = pr.In.Host
		}
		pr.Out.Header.Set("X-OpenFuyao-Authorization", "Bearer "+token)
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Attack: the proxy authorized every method as get on services/proxy, so a caller allowed to read
// through it could also POST, PUT and DELETE. Each method now needs the verb the apiserver would ask.
func TestAttackDashboardProxyVerbs(t *testing.T) {
	ns := namespace(t, "proxyverbs")
	runningCluster(t, ns, "pv")
	grantRole(t, ns, "carol", "proxy-read",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get"}})
	carol := env.tokens["carol"]
	base := itemPath(ns, "rayclusters", "pv") + "/dashboard"
	assert.Equal(t, 200, dashboardAs(t, "GET", base+"/api/version", carol).StatusCode, "reading is allowed")
	for method, verb := range map[string]string{"POST": "create", "PUT": "update", "PATCH": "update", "DELETE": "delete"} {
		res := dashboardAs(t, method, base+"/api/echo", carol)
		assert.Equal(t, 403, res.StatusCode, "%s needs %s on services/proxy", method, verb)
	}
	before := env.dashboards.seen("POST", "pv-head-svc."+ns, "/api/echo")
	assert.Zero(t, before, "nothing refused reached the dashboard")
}

// Attack: names that are no Kubernetes names reached client-go's validation and came back as 500 with
// an error in the log; random namespaces reached access reviews and grew the verdict cache. Both are
// now refused in the request layer with 400, naming the field.
func TestAttackMalformedNamesAreRefused(t *testing.T) {
	admin := env.tokens["admin"]
	long := strings.Repeat("a", 300)
	for _, path := range []string{
		"/rest/ray/v1/namespaces/default/rayclusters/..",
		"/rest/ray/v1/namespaces/default/rayclusters/.",
		"/rest/ray/v1/namespaces/default/rayclusters/a..b/yaml",
		"/rest/ray/v1/namespaces/default/rayclusters/UPPER/pods",
		"/rest/ray/v1/namespaces/default/rayclusters/" + long,
		"/rest/ray/v1/namespaces/../rayclusters",
		"/rest/ray/v1/namespaces/Not_A_Namespace/rayclusters/x",
		"/rest/ray/v1/namespaces/" + long + "/rayjobs",
	} {
		r := call(t, "GET", path, admin, "", nil)
		assert.Equal(t, 400, r.Status, "%s: %s", path, r.Raw)
		assert.Equal(t, "BadRequest", r.Reason, path)
	}
	r := call(t, "POST", "/rest/ray/v1/rayclusters/batch-delete", admin, "application/json",
		[]byte(`{"items":[{"namespace":"default","name":".."}]}`))
	assert.Equal(t, 400, r.Status, "%s", r.Raw)
	assert.Contains(t, r.Msg, "items[0].name")
}

// Attack: each distinct namespace a caller names is an access review whose verdict is cached; random
// namespaces grew the cache without bound. It now holds at most auth-cache-size verdicts.
func TestAttackVerdictCacheIsBounded(t *testing.T) {
	svc := startInstance(t, "ray-service-cache.log", "--auth-cache-size=50")
	viewer := env.tokens["viewer"]
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		status, _, err := httpGetHeaders(ctx, svc.url+fmt.Sprintf("/rest/ray/v1/namespaces/random-%d/rayclusters", i),
			map[string]string{"Authorization": "Bearer " + viewer})
		cancel()
		require.NoError(t, err)
		require.Equal(t, 200, status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, body, err := httpGet(ctx, svc.url+"/metrics")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^ray_service_auth_cache_entries ([0-9]+)$`).FindStringSubmatch(string(body))
	require.NotNil(t, m, "the cache's size is a metric")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	t.Logf("verdicts cached after 200 namespaces: %d", n)
	assert.LessOrEqual(t, n, 50)
	assert.Positive(t, n)
}

// Attack: status.dashboardURL was the proxy's and the RayJob stop's target, whatever it named. Whoever
// may write a RayJob's status could send the caller's proxy requests to another namespace's service,
// anywhere outside, or to the apiserver on loopback. Only an address in the object's own namespace's
// service zone is taken now; anything else is replaced by the head service's.
func TestAttackDashboardURLIsNotFollowedOutOfItsNamespace(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "dashurl")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", rayJob(t, "dj", false))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	eventually(t, 60*time.Second, "the operator recorded the dashboard", func() bool {
		o, err := getRay(t, rayJobs, ns, "dj")
		require.NoError(t, err)
		u, _, _ := unstructured.NestedString(o.Object, "status", "dashboardURL")
		return u != ""
	})
	base := itemPath(ns, "rayjobs", "dj") + "/dashboard/api/version"
	for _, target := range []string{"ray-evil.elsewhere.svc.cluster.local:8265", "attacker.example:8265",
		"http://127.0.0.1:" + strings.TrimPrefix(env.vars["KUBE_APISERVER_URL"], "https://127.0.0.1:")} {
		patch := fmt.Sprintf(`{"status":{"dashboardURL":%q}}`, target)
		_, err := env.adminDyn.Resource(rayJobs).Namespace(ns).Patch(context.Background(), "dj", types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
		r := call(t, "GET", base, admin, "", nil)
		assert.Equal(t, 200, r.Status, "%s: %s", target, r.Raw)
		assert.Contains(t, string(r.Raw), `"version":"standin"`, "%s: the derived head service answered", target)
		host, _, _ := strings.Cut(strings.TrimPrefix(target, "http://"), ":")
		assert.Zero(t, env.dashboards.seen("GET", host, "/api/version"), "%s was never asked", target)
	}
}

// closedWithin reports whether the server closes conn within d (reading until EOF or an error).
func closedWithin(conn net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	_ = conn.SetReadDeadline(start.Add(d))
	buf := make([]byte, 4096)
	for {
		if _, err := conn.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false, time.Since(start)
			}
			return true, time.Since(start)
		}
	}
}

// Attack: the server had no read, write or idle timeout beyond the header's, log follows had no cap or
// end, and the proxy waited on a dashboard for ever. A client could hold connections, goroutines and
// apiserver streams as long and as many as it liked. Each bound is shown by what ends (a connection the
// server closes while the client still sends, a 504 where the dashboard would have answered, a follow
// the server ends), each waited for well past the bound; how soon is not asserted.
func TestAttackSlowAndLongRequestsAreBounded(t *testing.T) {
	limits := []string{"--read-timeout=2s", "--idle-timeout=2s", "--dashboard-timeout=2s",
		"--max-log-follows-per-caller=2", "--max-log-follow-duration=3s"}
	if os.Getenv("RAY_TEST_NO_LIMITS") == "1" { // to show what a service without these settings does
		limits = nil
	}
	svc := startInstance(t, "ray-service-timeouts.log", limits...)
	addr := strings.TrimPrefix(svc.url, "http://")
	admin := env.tokens["admin"]

	t.Run("a body sent a byte a second is cut off", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "POST /rest/ray/v1/namespaces/default/rayclusters HTTP/1.1\r\nHost: x\r\n"+
			"Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", admin)
		require.NoError(t, err)
		// A byte a second for longer than the wait below: the body is still coming when the server cuts it off.
		go func() {
			for range 120 {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
		closed, after := closedWithin(conn, 60*time.Second)
		assert.True(t, closed, "the connection is closed by the read timeout")
		t.Logf("closed after %s", after.Round(100*time.Millisecond))
	})
	t.Run("an idle keep-alive connection is closed", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		_, err = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		closed, after := closedWithin(conn, 60*time.Second)
		assert.True(t, closed, "closed once idle")
		t.Logf("closed after %s", after.Round(100*time.Millisecond))
	})

	ns := namespace(t, "bounded")
	runningCluster(t, ns, "bc")
	path := itemPath(ns, "rayclusters", "bc")

	t.Run("a dashboard that does not answer is 504 in time", func(t *testing.T) {
		// The stand-in's /slow answers (200, empty) after 20 s: a proxy that waited for it would pass that
		// on; a 504 is the service's own, given before the dashboard answered.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		status, body, err := httpGetHeaders(ctx, svc.url+path+"/dashboard/slow", map[string]string{"Authorization": "Bearer " + admin})
		require.NoError(t, err)
		assert.Equal(t, 504, status, "%s", body)
	})
	t.Run("log follows are capped per caller and end by themselves", func(t *testing.T) {
		var head string
		for _, p := range clusterPods(t, ns, "bc") {
			if p.Labels["ray.io/node-type"] == "head" {
				head = p.Name
			}
		}
		podLog(t, ns, head, "ray-head", "a line")
		var open []*http.Response
		for range 2 {
			status, res := openFollow(t, svc.url, path, admin)
			require.Equal(t, 200, status)
			open = append(open, res)
		}
		status, _ := openFollow(t, svc.url, path, admin)
		assert.Equal(t, 429, status, "a third follow of the same caller")
		bind(t, ns, "alice", "ray-editor")
		waitAllowed(t, "alice", ns, "get", "ray.io", "rayclusters")
		grantRole(t, ns, "alice", "logs", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/log", "pods"}, Verbs: []string{"get", "list"}})
		status, res := openFollow(t, svc.url, path, env.tokens["alice"])
		assert.Equal(t, 200, status, "another caller is not held up")
		if res != nil {
			open = append(open, res)
		}
		// Each follow ends by itself: the server ends the stream (a clean end, no error), well before the
		// client would give up (openFollow).
		for i, res := range open {
			_, err := io.Copy(io.Discard, res.Body)
			res.Body.Close()
			require.NoError(t, err, "follow %d ended by itself at the maximum duration", i+1)
		}
		status, res = openFollow(t, svc.url, path, admin)
		assert.Equal(t, 200, status, "an ended follow frees its place")
		if res != nil {
			res.Body.Close()
		}
	})
}

// Attack: overview windows had no bound on their length, each distinct window's answers were cached for
// a whole step with no bound on entries, and a caller that went away left its Prometheus queries running
// until they timed out.
func TestAttackOverviewWindowsAreBounded(t *testing.T) {
	admin := env.tokens["admin"]
	for _, q := range []string{"start=0&end=4102444800", "start=2000-01-01T00:00:00Z&end=2030-01-01T00:00:00Z&step=1d",
		"start=0&end=100000&step=200000"} {
		r := call(t, "GET", "/rest/ray/v1/overview?"+q, admin, "", nil)
		assert.Equal(t, 400, r.Status, "%s: %s", q, r.Raw)
	}

	// Prometheus holds each query ten minutes, and the service's own timeout is as long: within the wait
	// below, a query ends only where the service cancels it.
	slow := &slowPrometheus{delay: 10 * time.Minute}
	// The idle detection off: its own queries are no caller's, and would be counted among theirs.
	args := []string{"--prometheus-url=" + slow.start(t), "--prometheus-timeout=10m", "--prometheus-cache-size=40", "--idle-window=0"}
	before := os.Getenv("RAY_TEST_NO_LIMITS") == "1" // to show what a service without the bounds does
	if before {
		args = append(args[:2], "--idle-window=0")
	}
	svc := startInstance(t, "ray-service-slowprom.log", args...)
	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, _, err := httpGetHeaders(ctx, svc.url+"/rest/ray/v1/overview?range=10m", map[string]string{"Authorization": "Bearer " + admin})
		left <- err
	}()
	// The caller leaves once the service asks Prometheus.
	eventually(t, 60*time.Second, "the overview's queries begun", func() bool { started, _ := slow.counts(); return started > 0 })
	cancel()
	require.Error(t, <-left, "the caller left")
	eventually(t, 60*time.Second, "the queries of the caller who left cancelled", func() bool {
		started, canceled := slow.counts()
		return canceled == started
	})
	started, canceled := slow.counts()
	t.Logf("Prometheus queries started %d, cancelled once the caller left %d", started, canceled)
	if before {
		return
	}

	slow.setDelay(0)
	for i := range 20 {
		q := fmt.Sprintf("start=%d&end=%d&step=60", 1700000000+i*60, 1700003600+i*60)
		r := call(t, "GET", "/rest/ray/v1/overview?"+q, admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		status, _, err := httpGetHeaders(ctx, svc.url+"/rest/ray/v1/overview?"+q, map[string]string{"Authorization": "Bearer " + admin})
		cancel()
		require.NoError(t, err)
		require.Equal(t, 200, status)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, body, err := httpGet(ctx, svc.url+"/metrics")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^ray_service_prometheus_cache_entries ([0-9]+)$`).FindStringSubmatch(string(body))
	require.NotNil(t, m, "the query cache's size is a metric")
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	t.Logf("answers cached after 20 distinct windows of 11 queries: %d", n)
	assert.LessOrEqual(t, n, 40)
}

// Attack: /readyz answers anyone, and told them why the service was not ready in the apiserver's own
// words (addresses and ports included). It now says "not ready"; the reason goes to the log.
func TestAttackReadyzTellsAnonymousCallersNothing(t *testing.T) {
	f := forward(t, strings.TrimPrefix(env.vars["KUBE_APISERVER_URL"], "https://"))
	svc := startInstance(t, "ray-service-readyz.log",
		"--kubeconfig", kubeconfigVia(t, f.ln.Addr().String()))
	f.stop()
	var body []byte
	eventually(t, 30*time.Second, "not ready once the apiserver is gone", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var status int
		var err error
		status, body, err = httpGet(ctx, svc.url+"/readyz")
		return err == nil && status == 503
	})
	assert.Equal(t, "not ready\n", string(body), "no detail for an anonymous caller")
	logged, err := os.ReadFile(svc.log.Name())
	require.NoError(t, err)
	assert.Contains(t, string(logged), "not ready", "the reason is logged")
}
