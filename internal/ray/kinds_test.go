package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every kind says what a kind must say; one that leaves something out is refused by name.
func TestKindsSayWhatTheyMust(t *testing.T) {
	for _, k := range NewKinds().All() {
		assert.NotPanics(t, k.check, k.Kind)
	}
	incomplete := &Kind{Resource: "raythings", Kind: "RayThing", ClustersOf: func(*Summary) []string { return nil }}
	assert.PanicsWithValue(t, `ray kind "RayThing": ClusterSpecPath, MaxNameLength, StatusOf not set`, incomplete.check)
}

// What a kind leaves out has the default its field names: no own signals, never suspended, never run
// again, the head service KubeRay names, the dashboard's default port.
func TestKindDefaults(t *testing.T) {
	k := &Kind{Resource: "raythings", Kind: "RayThing", MaxNameLength: 40, ClusterSpecPath: []string{"spec"},
		StatusOf: func(*unstructured.Unstructured) string { return StatusRunning }, ClustersOf: func(s *Summary) []string { return []string{s.Name} }}
	k.check()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayThing",
		"metadata": map[string]any{"name": "t", "namespace": "a"}, "spec": map[string]any{}}}
	s := k.Summarize(o)
	assert.Equal(t, StatusRunning, s.Status)
	assert.Empty(t, s.Problems())
	assert.False(t, k.Suspendable(o))
	assert.False(t, k.Reruns(StatusSucceeded))
	assert.Equal(t, "t-head-svc", k.HeadService(o, &s))
	assert.Equal(t, int64(DefaultDashboardPort), k.DashboardPort(o))
	assert.Equal(t, "patch", k.StartVerb())
	assert.Equal(t, "patch", k.StopVerb())
}
