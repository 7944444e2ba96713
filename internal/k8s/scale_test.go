package k8s

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"ray-service/internal/ray"
)

// A scale writes the object it read, with that object's resourceVersion, so that a change made in
// between is the apiserver's Conflict rather than lost; it reads again and retries a few times, then
// answers the conflict.
func TestScaleIsGuardedByTheVersionRead(t *testing.T) {
	e := newLifecycleEnv(t, "rayclusters")
	u := e.manifest("demo")
	u.SetResourceVersion("7")
	_, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Create(t.Context(), u, metav1.CreateOptions{})
	require.NoError(t, err)
	read, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Get(t.Context(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	var sent string
	updates := 0
	e.dyn.PrependReactor("update", "rayclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		updates++
		sent = a.(k8stesting.UpdateAction).GetObject().(*unstructured.Unstructured).GetResourceVersion()
		return true, nil, apierrors.NewConflict(e.kind.GVR().GroupResource(), "demo", errors.New("the object has been modified"))
	})
	groups, _, _ := unstructured.NestedSlice(read.Object, "spec", "workerGroupSpecs")
	name := groups[0].(map[string]any)["groupName"].(string)
	_, _, err = e.objs.Scale(t.Context(), "team", "demo", ray.ScaleRequest{Group: name, Replicas: n(1)})
	require.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Equal(t, read.GetResourceVersion(), sent)
	assert.NotEmpty(t, sent)
	assert.Equal(t, 5, updates, "read again and retried before answering the conflict")
}

func n(v int64) *int64 { return new(v) }
