//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// heapAfterGC reads the heap in use of a service right after a garbage collection, from its profiler:
// the least of a few readings, so that a collection running late does not count.
func heapAfterGC(t *testing.T, pprofAddr string) int64 {
	t.Helper()
	least := int64(-1)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		status, body, err := httpGet(ctx, "http://"+pprofAddr+"/debug/pprof/heap?gc=1&debug=1")
		cancel()
		require.NoError(t, err)
		require.Equal(t, 200, status)
		m := regexp.MustCompile(`(?m)^# HeapAlloc = ([0-9]+)$`).FindSubmatch(body)
		require.NotNil(t, m, "the heap profile tells HeapAlloc")
		n, err := strconv.ParseInt(string(m[1]), 10, 64)
		require.NoError(t, err)
		if least < 0 || n < least {
			least = n
		}
		time.Sleep(500 * time.Millisecond)
	}
	return least
}

// listedOn tells how many items the list of ns on the service at base shows for a label selector.
func listedOn(t *testing.T, base, ns, kind, selector string) int {
	t.Helper()
	r, err := sendTo(base, "GET", nsPath(ns, kind)+"?labelSelector="+selector, env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	return decode[listData](t, r).Total
}

// Attack: the change feed behind the streams kept the version before each of the last 4096 changes of
// every kind, whole, whether a stream was open or not, and a version copied the creator annotation
// whatever its length. A tenant who may patch one RayCluster of its own gave it a 200 KiB annotation and
// patched its labels a few thousand times: each patch pinned another copy, hundreds of MB that stayed
// after the object was gone. The feed is now bounded in bytes and the summary's strings in length.
// The heap is read after a collection (the service's profiler, --pprof-listen).
func TestAttackFeedFloodDoesNotHoldMemory(t *testing.T) {
	// The profiler's address is free when it is picked, and may be another instance's by the time the
	// service binds it (the service logs that and goes on): picked again until the profiler answers.
	var svc *serviceProc
	var pprofAddr string
	for try := 1; ; try++ {
		pprofAddr = freeAddr(t)
		svc = startInstance(t, "ray-service-flood.log", "--pprof-listen="+pprofAddr)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		status, _, err := httpGet(ctx, "http://"+pprofAddr+"/debug/pprof/cmdline")
		cancel()
		if err == nil && status == 200 || try == 3 {
			break
		}
		require.True(t, svc.stop(), "the service stops")
	}
	ns := namespace(t, "flood")
	grantRole(t, ns, "bob", "flood", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"},
		Verbs: []string{"patch", "get", "list", "create", "delete"}})
	bob := dynamicAs(t, "bob").Resource(rayClusters).Namespace(ns)
	ctx := context.Background()

	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(minimalCluster), &obj))
	u := &unstructured.Unstructured{Object: obj}
	u.SetName("flood")
	u.SetNamespace(ns)
	u.SetAnnotations(map[string]string{"ray.openfuyao.com/creator": strings.Repeat("x", 200<<10)})
	u.SetLabels(map[string]string{"flood": "start"})
	require.NoError(t, unstructured.SetNestedField(u.Object, true, "spec", "suspend"))
	_, err := bob.Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err, "bob may create a RayCluster in his namespace")
	eventually(t, 30*time.Second, "the service holds the cluster", func() bool { return listedOn(t, svc.url, ns, "rayclusters", "flood=start") == 1 })
	time.Sleep(2 * time.Second) // the operator's first writes
	before := heapAfterGC(t, pprofAddr)

	// A thousand patches of a 200 KiB object pinned about 200 MB before the fix: two hundred pin 40 MB,
	// twice what the test allows, where the heap after GC moves by 1 or 2 MB from one reading to the next
	// (each patch writes 200 KiB through etcd: a thousand took over three minutes).
	const patches, workers = 200, 6
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > patches {
					return
				}
				patch := fmt.Sprintf(`{"metadata":{"labels":{"flood":"p%d"}}}`, i)
				if _, err := bob.Patch(ctx, "flood", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// A busy apiserver may time some out; the attack needs most of them.
	t.Logf("%d of %d patches refused or timed out", failed.Load(), patches)
	require.Less(t, failed.Load(), int64(patches/10), "bob's patches are accepted")
	_, err = bob.Patch(ctx, "flood", types.MergePatchType, []byte(`{"metadata":{"labels":{"flood":"done"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 2*time.Minute, "the service saw the last patch", func() bool { return listedOn(t, svc.url, ns, "rayclusters", "flood=done") == 1 })
	after := heapAfterGC(t, pprofAddr)
	t.Logf("heap after GC: %d MB before, %d MB after %d patches (%+d MB)", before>>20, after>>20, patches, (after-before)>>20)
	assert.Less(t, after-before, int64(20<<20), "a tenant's patches move the service's heap by less than 20 MB")

	require.NoError(t, bob.Delete(ctx, "flood", metav1.DeleteOptions{}))
	eventually(t, time.Minute, "the cluster is gone from the service", func() bool { return listedOn(t, svc.url, ns, "rayclusters", "flood=done") == 0 })
	gone := heapAfterGC(t, pprofAddr)
	t.Logf("heap after GC once deleted: %d MB (%+d MB)", gone>>20, (gone-before)>>20)
	assert.Less(t, gone-before, int64(20<<20), "nothing of the flood stays once the object is gone")
}

// Attack: an object's stream sent PODS frames (names, nodes, addresses, images, states) to a caller who
// may read the Ray object but not list pods, while the pods route answers that caller 403.
func TestAttackObjectStreamShowsNoPodsWithoutPodRights(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "podrights")
	runningCluster(t, ns, "pr")
	grantRole(t, ns, "carol", "ray-only", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"},
		Verbs: []string{"get", "list", "watch"}})
	carol := env.tokens["carol"]
	path := itemPath(ns, "rayclusters", "pr")
	r := call(t, "GET", path+"/pods", carol, "", nil)
	require.Equal(t, 403, r.Status, "carol may not list the pods: %s", r.Raw)

	status, s := openWatch(t, env.serviceURL, path+"/watch", carol, "")
	require.Equal(t, 200, status)
	seen := s.until(t, 30*time.Second, "the first state", func(ev sseEvent) bool { return ev.Name == "SYNCED" })
	// A pod change comes next: the workers scaled down.
	r = call(t, "POST", path+"/scale", env.tokens["admin"], "application/json", []byte(`{"group":"workers","replicas":1}`))
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	eventually(t, 60*time.Second, "one worker left", func() bool { return len(clusterPods(t, ns, "pr")) == 2 })
	seen = append(seen, s.during(5*time.Second)...)
	for _, ev := range seen {
		assert.NotEqual(t, "PODS", ev.Name, "no pods for a caller who may not list them: %v", ev)
	}

	// Who may list pods still gets them.
	status, s = openWatch(t, env.serviceURL, path+"/watch", env.tokens["admin"], "")
	require.Equal(t, 200, status)
	first := s.until(t, 30*time.Second, "the admin's first state", func(ev sseEvent) bool { return ev.Name == "SYNCED" })
	var pods []podInfo
	for _, ev := range first {
		if ev.Name == "PODS" {
			require.NoError(t, json.Unmarshal(ev.Data, &pods))
		}
	}
	assert.NotEmpty(t, pods, "the admin sees the pods: %v", first)
}

// Attack: the bounds on watch streams and log follows per caller counted tokens, not users: a user who
// can mint tokens (any ServiceAccount's TokenRequest) took every place by opening each stream with a new
// token. They now count the authenticated user; an object stream is also refused before it starts
// reading the namespace's events.
func TestAttackStreamLimitsArePerUser(t *testing.T) {
	// The instance reaches the apiserver through a recorder: what it read before a refusal is in the
	// record by the time the refusal arrives.
	api := recordAPI(t)
	svc := startInstance(t, "ray-service-peruser.log",
		"--max-watches-per-caller=2", "--max-log-follows-per-caller=1", "--kubeconfig", api.kubeconfig(t))
	ns := namespace(t, "peruser")
	runningCluster(t, ns, "pu")
	ctx := context.Background()
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "events"}, Verbs: []string{"get", "list"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tenant", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	user := "system:serviceaccount:" + ns + ":tenant"
	waitAllowed(t, user, ns, "list", "ray.io", "rayclusters")
	waitAllowed(t, user, ns, "get", "", "pods/log")
	var tokens []string
	for range 4 {
		expiry := int64(3600)
		tr, err := env.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "tenant",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tokens = append(tokens, tr.Status.Token)
	}

	path := itemPath(ns, "rayclusters", "pu")
	for i, tok := range tokens[:2] {
		status, _ := openWatch(t, svc.url, watchPath(ns, "rayclusters"), tok, "")
		require.Equal(t, 200, status, "stream %d of the user", i+1)
	}
	status, _ := openWatch(t, svc.url, watchPath(ns, "rayclusters"), tokens[2], "")
	assert.Equal(t, 429, status, "a third stream of the same user, with a token of its own")
	status, _ = openWatch(t, svc.url, path+"/watch", tokens[3], "")
	assert.Equal(t, 429, status, "an object stream of the same user, with yet another token")
	// A stream that reads the events does so before its first state; had the refused one read them
	// before its refusal, the read would be recorded by now. None of this instance's streams so far
	// was one that reads them.
	refused := api.requests()
	assert.Empty(t, eventReads(refused, ns), "refused before reading the namespace's events")
	t.Logf("the instance's apiserver requests by the refusal: %d, of them reads of %s's events: %v", len(refused), ns, eventReads(refused, ns))
	// The record shows such a read where there is one: an object stream served reads them.
	status, admin := openWatch(t, svc.url, path+"/watch", env.tokens["admin"], "")
	require.Equal(t, 200, status, "the admin's object stream")
	admin.until(t, 30*time.Second, "the admin's first state", func(ev sseEvent) bool { return ev.Name == "SYNCED" })
	var served []apiRequest
	eventually(t, 60*time.Second, "the served stream's read of the namespace's events recorded", func() bool {
		served = eventReads(api.requests()[len(refused):], ns)
		return len(served) > 0
	})
	t.Logf("reads of %s's events for the stream served: %v", ns, served)
	admin.close()

	var head string
	for _, p := range clusterPods(t, ns, "pu") {
		if p.Labels["ray.io/node-type"] == "head" {
			head = p.Name
		}
	}
	podLog(t, ns, head, "ray-head", "a line")
	status, res := openFollow(t, svc.url, path, tokens[0])
	require.Equal(t, 200, status, "the user's first follow")
	defer res.Body.Close()
	status, _ = openFollow(t, svc.url, path, tokens[1])
	assert.Equal(t, 429, status, "a second follow of the same user, with another token")
}
