//go:build integration

package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// A start or stop with nothing to do still needs the right to do it, as kubectl's patch of an unchanged
// object does: a caller who may only read Ray objects gets 403, and the audit trail records no write of
// it. Before, the viewer got 200 for each and left a signed "stop by viewer" in the trail, as often as it
// liked.
func TestNothingToDoNeedsTheRight(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "noop-rights")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "suspended", "?start=false").Status)
	require.Equal(t, 201, createClusterAt(t, admin, ns, "started", "").Status)
	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)

	// A reader of RayServices and their templates (ConfigMaps) here, who may change nothing: the viewer
	// does not see templates at all (404).
	reader, readerToken := tenant(t, ns, "reader")
	grantRole(t, ns, reader, "read", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayservices"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}})
	for _, c := range []struct{ user, kind, name, action string }{
		{"viewer", "rayclusters", "suspended", "stop"},       // already suspended
		{"viewer", "rayclusters", "started", "start"},        // already asked to run
		{"reader", "rayservices", "minimal-service", "stop"}, // a template: already stopped
		{"viewer", "rayclusters", "suspended", "start"},      // a real write, refused by the apiserver
	} {
		tok := env.tokens[c.user]
		if c.user == "reader" {
			tok = readerToken
		}
		r := call(t, "POST", itemPath(ns, c.kind, c.name)+"/"+c.action, tok, "", nil)
		assert.Equal(t, 403, r.Status, "%s %s/%s by %s: %s", c.action, c.kind, c.name, c.user, r.Raw)
		assert.Equal(t, "Forbidden", r.Reason, "%s", r.Raw)
	}
	// The admin's own no-ops still answer 200, and change nothing.
	for _, c := range []struct{ kind, name, action string }{
		{"rayclusters", "suspended", "stop"}, {"rayclusters", "started", "start"}, {"rayservices", "minimal-service", "stop"},
	} {
		r := call(t, "POST", itemPath(ns, c.kind, c.name)+"/"+c.action, admin, "", nil)
		assert.Equal(t, 200, r.Status, "%s %s/%s by the admin: %s", c.action, c.kind, c.name, r.Raw)
	}

	// Only the three creates are writes: no entry names the viewer or the reader, and the admin's no-ops
	// are not recorded either. A write made after them all shows in the trail first, so that a wrong
	// entry would be there by then.
	got := auditPast(t, env.serviceURL, ns, "marker")
	var actions []string
	for _, e := range got.Items {
		assert.NotContains(t, []string{"viewer", reader}, e.User, "a refused or empty action is no write: %+v", e)
		actions = append(actions, fmt.Sprintf("%s %s", e.Action, e.Name))
	}
	assert.ElementsMatch(t, []string{"Create suspended", "Create started", "Create minimal-service", "Create marker"}, actions)
}
