package cache

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// startedStore is a store on fake clients, started and synced until t ends.
func startedStore(t *testing.T) (*ray.Kinds, *dynamicfake.FakeDynamicClient, *fake.Clientset, *Store) {
	t.Helper()
	kinds := ray.NewKinds()
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range kinds.All() {
		listKinds[k.GVR()] = k.Kind + "List"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	core := fake.NewSimpleClientset()
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

func signer(t *testing.T) *ray.TemplateSigner {
	t.Helper()
	s, err := ray.NewTemplateSigner(raytest.Key)
	require.NoError(t, err)
	return s
}
