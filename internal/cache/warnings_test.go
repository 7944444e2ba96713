package cache

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
)

func warningEvent(ns, name, kind, object, message string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.EventTypeWarning,
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: object}, Reason: "BackOff", Message: message,
		LastTimestamp: metav1.NewTime(at)}
}

type told struct{ objects []string }

func (t *told) change(ns, kind, name string) { t.objects = append(t.objects, ns+"/"+kind+"/"+name) }

func keepRay(kind string) bool { return kind == "Pod" || kind == "RayCluster" }

// Warnings about pods and Ray objects are kept, cut, by what they are about, newest first; others not,
// nor those that only say a controller wrote on a stale version.
func TestWarningCacheKeeps(t *testing.T) {
	tl := &told{}
	c := newWarningCache(keepRay, tl.change, 100, 100, 1<<20)
	now := time.Now()
	require.NoError(t, c.Add(warningEvent("a", "e1", "RayCluster", "rc", "old", now.Add(-time.Minute))))
	require.NoError(t, c.Add(warningEvent("a", "e2", "RayCluster", "rc", strings.Repeat("m", 10000), now)))
	require.NoError(t, c.Add(warningEvent("a", "e3", "Deployment", "d", "not ours", now)))
	normal := warningEvent("a", "e4", "Pod", "p", "normal", now)
	normal.Type = corev1.EventTypeNormal
	require.NoError(t, c.Add(normal))
	require.NoError(t, c.Add(warningEvent("a", "e5", "RayCluster", "rc", `Failed to update the HTTPRoute a/x: Operation cannot `+
		`be fulfilled on httproutes.gateway.networking.k8s.io "x": the object has been modified; please apply your changes `+
		`to the latest version and try again`, now)))
	got := c.about("a", ray.InvolvedObjectRef{Kind: "RayCluster", Name: "rc"})
	require.Len(t, got, 2)
	assert.LessOrEqual(t, len(got[0].Message), ray.MaxMessageBytes, "the newest first, its message cut")
	assert.Equal(t, "old", got[1].Message)
	n, _ := c.size()
	assert.Equal(t, 2, n, "neither the Deployment's warning, a Normal event nor a write that lost a race is kept")
	assert.Equal(t, []string{"a/RayCluster/rc", "a/RayCluster/rc"}, tl.objects)

	require.NoError(t, c.Delete(warningEvent("a", "e1", "RayCluster", "rc", "", now)))
	assert.Len(t, c.about("a", ray.InvolvedObjectRef{Kind: "RayCluster", Name: "rc"}), 1)
	require.NoError(t, c.Replace([]any{warningEvent("b", "e9", "Pod", "p", "x", now)}, ""))
	assert.Empty(t, c.about("a", ray.InvolvedObjectRef{Kind: "RayCluster", Name: "rc"}))
	assert.Len(t, c.about("b", ray.InvolvedObjectRef{Kind: "Pod", Name: "p"}), 1)
	assert.True(t, c.synced.Load())
}

// However many warnings come, the cache holds at most its bounds: a namespace that floods it lets its
// own oldest go, not another namespace's.
func TestWarningCacheBounds(t *testing.T) {
	c := newWarningCache(keepRay, func(string, string, string) {}, 500, 100, 1<<20)
	now := time.Now()
	require.NoError(t, c.Add(warningEvent("quiet", "q", "Pod", "p", "kept", now.Add(-time.Hour))))
	for i := range 5000 {
		require.NoError(t, c.Add(warningEvent("loud", fmt.Sprint("e", i), "Pod", fmt.Sprint("p", i%7), "flood", now.Add(time.Duration(i)*time.Millisecond))))
	}
	n, b := c.size()
	assert.LessOrEqual(t, n, 101)
	assert.LessOrEqual(t, b, 1<<20)
	assert.Len(t, c.about("quiet", ray.InvolvedObjectRef{Kind: "Pod", Name: "p"}), 1, "the quiet namespace's warning stays")
	newest := c.about("loud", ray.InvolvedObjectRef{Kind: "Pod", Name: fmt.Sprint("p", 4999%7)})
	require.NotEmpty(t, newest)
	assert.Equal(t, now.Add(4999*time.Millisecond).UTC(), newest[0].Since.UTC(), "the newest are those kept")

	// Many namespaces at once: the total count and bytes bound them.
	for i := range 3000 {
		require.NoError(t, c.Add(warningEvent(fmt.Sprint("ns", i), "e", "Pod", "p", strings.Repeat("m", 2000), now.Add(time.Duration(i)*time.Millisecond))))
	}
	n, b = c.size()
	assert.LessOrEqual(t, n, 500)
	assert.LessOrEqual(t, b, 1<<20)
}
