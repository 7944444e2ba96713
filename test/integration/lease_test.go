//go:build integration

package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
)

// Two replicas with no history, under one Lease: only its holder acts on the idle policies, so an idle
// RayCluster is announced once and stopped once, and the replicas' metrics agree on which one leads.
// Before the Lease was its own, with the history off every replica acted: the namespace's events showed
// two announcements (the test alone on the stack, counting events).
func TestIdleStopOnceAcrossReplicasWithoutHistory(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "idle-once")
	ctx := context.Background()
	args := append([]string{"--history-dsn=", "--lease", "idle-once", "--idle-window=30s", "--idle-interval=5s"}, idleStopIdentity(t, ns)...)
	replicas := []*serviceProc{startInstance(t, "ray-service-idle-once-a.log", args...), startInstance(t, "ray-service-idle-once-b.log", args...)}
	defer func() {
		if t.Failed() { // what each replica's policy did, to see why
			for _, svc := range replicas {
				b, _ := os.ReadFile(svc.log.Name())
				for line := range strings.Lines(string(b)) {
					if strings.Contains(line, "idle policy") || strings.Contains(line, "Lease") {
						t.Log(svc.log.Name(), strings.TrimSpace(line))
					}
				}
			}
		}
	}()
	leaders := func() int {
		n := 0
		for _, svc := range replicas {
			n += int(metricOf(t, svc.url, "ray_service_leader"))
		}
		return n
	}
	eventually(t, time.Minute, "one replica holding the Lease", func() bool { return leaders() == 1 })

	sleepy := quietCluster(t, "sleepy")
	sleepy.SetAnnotations(map[string]string{"ray.openfuyao.com/idle-stop-after": "1m"})
	_, err := dynamicWithToken(t, env.tokens["admin"]).Resource(ray.RayGroupVersion.WithResource("rayclusters")).Namespace(ns).Create(ctx, sleepy, metav1.CreateOptions{})
	require.NoError(t, err)
	waitStatus(t, ns, "rayclusters", "sleepy", "Running")
	// What the two replicas did, from their own logs: the stack runs other instances beside them whose
	// policies act on every namespace (each stops only where its identity may, but announces first), so
	// the namespace's events are not theirs alone.
	count := func(msg string) int {
		n := 0
		for _, svc := range replicas {
			b, err := os.ReadFile(svc.log.Name())
			require.NoError(t, err)
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"cluster":"`+ns+`/sleepy"`) {
					n++
				}
			}
		}
		return n
	}
	// Idle a window (30 s) after it ran, announced, stopped a minute after its spell began. Every replica
	// judges every 5 s from the same figures: one that acted beside the holder would have announced the
	// stop too, a warning (10 s) before any stop.
	eventually(t, 4*time.Minute, "sleepy stopped by the policy", func() bool { return count("idle policy: an idle cluster stopped") > 0 })
	assert.Equal(t, 1, count("idle policy: a stop announced"), "announced once")
	assert.Equal(t, 1, count("idle policy: an idle cluster stopped"), "stopped once")
	waitStatus(t, ns, "rayclusters", "sleepy", "Stopped")
	assert.Equal(t, 1, leaders(), "one replica leads")
}
