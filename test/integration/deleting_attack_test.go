//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Attack: undo another user's delete. A delete that finalizers hold (KubeRay's on a RayService from
// v1.6.2; here a finalizer of the test's own, which the operator leaves alone) answers deleting and
// allows no action until the object is gone. A co-tenant who may stop RayServices stops it meanwhile: on
// the stack's KubeRay (no spec.suspend on a RayService) a stop stores the RayService as a template, with
// its creator's signature, then deletes the instance, which is being deleted already. Once the finalizers
// are done the RayService the owner deleted is back, stopped, for anyone to start in its creator's name.
// A run-now of a RayCronJob being deleted likewise makes a run of what is going. Both are refused while it
// goes (409), as the allowed actions say, and the RayService stays deleted.
func TestStopWhileDeletingAttack(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "delstop")
	admin := env.tokens["admin"]
	ctx := context.Background()
	user, mallory := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	grantRole(t, ns, user, "templates", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "create", "update", "delete"}})

	r := call(t, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	const hold = "ray-service.test/hold"
	patchRay(t, rayGVR("rayservices"), ns, "minimal-service", types.MergePatchType, `{"metadata":{"finalizers":["`+hold+`"]}}`)
	r = call(t, "DELETE", itemPath(ns, "rayservices", "minimal-service")+"?force=true", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	require.True(t, decode[struct {
		Deleting bool `json:"deleting"`
	}](t, r).Deleting, "held by the finalizer: %s", r.Raw)

	r = call(t, "POST", itemPath(ns, "rayservices", "minimal-service")+"/stop", mallory, "", nil)
	assert.Equal(t, 409, r.Status, "a stop of a RayService being deleted: %s", r.Raw)
	assert.False(t, templateExists(t, ns, "rayservice", "minimal-service"), "no template stored beside what is being deleted")

	// The owner's delete again: whatever template there is of the name goes with it.
	r = call(t, "DELETE", itemPath(ns, "rayservices", "minimal-service")+"?force=true", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	patchRay(t, rayGVR("rayservices"), ns, "minimal-service", types.MergePatchType, `{"metadata":{"finalizers":null}}`)
	eventually(t, 30*time.Second, "the instance gone", func() bool {
		_, err := getRay(t, rayGVR("rayservices"), ns, "minimal-service")
		return err != nil
	})
	r = call(t, "GET", itemPath(ns, "rayservices", "minimal-service"), admin, "", nil)
	assert.Equal(t, 404, r.Status, "the deleted RayService stays deleted: %s", r.Raw)

	// A RayCronJob being deleted makes no run.
	var cron map[string]any
	require.NoError(t, yaml.Unmarshal(testdata(t, "raycronjob-minimal.yaml"), &cron))
	cron["spec"].(map[string]any)["suspend"] = true
	b, err := json.Marshal(cron)
	require.NoError(t, err)
	r = call(t, "POST", nsPath(ns, "raycronjobs"), admin, "application/json", b)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	patchRay(t, rayGVR("raycronjobs"), ns, "minimal-cronjob", types.MergePatchType, `{"metadata":{"finalizers":["`+hold+`"]}}`)
	t.Cleanup(func() {
		_, _ = env.adminDyn.Resource(rayGVR("raycronjobs")).Namespace(ns).Patch(context.Background(), "minimal-cronjob",
			types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	r = call(t, "DELETE", itemPath(ns, "raycronjobs", "minimal-cronjob"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	r = call(t, "POST", itemPath(ns, "raycronjobs", "minimal-cronjob")+"/run", mallory, "", nil)
	assert.Equal(t, 409, r.Status, "a run of a RayCronJob being deleted: %s", r.Raw)
	runs, err := env.adminDyn.Resource(rayGVR("rayjobs")).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cronjob-name=minimal-cronjob"})
	require.NoError(t, err)
	assert.Empty(t, runs.Items, "no run made")
}
