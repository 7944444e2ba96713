package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pods deleted are kept by their cluster for a minute, and no more than gonePodsMax of them.
func TestGonePodsKeptAWhile(t *testing.T) {
	var g gonePods
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	pod := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	g.add("ns/a", pod("a-head"), t0)
	g.add("ns/b", pod("b-head"), t0.Add(time.Second))
	g.add("ns/a", pod("a-worker"), t0.Add(2*time.Second))
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	assert.Equal(t, []string{"a-head", "a-worker"}, names(g.of("ns/a", t0, t0.Add(3*time.Second))))
	assert.Equal(t, []string{"a-worker"}, names(g.of("ns/a", t0.Add(time.Second), t0.Add(3*time.Second))), "not those deleted before the object was made")
	assert.Equal(t, []string{"a-worker"}, names(g.of("ns/a", t0, t0.Add(gonePodsFor+time.Second))), "past a minute")
	assert.Empty(t, g.of("other/a", t0, t0))
	// A flood keeps the newest.
	for i := range gonePodsMax + 10 {
		g.add("ns/c", pod(fmt.Sprintf("c-%d", i)), t0.Add(3*time.Second))
	}
	assert.Len(t, g.kept, gonePodsMax)
	assert.Empty(t, g.of("ns/a", t0, t0.Add(3*time.Second)), "the oldest forgotten")
	assert.Equal(t, fmt.Sprintf("c-%d", gonePodsMax+9), g.kept[len(g.kept)-1].pod.Name)
}
