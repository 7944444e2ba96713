//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func post(t *testing.T, path string) *response {
	return call(t, "POST", path, env.tokens["admin"], "", nil)
}

func templateExists(t *testing.T, ns, kind, name string) bool {
	t.Helper()
	_, err := env.admin.CoreV1().ConfigMaps(ns).Get(context.Background(), "ray-template."+kind+"."+name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestRayClusterLifecycle(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "lc-cluster")
	r := createClusterAt(t, env.tokens["admin"], ns, "lc", "?start=false")
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Equal(t, "instance", decode[summary](t, r).Type)
	o, err := getRay(t, rayClusters, ns, "lc")
	require.NoError(t, err)
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	assert.True(t, suspend, "created suspended")
	waitStatus(t, ns, "rayclusters", "lc", "Stopped")
	assert.Empty(t, clusterPods(t, ns, "lc"))

	r = post(t, itemPath(ns, "rayclusters", "lc")+"/start")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	waitStatus(t, ns, "rayclusters", "lc", "Running")
	assert.Len(t, clusterPods(t, ns, "lc"), 3)

	o, _ = getRay(t, rayClusters, ns, "lc")
	r = post(t, itemPath(ns, "rayclusters", "lc")+"/start")
	require.Equal(t, 200, r.Status, "start of a running cluster")
	o2, _ := getRay(t, rayClusters, ns, "lc")
	assert.Equal(t, o.GetGeneration(), o2.GetGeneration(), "a second start changes nothing")

	r = call(t, "DELETE", itemPath(ns, "rayclusters", "lc"), env.tokens["admin"], "", nil)
	assert.Equal(t, 409, r.Status, "delete of a Running cluster without force")
	assert.Equal(t, "Conflict", r.Reason)
	assert.Contains(t, r.Msg, "force=true")

	r = post(t, itemPath(ns, "rayclusters", "lc")+"/stop")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	waitStatus(t, ns, "rayclusters", "lc", "Stopped")
	eventually(t, 30*time.Second, "pods gone", func() bool { return len(clusterPods(t, ns, "lc")) == 0 })
	o, _ = getRay(t, rayClusters, ns, "lc")
	r = post(t, itemPath(ns, "rayclusters", "lc")+"/stop")
	require.Equal(t, 200, r.Status, "stop of a stopped cluster")
	o2, _ = getRay(t, rayClusters, ns, "lc")
	assert.Equal(t, o.GetGeneration(), o2.GetGeneration(), "a second stop changes nothing")

	r = call(t, "DELETE", itemPath(ns, "rayclusters", "lc"), env.tokens["admin"], "", nil)
	assert.Equal(t, 200, r.Status, "a stopped cluster deletes without force")

	require.Equal(t, 201, createCluster(t, env.tokens["admin"], ns, "forced", nil).Status)
	waitStatus(t, ns, "rayclusters", "forced", "Running")
	r = call(t, "DELETE", itemPath(ns, "rayclusters", "forced")+"?force=true", env.tokens["admin"], "", nil)
	assert.Equal(t, 200, r.Status)
	eventually(t, 30*time.Second, "pods collected", func() bool { return len(clusterPods(t, ns, "forced")) == 0 })

	for _, op := range []string{"start", "stop"} {
		r = call(t, "POST", itemPath(ns, "rayclusters", "lc")+"/"+op, env.tokens["viewer"], "", nil)
		assert.Contains(t, []int{403, 404}, r.Status, "%s as the viewer: %s", op, r.Raw)
		r = post(t, itemPath(ns, "rayclusters", "absent")+"/"+op)
		assert.Equal(t, 404, r.Status)
	}
}

func TestRayJobSuspendableLifecycle(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "lc-job")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, "sj", true))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Equal(t, "instance", decode[summary](t, r).Type)
	waitStatus(t, ns, "rayjobs", "sj", "Stopped")

	require.Equal(t, 200, post(t, itemPath(ns, "rayjobs", "sj")+"/start").Status)
	waitStatus(t, ns, "rayjobs", "sj", "Running")
	require.Equal(t, 200, post(t, itemPath(ns, "rayjobs", "sj")+"/stop").Status)
	waitStatus(t, ns, "rayjobs", "sj", "Stopped")
	o, _ := getRay(t, rayJobs, ns, "sj")
	suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
	assert.True(t, suspend)

	// Resume, finish it through the dashboard, then run it again.
	require.Equal(t, 200, post(t, itemPath(ns, "rayjobs", "sj")+"/start").Status)
	waitStatus(t, ns, "rayjobs", "sj", "Running")
	cluster := currentRayCluster(t, ns, "sj")
	finishJobs(t, ns, cluster, "SUCCEEDED")
	waitStatus(t, ns, "rayjobs", "sj", "Succeeded")
	r = post(t, itemPath(ns, "rayjobs", "sj")+"/stop")
	assert.Equal(t, 409, r.Status, "stop of a finished job")
	uid := mustUID(t, ns, "sj")
	r = post(t, itemPath(ns, "rayjobs", "sj")+"/start")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.NotEqual(t, uid, mustUID(t, ns, "sj"), "re-created")
	assert.False(t, templateExists(t, ns, "rayjob", "sj"), "the re-run's template is removed")
	waitStatus(t, ns, "rayjobs", "sj", "Running")
}

// A job whose Ray job fails is Failed; start runs it again.
func TestRayJobFailedRunsAgain(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "lc-failed")
	admin := env.tokens["admin"]
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", rayJob(t, "fj", true)).Status)
	waitStatus(t, ns, "rayjobs", "fj", "Running")
	cluster := currentRayCluster(t, ns, "fj")
	finishJobs(t, ns, cluster, "FAILED")
	waitStatus(t, ns, "rayjobs", "fj", "Failed")
	uid := mustUID(t, ns, "fj")
	require.Equal(t, 200, post(t, itemPath(ns, "rayjobs", "fj")+"/start").Status)
	assert.NotEqual(t, uid, mustUID(t, ns, "fj"))
	waitStatus(t, ns, "rayjobs", "fj", "Running")
}

func TestRayJobTemplateAndDashboardStop(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "lc-jobtpl")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, "tj", false))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	s := decode[summary](t, r)
	assert.Equal(t, "template", s.Type)
	assert.Equal(t, "Stopped", s.Status)
	assert.True(t, templateExists(t, ns, "rayjob", "tj"))
	_, err := getRay(t, rayJobs, ns, "tj")
	assert.True(t, apierrors.IsNotFound(err), "no instance for a template")

	// Listed, shown, exported, replaced like an instance.
	eventually(t, 20*time.Second, "the template listed", func() bool {
		l := decode[listData](t, call(t, "GET", nsPath(ns, "rayjobs")+"?type=template", admin, "", nil))
		return l.Total == 1 && l.Items[0].Name == "tj" && l.Items[0].Type == "template" && l.Items[0].Status == "Stopped"
	})
	l := decode[listData](t, call(t, "GET", nsPath(ns, "rayjobs")+"?type=instance", admin, "", nil))
	assert.Equal(t, 0, l.Total)
	l = decode[listData](t, call(t, "GET", nsPath(ns, "rayjobs")+"?status=Stopped", admin, "", nil))
	assert.Equal(t, 1, l.Total)
	d, code := statusOf(t, ns, "rayjobs", "tj")
	require.Equal(t, 200, code)
	assert.Equal(t, "template", d.Type)
	exp := call(t, "GET", itemPath(ns, "rayjobs", "tj")+"/yaml", admin, "", nil)
	require.Equal(t, 200, exp.Status)
	edited := strings.Replace(string(exp.Raw), `print('hello')`, `print('edited')`, 1)
	require.NotEqual(t, string(exp.Raw), edited)
	r = call(t, "PUT", itemPath(ns, "rayjobs", "tj"), admin, "application/yaml", []byte(edited))
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	r = call(t, "PUT", itemPath(ns, "rayjobs", "tj"), admin, "application/yaml", []byte(edited))
	assert.Equal(t, 409, r.Status, "a stale template copy")
	r = call(t, "PUT", itemPath(ns, "rayjobs", "tj"), admin, "application/yaml",
		[]byte(regexp.MustCompile(`\n  resourceVersion: "\d+"`).ReplaceAllString(strings.Replace(edited, "entrypoint:", "colour: blue\n  entrypoint:", 1), "")))
	assert.Equal(t, 422, r.Status, "a template is validated like the object: %s", r.Raw)

	// Start creates it; stop goes through the Ray dashboard job API.
	r = post(t, itemPath(ns, "rayjobs", "tj")+"/start")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.False(t, templateExists(t, ns, "rayjob", "tj"))
	o, err := getRay(t, rayJobs, ns, "tj")
	require.NoError(t, err)
	entry, _, _ := unstructured.NestedString(o.Object, "spec", "entrypoint")
	assert.Contains(t, entry, "edited")
	waitStatus(t, ns, "rayjobs", "tj", "Running")
	cluster := currentRayCluster(t, ns, "tj")
	// Running once its submitter runs; submitted once the operator reads the job's status back from the
	// dashboard (before that, a stop is 409: the dashboard knows no such job yet).
	eventually(t, 60*time.Second, "the Ray job submitted", func() bool {
		return decode[struct {
			JobStatus string `json:"jobStatus"`
		}](t, call(t, "GET", itemPath(ns, "rayjobs", "tj"), env.tokens["admin"], "", nil)).JobStatus == "RUNNING"
	})

	r = call(t, "POST", itemPath(ns, "rayjobs", "tj")+"/stop", env.tokens["viewer"], "", nil)
	assert.Equal(t, 403, r.Status, "the viewer may not stop through the dashboard: %s", r.Raw)
	assert.Zero(t, env.dashboards.seen("POST", cluster+"-head-svc."+ns, "/stop"))
	r = post(t, itemPath(ns, "rayjobs", "tj")+"/stop")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, 1, env.dashboards.seen("POST", cluster+"-head-svc."+ns, "/stop"))
	waitStatus(t, ns, "rayjobs", "tj", "Stopped")
	r = post(t, itemPath(ns, "rayjobs", "tj")+"/stop")
	assert.Equal(t, 200, r.Status, "stop of a stopped job")
	assert.Equal(t, 1, env.dashboards.seen("POST", cluster+"-head-svc."+ns, "/stop"), "nothing sent again")

	uid := mustUID(t, ns, "tj")
	require.Equal(t, 200, post(t, itemPath(ns, "rayjobs", "tj")+"/start").Status)
	assert.NotEqual(t, uid, mustUID(t, ns, "tj"), "a stopped job runs again from its spec")
	waitStatus(t, ns, "rayjobs", "tj", "Running")
}

func TestRayServiceLifecycle(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "lc-svc")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Equal(t, "template", decode[summary](t, r).Type)
	require.Equal(t, 200, post(t, itemPath(ns, "rayservices", "minimal-service")+"/start").Status)
	_, err := getRay(t, rayServices, ns, "minimal-service")
	require.NoError(t, err)
	assert.False(t, templateExists(t, ns, "rayservice", "minimal-service"))
	s, _ := statusOf(t, ns, "rayservices", "minimal-service")
	assert.Equal(t, "instance", s.Type)

	r = post(t, itemPath(ns, "rayservices", "minimal-service")+"/stop")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, "template", decode[summary](t, r).Type)
	assert.True(t, templateExists(t, ns, "rayservice", "minimal-service"))
	eventually(t, 30*time.Second, "the instance deleted", func() bool {
		_, err := getRay(t, rayServices, ns, "minimal-service")
		return apierrors.IsNotFound(err)
	})
	s, _ = statusOf(t, ns, "rayservices", "minimal-service")
	assert.Equal(t, "Stopped", s.Status)
	require.Equal(t, 200, post(t, itemPath(ns, "rayservices", "minimal-service")+"/stop").Status, "stop of a template")

	require.Equal(t, 200, post(t, itemPath(ns, "rayservices", "minimal-service")+"/start").Status)
	_, err = getRay(t, rayServices, ns, "minimal-service")
	require.NoError(t, err)
	r = call(t, "DELETE", itemPath(ns, "rayservices", "minimal-service")+"?force=true", admin, "", nil)
	require.Equal(t, 200, r.Status)
	assert.False(t, templateExists(t, ns, "rayservice", "minimal-service"))
}

func TestBatchDelete(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "batch")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "running", nil).Status)
	require.Equal(t, 201, createClusterAt(t, admin, ns, "stopped", "?start=false").Status)
	r := call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, "tpl", false))
	require.Equal(t, 201, r.Status)
	waitStatus(t, ns, "rayclusters", "running", "Running")
	waitStatus(t, ns, "rayclusters", "stopped", "Stopped")

	batch := func(kind string, body any) *response {
		b, _ := json.Marshal(body)
		return call(t, "POST", "/rest/ray/v1/"+kind+"/batch-delete", admin, "application/json", b)
	}
	type result struct {
		Namespace, Name, Msg, Reason string
		Code                         int
	}
	items := []map[string]string{{"namespace": ns, "name": "running"}, {"namespace": ns, "name": "stopped"},
		{"namespace": ns, "name": "absent"}, {"namespace": ns, "name": "stopped"}}
	r = batch("rayclusters", map[string]any{"items": items})
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	res := decode[[]result](t, r)
	require.Len(t, res, 4)
	assert.Equal(t, []int{409, 200, 404, 200}, []int{res[0].Code, res[1].Code, res[2].Code, res[3].Code})
	assert.Equal(t, "running", res[0].Name)
	_, err := getRay(t, rayClusters, ns, "running")
	require.NoError(t, err, "the Running one stays")

	r = batch("rayclusters", map[string]any{"items": items[:1], "force": true})
	require.Equal(t, 200, r.Status)
	assert.Equal(t, 200, decode[[]result](t, r)[0].Code)
	r = batch("rayjobs", map[string]any{"items": []map[string]string{{"namespace": ns, "name": "tpl"}}})
	require.Equal(t, 200, r.Status)
	assert.Equal(t, 200, decode[[]result](t, r)[0].Code)
	assert.False(t, templateExists(t, ns, "rayjob", "tpl"))

	var many []map[string]string
	for i := 0; i <= 100; i++ {
		many = append(many, map[string]string{"namespace": ns, "name": fmt.Sprint("x", i)})
	}
	for _, bad := range []any{map[string]any{"items": many}, map[string]any{"items": []string{}},
		map[string]any{"items": []map[string]string{{"name": "x"}}}, map[string]any{"itemz": items}} {
		r = batch("rayclusters", bad)
		assert.Equal(t, 400, r.Status, "%s", r.Raw)
	}
	r = call(t, "POST", "/rest/ray/v1/rayclusters/batch-delete", env.tokens["viewer"], "application/json", []byte(`{"items":[{"namespace":"`+ns+`","name":"stopped"}]}`))
	require.Equal(t, 200, r.Status)
	assert.Equal(t, 404, decode[[]result](t, r)[0].Code, "already deleted")
}

// Start, stop and delete of one object from 20 goroutines at once: no 5xx, and a consistent end.
func TestConcurrentLifecycle(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "race")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "contended")
	ops := []string{"start", "stop"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for g := range 20 {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(g)))
			for i := range 5 {
				op := ops[rnd.Intn(len(ops))]
				if i == 4 && rnd.Intn(4) == 0 {
					op = "delete" // some deletes at the end, racing the last starts and stops
				}
				var r *response
				var err error
				if op == "delete" {
					r, err = send("DELETE", itemPath(ns, "rayclusters", "contended"), admin, "", nil)
				} else {
					r, err = send("POST", itemPath(ns, "rayclusters", "contended")+"/"+op, admin, "", nil)
				}
				if err != nil {
					t.Errorf("%s: %v", op, err)
					return
				}
				mu.Lock()
				codes[r.Status]++
				mu.Unlock()
				assert.Less(t, r.Status, 500, "%s: %s", op, r.Raw)
			}
		}(g)
	}
	wg.Wait()
	t.Logf("answers: %v", codes)
	for code := range codes {
		assert.Contains(t, []int{200, 404, 409}, code)
	}
	// The end state is consistent: gone, or settled as its spec says.
	eventually(t, 60*time.Second, "a settled end state", func() bool {
		o, err := getRay(t, rayClusters, ns, "contended")
		if apierrors.IsNotFound(err) {
			return len(clusterPods(t, ns, "contended")) == 0
		}
		require.NoError(t, err)
		if o.GetDeletionTimestamp() != nil {
			return false
		}
		suspend, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend")
		s, code := statusOf(t, ns, "rayclusters", "contended")
		return code == 200 && (suspend && s.Status == "Stopped" || !suspend && s.Status == "Running")
	})
	assert.False(t, templateExists(t, ns, "raycluster", "contended"), "a RayCluster never leaves a template")
}

// A start cut short after the object was created (here: the caller may not delete the template) leaves
// the object and the template, never neither; the list shows the object once; a later start completes.
func TestInterruptedStartCompletes(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "interrupt")
	bind(t, ns, "alice", "ray-editor")
	ctx := context.Background()
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list", "update"}}
	grantRole(t, ns, "alice", "templates", rule)
	alice := env.tokens["alice"]

	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", alice, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	r = call(t, "POST", itemPath(ns, "rayservices", "minimal-service")+"/start", alice, "", nil)
	assert.Equal(t, 403, r.Status, "the template cannot be removed: %s", r.Raw)
	_, err := getRay(t, rayServices, ns, "minimal-service")
	require.NoError(t, err, "the object exists")
	assert.True(t, templateExists(t, ns, "rayservice", "minimal-service"), "the template is still there")
	eventually(t, 20*time.Second, "one list item, the instance", func() bool {
		l := decode[listData](t, call(t, "GET", nsPath(ns, "rayservices"), alice, "", nil))
		return l.Total == 1 && l.Items[0].Type == "instance"
	})

	rule.Verbs = append(rule.Verbs, "delete")
	_, err = env.admin.RbacV1().Roles(ns).Update(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "templates"},
		Rules: []rbacv1.PolicyRule{rule}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Until the authorizer knows the new right, a start leaves the stale template as it is (the caller
	// may not delete it) and says 200: wait for the right first.
	waitAllowed(t, "alice", ns, "delete", "", "configmaps")
	eventually(t, 10*time.Second, "the start completes", func() bool {
		r := call(t, "POST", itemPath(ns, "rayservices", "minimal-service")+"/start", alice, "", nil)
		return r.Status == 200
	})
	assert.False(t, templateExists(t, ns, "rayservice", "minimal-service"))
}
