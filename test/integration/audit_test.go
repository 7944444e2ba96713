//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every write through the service leaves an entry naming the caller and the request, newest first;
// the object's events show it; a look-alike event nobody signed does not count; callers see only the
// namespaces where they may list events.
func TestAuditTrail(t *testing.T) {
	ns := namespace(t, "audit")
	admin := env.tokens["admin"]
	var ids []string
	write := func(r *response, want int) {
		t.Helper()
		require.Equal(t, want, r.Status, string(r.Raw))
		ids = append(ids, r.Header.Get("X-Request-ID"))
	}
	write(createClusterAt(t, admin, ns, "audited", "?start=false"), 201)
	write(call(t, "POST", itemPath(ns, "rayclusters", "audited")+"/start", admin, "", nil), 200)
	write(call(t, "POST", itemPath(ns, "rayclusters", "audited")+"/stop", admin, "", nil), 200)
	write(scaleAs(t, admin, ns, "rayclusters", "audited", `{"group":"workers","replicas":1}`), 200)
	require.Equal(t, 200, call(t, "POST", nsPath(ns, "rayclusters")+"?dryRun=true", admin, "application/yaml",
		[]byte(`{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"dry"},"spec":{"headGroupSpec":{"template":{"spec":{"containers":[{"name":"h","image":"i"}]}}}}}`)).Status)
	assert.Equal(t, 422, scaleAs(t, admin, ns, "rayclusters", "audited", `{"group":"none","replicas":1}`).Status)

	list := func(token, query string) (int, auditData) {
		r := call(t, "GET", "/rest/ray/v1/audit"+query, token, "", nil)
		if r.Status != 200 {
			return r.Status, auditData{}
		}
		return 200, decode[auditData](t, r)
	}
	var got auditData
	ok := waitFor(10*time.Second, func() bool {
		_, got = list(admin, "?namespace="+ns)
		return got.Total == 4
	})
	require.True(t, ok, "four entries, got %+v", got.Items)
	var actions, requests []string
	for _, e := range got.Items {
		actions = append(actions, e.Action)
		requests = append(requests, e.RequestID)
		assert.Equal(t, "admin", e.User)
		assert.Equal(t, "RayCluster", e.Kind)
		assert.Equal(t, "audited", e.Name)
	}
	assert.Equal(t, []string{"Scale", "Stop", "Start", "Create"}, actions, "newest first; the dry run and the refused scale are not writes")
	assert.Equal(t, []string{ids[3], ids[2], ids[1], ids[0]}, requests)
	assert.Contains(t, got.Items[0].Message, "group workers, replicas 1")

	// The object's own events show the trail.
	r := call(t, "GET", itemPath(ns, "rayclusters", "audited")+"/events", admin, "", nil)
	require.Equal(t, 200, r.Status)
	var events []struct{ Reason, Message string }
	require.NoError(t, json.Unmarshal(r.Data, &events))
	reasons := map[string]bool{}
	for _, e := range events {
		reasons[e.Reason] = true
	}
	assert.True(t, reasons["RayServiceStop"] && reasons["RayServiceScale"], "%v", reasons)

	// A delete is recorded too; an event made to look like the trail's is not shown.
	write(call(t, "DELETE", itemPath(ns, "rayclusters", "audited"), admin, "", nil), 200)
	_, err := env.admin.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Labels: map[string]string{"ray.openfuyao.com/audit": "true"},
			Annotations: map[string]string{"ray.openfuyao.com/user": "mallory", "ray.openfuyao.com/action": "Delete",
				"ray.openfuyao.com/time": time.Now().Format(time.RFC3339Nano), "ray.openfuyao.com/audit-signature": "forged"}},
		InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: "audited", Namespace: ns}, Reason: "RayServiceDelete", Message: "forged",
		Source: corev1.EventSource{Component: "ray-service"}, Type: "Normal", LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 10*time.Second, "the delete listed", func() bool {
		_, got = list(admin, "?namespace="+ns)
		return got.Total == 5
	})
	assert.Equal(t, "Delete", got.Items[0].Action)
	assert.Equal(t, ids[4], got.Items[0].RequestID)
	for _, e := range got.Items {
		assert.NotEqual(t, "mallory", e.User, "an unsigned event is not the trail's")
	}
	_, page := list(admin, "?namespace="+ns+"&page=2&pageSize=2")
	require.Len(t, page.Items, 2)
	assert.Equal(t, got.Items[2], page.Items[0])

	// The viewer may not list events: 403 for the namespace, nothing of it across namespaces.
	status, _ := list(env.tokens["viewer"], "?namespace="+ns)
	assert.Equal(t, 403, status)
	status, all := list(env.tokens["viewer"], "?pageSize=500")
	require.Equal(t, 200, status)
	for _, e := range all.Items {
		assert.NotEqual(t, ns, e.Namespace)
	}
	grantRole(t, ns, "carol", "events-read", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}})
	status, mine := list(env.tokens["carol"], "?namespace="+ns)
	require.Equal(t, 200, status)
	assert.Equal(t, 5, mine.Total)
	// Each item a batch deletes is an entry of its own.
	for _, n := range []string{"batch-a", "batch-b"} {
		require.Equal(t, 201, createClusterAt(t, admin, ns, n, "?start=false").Status)
	}
	r = call(t, "POST", "/rest/ray/v1/rayclusters/batch-delete", admin, "application/json",
		[]byte(`{"items":[{"namespace":"`+ns+`","name":"batch-a"},{"namespace":"`+ns+`","name":"batch-b"},{"namespace":"`+ns+`","name":"absent"}]}`))
	require.Equal(t, 200, r.Status, string(r.Raw))
	eventually(t, 10*time.Second, "the batch's two deletes listed", func() bool {
		_, got = list(admin, "?namespace="+ns)
		deleted := map[string]bool{}
		for _, e := range got.Items {
			if e.Action == "Delete" {
				deleted[e.Name] = true
			}
		}
		return deleted["batch-a"] && deleted["batch-b"] && !deleted["absent"]
	})
	assert.Equal(t, 400, call(t, "GET", "/rest/ray/v1/audit?namespace=Bad_NS", admin, "", nil).Status)
	assert.Equal(t, 400, call(t, "GET", "/rest/ray/v1/audit?pageSize=501", admin, "", nil).Status)
}
