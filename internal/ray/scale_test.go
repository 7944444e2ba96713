package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func scaled(t *testing.T, k *Kind, auto bool, r ScaleRequest) (*unstructured.Unstructured, []string, error) {
	t.Helper()
	spec := map[string]any{
		"enableInTreeAutoscaling": auto,
		"workerGroupSpecs": []any{
			map[string]any{"groupName": "small", "replicas": int64(1), "minReplicas": int64(0), "maxReplicas": int64(4)},
			map[string]any{"groupName": "gpu", "replicas": int64(2)},
		},
	}
	o := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "demo"}}}
	require.NoError(t, unstructured.SetNestedMap(o.Object, spec, k.ClusterSpecPath...))
	warnings, err := k.ApplyScale(o, r)
	return o, warnings, err
}

func n(v int64) *int64 { return new(v) }

// A scale sets what it names in the group it names, in the cluster spec of each kind.
func TestScaleSetsTheGroup(t *testing.T) {
	for _, k := range NewKinds().All() {
		o, warnings, err := scaled(t, k, false, ScaleRequest{Group: "small", Replicas: n(3), MaxReplicas: n(6)})
		require.NoError(t, err, k.Kind)
		assert.Empty(t, warnings)
		groups, _, _ := unstructured.NestedSlice(o.Object, append(k.ClusterSpecPath, "workerGroupSpecs")...)
		assert.Equal(t, map[string]any{"groupName": "small", "replicas": int64(3), "minReplicas": int64(0), "maxReplicas": int64(6)}, groups[0], k.Kind)
		assert.Equal(t, map[string]any{"groupName": "gpu", "replicas": int64(2)}, groups[1], "the other group is left alone")
	}
}

// What cannot hold afterwards is Invalid naming the field; the manifest is then left as it was.
func TestScaleRefusesBadFigures(t *testing.T) {
	k := NewKinds().Cluster()
	for _, c := range []struct {
		r     ScaleRequest
		field string
	}{
		{ScaleRequest{Replicas: n(1)}, "group"},
		{ScaleRequest{Group: "small"}, "replicas"},
		{ScaleRequest{Group: "large", Replicas: n(1)}, "group"},
		{ScaleRequest{Group: "small", Replicas: n(5)}, "replicas"},
		{ScaleRequest{Group: "small", MinReplicas: n(2)}, "replicas"},
		{ScaleRequest{Group: "small", MinReplicas: n(5), Replicas: n(5)}, "minReplicas"},
		{ScaleRequest{Group: "small", Replicas: n(-1)}, "replicas"},
		{ScaleRequest{Group: "small", MaxReplicas: n(1 << 40)}, "maxReplicas"},
	} {
		o, _, err := scaled(t, k, false, c.r)
		require.Error(t, err)
		require.True(t, apierrors.IsInvalid(err), "%+v: %v", c.r, err)
		causes := err.(apierrors.APIStatus).Status().Details.Causes
		require.Len(t, causes, 1, "%+v", c.r)
		assert.Equal(t, c.field, causes[0].Field, "%+v: %v", c.r, err)
		groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "workerGroupSpecs")
		assert.Equal(t, int64(1), groups[0].(map[string]any)["replicas"], "unchanged")
	}
	_, _, err := scaled(t, k, false, ScaleRequest{Group: "large", Replicas: n(1)})
	assert.Contains(t, err.Error(), `"small", "gpu"`, "the groups there are")
	// A group without bounds takes any count.
	_, _, err = scaled(t, k, false, ScaleRequest{Group: "gpu", Replicas: n(100)})
	assert.NoError(t, err)
}

// Where the autoscaler owns the replicas, setting them warns.
func TestScaleWarnsOfTheAutoscaler(t *testing.T) {
	k := NewKinds().Cluster()
	_, warnings, err := scaled(t, k, true, ScaleRequest{Group: "small", Replicas: n(2)})
	require.NoError(t, err)
	assert.Equal(t, []string{AutoscalerWarning}, warnings)
	_, warnings, err = scaled(t, k, true, ScaleRequest{Group: "small", MaxReplicas: n(8)})
	require.NoError(t, err)
	assert.Empty(t, warnings, "bounds are what the autoscaler follows")
}
