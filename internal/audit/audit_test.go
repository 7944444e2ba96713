package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func trail(key string) (*Trail, *fake.Clientset) {
	c := fake.NewSimpleClientset()
	return &Trail{Signer: Signer{Key: []byte(key)}, Events: c.CoreV1(), Log: zap.NewNop(), Instance: "replica-1"}, c
}

// A write becomes a signed event on its object naming the caller and
// the request; the trail reads it back.
func TestRecordAndList(t *testing.T) {
	tr, c := trail("0123456789abcdef0123456789abcdef")
	tr.Record(t.Context(), Write{Action: Stop, Kind: "RayCluster", Namespace: "team", Name: "demo", UID: "u-1", User: "alice", RequestID: "r-1"})
	tr.Record(t.Context(), Write{Action: Delete, Kind: "RayJob", Namespace: "team", Name: "job", User: "bob", RequestID: "r-2", Detail: "forced"})
	events, err := c.CoreV1().Events("team").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, events.Items, 2)
	byReason := map[string]corev1.Event{}
	for _, e := range events.Items {
		byReason[e.Reason] = e
	}
	stop := byReason["RayServiceStop"]
	assert.Equal(t, corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Namespace: "team", Name: "demo", UID: "u-1"}, stop.InvolvedObject)
	assert.Equal(t, "stop RayCluster team/demo by alice (request r-1)", stop.Message)
	assert.Equal(t, "true", stop.Labels[Label])
	assert.Equal(t, "ray-service", stop.Source.Component)
	del := byReason["RayServiceDelete"]
	assert.Equal(t, corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayJob", Namespace: "team", Name: "job"}, del.InvolvedObject,
		"a deleted object's event names it")
	assert.Equal(t, "delete RayJob team/job by bob (request r-2): forced", del.Message)

	entries, err := tr.List(t.Context(), "")
	require.NoError(t, err)
	require.Len(t, entries, 2)
	names := map[string]Entry{}
	for _, e := range entries {
		names[e.Name] = e
	}
	assert.Equal(t, Entry{Time: names["demo"].Time, Action: Stop, Kind: "RayCluster", Namespace: "team", Name: "demo", User: "alice",
		RequestID: "r-1", Message: stop.Message}, names["demo"])
	assert.Equal(t, "RayJob", names["job"].Kind)
}

// An event anyone allowed to create events made to look like the trail's, or one of the trail changed
// since, is not shown; nor one signed with another key.
func TestForgedEntriesAreNotListed(t *testing.T) {
	tr, c := trail("0123456789abcdef0123456789abcdef")
	tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: "real", User: "alice", RequestID: "r-1"})
	events, err := c.CoreV1().Events("team").List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	written := events.Items[0]

	forged := written.DeepCopy()
	forged.Name, forged.Annotations = "forged", map[string]string{UserKey: "mallory", ActionKey: Delete, KindKey: "RayCluster", NameKey: "x"}
	_, err = c.CoreV1().Events("team").Create(t.Context(), forged, metav1.CreateOptions{})
	require.NoError(t, err)
	changed := written.DeepCopy()
	changed.Name = "changed"
	changed.Annotations[UserKey] = "mallory"
	_, err = c.CoreV1().Events("team").Create(t.Context(), changed, metav1.CreateOptions{})
	require.NoError(t, err)

	entries, err := tr.List(t.Context(), "team")
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "alice", entries[0].User)

	other := &Trail{Signer: Signer{Key: []byte("another key of at least thirty-two bytes")}, Events: c.CoreV1()}
	entries, err = other.List(t.Context(), "")
	require.NoError(t, err)
	assert.Empty(t, entries)
}
