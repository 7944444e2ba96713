package k8s

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// ResolveWithEvents: the object's events and its Job's, not another object's; events the caller may
// not list are left out (nil) rather than refused; any other failure of either read is the answer.
func TestResolveWithEvents(t *testing.T) {
	e := newLifecycleEnv(t, "rayjobs")
	e.seed("job", map[string]any{"jobDeploymentStatus": "Running", "rayClusterName": "job-raycluster-x"})
	ctx := context.Background()
	event := func(name, kind, object string) {
		_, err := e.core.CoreV1().Events("team").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object}, Reason: name}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	event("of-the-job", "RayJob", "job")
	event("of-its-cluster", "RayCluster", "job-raycluster-x")
	event("of-its-submitter", "Job", "job")
	event("of-another", "RayJob", "other")

	cur, events, err := e.objs.ResolveWithEvents(ctx, "team", "job")
	require.NoError(t, err)
	require.NotNil(t, cur.Instance)
	var reasons []string
	for _, ev := range events {
		reasons = append(reasons, ev.Reason)
	}
	assert.ElementsMatch(t, []string{"of-the-job", "of-its-cluster", "of-its-submitter"}, reasons)

	forbidden := apierrors.NewForbidden(corev1.Resource("events"), "", nil)
	e.core.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, forbidden })
	cur, events, err = e.objs.ResolveWithEvents(ctx, "team", "job")
	require.NoError(t, err, "events the caller may not list are left out")
	assert.NotNil(t, cur.Instance)
	assert.Nil(t, events)

	e.core.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, errInjected })
	_, _, err = e.objs.ResolveWithEvents(ctx, "team", "job")
	require.ErrorIs(t, err, errInjected, "the events' read failing otherwise is the answer")

	e.failures["get rayjobs"] = 1
	_, _, err = e.objs.ResolveWithEvents(ctx, "team", "job")
	require.ErrorIs(t, err, errInjected, "the object's read failing is the answer")
}
