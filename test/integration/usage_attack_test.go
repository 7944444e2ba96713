//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"ray-service/internal/idle"
	"ray-service/internal/ray"
)

// tokenConfig is the configuration of a client that acts as a token's holder, straight to the apiserver.
func tokenConfig(token string) *rest.Config {
	return seeingCredentials(&rest.Config{Host: env.vars["KUBE_APISERVER_URL"], BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.vars["KUBE_CA_FILE"]}})
}

// dynamicWithToken is a dynamic client that acts as a token's holder, straight to the apiserver.
func dynamicWithToken(t *testing.T, token string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(tokenConfig(token))
	require.NoError(t, err)
	return d
}

// clientWithToken is a Kubernetes client that acts as a token's holder, straight to the apiserver.
func clientWithToken(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(tokenConfig(token))
	require.NoError(t, err)
	return cs
}

// putIdlePolicy sets ns's idle policy through svc as the holder of token.
func putIdlePolicy(t *testing.T, svc *serviceProc, token, ns, stopAfter string) *response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"stopAfter": stopAfter})
	r, err := sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", token, "application/json", body)
	require.NoError(t, err)
	return r
}

// utilizationOf is svc's utilization report of ns grouped by groupBy, as the holder of token reads it.
func utilizationOf(t *testing.T, svc *serviceProc, token, ns, groupBy string) utilizationReport {
	t.Helper()
	r, err := sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+"/utilization?groupBy="+groupBy, token, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	var rep utilizationReport
	require.NoError(t, json.Unmarshal(r.Data, &rep), "%s", r.Raw)
	return rep
}

// idleDetail is what a cluster's detail says of its creator and of its idleness.
type idleDetail struct {
	Creator       string `json:"creator"`
	CreatorSigned bool   `json:"creatorSigned"`
	Idle          *struct {
		StopAt *time.Time `json:"stopAt"`
		Policy string     `json:"policy"`
	} `json:"idle"`
}

// waitIdle waits until svc's detail of the RayCluster name in ns says it is idle, and returns it.
func waitIdle(t *testing.T, svc *serviceProc, token, ns, name string) idleDetail {
	t.Helper()
	var d idleDetail
	eventually(t, 2*time.Minute, "the "+name+" cluster idle", func() bool {
		r, err := sendTo(svc.url, "GET", itemPath(ns, "rayclusters", name), token, "", nil)
		require.NoError(t, err)
		d = decode[idleDetail](t, r)
		return d.Idle != nil
	})
	return d
}

// controlledBy makes u's controlling owner reference name the Ray object kind/name of that UID.
func controlledBy(u *unstructured.Unstructured, kind, name string, uid types.UID) {
	yes := true
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: name, UID: uid, Controller: &yes}})
}

// idleStopIdentity makes, in ns alone, the identity the chart makes for the stop of idle clusters by
// policy (and the service's right to ask a token for it), and returns the flags of an instance that
// stops as it.
func idleStopIdentity(t *testing.T, ns string) []string {
	t.Helper()
	ctx := context.Background()
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "idle-stop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, r := range []struct {
		name    string
		rule    rbacv1.PolicyRule
		subject rbacv1.Subject
	}{
		{"idle-stop", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get", "patch"}},
			rbacv1.Subject{Kind: "ServiceAccount", Name: "idle-stop", Namespace: ns}},
		{"idle-stop-token", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{"idle-stop"},
			Verbs: []string{"create"}}, rbacv1.Subject{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "ray-service"}},
	} {
		_, err = env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: r.name}, Rules: []rbacv1.PolicyRule{r.rule}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.name},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: r.name}, Subjects: []rbacv1.Subject{r.subject}},
			metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return []string{"--idle-stop-identity=" + ns + "/idle-stop", "--idle-stop-warning=10s"}
}

// quietCluster is a RayCluster manifest whose pods use nothing (stack/kwok-metrics.yaml), so that it
// becomes idle a window after it runs.
func quietCluster(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := clusterManifest(t, name)
	for _, tpl := range []map[string]any{group(u.Object, "spec", "headGroupSpec", "template"), group(u.Object, "spec", "workerGroupSpecs", 0, "template")} {
		group(tpl, "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": "0"}
	}
	return u
}

// A tenant who may edit Ray objects in its namespace makes a RayCluster straight through the apiserver
// with another user's name as its creator annotation (unsigned) and KubeRay's labels that say a RayJob
// of another name made it. Its hours must not be billed to that user nor filed under that RayJob, and the
// labels must not exempt it from its namespace's idle policy (which leaves clusters a RayJob or RayService
// made to their maker): the labels hold only with the owner reference KubeRay sets, and the creator only
// with the service's signature. Before, the report showed a row of the victim and of kind RayJob, and
// the idle cluster had no stop planned.
func TestAttackForgedCreatorAndMaker(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "usage-forged")
	flags := idleStopIdentity(t, ns)
	svc := startInstance(t, "ray-service-usage-forged.log", append([]string{"--usage-credit-every=2s", "--idle-window=30s",
		"--idle-interval=5s"}, flags...)...)
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")

	r := putIdlePolicy(t, svc, admin, ns, "1h")
	require.Equal(t, 201, r.Status, "%s", r.Raw)

	forged := quietCluster(t, "forged")
	forged.SetAnnotations(map[string]string{ray.CreatorKey: "victim-user"})
	forged.SetLabels(map[string]string{ray.CreatorKey: "victim-user", ray.OriginatedFromCRDLabel: "RayJob", ray.OriginatedFromCRNameLabel: "victims-job"})
	_, err := dynamicWithToken(t, token).Resource(ray.RayGroupVersion.WithResource("rayclusters")).Namespace(ns).Create(context.Background(), forged,
		metav1.CreateOptions{})
	require.NoError(t, err)
	waitStatus(t, ns, "rayclusters", "forged", "Running")

	report := func(groupBy string) utilizationReport { return utilizationOf(t, svc, admin, ns, groupBy) }
	eventually(t, 60*time.Second, "the forged cluster's hours credited", func() bool {
		rep := report("creator")
		return len(rep.Items) > 0 && rep.Whole.Allocated.CPUCoreHours > 0
	})
	for _, row := range report("creator").Items {
		assert.NotEqual(t, "victim-user", row.Creator, "an unsigned creator annotation bills no one: %+v", row.GroupKey)
	}
	kinds := map[string]bool{}
	for _, row := range report("kind").Items {
		kinds[row.Kind] = true
	}
	assert.False(t, kinds["RayJob"], "labels without KubeRay's owner reference file no cluster under a RayJob: %v", kinds)
	assert.True(t, kinds["RayCluster"], "counted as what it is, a RayCluster of its own: %v", kinds)

	d := waitIdle(t, svc, admin, ns, "forged")
	assert.False(t, d.CreatorSigned, "the detail says the creator is not the service's")
	if assert.NotNil(t, d.Idle.StopAt, "the namespace's policy plans its stop: the forged labels exempt nothing") {
		assert.Contains(t, d.Idle.Policy, "namespace policy")
	}
}

// A tenant who may edit Ray objects in a namespace reads another user's RayJob there (its UID) and
// makes a RayCluster straight through the apiserver with KubeRay's labels and a controlling owner
// reference to that RayJob, UID and all. KubeRay made no such cluster: the RayJob's status
// (status.rayClusterName) names none, so its hours must not be billed to the RayJob's creator nor filed
// under the RayJob, and the RayJob's exemption from the namespace's idle policy must not cover it.
// Before, the owner reference alone was believed: the report showed the RayJob and its creator, and the
// idle cluster had no stop planned.
func TestAttackForgedOwnerReference(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "usage-owner")
	flags := idleStopIdentity(t, ns)
	svc := startInstance(t, "ray-service-usage-owner.log", append([]string{"--usage-credit-every=2s", "--idle-window=30s",
		"--idle-interval=5s"}, flags...)...)
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	ctx := context.Background()

	r := putIdlePolicy(t, svc, admin, ns, "1h")
	require.Equal(t, 201, r.Status, "%s", r.Raw)

	// The victim's RayJob, made through the service (its creator signed); suspended, it makes no cluster.
	r = createSuspendedRayJob(t, admin, ns, "victims-job", nil)
	require.True(t, decode[summary](t, r).CreatorSigned)
	victim := decode[summary](t, r).Creator

	mallory := dynamicWithToken(t, token)
	job, err := mallory.Resource(rayJobs).Namespace(ns).Get(ctx, "victims-job", metav1.GetOptions{})
	require.NoError(t, err)
	forged := quietCluster(t, "forged")
	forged.SetLabels(map[string]string{ray.OriginatedFromCRDLabel: "RayJob", ray.OriginatedFromCRNameLabel: "victims-job"})
	controlledBy(forged, "RayJob", "victims-job", job.GetUID())
	_, err = mallory.Resource(ray.RayGroupVersion.WithResource("rayclusters")).Namespace(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	waitStatus(t, ns, "rayclusters", "forged", "Running")

	report := func(groupBy string) utilizationReport { return utilizationOf(t, svc, admin, ns, groupBy) }
	eventually(t, 60*time.Second, "the forged cluster's hours credited", func() bool {
		return report("creator").Whole.Allocated.CPUCoreHours > 0
	})
	for _, row := range report("cluster").Items {
		assert.NotEqual(t, victim, row.Creator, "a forged owner reference bills no one: %+v", row.GroupKey)
		assert.Equal(t, "RayCluster", row.Kind, "nor files the cluster under the RayJob: %+v", row.GroupKey)
	}

	d := waitIdle(t, svc, admin, ns, "forged")
	if assert.NotNil(t, d.Idle.StopAt, "the namespace's policy plans its stop: the RayJob's exemption does not cover it") {
		assert.Contains(t, d.Idle.Policy, "namespace policy")
	}
}

// A RayCronJob made through the service (its creator signed) runs every minute: the runs KubeRay makes on
// its schedule carry no signed creator, and are billed to the RayCronJob's. A tenant who may edit Ray
// objects there cannot have a RayJob of its own billed so: one with the RayCronJob's controlling owner
// reference (its real UID), label and the annotation of a tick to come, made before that tick (KubeRay
// makes a run at its tick, one per tick, and writes status.lastScheduleTime after), is no run of it,
// before and after the RayCronJob reaches that tick. Before, the scheduled runs were unverified.
func TestAttackCronRunsBilledOnlyWhenScheduled(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "usage-cron")
	svc := startInstance(t, "ray-service-usage-cron.log", "--usage-credit-every=2s", "--idle-window=0")
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	ctx := context.Background()

	victim := everyMinuteCron(t, ns, "every-minute", "")

	mallory := dynamicWithToken(t, token)
	cron, err := mallory.Resource(ray.RayGroupVersion.WithResource("raycronjobs")).Namespace(ns).Get(ctx, "every-minute", metav1.GetOptions{})
	require.NoError(t, err)
	// A tick far enough ahead that the RayJob is made before it.
	tick := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Minute)
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(mustRename(t, "rayjob-minimal.yaml", "every-minute-forged"), &obj))
	forged := &unstructured.Unstructured{Object: obj}
	forged.SetLabels(map[string]string{ray.RunOfLabel: "every-minute"})
	forged.SetAnnotations(map[string]string{ray.ScheduledAtAnnotation: tick.Format(time.RFC3339)})
	controlledBy(forged, "RayCronJob", "every-minute", cron.GetUID())
	_, err = mallory.Resource(rayJobs).Namespace(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, time.Now().Before(tick), "made before its tick")

	rows := func() []utilizationRow { return utilizationOf(t, svc, admin, ns, "cluster").Items }
	// billed are the creators the rows counted to a RayJob bill, and its core-hours.
	billed := func(job string) (creators map[string]bool, hours float64) {
		creators = map[string]bool{}
		for _, row := range rows() {
			if row.Kind == "RayJob" && row.Name == job {
				creators[row.Creator] = true
				hours += row.Allocated.CPUCoreHours
			}
		}
		return creators, hours
	}
	// claimants are the RayJobs that say they are the run of each tick, and runs tells them.
	claimants := func() (map[time.Time][]string, string) {
		list, err := env.adminDyn.Resource(rayJobs).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: ray.RunOfLabel + "=every-minute"})
		require.NoError(t, err)
		by := map[time.Time][]string{}
		var told []string
		for _, j := range list.Items {
			at, err := time.Parse(time.RFC3339, j.GetAnnotations()[ray.ScheduledAtAnnotation])
			if err != nil {
				continue
			}
			by[at] = append(by[at], j.GetName())
			told = append(told, fmt.Sprintf("%s of %s made %s", j.GetName(), at.Format(time.TimeOnly), j.GetCreationTimestamp().Format(time.TimeOnly)))
		}
		return by, strings.Join(told, "; ")
	}
	// A run KubeRay makes on schedule, once its cluster's hours are credited, of a tick it alone claims:
	// the forged RayJob claims a tick of its own, and KubeRay v1.6.0 makes a second run of a tick when its
	// status update after the first is refused (raycronjob_controller.go: the RayJob is created, then the
	// status; an error requeues the tick). A tick with two claimants is billed to no one, by design.
	var run string
	eventually(t, 4*time.Minute, "a scheduled run's cluster credited, the only claimant of its tick", func() bool {
		by, _ := claimants()
		for _, row := range rows() {
			if row.Kind == "RayJob" && row.Name != "every-minute-forged" && strings.HasPrefix(row.Name, "every-minute-") && row.Allocated.CPUCoreHours > 0 {
				for at, names := range by {
					if len(names) == 1 && names[0] == row.Name && !at.Equal(tick) {
						run = row.Name
						return true
					}
				}
			}
		}
		return false
	})
	// pastTick waits until the RayCronJob's status has reached a tick, and then for a credit of a job's
	// cluster after that.
	pastTick := func(job string, tick time.Time) {
		t.Helper()
		eventually(t, 3*time.Minute, "the RayCronJob's status past "+tick.String(), func() bool {
			c, err := env.adminDyn.Resource(ray.RayGroupVersion.WithResource("raycronjobs")).Namespace(ns).Get(ctx, "every-minute", metav1.GetOptions{})
			require.NoError(t, err)
			last, _, _ := unstructured.NestedString(c.Object, "status", "lastScheduleTime")
			at, err := time.Parse(time.RFC3339, last)
			return err == nil && !at.Before(tick)
		})
		_, before := billed(job)
		eventually(t, 60*time.Second, job+"'s cluster credited since", func() bool {
			_, now := billed(job)
			return now > before
		})
	}
	scheduled, err := env.adminDyn.Resource(rayJobs).Namespace(ns).Get(ctx, run, metav1.GetOptions{})
	require.NoError(t, err)
	at, err := time.Parse(time.RFC3339, scheduled.GetAnnotations()[ray.ScheduledAtAnnotation])
	require.NoError(t, err)
	t.Logf("the scheduled run %s of %s; the forged run claims %s", run, at, tick)
	pastTick(run, at)
	creators, _ := billed(run)
	_, told := claimants()
	signed := decode[summary](t, call(t, "GET", itemPath(ns, "raycronjobs", "every-minute"), admin, "", nil)).CreatorSigned
	assert.Equal(t, map[string]bool{victim: true}, creators, "the run %s KubeRay made on schedule is billed to the RayCronJob's signed creator "+
		"(runs: %s; the RayCronJob's creator signed now: %v)", run, told, signed)

	// The RayCronJob reaches the forged run's tick; a credit later, the forged run is still no run of it.
	pastTick("every-minute-forged", tick)
	creators, _ = billed("every-minute-forged")
	assert.Equal(t, map[string]bool{"": true}, creators, "a RayJob made before the tick it claims is billed to no one")
}

// everyMinuteCron makes, through the service as the admin, a RayCronJob that runs every minute (query
// "?start=false": suspended), and returns its creator, which the service signed.
func everyMinuteCron(t *testing.T, ns, name, query string) string {
	t.Helper()
	manifest := strings.Replace(string(testdata(t, "raycronjob-minimal.yaml")), `schedule: "0 1 * * *"`, `schedule: "* * * * *"`, 1)
	manifest = strings.Replace(manifest, "name: minimal-cronjob", "name: "+name, 1)
	r := call(t, "POST", nsPath(ns, "raycronjobs")+query, env.tokens["admin"], "application/yaml", []byte(manifest))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	require.True(t, decode[summary](t, r).CreatorSigned)
	return decode[summary](t, r).Creator
}

// Anyone who may write ConfigMaps in a namespace replays its idle policy: the admin sets 1h and later
// 2h; the tenant writes the first version's data and signature back into the ConfigMap, and after the
// admin deletes the policy creates a copy of it again. Neither is a policy: the signature holds the
// ConfigMap's UID and the generation the service last wrote (which it keeps apart), and the answer says
// why it is refused. Before, both were read back as the admin's policy of 1h.
func TestAttackIdlePolicyReplay(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "policy-replay")
	svc := startInstance(t, "ray-service-policy-replay.log", append([]string{"--idle-window=30s", "--idle-interval=5s"}, idleStopIdentity(t, ns)...)...)
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "writer")
	grantRole(t, ns, user, "configmaps", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "create", "update"}})
	cms := clientWithToken(t, token).CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	path := "/rest/ray/v1/namespaces/" + ns + "/idle-policy"
	put := func(stopAfter string) {
		r := putIdlePolicy(t, svc, admin, ns, stopAfter)
		require.Contains(t, []int{200, 201}, r.Status, "%s", r.Raw)
	}
	get := func() *response {
		r, err := sendTo(svc.url, "GET", path, admin, "", nil)
		require.NoError(t, err)
		return r
	}
	put("1h")
	old, err := cms.Get(ctx, idle.PolicyName, metav1.GetOptions{})
	require.NoError(t, err)
	put("2h")

	// An older version of the same ConfigMap, written back.
	cur, err := cms.Get(ctx, idle.PolicyName, metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data, cur.Annotations = old.Data, old.Annotations
	_, err = cms.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	r := get()
	assert.Equal(t, 404, r.Status, "an older version written back is no policy: %s", r.Raw)
	assert.Contains(t, r.Msg, "refused", "%s", r.Raw)

	// The admin sets it again: its own write is a policy.
	put("2h")
	r = get()
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Data), `"stopAfter":"2h"`)

	// Deleted, then created again from the copy.
	r, err = sendTo(svc.url, "DELETE", path, admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	copied := old.DeepCopy()
	copied.ObjectMeta = metav1.ObjectMeta{Name: old.Name, Namespace: ns, Labels: old.Labels, Annotations: old.Annotations}
	_, err = cms.Create(ctx, copied, metav1.CreateOptions{})
	require.NoError(t, err)
	r = get()
	assert.Equal(t, 404, r.Status, "a copy created again is no policy: %s", r.Raw)
	assert.Contains(t, r.Msg, "refused", "%s", r.Raw)
}

// A stop of a Kueue-admitted RayJob whose Workload is already deactivated changes nothing, and must
// still need the right the stop would have used (patch on the Workload), as the no-op paths of the other
// kinds do: a caller who may only read gets 403. Before, it answered 200.
func TestAttackKueueNoopNeedsTheRight(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "kueue-noop")
	admin := env.tokens["admin"]
	ctx := context.Background()
	createSuspendedRayJob(t, admin, ns, "queued", map[string]any{"kueue.x-k8s.io/queue-name": "team-queue"})
	made := makeWorkload(t, ns, rayJobs, "queued", "rayjob-queued-noop", "team-queue")
	_, err := env.adminDyn.Resource(kueueWorkloads).Namespace(ns).Patch(ctx, made.GetName(), types.MergePatchType, []byte(`{"spec":{"active":false}}`),
		metav1.PatchOptions{})
	require.NoError(t, err)

	reader, readerToken := tenant(t, ns, "reader")
	grantRole(t, ns, reader, "read", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{"kueue.x-k8s.io"}, Resources: []string{"workloads"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}})
	r := call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", readerToken, "", nil)
	assert.Equal(t, 403, r.Status, "a stop with nothing to do by a reader: %s", r.Raw)
	r = call(t, "POST", itemPath(ns, "rayjobs", "queued")+"/stop", admin, "", nil)
	assert.Equal(t, 200, r.Status, "the admin's no-op: %s", r.Raw)
}

// The utilization report by namespace carries the namespace's ResourceQuotas, which the service reads
// with its own identity: a caller who may list RayClusters there but not read ResourceQuotas must not
// get them. Before, the row carried the quota all the same.
func TestAttackUtilizationQuotasUnreadable(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "usage-quota")
	svc := startInstance(t, "ray-service-usage-quota.log", "--usage-credit-every=2s", "--idle-window=0")
	admin := env.tokens["admin"]
	ctx := context.Background()
	_, err := env.admin.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "secret-budget"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("40")}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	user, token := tenant(t, ns, "lister")
	bind(t, ns, user, "ray-viewer")
	require.Equal(t, 201, createCluster(t, admin, ns, "held", nil).Status)
	waitStatus(t, ns, "rayclusters", "held", "Running")
	report := func(tok string) utilizationReport { return utilizationOf(t, svc, tok, ns, "namespace") }
	eventually(t, 60*time.Second, "the namespace's row", func() bool { return len(report(admin).Items) == 1 })
	assert.NotEmpty(t, report(admin).Items[0].Quota, "an admin reads the quota")
	rep := report(token)
	require.Len(t, rep.Items, 1)
	assert.Empty(t, rep.Items[0].Quota, "a caller who may not read ResourceQuotas gets none")
}

// The API's /metrics answers without a token: it must not name the RayCronJobs (namespace and name),
// which only callers who may list them see. The metrics address of its own (the chart's) still serves
// them to the Grafana dashboard's schedules panel. Before, the API's /metrics named every RayCronJob.
func TestAttackCronJobNamesOnAPIMetrics(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "cron-names")
	admin := env.tokens["admin"]
	manifest := strings.Replace(string(testdata(t, "raycronjob-minimal.yaml")), "name: minimal-cronjob", "name: acquisition-target-x", 1)
	r := call(t, "POST", nsPath(ns, "raycronjobs")+"?start=false", admin, "application/yaml", []byte(manifest))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	require.Equal(t, 200, call(t, "GET", itemPath(ns, "raycronjobs", "acquisition-target-x"), admin, "", nil).Status)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, body, err := httpGet(ctx, env.serviceURL+"/metrics")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, string(body), "acquisition-target-x", "the API's /metrics names no RayCronJob")
	assert.NotContains(t, string(body), ns, "nor its namespace")

	metricsAddr := freeAddr(t)
	startInstance(t, "ray-service-cron-names.log", "--metrics-listen", metricsAddr)
	eventually(t, 30*time.Second, "the metrics address names it for the dashboard", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		status, body, err := httpGet(ctx, "http://"+metricsAddr+"/metrics")
		return err == nil && status == 200 && strings.Contains(string(body), `name="acquisition-target-x"`)
	})
}
