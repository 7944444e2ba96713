package history

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// A change waits in the queue until it is written; a write that fails is counted and its change stays
// queued, for the service's metrics (ray_service_history_pending, ray_service_history_write_failures_total).
func TestFailedWritesAreCountedAndStayQueued(t *testing.T) {
	store, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "history.db"))
	require.NoError(t, err)
	kinds := ray.NewKinds()
	r := &Recorder{Store: store, Kinds: kinds, Log: zap.NewNop()}
	r.init()
	r.leadCtx = t.Context()
	r.leading.Store(true)
	k := kinds.Cluster()
	c := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": "c", "namespace": "team", "uid": "u-c", "generation": int64(1),
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": map[string]any{"headGroupSpec": map[string]any{}},
	}}
	s := k.Summarize(c)
	r.Observe(k, c, &s)
	assert.Equal(t, 1, r.Pending())
	assert.Zero(t, r.Failures())

	require.NoError(t, store.Close()) // every write fails from now on
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); r.write(ctx) }()
	r.wake <- struct{}{}
	require.Eventually(t, func() bool { return r.Failures() >= 1 }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	assert.Equal(t, 1, r.Pending(), "the change failed is queued again")
	assert.Zero(t, r.Writes())
}
