package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// object is a RayCluster as the apiserver holds it, at version rv and generation gen.
func object(rv string, gen int64, replicas int64, labels map[string]string, finalizers ...string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "uid": "u1"},
		"spec": map[string]any{"workerGroupSpecs": []any{map[string]any{"groupName": "w", "replicas": replicas,
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "ray-worker", "image": "rayproject/ray:2.46.0"}}}}}}},
	}}
	o.SetResourceVersion(rv)
	o.SetGeneration(gen)
	o.SetLabels(labels)
	o.SetFinalizers(finalizers)
	return o
}

func replicasOf(t *testing.T, o *unstructured.Unstructured) int64 {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "workerGroupSpecs")
	require.Len(t, groups, 1)
	return groups[0].(map[string]any)["replicas"].(int64)
}

func TestRebase(t *testing.T) {
	base := object("10", 1, 2, map[string]string{"team": "a"})
	t.Run("only status moved: the caller's edit is taken at the current version", func(t *testing.T) {
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		out, err := rebase(sent, base, object("12", 1, 2, map[string]string{"team": "a"}))
		require.NoError(t, err)
		assert.Equal(t, "12", out.GetResourceVersion())
		assert.Equal(t, int64(3), replicasOf(t, out))
	})
	t.Run("the operator added a finalizer the export lacked: it stays", func(t *testing.T) {
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		out, err := rebase(sent, base, object("12", 1, 2, map[string]string{"team": "a"}, "ray.io/rayjob-finalizer"))
		require.NoError(t, err)
		assert.Equal(t, []string{"ray.io/rayjob-finalizer"}, out.GetFinalizers())
		assert.Equal(t, int64(3), replicasOf(t, out))
	})
	t.Run("someone else's label stays where the caller changed only the spec", func(t *testing.T) {
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		out, err := rebase(sent, base, object("12", 1, 2, map[string]string{"team": "b"}))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"team": "b"}, out.GetLabels())
		assert.Equal(t, int64(3), replicasOf(t, out))
	})
	t.Run("a stale edit of the spec is a conflict naming it", func(t *testing.T) {
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		_, err := rebase(sent, base, object("12", 2, 4, map[string]string{"team": "a"}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec was changed since resourceVersion 10")
	})
	t.Run("both changed the labels differently: a conflict", func(t *testing.T) {
		sent := object("10", 1, 2, map[string]string{"team": "c"})
		_, err := rebase(sent, base, object("12", 1, 2, map[string]string{"team": "b"}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "metadata.labels")
	})
	t.Run("both made the same change: taken", func(t *testing.T) {
		sent := object("10", 1, 4, map[string]string{"team": "a"})
		out, err := rebase(sent, base, object("12", 2, 4, map[string]string{"team": "a"}))
		require.NoError(t, err)
		assert.Equal(t, int64(4), replicasOf(t, out))
	})
	t.Run("the export sent back unchanged keeps another's spec change", func(t *testing.T) {
		out, err := rebase(base.DeepCopy(), base, object("12", 2, 4, map[string]string{"team": "a"}))
		require.NoError(t, err)
		assert.Equal(t, int64(4), replicasOf(t, out))
	})
	t.Run("empty objects the operator's typed update writes are no change", func(t *testing.T) {
		now := object("12", 2, 2, map[string]string{"team": "a"})
		groups, _, _ := unstructured.NestedSlice(now.Object, "spec", "workerGroupSpecs")
		groups[0].(map[string]any)["scaleStrategy"] = map[string]any{}
		template := groups[0].(map[string]any)["template"].(map[string]any)
		template["metadata"] = map[string]any{"creationTimestamp": nil}
		template["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["resources"] = map[string]any{}
		require.NoError(t, unstructured.SetNestedSlice(now.Object, groups, "spec", "workerGroupSpecs"))
		out, err := rebase(object("10", 1, 3, map[string]string{"team": "a"}), base, now)
		require.NoError(t, err, "the spec's meaning did not move")
		assert.Equal(t, int64(3), replicasOf(t, out))
		groups[0].(map[string]any)["scaleStrategy"] = map[string]any{"workersToDelete": []any{"w-1"}}
		require.NoError(t, unstructured.SetNestedSlice(now.Object, groups, "spec", "workerGroupSpecs"))
		_, err = rebase(object("10", 1, 3, map[string]string{"team": "a"}), base, now)
		require.Error(t, err, "a worker to delete is a change")
	})
	t.Run("an empty selector someone else added is a change", func(t *testing.T) {
		// withTerm is o with a required anti-affinity term on its workers, sel its namespaceSelector.
		withTerm := func(o *unstructured.Unstructured, sel map[string]any) *unstructured.Unstructured {
			term := map[string]any{"topologyKey": "kubernetes.io/hostname"}
			if sel != nil {
				term["namespaceSelector"] = sel
			}
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "workerGroupSpecs")
			groups[0].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"] = map[string]any{
				"podAntiAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": []any{term}}}
			require.NoError(t, unstructured.SetNestedSlice(o.Object, groups, "spec", "workerGroupSpecs"))
			return o
		}
		was := withTerm(object("10", 1, 2, map[string]string{"team": "a"}), nil)
		// namespaceSelector: {} is every namespace; without it, the pod's own.
		now := withTerm(object("12", 2, 2, map[string]string{"team": "a"}), map[string]any{})
		_, err := rebase(withTerm(object("10", 1, 3, map[string]string{"team": "a"}), nil), was, now)
		require.Error(t, err, "the caller's stale spec would drop their selector")
		out, err := rebase(withTerm(object("10", 1, 2, map[string]string{"team": "c"}), nil), was, now)
		require.NoError(t, err, "a label edit alone")
		assert.Equal(t, now.Object["spec"], out.Object["spec"], "their selector stays")
	})
	t.Run("the creator's keys are the service's, not a change", func(t *testing.T) {
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		now := object("12", 1, 2, map[string]string{"team": "a", ray.CreatorKey: "alice"})
		now.SetAnnotations(map[string]string{ray.CreatorKey: "alice", ray.CreatorSignatureKey: "sig"})
		_, err := rebase(sent, base, now)
		require.NoError(t, err)
	})
	t.Run("an object created again under the name is a conflict", func(t *testing.T) {
		now := object("12", 1, 2, map[string]string{"team": "a"})
		now.SetUID("u2")
		_, err := rebase(object("10", 1, 3, map[string]string{"team": "a"}), base, now)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "deleted and created again")
		sent := object("10", 1, 3, map[string]string{"team": "a"})
		sent.SetUID("")
		_, err = rebase(sent, base, now)
		require.Error(t, err, "the export read back tells it too")
	})
	t.Run("without the export: the spec by its generation", func(t *testing.T) {
		out, err := rebase(object("10", 1, 3, map[string]string{"team": "a"}), nil, object("12", 1, 2, map[string]string{"team": "a"}))
		require.NoError(t, err)
		assert.Equal(t, int64(3), replicasOf(t, out))
		_, err = rebase(object("10", 1, 3, map[string]string{"team": "a"}), nil, object("12", 2, 2, map[string]string{"team": "a"}))
		require.Error(t, err, "the spec moved since")
		noUID := object("10", 1, 3, map[string]string{"team": "a"})
		noUID.SetUID("")
		_, err = rebase(noUID, nil, object("12", 1, 2, map[string]string{"team": "a"}))
		require.Error(t, err, "no uid sent: the generation may be another object's")
		noGen := object("10", 0, 3, map[string]string{"team": "a"})
		_, err = rebase(noGen, nil, object("12", 0, 2, map[string]string{"team": "a"}))
		require.Error(t, err, "no generation sent: nothing tells the spec's base")
	})
	t.Run("without the export: metadata changed by the caller cannot be told from another's", func(t *testing.T) {
		_, err := rebase(object("10", 1, 2, map[string]string{"team": "c"}), nil, object("12", 1, 2, map[string]string{"team": "a"}))
		require.Error(t, err)
		out, err := rebase(object("10", 1, 2, map[string]string{"team": "a"}), nil, object("12", 1, 2, map[string]string{"team": "a"}, "f"))
		require.Error(t, err, "the finalizer added since could be dropped by the caller")
		assert.Nil(t, out)
	})
}
