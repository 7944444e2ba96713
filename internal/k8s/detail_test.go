package k8s

import (
	"context"
	"testing"

	"ray-service/internal/ray"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// What one request reads of an object is summarized once for all its parts: the detail (events, the
// pods whose events they are, the answer), the pods and the logs. The kind counts its summaries.
func TestAnObjectIsSummarizedOncePerRead(t *testing.T) {
	e := newLifecycleEnv(t, "rayjobs")
	e.seed("job", map[string]any{"jobDeploymentStatus": "Running", "rayClusterName": "job-raycluster-x"})
	counted := *e.objs.Kind
	summaries, own := 0, counted.SummarizeOwn
	counted.SummarizeOwn = func(o *unstructured.Unstructured, s *ray.Summary) {
		summaries++
		own(o, s)
	}
	e.objs.Kind = &counted
	ctx := context.Background()

	cur, _, err := e.objs.ResolveWithEvents(ctx, "team", "job")
	require.NoError(t, err)
	e.objs.Summarize(cur)
	assert.Equal(t, 1, summaries, "a detail")

	summaries = 0
	cur, err = e.objs.Resolve(ctx, "team", "job")
	require.NoError(t, err)
	_, err = e.objs.Events(ctx, cur)
	require.NoError(t, err)
	_, err = e.objs.Pods(ctx, cur)
	require.NoError(t, err)
	_, err = e.objs.OpenLogs(ctx, cur, "", "", &corev1.PodLogOptions{})
	require.Error(t, err, "the job has no pods")
	assert.Equal(t, 1, summaries, "events, pods and logs of one read")
}
