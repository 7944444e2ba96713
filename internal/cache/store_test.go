package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
	"ray-service/internal/signing"
)

// fakeClients are a fake dynamic client that lists every kind the store follows, and a fake core client.
func fakeClients(kinds *ray.Kinds) (*dynamicfake.FakeDynamicClient, *fake.Clientset) {
	listKinds := map[schema.GroupVersionResource]string{ray.PodGroupResource(): "PodGroupList", ray.WorkloadResource(): "WorkloadList"}
	for _, gvr := range ray.GangPodGroupResources() {
		listKinds[gvr] = "PodGroupList"
	}
	for _, k := range kinds.All() {
		listKinds[k.GVR()] = k.Kind + "List"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	core := fake.NewSimpleClientset()
	return dyn, core
}

// startedStore is a store on fake clients, started and synced until t ends.
func startedStore(t *testing.T) (*ray.Kinds, *dynamicfake.FakeDynamicClient, *fake.Clientset, *Store) {
	t.Helper()
	kinds := ray.NewKinds()
	dyn, core := fakeClients(kinds)
	store, err := NewStore(dyn, core, kinds, signer(t), 0)
	require.NoError(t, err)
	store.Start(t.Context())
	require.True(t, store.WaitForSync(t.Context()))
	return kinds, dyn, core, store
}

// The store publishes each object's whole summary when the object or a pod of its Ray cluster
// changes: a read needs no second step.
func TestStorePublishesWholeSummaries(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx := t.Context()

	_, err := dyn.Resource(kinds.Cluster().GVR()).Namespace("team").Create(ctx,
		raytest.Manifest(t, kinds.Cluster().Kind, kinds.Cluster().ClusterSpecPath, "demo", map[string]any{"state": "ready"}), metav1.CreateOptions{})
	require.NoError(t, err)
	cluster := kinds.Cluster()
	published := func() *Item {
		items := store.Items(cluster, Scopes{Instances: auth.AllNamespaces()})
		if len(items) != 1 {
			return nil
		}
		return items[0]
	}
	eventually := func(what string, cond func(it *Item) bool) {
		t.Helper()
		require.Eventually(t, func() bool { it := published(); return it != nil && cond(it) }, 5*time.Second, 10*time.Millisecond, what)
	}
	eventually("the object is published, Running", func(it *Item) bool { return it.Summary.Status == ray.StatusRunning })
	before := published()

	pods := core.CoreV1().Pods("team")
	_, err = pods.Create(ctx, raytest.Pod("demo-head", "demo", ray.NodeTypeHead, "headgroup", true), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"demo-small-a", "demo-small-b"} {
		_, err = pods.Create(ctx, raytest.Pod(name, "demo", ray.NodeTypeWorker, "small", true), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = pods.Create(ctx, raytest.Pod("other-worker", "other", ray.NodeTypeWorker, "small", true), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually("two ready workers in group small", func(it *Item) bool { return it.Summary.WorkerGroups[0].ReadyReplicas == 2 })
	assert.Zero(t, before.Summary.WorkerGroups[0].ReadyReplicas, "a published item is never changed")

	head := raytest.Pod("demo-head", "demo", ray.NodeTypeHead, "headgroup", false)
	head.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "ray-head",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	_, err = pods.Update(ctx, head, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually("a head that cannot start makes it Failed", func(it *Item) bool { return it.Summary.Status == ray.StatusFailed })

	require.NoError(t, pods.Delete(ctx, "demo-head", metav1.DeleteOptions{}))
	require.NoError(t, pods.Delete(ctx, "demo-small-a", metav1.DeleteOptions{}))
	eventually("back to Running with one ready worker", func(it *Item) bool {
		return it.Summary.Status == ray.StatusRunning && it.Summary.WorkerGroups[0].ReadyReplicas == 1
	})

	a := store.Allocated(auth.Namespaces("team"), "")
	assert.Equal(t, 2, a.ActiveRayClusters, "demo and other have running pods")
	assert.Equal(t, 0, store.Allocated(auth.Namespaces("elsewhere"), "").ActiveRayClusters)

	require.NoError(t, dyn.Resource(cluster.GVR()).Namespace("team").Delete(ctx, "demo", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(store.Items(cluster, Scopes{Instances: auth.AllNamespaces()})) == 0 },
		5*time.Second, 10*time.Millisecond, "a deleted object is unpublished")
	assert.Empty(t, store.Namespaces(cluster))
}

func signer(t *testing.T) *signing.Signer {
	t.Helper()
	s, err := signing.New(raytest.Key)
	require.NoError(t, err)
	return s
}

// The overview's counts, kept per namespace as objects are published, are what counting the published
// items gives, through creations, changes of status and deletions.
func TestCountIsWhatThePublishedItemsGive(t *testing.T) {
	kinds, dyn, _, store := startedStore(t)
	ctx, cluster := t.Context(), kinds.Cluster()
	clusters := func(ns string) dynamic.ResourceInterface { return dyn.Resource(cluster.GVR()).Namespace(ns) }
	create := func(ns, name string, status map[string]any) {
		u := raytest.Manifest(t, cluster.Kind, cluster.ClusterSpecPath, name, status)
		u.SetNamespace(ns)
		_, err := clusters(ns).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	counted := func(sc Scopes) ray.KindCount {
		c := ray.KindCount{}
		for _, it := range store.Items(cluster, sc) {
			c.Total++
			if cluster.Active(it.Summary.Status) {
				c.Active++
			}
		}
		return c
	}
	scopes := []Scopes{{Instances: auth.AllNamespaces()}, {Instances: auth.Namespaces("a")}, {Instances: auth.Namespaces("b", "c")}, {}}
	agree := func(what string, total, active int) {
		t.Helper()
		require.Eventually(t, func() bool { return store.Count(cluster, scopes[0]) == ray.KindCount{Total: total, Active: active} },
			5*time.Second, 10*time.Millisecond, what)
		for _, sc := range scopes {
			assert.Equal(t, counted(sc), store.Count(cluster, sc), what)
		}
	}
	create("a", "one", map[string]any{"state": "ready"})
	create("a", "two", map[string]any{"state": "ready"})
	create("b", "three", map[string]any{"state": "suspended"})
	agree("created", 3, 2)
	assert.Equal(t, ray.KindCount{Total: 2, Active: 2}, store.Count(cluster, scopes[1]))

	two, err := clusters("a").Get(ctx, "two", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(two.Object, "suspended", "status", "state"))
	_, err = clusters("a").UpdateStatus(ctx, two, metav1.UpdateOptions{})
	require.NoError(t, err)
	agree("one stopped", 3, 1)
	require.NoError(t, clusters("a").Delete(ctx, "one", metav1.DeleteOptions{}))
	agree("the active one deleted", 2, 0)
	require.NoError(t, clusters("a").Delete(ctx, "two", metav1.DeleteOptions{}))
	require.NoError(t, clusters("b").Delete(ctx, "three", metav1.DeleteOptions{}))
	agree("all deleted", 0, 0)
	assert.Empty(t, store.active[cluster], "no namespace is left counted")
}

// An optional kind (RayCronJob) is not served, and the store syncs without it, until discovery finds
// its CRD; then its informer lists, and its objects are published. Its CRD gone, it is not served.
func TestOptionalKindFollowsItsCRD(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx := t.Context()
	var cron *ray.Kind
	for _, k := range kinds.All() {
		if k.Optional {
			cron = k
		}
	}
	require.NotNil(t, cron)
	assert.False(t, store.Serves(cron), "no CRD found yet")
	assert.True(t, store.Serves(kinds.Cluster()))
	assert.True(t, store.HasSynced(), "synced without it")

	disc := core.Discovery().(*discoveryfake.FakeDiscovery)
	resources := func(names ...string) {
		list := &metav1.APIResourceList{GroupVersion: ray.RayGroupVersion.String()}
		for _, n := range names {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: n, Namespaced: true})
		}
		disc.Resources = []*metav1.APIResourceList{list}
	}
	resources("rayclusters", "rayjobs", "rayservices")
	changed, err := store.CheckInstalled(disc)
	require.NoError(t, err)
	assert.Empty(t, changed)
	assert.False(t, store.Serves(cron))

	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCronJob",
		"metadata": map[string]any{"name": "nightly", "namespace": "team"},
		"spec":     map[string]any{"schedule": "0 1 * * *", "jobTemplate": map[string]any{"entrypoint": "python run.py"}}}}
	_, err = dyn.Resource(cron.GVR()).Namespace("team").Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
	resources("rayclusters", "rayjobs", "rayservices", "raycronjobs")
	changed, err = store.CheckInstalled(disc)
	require.NoError(t, err)
	assert.Equal(t, map[*ray.Kind]bool{cron: true}, changed)
	require.Eventually(t, func() bool { return store.Serves(cron) }, 5*time.Second, 10*time.Millisecond, "served once listed")
	items := store.Items(cron, Scopes{Instances: auth.AllNamespaces()})
	require.Len(t, items, 1)
	assert.Equal(t, ray.StatusRunning, items[0].Summary.Status)

	resources("rayclusters", "rayjobs", "rayservices")
	changed, err = store.CheckInstalled(disc)
	require.NoError(t, err)
	assert.Equal(t, map[*ray.Kind]bool{cron: false}, changed)
	assert.False(t, store.Serves(cron), "its CRD gone")
}

// A RayCronJob's published summary follows its runs (the RayJobs labelled with its name): their count,
// the active ones, the newest and the last outcome, and the health they give it; the overview counts its
// active runs, and a list filters by last outcome.
func TestRunsCompleteTheirMaker(t *testing.T) {
	kinds, dyn, _, store := startedStore(t)
	ctx := t.Context()
	cron, _ := kinds.Lookup("raycronjobs")
	job, _ := kinds.Lookup("rayjobs")
	store.SetInstalled(cron, true)
	require.Eventually(t, func() bool { return store.Serves(cron) }, 5*time.Second, 10*time.Millisecond)
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCronJob",
		"metadata": map[string]any{"name": "nightly", "namespace": "team"},
		"spec":     map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"entrypoint": "python run.py"}}}}
	_, err := dyn.Resource(cron.GVR()).Namespace("team").Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
	jobs := dyn.Resource(job.GVR()).Namespace("team")
	makeRun := func(name, of string, created time.Time, status map[string]any) {
		u := raytest.Manifest(t, job.Kind, job.ClusterSpecPath, name, status)
		u.SetNamespace("team")
		u.SetLabels(map[string]string{ray.RunOfLabel: of})
		u.SetCreationTimestamp(metav1.NewTime(created))
		_, err := jobs.Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	published := func(what string, cond func(s *ray.Summary) bool) *ray.Summary {
		t.Helper()
		var got *ray.Summary
		require.Eventually(t, func() bool {
			items := store.Items(cron, Scopes{Instances: auth.AllNamespaces()})
			if len(items) != 1 || items[0].Summary.Runs == nil {
				return false
			}
			got = &items[0].Summary
			return cond(got)
		}, 5*time.Second, 10*time.Millisecond, what)
		return got
	}
	s := published("no runs yet", func(s *ray.Summary) bool { return s.Runs.Total == 0 })
	assert.Equal(t, ray.OutcomeNone, s.LastOutcome())

	t0 := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	makeRun("nightly-aaaaa", "nightly", t0, map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
		"startTime": t0.Format(time.RFC3339), "endTime": t0.Add(90 * time.Second).Format(time.RFC3339)})
	makeRun("other-bbbbb", "other", t0, map[string]any{"jobDeploymentStatus": "Running"})
	s = published("one run, succeeded", func(s *ray.Summary) bool { return s.Runs.Total == 1 })
	assert.Equal(t, ray.StatusSucceeded, s.LastOutcome())
	assert.InDelta(t, 90.0, *s.Runs.LastEnded.DurationSeconds, 0.001)
	assert.Equal(t, ray.HealthHealthy, s.Health.State)

	makeRun("nightly-ccccc", "nightly", t0.Add(time.Minute), map[string]any{"jobDeploymentStatus": "Failed", "jobStatus": "FAILED",
		"startTime": t0.Add(time.Minute).Format(time.RFC3339), "endTime": t0.Add(2 * time.Minute).Format(time.RFC3339)})
	s = published("the last run failed", func(s *ray.Summary) bool { return s.Runs.Total == 2 })
	assert.Equal(t, ray.ReasonLastRunFailed, s.Health.Reason)
	assert.Equal(t, ray.HealthDegraded, s.Health.State)
	degraded := func() []string {
		var out []string
		store.EachDegraded(func(kind, ns, name string) { out = append(out, kind+" "+ns+"/"+name) })
		return out
	}
	assert.Equal(t, []string{"RayCronJob team/nightly"}, degraded(), "the service's metrics name what is Degraded")

	makeRun("nightly-ddddd", "nightly", t0.Add(2*time.Minute), map[string]any{"jobDeploymentStatus": "Running"})
	makeRun("nightly-eeeee", "nightly", t0.Add(3*time.Minute), map[string]any{"jobDeploymentStatus": "Running"})
	s = published("two runs at once", func(s *ray.Summary) bool { return s.Runs.Active == 2 })
	assert.Equal(t, "nightly-eeeee", s.Runs.Last.Name)
	assert.Equal(t, "nightly-ccccc", s.Runs.LastEnded.Name)
	c := store.Count(cron, Scopes{Instances: auth.AllNamespaces()})
	require.NotNil(t, c.RunsActive)
	assert.Equal(t, 2, *c.RunsActive)
	assert.Nil(t, store.Count(job, Scopes{Instances: auth.AllNamespaces()}).RunsActive, "RayJobs make no runs")

	items := store.Items(cron, Scopes{Instances: auth.AllNamespaces()})
	for outcome, want := range map[string]int{ray.StatusFailed: 1, ray.StatusSucceeded: 0, ray.OutcomeNone: 0} {
		q := &Query{LastOutcomes: []string{outcome}, Page: 1, PageSize: 10}
		_, total := q.Apply(items)
		assert.Equal(t, want, total, outcome)
	}

	for _, name := range []string{"nightly-ccccc", "nightly-ddddd"} {
		require.NoError(t, jobs.Delete(ctx, name, metav1.DeleteOptions{}))
	}
	s = published("runs deleted", func(s *ray.Summary) bool { return s.Runs.Total == 2 })
	assert.Equal(t, ray.StatusSucceeded, s.LastOutcome(), "the failed run is gone")
	assert.Equal(t, ray.HealthHealthy, s.Health.State)
	assert.Empty(t, degraded())
}

// Once discovery finds Volcano's PodGroup CRD, a Ray cluster's PodGroup completes its published
// summary and those of what runs on it: waiting in the queue while Volcano cannot place it, its own
// health once the group runs, nothing once the group is gone.
func TestPodGroupsCompleteTheirOwners(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx, cluster := t.Context(), kinds.Cluster()
	disc := core.Discovery().(*discoveryfake.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: ray.RayGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "rayclusters"}, {Name: "rayjobs"}, {Name: "rayservices"}}},
		{GroupVersion: "scheduling.volcano.sh/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true}}},
	}
	_, err := store.CheckInstalled(disc)
	require.NoError(t, err)

	u := raytest.Manifest(t, cluster.Kind, cluster.ClusterSpecPath, "demo", nil)
	u.SetNamespace("team")
	made, err := dyn.Resource(cluster.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "ray-demo-pg", "namespace": "team"},
		"spec":     map[string]any{"minMember": int64(3), "queue": "ray-a"},
		"status": map[string]any{"phase": "Pending", "conditions": []any{map[string]any{"type": "Unschedulable", "status": "True",
			"reason": "NotEnoughResources", "message": "3/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: 3 Unschedulable"}}}}}
	pg.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "demo", UID: made.GetUID(), Controller: &yes}})
	groups := dyn.Resource(ray.PodGroupResource()).Namespace("team")
	_, err = groups.Create(ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	published := func(what string, cond func(s *ray.Summary) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			items := store.Items(cluster, Scopes{Instances: auth.AllNamespaces()})
			return len(items) == 1 && cond(&items[0].Summary)
		}, 5*time.Second, 10*time.Millisecond, what)
	}
	published("waiting in the queue", func(s *ray.Summary) bool {
		return s.Scheduling != nil && s.Scheduling.Queue == "ray-a" && s.Health.Reason == ray.ReasonWaitingInQueue
	})

	all := map[*ray.Kind]Scopes{}
	for _, k := range kinds.All() {
		all[k] = Scopes{Instances: auth.AllNamespaces()}
	}
	assert.Equal(t, store.Items(cluster, all[cluster])[0].Summary.Requested, store.Pending(all), "its demand waits")
	assert.Equal(t, ray.Resources{}, store.Pending(map[*ray.Kind]Scopes{cluster: {Instances: auth.Namespaces("elsewhere")}}))
	require.NoError(t, unstructured.SetNestedField(pg.Object, map[string]any{"phase": "Running", "running": int64(3)}, "status"))
	_, err = groups.Update(ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	published("admitted", func(s *ray.Summary) bool {
		return s.Scheduling != nil && s.Scheduling.Phase == "Running" && s.Health.Reason != ray.ReasonWaitingInQueue
	})
	assert.Equal(t, ray.Resources{}, store.Pending(all), "admitted: nothing waits")
	require.NoError(t, groups.Delete(ctx, "ray-demo-pg", metav1.DeleteOptions{}))
	published("the group gone", func(s *ray.Summary) bool { return s.Scheduling == nil })
}

// A Kubernetes PodGroup (scheduling.k8s.io, as KubeRay v1.7.0 makes it for a gang-scheduled cluster)
// completes its cluster's summary, read from the version the cluster serves (v1beta1 before v1alpha2):
// waiting while the scheduler cannot place the gang, even beside the Volcano PodGroup a KubeRay run with
// --batch-scheduler=volcano also makes; not waiting once placed. Its demand waits as the cluster's own.
func TestKubernetesPodGroupsCompleteTheirOwners(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx, cluster := t.Context(), kinds.Cluster()
	disc := core.Discovery().(*discoveryfake.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: ray.RayGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "rayclusters"}, {Name: "rayjobs"}, {Name: "rayservices"}}},
		{GroupVersion: "scheduling.volcano.sh/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true}}},
		{GroupVersion: "scheduling.k8s.io/v1alpha2", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true}}},
		{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true}, {Name: "workloads", Namespaced: true}}},
	}
	_, err := store.CheckInstalled(disc)
	require.NoError(t, err)
	v1beta1, v1alpha2 := ray.GangPodGroupResources()[0], ray.GangPodGroupResources()[1]
	for _, f := range store.groups.followed {
		switch f.gvr {
		case v1beta1:
			assert.True(t, f.started.Load(), "the preferred version served is followed")
		case v1alpha2:
			assert.False(t, f.started.Load(), "another version of the same objects is not")
		}
	}

	u := raytest.Manifest(t, cluster.Kind, cluster.ClusterSpecPath, "demo", nil)
	u.SetNamespace("team")
	made, err := dyn.Resource(cluster.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	owner := []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "demo", UID: made.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}
	volcano := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "ray-demo-pg", "namespace": "team"}, "spec": map[string]any{"minMember": int64(3)}}}
	volcano.SetOwnerReferences(owner)
	_, err = dyn.Resource(ray.PodGroupResource()).Namespace("team").Create(ctx, volcano, metav1.CreateOptions{})
	require.NoError(t, err)
	const why = "0/2 nodes are available: 2 Insufficient cpu."
	pg := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
		"metadata": map[string]any{"name": "demo-cluster", "namespace": "team", "labels": map[string]any{"ray.io/cluster": "demo"}},
		"spec": map[string]any{"workloadRef": map[string]any{"workloadName": "demo", "templateName": "cluster"},
			"schedulingPolicy": map[string]any{"gang": map[string]any{"minCount": int64(3)}}},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "PodGroupInitiallyScheduled", "status": "False",
			"reason": "Unschedulable", "message": why, "lastTransitionTime": "2026-12-03T08:00:00Z"}}}}}
	pg.SetOwnerReferences(owner)
	groups := dyn.Resource(v1beta1).Namespace("team")
	_, err = groups.Create(ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	published := func(what string, cond func(s *ray.Summary) bool) {
		t.Helper()
		require.Eventually(t, func() bool {
			items := store.Items(cluster, Scopes{Instances: auth.AllNamespaces()})
			return len(items) == 1 && cond(&items[0].Summary)
		}, 5*time.Second, 10*time.Millisecond, what)
	}
	published("waiting for its gang", func(s *ray.Summary) bool {
		return s.Scheduling != nil && s.Scheduling.Manager == ray.ManagerKubernetes && s.Scheduling.Group == "demo-cluster" &&
			s.Health.Reason == ray.ReasonWaitingInQueue &&
			s.Health.Message == "waiting for kubernetes to place its 3 pods at once (PodGroup demo-cluster): "+why
	})
	all := map[*ray.Kind]Scopes{cluster: {Instances: auth.AllNamespaces()}}
	assert.Equal(t, store.Items(cluster, all[cluster])[0].Summary.Requested, store.Pending(all), "its demand waits")

	// The Volcano PodGroup changing again does not hide the gang's verdict.
	volcano.SetLabels(map[string]string{"touched": "yes"})
	_, err = dyn.Resource(ray.PodGroupResource()).Namespace("team").Update(ctx, volcano, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(pg.Object, []any{map[string]any{"type": "PodGroupInitiallyScheduled", "status": "True",
		"reason": "Scheduled", "message": "", "lastTransitionTime": "2026-12-03T08:01:00Z"}}, "status", "conditions"))
	_, err = groups.Update(ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	published("placed", func(s *ray.Summary) bool {
		return s.Scheduling != nil && s.Scheduling.Manager == ray.ManagerKubernetes && s.Scheduling.Phase == ray.GangPhaseScheduled &&
			s.Health.Reason != ray.ReasonWaitingInQueue
	})
	assert.Equal(t, ray.Resources{}, store.Pending(all), "placed: nothing waits")
	require.NoError(t, groups.Delete(ctx, "demo-cluster", metav1.DeleteOptions{}))
	published("the gang gone, Volcano's group stays", func(s *ray.Summary) bool {
		return s.Scheduling != nil && s.Scheduling.Manager == ray.ManagerVolcano
	})
}

// A RayJob's Kueue Workload, once discovery finds its CRD, completes the RayJob's summary: waiting in
// its LocalQueue while Kueue reserves no quota, saying why.
func TestWorkloadsCompleteTheirOwners(t *testing.T) {
	kinds, dyn, core, store := startedStore(t)
	ctx := t.Context()
	job, _ := kinds.Lookup("rayjobs")
	disc := core.Discovery().(*discoveryfake.FakeDiscovery)
	disc.Resources = []*metav1.APIResourceList{
		{GroupVersion: ray.RayGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "rayclusters"}, {Name: "rayjobs"}, {Name: "rayservices"}}},
		{GroupVersion: "kueue.x-k8s.io/v1beta2", APIResources: []metav1.APIResource{{Name: "workloads", Namespaced: true}}},
	}
	_, err := store.CheckInstalled(disc)
	require.NoError(t, err)
	u := raytest.Manifest(t, job.Kind, job.ClusterSpecPath, "train", nil)
	u.SetNamespace("team")
	made, err := dyn.Resource(job.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	wl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "rayjob-train-1a2b3", "namespace": "team"},
		"spec":     map[string]any{"queueName": "team-queue"},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
			"message": "couldn't assign flavors to pod set head: insufficient unused quota for cpu in flavor default, 2 more needed"}}}}}
	wl.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "train", UID: made.GetUID(), Controller: &yes}})
	_, err = dyn.Resource(ray.WorkloadResource()).Namespace("team").Create(ctx, wl, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		items := store.Items(job, Scopes{Instances: auth.AllNamespaces()})
		return len(items) == 1 && items[0].Summary.Scheduling != nil && items[0].Summary.Scheduling.Manager == ray.ManagerKueue &&
			items[0].Summary.Health.Reason == ray.ReasonWaitingInQueue
	}, 5*time.Second, 10*time.Millisecond, "the RayJob waits in its LocalQueue")
}
