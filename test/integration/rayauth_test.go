//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"maps"
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
