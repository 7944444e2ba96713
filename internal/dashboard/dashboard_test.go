package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// A recorded dashboard URL is taken only where it names a service of the object's own namespace.
func TestDashboardAddressStaysInItsNamespace(t *testing.T) {
	job, _ := ray.NewKinds().Lookup("rayjobs")
	d := NewDashboards("cluster.local", 0)
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "j", "namespace": "team"}, "status": map[string]any{"rayClusterName": "j-abc"}}}
	for recorded, want := range map[string]string{
		"j-abc-head-svc.team.svc.cluster.local:8265":        "j-abc-head-svc.team.svc.cluster.local:8265",
		"http://j-abc-head-svc.team.svc.cluster.local:8265": "j-abc-head-svc.team.svc.cluster.local:8265",
		"evil.elsewhere.svc.cluster.local:8265":             "j-abc-head-svc.team.svc.cluster.local:8265",
		"a.b.team.svc.cluster.local:8265":                   "j-abc-head-svc.team.svc.cluster.local:8265",
		"attacker.example:8265":                             "j-abc-head-svc.team.svc.cluster.local:8265",
		"127.0.0.1:6443":                                    "j-abc-head-svc.team.svc.cluster.local:8265",
		"j-abc-head-svc.team.svc.cluster.local":             "j-abc-head-svc.team.svc.cluster.local:8265",
		"j-abc-head-svc.team.svc.cluster.local:99999":       "j-abc-head-svc.team.svc.cluster.local:8265",
	} {
		require.NoError(t, unstructured.SetNestedField(o.Object, recorded, "status", "dashboardURL"))
		sum := job.Summarize(o)
		assert.Equal(t, want, d.Address(job, o, &sum), recorded)
	}
}
