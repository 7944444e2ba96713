//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// detailsServed reads how many details an instance served from source ("cache" or "apiserver").
func detailsServed(t *testing.T, base, source string) float64 {
	t.Helper()
	v, _ := seriesOf(t, base, `ray_service_details_total\{source="`+source+`"\}`)
	return v
}

// cachedDetail is what the test compares of two details.
type cachedDetail struct {
	Object map[string]any `json:"object"`
	Events []struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"events"`
	Actions []string `json:"actions"`
	Status  string   `json:"status"`
}

// From its second detail on, an object's detail is served from the watch cache: the same answer as the
// apiserver's, every change made elsewhere shown, a write through the service shown at once, events
// from the namespace's watch, and the caller's rights checked as before.
func TestDetailFromTheCache(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "detail-cache.log")
	ns := namespace(t, "detail")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "demo", func(o map[string]any) {
		o["spec"].(map[string]any)["suspend"] = true // nothing reconciles it any more once Stopped
	}).Status)
	waitStatus(t, ns, "rayclusters", "demo", "Stopped")
	path := itemPath(ns, "rayclusters", "demo")
	detail := func(token string) (int, cachedDetail) {
		t.Helper()
		r, err := sendTo(svc.url, "GET", path, token, "", nil)
		require.NoError(t, err)
		var d cachedDetail
		if r.Status == 200 {
			require.NoError(t, json.Unmarshal(r.Data, &d))
		}
		return r.Status, d
	}

	code, first := detail(admin)
	require.Equal(t, 200, code)
	assert.InDelta(t, 1.0, detailsServed(t, svc.url, "apiserver"), 0, "the first detail reads the apiserver")
	var cached cachedDetail
	eventually(t, 15*time.Second, "a detail served from the cache, the object as the apiserver has it", func() bool {
		before := detailsServed(t, svc.url, "cache")
		_, cached = detail(admin)
		direct, err := env.adminDyn.Resource(rayClusters).Namespace(ns).Get(context.Background(), "demo", metav1.GetOptions{})
		require.NoError(t, err)
		direct.SetManagedFields(nil)
		raw, err := json.Marshal(direct.Object)
		require.NoError(t, err)
		var want map[string]any // numbers as JSON decodes them
		require.NoError(t, json.Unmarshal(raw, &want))
		return detailsServed(t, svc.url, "cache") == before+1 && assert.ObjectsAreEqual(want, cached.Object)
	})
	assert.Equal(t, first.Actions, cached.Actions)
	assert.Equal(t, first.Status, cached.Status)
	fromAPIServer := detailsServed(t, svc.url, "apiserver")

	// A change made elsewhere, and an event about the object: shown from the cache.
	patchRay(t, rayClusters, ns, "demo", types.MergePatchType, `{"metadata":{"labels":{"changed":"elsewhere"}}}`)
	_, err := env.admin.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "demo-note"},
		InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: "demo", Namespace: ns}, Reason: "Noted", Message: "a note",
		Type: "Normal", LastTimestamp: metav1.Now(), Source: corev1.EventSource{Component: "test"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the label and the event in the detail", func() bool {
		_, d := detail(admin)
		labels, _ := nested(d.Object, "metadata", "labels").(map[string]any)
		return labels["changed"] == "elsewhere" && len(d.Events) > 0 && d.Events[0].Reason == "Noted"
	})
	assert.InDelta(t, fromAPIServer, detailsServed(t, svc.url, "apiserver"), 0, "served from the cache all along")

	// A write through the service is in the very next detail, which reads the apiserver again.
	r, err := sendTo(svc.url, "POST", path+"/scale", admin, "application/json", []byte(`{"group":"workers","replicas":2}`))
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	_, d := detail(admin)
	groups, _ := nested(d.Object, "spec", "workerGroupSpecs").([]any)
	require.NotEmpty(t, groups)
	assert.EqualValues(t, 2, groups[0].(map[string]any)["replicas"], "read your writes")
	assert.InDelta(t, fromAPIServer+1, detailsServed(t, svc.url, "apiserver"), 0, "the write is read from the apiserver")

	// Rights: one bound nowhere is refused as the apiserver refuses it; one who may get the object but
	// not list events is shown none.
	_, nobody := tenant(t, ns, "nobody")
	code, _ = detail(nobody)
	assert.Equal(t, 403, code)
	reader, readerToken := tenant(t, ns, "reader")
	grantRole(t, ns, reader, "get-rayclusters", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get"}})
	cache := detailsServed(t, svc.url, "cache")
	for range 2 {
		code, d = detail(readerToken)
		require.Equal(t, 200, code)
		assert.Empty(t, d.Events, "no events for one who may not list them")
	}
	assert.Greater(t, detailsServed(t, svc.url, "cache"), cache, "served from the cache")
}

// A list across namespaces shows what the caller's RoleBindings grant, whichever subject names it: its
// user, a group it is in; a binding made or removed later is followed; one naming someone else grants
// nothing. The namespaces reviewed are those a RoleBinding names the caller in.
func TestListAcrossNamespacesFollowsRoleBindings(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "bindings.log", "--auth-cache-ttl=1s")
	home, byGroup, byUser := namespace(t, "bind-home"), namespace(t, "bind-group"), namespace(t, "bind-user")
	admin := env.tokens["admin"]
	for _, ns := range []string{home, byGroup, byUser} {
		require.Equal(t, 201, createCluster(t, admin, ns, "c", nil).Status)
	}
	user, token := tenant(t, home, "lister")
	rb := func(ns, name string, s rbacv1.Subject) {
		_, err := env.admin.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "ray-viewer"},
			Subjects: []rbacv1.Subject{s}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	rb(byGroup, "by-group", rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:" + home})
	rb(byUser, "someone-else", rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: rbacv1.UserKind, Name: "someone-else"})
	seen := func() []string {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/rayclusters?pageSize=500", token, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		var page listData
		require.NoError(t, json.Unmarshal(r.Data, &page))
		var out []string
		for _, it := range page.Items {
			if it.Namespace == home || it.Namespace == byGroup || it.Namespace == byUser {
				out = append(out, it.Namespace)
			}
		}
		slices.Sort(out)
		return out
	}
	eventually(t, 15*time.Second, "the namespace its group is bound in", func() bool { return slices.Equal(seen(), []string{byGroup}) })

	rb(byUser, "by-user", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "lister", Namespace: home})
	waitAllowed(t, user, byUser, "list", "ray.io", "rayclusters")
	eventually(t, 15*time.Second, "a binding made later", func() bool { return slices.Equal(seen(), []string{byGroup, byUser}) })

	require.NoError(t, env.admin.RbacV1().RoleBindings(byGroup).Delete(context.Background(), "by-group", metav1.DeleteOptions{}))
	eventually(t, 15*time.Second, "a binding removed", func() bool { return slices.Equal(seen(), []string{byUser}) })
}
