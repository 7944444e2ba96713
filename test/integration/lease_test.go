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
	count := func(reason string) int {
		events, err := env.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		n := 0
		for _, e := range events.Items {
			if e.Reason == reason && e.InvolvedObject.Name == "sleepy" {
				n += max(1, int(e.Count))
			}
		}
		return n
	}
	// Idle a window (30 s) after it ran, announced, stopped a minute after its spell began. Every replica
	// judges every 5 s from the same figures: one that acted beside the holder would have announced the
	// stop too, a warning (10 s) before any stop.
	eventually(t, 4*time.Minute, "sleepy stopped by the policy", func() bool { return count("IdleStopped") > 0 })
	assert.Equal(t, 1, count("IdleStopPlanned"), "announced once")
	assert.Equal(t, 1, count("IdleStopped"), "stopped once")
	assert.Equal(t, 1, leaders(), "one replica leads")
}
