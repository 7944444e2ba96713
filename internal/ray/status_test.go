package ray

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The fixtures in testdata/status are statuses KubeRay wrote on the local stack, captured by the
// integration tests (RAY_TEST_CAPTURE_STATUS) at the moment the service reported the status named in
// "want".
func TestStatusOfCapturedObjects(t *testing.T) {
	files, err := filepath.Glob("testdata/status/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	byKind := map[string]*Kind{}
	for _, k := range NewKinds().All() {
		byKind[k.Kind] = k
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var fx struct {
				Kind   string         `json:"kind"`
				Want   string         `json:"want"`
				Object map[string]any `json:"object"`
			}
			require.NoError(t, json.Unmarshal(b, &fx))
			k := byKind[fx.Kind]
			require.NotNil(t, k, fx.Kind)
			assert.Equal(t, fx.Want, k.Status(&unstructured.Unstructured{Object: fx.Object}))
		})
	}
}

func cond(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason}
}

func obj(spec, status map[string]any) *unstructured.Unstructured {
	o := map[string]any{}
	if spec != nil {
		o["spec"] = spec
	}
	if status != nil {
		o["status"] = status
	}
	return &unstructured.Unstructured{Object: o}
}

type m = map[string]any
type l = []any

// Values the local stack does not reach (failures, retries, upgrades), built from KubeRay v1.5's fields.
func TestStatusTable(t *testing.T) {
	reg := NewKinds()
	cluster, _ := reg.Lookup("rayclusters")
	job, _ := reg.Lookup("rayjobs")
	service, _ := reg.Lookup("rayservices")
	cases := []struct {
		name string
		kind *Kind
		o    *unstructured.Unstructured
		want string
	}{
		{"cluster new", cluster, obj(nil, nil), StatusPending},
		{"cluster provisioning", cluster, obj(nil, m{"conditions": l{cond("RayClusterProvisioned", "False", "RayClusterPodsProvisioning")}}), StatusPending},
		{"cluster ready", cluster, obj(nil, m{"state": "ready"}), StatusRunning},
		{"cluster replica failure", cluster, obj(nil, m{"state": "ready", "conditions": l{cond("ReplicaFailure", "True", "FailedCreateHeadPod")}}), StatusFailed},
		{"cluster failed state", cluster, obj(nil, m{"state": "failed"}), StatusFailed},
		{"cluster suspending", cluster, obj(m{"suspend": true}, m{"state": "ready", "conditions": l{cond("RayClusterSuspending", "True", "RayClusterSuspending")}}), StatusStopping},
		{"cluster suspend asked", cluster, obj(m{"suspend": true}, m{"state": "ready"}), StatusStopping},
		{"cluster suspended", cluster, obj(m{"suspend": true}, m{"state": "suspended", "conditions": l{cond("RayClusterSuspended", "True", "RayClusterSuspended")}}), StatusStopped},
		{"cluster suspended, no conditions gate", cluster, obj(m{"suspend": true}, m{"state": "suspended"}), StatusStopped},
		{"cluster resumed, pods not yet up", cluster, obj(m{"suspend": false}, m{"state": "suspended", "conditions": l{cond("RayClusterSuspended", "False", "RayClusterSuspended")}}), StatusPending},
		{"job new", job, obj(nil, nil), StatusPending},
		{"job initializing", job, obj(nil, m{"jobDeploymentStatus": "Initializing"}), StatusPending},
		{"job waiting", job, obj(nil, m{"jobDeploymentStatus": "Waiting"}), StatusPending},
		{"job running", job, obj(nil, m{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}), StatusRunning},
		{"job succeeded, cluster not yet down", job, obj(nil, m{"jobDeploymentStatus": "Running", "jobStatus": "SUCCEEDED"}), StatusRunning},
		{"job retrying", job, obj(nil, m{"jobDeploymentStatus": "Retrying"}), StatusRetrying},
		{"job suspending", job, obj(nil, m{"jobDeploymentStatus": "Suspending"}), StatusStopping},
		{"job suspended", job, obj(nil, m{"jobDeploymentStatus": "Suspended"}), StatusStopped},
		{"job stopped through Ray", job, obj(nil, m{"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}), StatusStopped},
		{"job complete", job, obj(nil, m{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}), StatusSucceeded},
		{"job failed", job, obj(nil, m{"jobDeploymentStatus": "Failed"}), StatusFailed},
		{"job validation failed", job, obj(nil, m{"jobDeploymentStatus": "ValidationFailed"}), StatusFailed},
		{"job status failed", job, obj(nil, m{"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}), StatusFailed},
		{"service new", service, obj(nil, nil), StatusPending},
		{"service initializing", service, obj(nil, m{"conditions": l{cond("Ready", "False", "Initializing")}}), StatusPending},
		{"service ready", service, obj(nil, m{"conditions": l{cond("Ready", "True", "NonZeroServeEndpoints")}}), StatusRunning},
		{"service upgrading", service, obj(nil, m{"conditions": l{cond("Ready", "True", "NonZeroServeEndpoints"), cond("UpgradeInProgress", "True", "BothActivePendingClustersExist")}}), StatusUpgrading},
		{"service init timeout", service, obj(nil, m{"conditions": l{cond("Ready", "False", "InitializingTimeout")}}), StatusFailed},
		{"service without conditions", service, obj(nil, m{"serviceStatus": "Running"}), StatusRunning},
		// KubeRay v1.7 rayservice_controller.go handleSuspend: Suspending, then Suspended.
		{"service suspend asked", service, obj(m{"suspend": true}, m{"conditions": l{cond("Ready", "True", "NonZeroServeEndpoints")}}), StatusStopping},
		{"service suspending", service, obj(m{"suspend": true}, m{"conditions": l{cond("Suspending", "True", "SuspendRequested"), cond("Ready", "False", "SuspendInProgress")}}), StatusStopping},
		{"service suspending, suspend set back", service, obj(m{"suspend": false}, m{"conditions": l{cond("Suspending", "True", "SuspendInProgress"), cond("Ready", "False", "SuspendInProgress")}}), StatusStopping},
		{"service suspended", service, obj(m{"suspend": true}, m{"conditions": l{cond("Suspending", "False", "SuspendComplete"), cond("Suspended", "True", "SuspendComplete"), cond("Ready", "False", "SuspendComplete")}}), StatusStopped},
		{"service resumed", service, obj(m{"suspend": false}, m{"conditions": l{cond("Suspended", "False", "RayServiceResumed"), cond("Ready", "False", "Initializing")}}), StatusPending},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, c.kind.Status(c.o)) })
	}
}
