package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// The cache serves a manifest only from an object's detail on, only at the version its informer holds,
// with every newer version it receives, and not after a write through the service until it is read
// again; a deleted object's is gone.
func TestManifestsFollowTheInformer(t *testing.T) {
	kinds, dyn, _, store := startedStore(t)
	ctx := t.Context()
	k := kinds.Cluster()
	objects := dyn.Resource(k.GVR()).Namespace("team")
	version := func(rv, label string) *unstructured.Unstructured {
		u := raytest.Manifest(t, k.Kind, k.ClusterSpecPath, "demo", map[string]any{"state": "ready"})
		u.SetNamespace("team")
		u.SetResourceVersion(rv)
		u.SetLabels(map[string]string{"version": label})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		return u
	}
	created, err := objects.Create(ctx, version("1", "one"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { rv, ok := store.entryVersion(k, "team", "demo"); return ok && rv == "1" }, 5*time.Second, 10*time.Millisecond)

	_, kept := store.Manifest(k, "team", "demo")
	assert.False(t, kept, "not kept before a detail")
	store.KeepManifest(k, created, store.ManifestWrites())
	m, kept := store.Manifest(k, "team", "demo")
	require.True(t, kept, "kept after a detail at the informer's version")
	assert.Equal(t, "one", m.GetLabels()["version"])
	assert.Empty(t, m.GetManagedFields(), "without managedFields")
	assert.NotEmpty(t, created.GetManagedFields(), "the detail's own object is not changed")

	_, err = objects.Update(ctx, version("2", "two"), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, kept := store.Manifest(k, "team", "demo")
		return kept && m.GetLabels()["version"] == "two"
	}, 5*time.Second, 10*time.Millisecond, "the newer version the informer received")

	// A read older than the informer's version is kept but not served; the next read heals it.
	store.KeepManifest(k, version("1", "one"), store.ManifestWrites())
	_, kept = store.Manifest(k, "team", "demo")
	assert.False(t, kept, "a version the informer does not hold is not served")

	// A write through the service: the manifest is not served, and a read that began before it is not kept.
	writes := store.ManifestWrites()
	store.ForgetManifest(k, "team", "demo")
	store.KeepManifest(k, version("2", "two"), writes)
	_, kept = store.Manifest(k, "team", "demo")
	assert.False(t, kept, "a read from before the write is not kept")
	store.KeepManifest(k, version("2", "two"), store.ManifestWrites())
	_, kept = store.Manifest(k, "team", "demo")
	assert.True(t, kept, "a read after it is")

	require.NoError(t, objects.Delete(ctx, "demo", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, kept := store.Manifest(k, "team", "demo"); return !kept }, 5*time.Second, 10*time.Millisecond)
	// Not served as soon as the informer's store lets it go; dropped when its delete is handled, after.
	assert.Eventually(t, func() bool {
		store.manifests.mu.Lock()
		defer store.manifests.mu.Unlock()
		return len(store.manifests.byKey) == 0
	}, 5*time.Second, 10*time.Millisecond, "a deleted object's manifest is dropped")
}

// The manifests kept are bounded in number and in bytes: the least recently shown go first.
func TestManifestsAreBounded(t *testing.T) {
	k := ray.NewKinds().Cluster()
	m := newManifests()
	obj := func(i int, size int) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
			"namespace": "team", "name": fmt.Sprintf("c%05d", i), "resourceVersion": "1"}, "spec": map[string]any{"blob": string(make([]byte, size))}}}
		return u
	}
	for i := range maxManifests + 10 {
		m.track(k, obj(i, 10), 0)
	}
	_, first := m.get(k, "team", "c00000", "1")
	_, last := m.get(k, "team", fmt.Sprintf("c%05d", maxManifests+9), "1")
	assert.Equal(t, maxManifests, m.lru.Len())
	assert.False(t, first, "the least recently shown went first")
	assert.True(t, last)

	m = newManifests()
	for i := range 8 {
		m.track(k, obj(i, maxManifestsBytes/8), 0) // counted twice: the object and its encoding
	}
	assert.LessOrEqual(t, m.bytes, maxManifestsBytes)
	assert.Equal(t, 3, m.lru.Len(), "three quarters of the bytes fit, with their metadata")
	m.track(k, obj(99, 2*maxManifestsBytes), 0)
	assert.LessOrEqual(t, m.bytes, maxManifestsBytes, "one larger than the bound is not kept")
}

// The informer transforms a version (and the cache keeps its manifest) before its store holds it: in
// between, the version the store still publishes is served, not refused to the apiserver.
func TestManifestBetweenTransformAndStore(t *testing.T) {
	k := ray.NewKinds().Cluster()
	m := newManifests()
	version := func(rv string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
			"namespace": "team", "name": "demo", "resourceVersion": rv}}}
	}
	m.track(k, version("1"), 0)
	m.observe(k, version("2"))
	for _, rv := range []string{"1", "2"} {
		got, ok := m.get(k, "team", "demo", rv)
		require.True(t, ok, "version %s", rv)
		assert.Equal(t, rv, got.GetResourceVersion())
	}
	m.observe(k, version("3"))
	_, ok := m.get(k, "team", "demo", "1")
	assert.False(t, ok, "two versions back is not served")
	m.track(k, version("2"), 0)
	_, ok = m.get(k, "team", "demo", "3")
	assert.False(t, ok, "a read replaces the versions kept")
	m.forget(k, "team", "demo", false)
	assert.Zero(t, m.bytes, "the bytes of both versions are given back")
}
