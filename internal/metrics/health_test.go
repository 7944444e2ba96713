package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"ray-service/internal/ray"
)

// What is Degraded and what idles is exposed one series per object, as the chart's alerts read it: an
// idle cluster's accelerators only where it holds some.
func TestHealthCollector(t *testing.T) {
	degraded := func(visit func(kind, namespace, name string)) {
		visit("RayCluster", "team", "stuck")
		visit("RayJob", "team", "train")
	}
	since := time.Date(2026, 12, 3, 14, 2, 0, 0, time.UTC)
	idle := func(visit func(namespace, name string, idle *ray.Idle)) {
		visit("team", "sleepy", &ray.Idle{Since: since, Holding: ray.Resources{CPU: 4, GPU: 8}})
		visit("lab", "cpu-only", &ray.Idle{Since: since.Add(time.Minute), Holding: ray.Resources{CPU: 2}})
	}
	want := `
# HELP ray_service_degraded 1 for each Ray object whose health is Degraded now (none for the others).
# TYPE ray_service_degraded gauge
ray_service_degraded{kind="RayCluster",name="stuck",namespace="team"} 1
ray_service_degraded{kind="RayJob",name="train",namespace="team"} 1
# HELP ray_service_idle_accelerators The GPUs or NPUs (resource) that each idle Ray cluster's pods request, in device equivalents (a MIG instance, a vNPU or a shared GPU's replica as its share of a device), and so hold while it idles (none where it holds none).
# TYPE ray_service_idle_accelerators gauge
ray_service_idle_accelerators{name="sleepy",namespace="team",resource="gpu"} 8
# HELP ray_service_idle_since_timestamp_seconds When each Ray cluster the idle detection finds idle was last seen at work, in seconds since the epoch (none for the others).
# TYPE ray_service_idle_since_timestamp_seconds gauge
ray_service_idle_since_timestamp_seconds{name="cpu-only",namespace="lab"} 1.79630658e+09
ray_service_idle_since_timestamp_seconds{name="sleepy",namespace="team"} 1.79630652e+09
`
	require.NoError(t, testutil.CollectAndCompare(NewHealthCollector(degraded, idle), strings.NewReader(want)))
}
