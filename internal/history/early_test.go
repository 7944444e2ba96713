package history

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"ray-service/internal/ray"
)

// The ending of a RayJob is read as soon as it is seen finished, not when the writer comes to it: a
// deletion rule with ttlSeconds 0 (KubeRay v1.6) deletes its cluster's pods right after, and the ending
// written still lists them, with the driver's log.
func TestEndingReadWhenSeenFinished(t *testing.T) {
	store, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "history.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	head := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-abcde-head", Namespace: "team",
		Labels: map[string]string{"ray.io/cluster": "job-abcde", "ray.io/node-type": "head"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	core := fake.NewClientset(head)
	kinds := ray.NewKinds()
	r := &Recorder{Store: store, Kinds: kinds, Core: core, Log: zap.NewNop(), Limits: ray.EndingLimits{Events: 100, LogLines: 2000, LogBytes: 256 << 10}}
	r.init()
	r.leadCtx = t.Context()
	r.leading.Store(true)

	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "job", "namespace": "team", "uid": "u-job", "generation": int64(1),
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec":   map[string]any{"submissionMode": "HTTPMode", "entrypoint": "python main.py"},
		"status": map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayClusterName": "job-abcde"},
	}}
	k := kinds.ByKind("RayJob")
	s := k.Summarize(job)
	require.True(t, k.Finished(s.Status), "status %s", s.Status)
	r.Observe(k, job, &s)

	r.mu.Lock()
	early := r.early["u-job"]
	r.mu.Unlock()
	require.NotNil(t, early, "the ending is being read")
	select {
	case <-early.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the early read did not end")
	}
	// The rule deletes the cluster before the writer comes.
	require.NoError(t, core.CoreV1().Pods("team").Delete(t.Context(), head.Name, metav1.DeleteOptions{}))

	r.mu.Lock()
	c := r.pending["u-job"]
	r.mu.Unlock()
	require.NotNil(t, c)
	require.NoError(t, r.writeOne(t.Context(), c))
	rec, err := store.Get(t.Context(), "u-job")
	require.NoError(t, err)
	require.NotNil(t, rec.Ending)
	require.Len(t, rec.Ending.Pods, 1, "the pods as they were when it finished")
	assert.Equal(t, head.Name, rec.Ending.Pods[0].Name)
	require.NotNil(t, rec.Ending.Log, "the driver's log")
	assert.NotEmpty(t, rec.Ending.Log.Text)
	r.mu.Lock()
	assert.Empty(t, r.early, "taken by the writer")
	r.mu.Unlock()

	// At most maxEarlyEndings are read ahead at once; the others are left to the writer.
	r.mu.Lock()
	for i := range maxEarlyEndings + 3 {
		r.readEarlyLocked(k, "u"+string(rune('a'+i)), "team", "other", []string{"other-x"})
	}
	assert.Len(t, r.early, maxEarlyEndings)
	r.mu.Unlock()
}
