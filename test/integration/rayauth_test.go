//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A token-mode Ray cluster (authOptions.mode: token, KubeRay v1.6): its dashboard opens through the
// proxy for a caller who may read the Secret holding its token, and answers its own 401 to one who may
// not; a RayJob on such a cluster is submitted by the operator and stopped by the service with that
// token, and a caller who may not read the Secret is told which right is missing. The dashboard
// stand-in refuses requests without the token exactly where the head pod says token mode.
func TestTokenAuthenticatedDashboards(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "rayauth")
	proxy := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get", "create"}}
	for _, u := range []string{"alice", "bob"} {
		bind(t, ns, u, "ray-editor")
		grantRole(t, ns, u, u+"-proxy", proxy)
	}
	grantRole(t, ns, "bob", "bob-secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	alice, bob := env.tokens["alice"], env.tokens["bob"]

	// Token mode needs Ray 2.52 or later (KubeRay v1.6 controllers/ray/utils/validation.go).
	tokenMode := func(spec map[string]any) {
		spec["authOptions"] = map[string]any{"mode": "token"}
		spec["rayVersion"] = "2.52.0"
	}
	require.Equal(t, 201, createCluster(t, env.tokens["admin"], ns, "tok", func(o map[string]any) {
		tokenMode(o["spec"].(map[string]any))
	}).Status)
	waitStatus(t, ns, "rayclusters", "tok", "Running")
	secret, err := env.admin.CoreV1().Secrets(ns).Get(context.Background(), "tok", metav1.GetOptions{})
	require.NoError(t, err, "KubeRay makes the cluster's Secret")
	rayToken := string(secret.Data["auth_token"])
	require.NotEmpty(t, rayToken)

	// The summary says how its dashboard takes callers (checked against the Swagger like every answer).
	d := call(t, "GET", itemPath(ns, "rayclusters", "tok"), bob, "", nil)
	require.Equal(t, 200, d.Status)
	var detail struct {
		Options struct {
			Auth  string   `json:"auth"`
			Notes []string `json:"notes"`
		} `json:"options"`
	}
	require.NoError(t, json.Unmarshal(d.Data, &detail))
	assert.Equal(t, "token", detail.Options.Auth)
	assert.Contains(t, detail.Options.Notes, "token authentication on")

	base := itemPath(ns, "rayclusters", "tok") + "/dashboard"
	r := call(t, "GET", base+"/api/version", bob, "", nil)
	assert.Equal(t, 200, r.Status, "bob may read the Secret: %s", r.Raw)
	r = call(t, "POST", base+"/api/echo", bob, "application/json", []byte(`{}`))
	assert.Equal(t, 200, r.Status, "every proxied method carries the token: %s", r.Raw)
	r = call(t, "GET", base+"/api/version", alice, "", nil)
	assert.Equal(t, 401, r.Status, "alice meets the dashboard's own login: %s", r.Raw)
	assert.Contains(t, string(r.Raw), "Missing authentication token")
	r = call(t, "GET", base+"/", alice, "", nil)
	assert.Equal(t, 200, r.Status, "the page that asks for the token opens")
	// A token alice holds herself is hers to send.
	r = callWith(t, "GET", base+"/api/version", alice, map[string]string{"X-Ray-Authorization": "Bearer " + rayToken})
	assert.Equal(t, 200, r.Status, "%s", r.Raw)
	r = callWith(t, "GET", base+"/api/version", alice, map[string]string{"X-Ray-Authorization": "Bearer wrong"})
	assert.Equal(t, 403, r.Status, "a wrong token is the dashboard's 403")
	assert.False(t, env.dashboards.credentialsSeen("tok-head-svc."+ns), "no caller's Kubernetes token reaches the dashboard")

	// A RayJob on a token-mode cluster: the operator submits with the token, the service stops with it.
	var job map[string]any
	require.NoError(t, json.Unmarshal(rayJob(t, "tj", false), &job))
	tokenMode(job["spec"].(map[string]any)["rayClusterSpec"].(map[string]any))
	b, err := json.Marshal(job)
	require.NoError(t, err)
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), env.tokens["admin"], "application/json", b).Status)
	waitStatus(t, ns, "rayjobs", "tj", "Running")
	cluster := currentRayCluster(t, ns, "tj")
	eventually(t, 30*time.Second, "the operator asking the job's dashboard with the token", func() bool {
		return env.dashboards.seen("GET", cluster+"-head-svc."+ns, "") > 0
	})
	r = call(t, "POST", itemPath(ns, "rayjobs", "tj")+"/stop", alice, "", nil)
	assert.Equal(t, 403, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Raw), `secrets \"`+cluster+`\"`, "the refusal names the Secret")
	r = call(t, "POST", itemPath(ns, "rayjobs", "tj")+"/stop", bob, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, 1, env.dashboards.seen("POST", cluster+"-head-svc."+ns, "/stop"), "the dashboard took the stop")
	waitStatus(t, ns, "rayjobs", "tj", "Stopped")

	// The token is nowhere in what the service answers.
	for _, p := range []string{itemPath(ns, "rayclusters", "tok"), itemPath(ns, "rayjobs", "tj"), nsPath(ns, "rayclusters")} {
		r = call(t, "GET", p, bob, "", nil)
		require.Equal(t, 200, r.Status)
		assert.NotContains(t, string(r.Raw), rayToken, p)
	}
}

// callWith sends a GET as the holder of token, with more headers, and returns status and body.
func callWith(t *testing.T, method, path, token string, headers map[string]string) *response {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + token}
	maps.Copy(h, headers)
	code, body, err := httpGetHeaders(context.Background(), env.serviceURL+path, h)
	require.NoError(t, err)
	require.Equal(t, "GET", method)
	return &response{Status: code, Raw: body}
}

// A Ray cluster whose spec sets no authOptions, but whose dashboard requires a token: Ray 2.61 runs every
// cluster with token authentication unless RAY_AUTH_MODE=disabled (its release notes), here with a token
// its author gave the head in RAY_AUTH_TOKEN. The service has no token to send, so what reads the
// dashboard says "token required" and what to set, instead of passing on a 401 or a generic proxy error:
// the proxy answers 409 Conflict naming spec.authOptions.mode (a caller who sends a token of their own
// still reaches the dashboard), and the health tab's GCS panel, which reads gcs_server.out through the
// dashboard, says the same. The token is in no answer and in no log line.
func TestTokenRequiredWithoutAuthOptions(t *testing.T) {
	// Parallel: it binds bob, whom TestAuthorization (sequential, before every parallel test) finds
	// bound in its namespace only.
	t.Parallel()
	ns := namespace(t, "raytokreq")
	bind(t, ns, "bob", "ray-editor")
	grantRole(t, ns, "bob", "bob-proxy", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get"}})
	bob, admin := env.tokens["bob"], env.tokens["admin"]
	const headToken = "chosen-by-the-author-4f1c2a9d0b7e"
	require.Equal(t, 201, createCluster(t, admin, ns, "open", func(o map[string]any) {
		spec := o["spec"].(map[string]any)
		spec["rayVersion"] = "2.61.0"
		head := spec["headGroupSpec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		head["image"] = "rayproject/ray:2.61.0"
		head["env"] = []any{map[string]any{"name": "RAY_AUTH_TOKEN", "value": headToken}}
	}).Status)
	waitStatus(t, ns, "rayclusters", "open", "Running")

	base := itemPath(ns, "rayclusters", "open") + "/dashboard"
	r := call(t, "GET", base+"/api/version", bob, "", nil)
	require.Equal(t, 409, r.Status, "%s", r.Raw)
	assert.Equal(t, 409, r.Code)
	assert.Equal(t, "Conflict", r.Reason)
	assert.Contains(t, r.Msg, "requires a token")
	assert.Contains(t, r.Msg, "set spec.authOptions.mode: token")
	require.Len(t, r.Details, 1)
	assert.Equal(t, "spec.authOptions.mode", r.Details[0].Field)
	assert.Equal(t, 1, env.dashboards.refused("GET", "open-head-svc."+ns, "/api/version"), "the dashboard was asked, and refused")
	r = call(t, "GET", base+"/", bob, "", nil)
	assert.Equal(t, 200, r.Status, "the page that asks for the token opens")
	r = callWith(t, "GET", base+"/api/version", bob, map[string]string{"X-Ray-Authorization": "Bearer " + headToken})
	assert.Equal(t, 200, r.Status, "a token the caller holds is theirs to send: %s", r.Raw)

	// The health tab: Prometheus holds none of the cluster's Ray metrics, so the GCS panel asks the
	// dashboard for gcs_server.out, and says why it could not read it.
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-10 * time.Minute)
	promURL, _ := startPrometheus(t, rayMetricsFixture(ns, map[string]rayLoad{}, start, end))
	svc := startInstance(t, "ray-service-raytokreq.log", "--prometheus-url", promURL)
	h, err := sendTo(svc.url, "GET", healthPath(ns, "open", start, end), bob, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, h.Status, "%s", h.Raw)
	p := panelOf(decode[clusterHealthData](t, h), "gcsEventPressure")
	assert.Nil(t, p.Value)
	assert.Contains(t, p.Reason, "requires a token")
	assert.Contains(t, p.Reason, "set spec.authOptions.mode: token")
	assert.Positive(t, env.dashboards.refused("GET", "open-head-svc."+ns, "/api/v0/logs/file"), "the log API was asked, and refused")

	for _, b := range [][]byte{r.Raw, h.Raw} {
		assert.NotContains(t, string(b), headToken)
	}
	b, err := os.ReadFile(svc.log.Name())
	require.NoError(t, err)
	assert.NotContains(t, string(b), headToken, "no Ray token in the log")
}

// refused counts the requests matching method and path made to hosts starting with hostPrefix that the
// stand-in refused for want of a Ray token.
func (s *standIn) refused(method, hostPrefix, pathSuffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Refused && r.Method == method && strings.HasPrefix(r.Host, hostPrefix) && strings.HasSuffix(r.Path, pathSuffix) {
			n++
		}
	}
	return n
}
