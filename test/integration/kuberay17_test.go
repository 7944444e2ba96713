//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"
)

// kuberay17Fields are the fields of KubeRay v1.7.0's CRDs the service acts on that v1.6's lack, as
// v1.7.0 declares them (ray-project/kuberay ray-operator/config/crd/bases, v1.7.0): a RayService's
// spec.suspend (ray.io_rayservices.yaml; apis/ray/v1/rayservice_types.go:129) and a RayCronJob's
// spec.timeZone (ray.io_raycronjobs.yaml; apis/ray/v1/raycronjob_types.go). The module proxy does not
// serve v1.7.0's module, so the test adds them to the stack's own CRDs.
var kuberay17Fields = map[string]map[string]any{
	"rayservices.ray.io": {"suspend": map[string]any{"type": "boolean",
		"description": "Suspend indicates whether the RayService should suspend its execution."}},
	"raycronjobs.ray.io": {"timeZone": map[string]any{"type": "string",
		"description": "TimeZone is the time zone name for the given schedule."}},
}

// kuberay17CRDs writes the stack's Ray CRDs, with the fields v1.7.0 added (kuberay17Fields), to a
// directory for kubectl apply.
func kuberay17CRDs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"rayclusters.ray.io", "rayjobs.ray.io", "rayservices.ray.io", "raycronjobs.ray.io"} {
		crd, err := env.adminDyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err, "the stack serves %s", name)
		out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind(),
			"metadata": map[string]any{"name": name}, "spec": crd.Object["spec"]}}
		versions, _, _ := unstructured.NestedSlice(out.Object, "spec", "versions")
		for _, v := range versions {
			v := v.(map[string]any)
			if v["name"] != "v1" {
				continue
			}
			for field, schema := range kuberay17Fields[name] {
				require.NoError(t, unstructured.SetNestedField(v, schema, "schema", "openAPIV3Schema", "properties", "spec", "properties", field))
			}
		}
		require.NoError(t, unstructured.SetNestedSlice(out.Object, versions, "spec", "versions"))
		b, err := yaml.Marshal(out.Object)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".yaml"), b, 0o600))
	}
	return dir
}

// The service on a cluster whose Ray CRDs are KubeRay v1.7's: an apiserver of its own with the stack's
// CRDs and the fields v1.7.0 added, and no operator, whose part the test plays by writing the statuses
// v1.7.0's RayService controller writes (rayservice_controller.go:383 handleSuspend). A RayService is
// stopped with spec.suspend and stays stored; its status and allowed actions follow the Suspending and
// Suspended conditions; start sets spec.suspend back to false; create with start=false creates it
// suspended. On the stack (v1.6's CRD, no spec.suspend) the same routes keep it as a template
// (TestKubeRayV15CRDs, TestRayServiceLifecycle). A RayCronJob with spec.timeZone shows its next runs in
// that zone, one whose schedule names a zone is Failed with v1.7's reason, and run-now names its run as
// v1.7.0 names runs (raycronjob_controller.go:160-168).
func TestKubeRayV17CRDs(t *testing.T) {
	t.Parallel()
	api := compatAPIServer(t, "kuberay17")
	kubectl := filepath.Join(env.vars["STACK_BIN"], "kubectl")
	kc := "--kubeconfig=" + api.admin
	runTool(t, kubectl, kc, "apply", "--server-side", "-f", kuberay17CRDs(t))
	runTool(t, kubectl, kc, "apply", "--server-side", "-f", filepath.Join(env.root, "stack", "rbac.yaml"))
	runTool(t, kubectl, kc, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/rayclusters.ray.io", "crd/rayjobs.ray.io", "crd/rayservices.ray.io", "crd/raycronjobs.ray.io")

	vars := maps.Clone(env.vars)
	vars["SERVICE_KUBECONFIG"] = api.service
	// The apiserver publishes a new CRD in its discovery and OpenAPI documents a moment after it is
	// Established: the service asks every second here (30 s by default) and is waited for.
	svc, err := launchServiceEnv(env.root, env.state, vars, "compat-kuberay17.log", 60*time.Second, nil, "--crd-poll-interval=1s")
	require.NoError(t, err, "the service becomes ready on v1.7's CRDs")
	t.Cleanup(func() { svc.stop() })
	eventually(t, 60*time.Second, "the service reads the fields v1.7 declares and serves RayCronJobs", func() bool {
		b, err := os.ReadFile(svc.log.Name())
		if err != nil {
			return false
		}
		for _, f := range []string{"RayService.spec.suspend", "RayCronJob.spec.timeZone"} {
			if !strings.Contains(string(b), `"field":"`+f+`","declared":true`) {
				return false
			}
		}
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/raycronjobs", env.tokens["admin"], "", nil)
		return err == nil && r.Status == 200
	})

	ctx := context.Background()
	admin := env.tokens["admin"]
	ns := "compat-" + utilrand.String(5)
	_, err = api.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	send := func(method, path string, body []byte) *response {
		t.Helper()
		r, err := sendTo(svc.url, method, path, admin, "application/json", body)
		require.NoError(t, err)
		return r
	}
	type shown struct {
		Status  string   `json:"status"`
		Type    string   `json:"type"`
		Actions []string `json:"actions"`
		Health  struct {
			Reason string `json:"reason"`
		} `json:"health"`
	}
	show := func(name string) shown {
		t.Helper()
		r := send("GET", itemPath(ns, "rayservices", name), nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		var s shown
		require.NoError(t, json.Unmarshal(dataOf(t, r.Raw), &s))
		return s
	}
	stored := func(name string) *unstructured.Unstructured {
		t.Helper()
		o, err := api.dyn.Resource(rayGVR("rayservices")).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "the RayService stays stored")
		return o
	}
	suspendAsked := func(name string) any {
		t.Helper()
		v, found, _ := unstructured.NestedBool(stored(name).Object, "spec", "suspend")
		if !found {
			return nil
		}
		return v
	}
	writeStatus := func(name, status string) {
		t.Helper()
		_, err := api.dyn.Resource(rayGVR("rayservices")).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"status":`+status+`}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
	manifest := func(name string) []byte {
		t.Helper()
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(testdata(t, "rayservice-minimal.yaml"), &obj))
		obj["metadata"] = map[string]any{"name": name}
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		return b
	}
	cond := func(typ, status, reason, message string) string {
		b, _ := json.Marshal(map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
			"observedGeneration": 2, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
		return string(b)
	}

	require.Equal(t, 201, send("POST", nsPath(ns, "rayservices"), manifest("serve")).Status)
	writeStatus("serve", `{"serviceStatus":"Running","numServeEndpoints":1,"activeServiceStatus":{"rayClusterName":"serve-a1b2c"},`+
		`"conditions":[`+cond("Ready", "True", "NonZeroServeEndpoints", "Number of serve endpoints is greater than 0")+`]}`)
	require.Eventually(t, func() bool { return show("serve").Status == "Running" }, 30*time.Second, 100*time.Millisecond)
	assert.Contains(t, show("serve").Actions, "stop")

	// Stop: spec.suspend, the object kept; Stopping until the operator says Suspended.
	r := send("POST", itemPath(ns, "rayservices", "serve")+"/stop", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, true, suspendAsked("serve"), "stopped in place: spec.suspend")
	assert.Equal(t, "Stopping", show("serve").Status, "asked, not yet suspended")
	r = send("POST", itemPath(ns, "rayservices", "serve")+"/stop", nil)
	require.Equal(t, 200, r.Status, "stopping what is stopping changes nothing: %s", r.Raw)
	// v1.7.0 handleSuspend, case 2 (rayservice_controller.go:419-432), then case 3 while the clusters go
	// (:444).
	writeStatus("serve", `{"serviceStatus":"","numServeEndpoints":0,"activeServiceStatus":null,"conditions":[`+
		cond("Suspending", "True", "SuspendInProgress", "Waiting for all Kubernetes resources owned by this RayService to be deleted.")+","+
		cond("Ready", "False", "SuspendInProgress", "RayService is suspending.")+","+
		cond("UpgradeInProgress", "False", "SuspendInProgress", "No upgrade in progress.")+","+
		cond("RollbackInProgress", "False", "SuspendInProgress", "No rollback in progress.")+`]}`)
	require.Eventually(t, func() bool { return show("serve").Status == "Stopping" }, 30*time.Second, 100*time.Millisecond)
	assert.NotContains(t, show("serve").Actions, "stop", "a stop is under way")
	// Case 3 done (:455-462): Suspended.
	writeStatus("serve", `{"conditions":[`+
		cond("Suspending", "False", "SuspendComplete", "All owned resources have been deleted.")+","+
		cond("Suspended", "True", "SuspendComplete", "All owned resources have been deleted.")+","+
		cond("Ready", "False", "SuspendComplete", "RayService is suspended.")+","+
		cond("UpgradeInProgress", "False", "SuspendComplete", "No upgrade in progress.")+","+
		cond("RollbackInProgress", "False", "SuspendComplete", "No rollback in progress.")+`]}`)
	require.Eventually(t, func() bool { return show("serve").Status == "Stopped" }, 30*time.Second, 100*time.Millisecond)
	s := show("serve")
	assert.Equal(t, "instance", s.Type, "a suspended RayService is the instance, not a template")
	assert.Contains(t, s.Actions, "start")
	assert.Contains(t, s.Actions, "delete")
	assert.NotContains(t, s.Actions, "stop")

	// Start: spec.suspend false; the operator resumes it (case 1, :390-405): Pending until Ready.
	r = send("POST", itemPath(ns, "rayservices", "serve")+"/start", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, false, suspendAsked("serve"), "started in place")
	writeStatus("serve", `{"conditions":[`+
		cond("Suspending", "False", "SuspendComplete", "All owned resources have been deleted.")+","+
		cond("Suspended", "False", "RayServiceResumed", "Spec.Suspend is false; RayService has resumed.")+","+
		cond("Ready", "False", "Initializing", "RayService is initializing after resuming from suspend.")+","+
		cond("UpgradeInProgress", "False", "Initializing", "RayService is initializing after resuming from suspend.")+`]}`)
	require.Eventually(t, func() bool { return show("serve").Status == "Pending" }, 30*time.Second, 100*time.Millisecond)

	// Created stopped: suspended from the start, not a template.
	r = send("POST", nsPath(ns, "rayservices")+"?start=false", manifest("later"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Equal(t, true, suspendAsked("later"), "created suspended")
	assert.Equal(t, "instance", show("later").Type)

	// RayCronJob: spec.timeZone.
	cron := func(name, schedule string, zone *string) []byte {
		t.Helper()
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(testdata(t, "raycronjob-minimal.yaml"), &obj))
		obj["metadata"] = map[string]any{"name": name}
		spec := obj["spec"].(map[string]any)
		spec["schedule"], spec["suspend"] = schedule, false
		if zone != nil {
			spec["timeZone"] = *zone
		}
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		return b
	}
	type cronShown struct {
		Status   string `json:"status"`
		Schedule struct {
			TimeZone string      `json:"timeZone"`
			Error    string      `json:"error"`
			NextRuns []time.Time `json:"nextRuns"`
		} `json:"schedule"`
	}
	showCron := func(name string) cronShown {
		t.Helper()
		r := send("GET", itemPath(ns, "raycronjobs", name), nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		var c cronShown
		require.NoError(t, json.Unmarshal(dataOf(t, r.Raw), &c))
		return c
	}
	shanghai := "Asia/Shanghai"
	r = send("POST", nsPath(ns, "raycronjobs"), cron("daily", "0 9 * * *", &shanghai))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	var c cronShown
	require.Eventually(t, func() bool { c = showCron("daily"); return c.Status == "Running" }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, "Asia/Shanghai", c.Schedule.TimeZone)
	require.Len(t, c.Schedule.NextRuns, 3)
	for _, at := range c.Schedule.NextRuns {
		assert.Equal(t, 1, at.UTC().Hour(), "09:00 in Shanghai is 01:00 UTC: %s", at)
		assert.Zero(t, at.UTC().Minute())
	}
	r = send("POST", nsPath(ns, "raycronjobs"), cron("zoned", "CRON_TZ=Asia/Shanghai 0 9 * * *", nil))
	require.Equal(t, 201, r.Status, "the CRD takes it; the operator refuses it: %s", r.Raw)
	c = showCron("zoned")
	assert.Equal(t, "Failed", c.Status)
	assert.Equal(t, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead", c.Schedule.Error)

	// Run now: named <name>-<Unix minutes>; a run of that minute there already (the operator's, at a
	// tick) is 409 and nothing else is made.
	before := time.Now().Unix() / 60
	r = send("POST", itemPath(ns, "raycronjobs", "daily")+"/run", nil)
	after := time.Now().Unix() / 60
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	var run struct {
		Name string `json:"name"`
	}
	require.NoError(t, json.Unmarshal(dataOf(t, r.Raw), &run))
	var minute int64
	_, err = fmt.Sscanf(run.Name, "daily-%d", &minute)
	require.NoError(t, err, "named as v1.7 names runs: %s", run.Name)
	assert.True(t, minute >= before && minute <= after, "%s: the minute of the run (%d..%d)", run.Name, before, after)
	now := time.Now().Unix() / 60
	for m := now; m <= now+2; m++ { // the operator's runs of the ticks of this minute and the next two
		tick := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
			"metadata": map[string]any{"name": fmt.Sprintf("daily-%d", m), "namespace": ns}, "spec": map[string]any{"entrypoint": "true"}}}
		if _, err := api.dyn.Resource(rayGVR("rayjobs")).Namespace(ns).Create(ctx, tick, metav1.CreateOptions{}); err != nil {
			require.True(t, apierrors.IsAlreadyExists(err), "%v", err)
		}
	}
	r = send("POST", itemPath(ns, "raycronjobs", "daily")+"/run", nil)
	assert.Equal(t, 409, r.Status, "a run of this minute exists: %s", r.Raw)
	runs, err := api.dyn.Resource(rayGVR("rayjobs")).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cronjob-name=daily"})
	require.NoError(t, err)
	assert.Len(t, runs.Items, 1, "only the first run-now is labelled a run of it")

	// A name of 37 characters: v1.7 refuses it (utils/constant.go:385), and so does the service.
	r = send("POST", nsPath(ns, "raycronjobs"), cron(strings.Repeat("n", 37), "0 9 * * *", nil))
	assert.Equal(t, 422, r.Status, "%s", r.Raw)
}

// KubeRay's CRDs serve ray.io/v1alpha1 beside v1 and store v1 (v1.6.2 and v1.7.0
// config/crd/bases; v1.7.0 marks v1alpha1 deprecated): what a client made through v1alpha1 is listed and
// shown through v1 like the rest, and a v1alpha1 manifest sent to the service is refused saying which
// version to write.
func TestV1alpha1ObjectsListedThroughV1(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "alpha")
	admin := env.tokens["admin"]
	old := clusterManifest(t, "old")
	old.SetAPIVersion("ray.io/v1alpha1")
	old.SetNamespace(ns)
	alpha := rayClusters
	alpha.Version = "v1alpha1"
	_, err := env.adminDyn.Resource(alpha).Namespace(ns).Create(context.Background(), old, metav1.CreateOptions{})
	require.NoError(t, err, "made through v1alpha1")
	waitStatus(t, ns, "rayclusters", "old", "Running")
	l := decode[listData](t, call(t, "GET", nsPath(ns, "rayclusters"), admin, "", nil))
	require.Len(t, l.Items, 1)
	assert.Equal(t, "old", l.Items[0].Name)
	r := call(t, "GET", itemPath(ns, "rayclusters", "old"), admin, "", nil)
	require.Equal(t, 200, r.Status)
	assert.Equal(t, "ray.io/v1", decode[summary](t, r).Object["apiVersion"])

	b, err := json.Marshal(old.Object)
	require.NoError(t, err)
	r = call(t, "POST", nsPath(ns, "rayclusters"), admin, "application/json", b)
	assert.Equal(t, 400, r.Status, "%s", r.Raw)
	assert.Contains(t, r.Msg, `apiVersion "ray.io/v1alpha1" is deprecated (KubeRay v1.7): write ray.io/v1`)
}
