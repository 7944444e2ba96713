package history

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"ray-service/internal/ray"
)

// A new holder of the Lease catches up by listing every object while the watch goes on. An object
// deleted once the apiserver answered the page that holds it, whose deletion the watch delivers before
// the page is read, stays deleted: the page does not bring it back as there still, which would leave its
// record without the time it went (until some later holder's listing).
func TestCatchUpBringsNoDeletedObjectBack(t *testing.T) {
	store, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "history.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	kinds := ray.NewKinds()
	k := kinds.ByKind("RayJob")
	doomed := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "doomed", "namespace": "team", "uid": "u-doomed", "generation": int64(1),
			"creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec":   map[string]any{"entrypoint": "python main.py"},
		"status": map[string]any{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}}}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, kind := range kinds.All() {
		listKinds[kind.GVR()] = kind.Kind + "List"
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, doomed.DeepCopy())
	r := &Recorder{Store: store, Kinds: kinds, Dynamic: dyn, Log: zap.NewNop()}
	r.init()
	var deletedAt time.Time
	dyn.PrependReactor("list", "rayjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		deletedAt = time.Now().UTC()
		s := k.Summarize(doomed)
		r.mu.Lock()
		r.endLocked(k, "u-doomed", "team", "doomed", doomed.GetCreationTimestamp().UTC(), &s, nil, deletedAt) // as the watch's Gone
		r.mu.Unlock()
		return false, nil, nil // the page, as answered before
	})
	r.lead(t.Context())
	require.True(t, r.Leading())
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.NotContains(t, r.known, "u-doomed", "an object deleted while the listing ran is known as there no more")
	require.Contains(t, r.pending, "u-doomed")
	require.NotNil(t, r.pending["u-doomed"].record.DeletedAt, "its record is written deleted")
	assert.Equal(t, deletedAt, *r.pending["u-doomed"].record.DeletedAt)
}
