//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

var allActions = []string{"start", "stop", "delete", "edit", "scale", "logs", "dashboard"}

// The actions a list item and a detail name are exactly what succeeds: for the admin, a viewer and a
// namespace editor (Ray objects, ConfigMaps and pod logs, not the dashboard proxy), on a running
// RayCluster, a stopped one, a suspended RayJob and a RayService template, every action named is taken and succeeds, and
// every action not named is refused, or (start of what runs, stop of what is stopped) changes nothing.
func TestActionsAreWhatSucceeds(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "actions")
	admin := env.tokens["admin"]
	grantRole(t, ns, "bob", "editor",
		rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters", "rayjobs", "rayservices"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}})
	users := map[string]string{"admin": admin, "viewer": env.tokens["viewer"], "editor": env.tokens["bob"]}
	states := map[string]struct {
		kind string
		make func(name string)
	}{
		"running": {"rayclusters", func(name string) {
			runningCluster(t, ns, name)
			pods := decode[[]podInfo](t, call(t, "GET", itemPath(ns, "rayclusters", name)+"/pods", admin, "", nil))
			podLog(t, ns, pods[0].Name, pods[0].Containers[0].Name, "ready")
		}},
		"stopped": {"rayclusters", func(name string) {
			require.Equal(t, 201, createClusterAt(t, admin, ns, name, "?start=false").Status)
			waitStatus(t, ns, "rayclusters", name, "Stopped")
		}},
		"job-stopped": {"rayjobs", func(name string) { // a RayJob KubeRay can suspend, created stopped
			require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, name, true)).Status)
			waitStatus(t, ns, "rayjobs", name, "Stopped")
		}},
		"template": {"rayservices", func(name string) {
			require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml",
				mustRename(t, "rayservice-minimal.yaml", name)).Status)
		}},
	}
	n := 0
	summary := map[string][]string{}
	for _, user := range []string{"admin", "editor", "viewer"} {
		token := users[user]
		for _, state := range []string{"running", "stopped", "job-stopped", "template"} {
			st := states[state]
			for _, action := range allActions {
				n++
				name := fmt.Sprintf("a%d", n)
				st.make(name)
				r := call(t, "GET", itemPath(ns, st.kind, name), token, "", nil)
				if r.Status == 404 && state == "template" && user == "viewer" {
					// Templates are ConfigMaps: a caller who may not read them does not see them at all.
					call(t, "DELETE", itemPath(ns, st.kind, name), admin, "", nil)
					continue
				}
				require.Equal(t, 200, r.Status, string(r.Raw))
				var d struct {
					Status  string         `json:"status"`
					Actions []string       `json:"actions"`
					Object  map[string]any `json:"object"`
				}
				require.NoError(t, json.Unmarshal(r.Data, &d))
				require.NotNil(t, d.Actions, "a detail always names its actions")
				listed := listedActions(t, token, ns, st.kind, name, d.Actions)
				assert.Equal(t, d.Actions, listed, "%s on %s: the list item names the detail's actions", user, state)
				summary[user+" on "+state] = d.Actions
				code := take(t, token, ns, st.kind, name, action, d.Object)
				what := fmt.Sprintf("%s, %s %s (actions %v)", user, action, state, d.Actions)
				noop := (action == "start" && state == "running") || (action == "stop" && state != "running")
				switch {
				case slices.Contains(d.Actions, action):
					assert.True(t, code >= 200 && code < 300, "%s: named, must succeed; got %d", what, code)
				case noop && code == 200:
					s, _ := statusOf(t, ns, st.kind, name)
					assert.Equal(t, d.Status, s.Status, "%s: not named, answered 200 and changed nothing", what)
				default:
					assert.True(t, code >= 400 && code < 500, "%s: not named, must be refused; got %d", what, code)
				}
				// Room on the fake nodes for the next one.
				call(t, "DELETE", itemPath(ns, st.kind, name)+"?force=true", admin, "", nil)
			}
		}
	}
	for k, v := range summary {
		t.Logf("%-20s %v", k, v)
	}
}

// listedActions returns the actions the list item of name names, once the watch cache has caught up
// with the detail, which is read from the apiserver and can come first: until they are want, or 10 s.
func listedActions(t *testing.T, token, ns, kind, name string, want []string) []string {
	actions := []string{"(not listed)"}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !slices.Equal(actions, want) {
		time.Sleep(50 * time.Millisecond)
		r := call(t, "GET", nsPath(ns, kind)+"?search="+name+"&pageSize=500", token, "", nil)
		require.Equal(t, 200, r.Status, string(r.Raw))
		for _, it := range decode[struct {
			Items []struct {
				Name    string   `json:"name"`
				Actions []string `json:"actions"`
			} `json:"items"`
		}](t, r).Items {
			if it.Name == name {
				require.NotNil(t, it.Actions, "a list item always names its actions")
				actions = it.Actions
			}
		}
	}
	return actions
}

// take takes one action as token and returns the status of the answer.
func take(t *testing.T, token, ns, kind, name, action string, object map[string]any) int {
	path := itemPath(ns, kind, name)
	switch action {
	case "start", "stop":
		return call(t, "POST", path+"/"+action, token, "", nil).Status
	case "delete":
		return call(t, "DELETE", path, token, "", nil).Status
	case "edit":
		// As a user would: a change made in between (the operator's status) is 409; read again, retry.
		for range 3 {
			body, err := json.Marshal(object)
			require.NoError(t, err)
			r := call(t, "PUT", path, token, "application/json", body)
			if r.Status != 409 {
				return r.Status
			}
			var d struct{ Object map[string]any }
			require.NoError(t, json.Unmarshal(call(t, "GET", path, token, "", nil).Data, &d))
			object = d.Object
		}
		return 409
	case "scale":
		return call(t, "POST", path+"/scale", token, "application/json", []byte(`{"group":"workers","maxReplicas":4}`)).Status
	case "logs":
		return call(t, "GET", path+"/logs?tailLines=1", token, "", nil).Status
	case "dashboard":
		r := call(t, "GET", path+"/dashboard/api/version", token, "", nil)
		if r.Status >= 500 {
			t.Logf("dashboard: %s", strings.TrimSpace(string(r.Raw)))
		}
		return r.Status
	}
	require.FailNow(t, "unknown action", action)
	return 0
}
