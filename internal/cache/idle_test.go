package cache

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
)

// What the idle detection finds goes into the summary of the idle cluster and of the RayJob that runs
// on it, the list filter idle selects them, and the overview's totals count it;
// once it works again, all of it goes.
func TestIdleClustersArePublished(t *testing.T) {
	kinds, dyn, _, store := startedStore(t)
	ctx := t.Context()
	clusterKind, jobKind := kinds.Cluster(), kinds.ByKind("RayJob")
	for _, c := range []struct{ name, state string }{{"sleepy", "ready"}, {"busy", "ready"}} {
		u := raytest.Manifest(t, clusterKind.Kind, clusterKind.ClusterSpecPath, c.name, map[string]any{"state": c.state})
		u.SetAnnotations(map[string]string{ray.IdleStopAfterKey: "2h"})
		u.SetLabels(map[string]string{"team": "a"})
		_, err := dyn.Resource(clusterKind.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	job := raytest.Manifest(t, jobKind.Kind, jobKind.ClusterSpecPath, "between-jobs",
		map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayClusterName": "sleepy"})
	_, err := dyn.Resource(jobKind.GVR()).Namespace("team").Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	all := Scopes{Instances: auth.AllNamespaces()}
	require.Eventually(t, func() bool {
		return len(store.Items(clusterKind, all)) == 2 && len(store.Items(jobKind, all)) == 1
	}, 5*time.Second, 10*time.Millisecond)
	cands := store.IdleCandidates()
	require.Len(t, cands, 2, "both clusters run")
	for _, c := range cands {
		assert.False(t, c.JobRunning, "the RayJob's job has ended")
	}

	since := time.Date(2026, 12, 3, 14, 2, 0, 0, time.UTC)
	store.SetIdle(map[ray.ClusterRef]*ray.Idle{{Namespace: "team", Name: "sleepy"}: {Since: since, Holding: ray.Resources{GPU: 8}}})
	idle := true
	matching := func(k *ray.Kind) []string {
		items, _ := store.Matching(k, all, &Query{Idle: &idle, SortBy: SortByName})
		var names []string
		for _, it := range items {
			names = append(names, it.Summary.Name)
		}
		return names
	}
	require.Eventually(t, func() bool { return len(matching(jobKind)) == 1 }, 5*time.Second, 10*time.Millisecond)
	for _, c := range store.IdleCandidates() { // the policy's annotation and the labels, kept as idleness is published
		assert.Equal(t, "2h", c.StopAfter, c.Name)
		assert.Equal(t, "a", c.Labels.Get("team"), c.Name)
	}
	assert.Equal(t, []string{"sleepy"}, matching(clusterKind))
	for _, it := range append(store.Items(clusterKind, all), store.Items(jobKind, all)...) {
		if it.Summary.Name == "busy" {
			assert.Nil(t, it.Summary.Idle)
			continue
		}
		require.NotNil(t, it.Summary.Idle, it.Summary.Name)
		assert.Equal(t, since, it.Summary.Idle.Since)
	}
	visited := map[string]ray.Resources{}
	store.EachIdle(func(ns, name string, i *ray.Idle) { visited[ns+"/"+name] = i.Holding })
	assert.Equal(t, map[string]ray.Resources{"team/sleepy": {GPU: 8}}, visited, "the cluster once, not again for its RayJob")
	n, held := store.IdleTotals(auth.AllNamespaces())
	assert.Equal(t, int64(1), n)
	assert.InDelta(t, 8.0, held.GPU, 0)
	n, _ = store.IdleTotals(auth.Namespaces("elsewhere"))
	assert.Zero(t, n, "only namespaces in scope")

	store.SetIdle(nil)
	store.EachIdle(func(ns, name string, _ *ray.Idle) { t.Errorf("%s/%s is visited once no longer idle", ns, name) })
	require.Eventually(t, func() bool { return len(matching(clusterKind)) == 0 && len(matching(jobKind)) == 0 }, 5*time.Second, 10*time.Millisecond)
}

// A Ray cluster is its maker's to stop (the idle policy leaves it) only where KubeRay's labels are backed
// by its owner reference to the maker the cache holds, with that UID, and the maker's status names the
// cluster: labels alone, a reference to another UID, or one to the maker's UID that its status does not
// name, leave it a cluster of its own. Once the status names it, it is the maker's.
func TestIdleCandidatesOwnedOnlyByReference(t *testing.T) {
	kinds, dyn, _, store := startedStore(t)
	ctx := t.Context()
	clusterKind, jobKind := kinds.Cluster(), kinds.ByKind("RayJob")
	job := raytest.Manifest(t, jobKind.Kind, jobKind.ClusterSpecPath, "train", map[string]any{"jobDeploymentStatus": "Running",
		"rayClusterName": "made"})
	job.SetUID("u-job")
	_, err := dyn.Resource(jobKind.GVR()).Namespace("team").Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	yes := true
	for _, c := range []struct{ name, uid string }{{"labelled", ""}, {"wrong-uid", "u-other"}, {"made", "u-job"}, {"unnamed", "u-job"}} {
		u := raytest.Manifest(t, clusterKind.Kind, clusterKind.ClusterSpecPath, c.name, map[string]any{"state": "ready"})
		u.SetUID(types.UID("u-" + c.name))
		u.SetLabels(map[string]string{ray.OriginatedFromCRDLabel: "RayJob", ray.OriginatedFromCRNameLabel: "train"})
		if c.uid != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayJob", Name: "train", UID: types.UID(c.uid), Controller: &yes}})
		}
		_, err := dyn.Resource(clusterKind.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	all := Scopes{Instances: auth.AllNamespaces()}
	require.Eventually(t, func() bool {
		return len(store.Items(clusterKind, all)) == 4 && len(store.Items(jobKind, all)) == 1
	}, 5*time.Second, 10*time.Millisecond)
	owned := func() map[string]string {
		out := map[string]string{}
		for _, c := range store.IdleCandidates() {
			out[c.Name] = c.OwnedBy
		}
		return out
	}
	assert.Equal(t, map[string]string{"labelled": "", "wrong-uid": "", "made": "RayJob", "unnamed": ""}, owned())

	// The status names the other cluster now: it is the RayJob's, and the first no more.
	require.NoError(t, unstructured.SetNestedField(job.Object, "unnamed", "status", "rayClusterName"))
	_, err = dyn.Resource(jobKind.GVR()).Namespace("team").UpdateStatus(ctx, job, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return maps.Equal(owned(), map[string]string{"labelled": "", "wrong-uid": "", "made": "", "unnamed": "RayJob"})
	}, 5*time.Second, 10*time.Millisecond)
}
