//go:build integration

package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The write path acts as its caller and as no one else. A tenant who may edit the RayClusters of its own
// namespace alone, and who writes an object the admin created there, leaves the admin its creator (a
// replace that claims the object for the tenant keeps the signed one) while the audit trail names the
// tenant for each write it made; a batch that mixes the admin's namespace into the tenant's deletes and
// records only what the tenant may delete; a write refused is not recorded.
func TestAttackWritePathActsAsTheCaller(t *testing.T) {
	t.Parallel()
	theirs, mine := namespace(t, "wr-other"), namespace(t, "wr-own")
	admin := env.tokens["admin"]
	user, tok := tenant(t, mine, "mallory")
	grantRole(t, mine, user, "ray-edit", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	require.Equal(t, 201, createClusterAt(t, admin, mine, "admins", "?start=false").Status)
	require.Equal(t, 201, createClusterAt(t, admin, theirs, "untouchable", "?start=false").Status)

	// A replace that claims the admin's object for the tenant: taken, the creator kept as signed.
	exp := call(t, "GET", itemPath(mine, "rayclusters", "admins")+"/yaml", tok, "", nil)
	require.Equal(t, 200, exp.Status, "%s", exp.Raw)
	claimed := strings.ReplaceAll(string(exp.Raw), "ray.openfuyao.com/creator: admin", "ray.openfuyao.com/creator: "+user)
	require.NotEqual(t, string(exp.Raw), claimed, "the export names the admin as creator")
	put := call(t, "PUT", itemPath(mine, "rayclusters", "admins"), tok, "application/yaml", []byte(claimed))
	require.Equal(t, 200, put.Status, "%s", put.Raw)
	got := decode[summary](t, call(t, "GET", itemPath(mine, "rayclusters", "admins"), admin, "", nil))
	assert.Equal(t, "admin", got.Creator, "a replace keeps the creator recorded at creation")
	assert.True(t, got.CreatorSigned, "and its signature")

	// Start, scale and stop by the tenant; a scale and a stop in the other namespace are refused.
	require.Equal(t, 200, call(t, "POST", itemPath(mine, "rayclusters", "admins")+"/start", tok, "", nil).Status)
	require.Equal(t, 200, scaleAs(t, tok, mine, "rayclusters", "admins", `{"group":"workers","replicas":1}`).Status)
	require.Equal(t, 200, call(t, "POST", itemPath(mine, "rayclusters", "admins")+"/stop", tok, "", nil).Status)
	assert.Equal(t, 403, scaleAs(t, tok, theirs, "rayclusters", "untouchable", `{"group":"workers","replicas":1}`).Status)
	assert.Equal(t, 403, call(t, "POST", itemPath(theirs, "rayclusters", "untouchable")+"/start", tok, "", nil).Status)

	// A batch mixing the two namespaces, each item twice: the tenant's deleted, the other refused.
	r := call(t, "POST", "/rest/ray/v1/rayclusters/batch-delete", tok, "application/json", []byte(`{"items":[`+
		`{"namespace":"`+theirs+`","name":"untouchable"},{"namespace":"`+mine+`","name":"admins"},`+
		`{"namespace":"`+theirs+`","name":"untouchable"},{"namespace":"`+mine+`","name":"admins"}],"force":true}`))
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	results := decode[[]struct {
		Namespace, Name string
		Code            int
	}](t, r)
	require.Len(t, results, 4)
	for _, res := range results {
		want := map[string]int{theirs: 403, mine: 200}[res.Namespace]
		assert.Equal(t, want, res.Code, "%s/%s", res.Namespace, res.Name)
	}
	_, err := getRay(t, rayClusters, theirs, "untouchable")
	require.NoError(t, err, "the other namespace's object is still there")

	audit := func(ns string) auditData {
		r := call(t, "GET", "/rest/ray/v1/audit?pageSize=500&namespace="+ns, admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[auditData](t, r)
	}
	var own auditData
	eventually(t, 10*time.Second, "the tenant's five writes in the trail", func() bool {
		own = audit(mine)
		return own.Total == 6
	})
	var seen []string
	for _, e := range own.Items {
		seen = append(seen, e.Action+" by "+e.User)
	}
	assert.Equal(t, []string{"Delete by " + user, "Stop by " + user, "Scale by " + user, "Start by " + user, "Replace by " + user,
		"Create by admin"}, seen, "each write names who made it, the batch's delete once")
	other := audit(theirs)
	require.Equal(t, 1, other.Total, "%+v", other.Items)
	assert.Equal(t, "Create by admin", other.Items[0].Action+" by "+other.Items[0].User,
		"nothing refused in the other namespace is recorded")
}
