//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/metrics"
)

type idleSummary struct {
	Name string `json:"name"`
	Idle *struct {
		Since   time.Time `json:"since"`
		Holding struct {
			CPU float64
			GPU int64
		}
		Evidence struct {
			Window  string   `json:"window"`
			RayUsed float64  `json:"rayUsed"`
			CPU     *float64 `json:"cpu"`
			GPU     *float64 `json:"gpuUtilization"`
		} `json:"evidence"`
	} `json:"idle"`
	Health struct{ State, Reason, Message string } `json:"health"`
}

// Idle clusters, on an instance that judges them over 30 s every 5 s: a cluster whose pods' emulated use
// is nothing (Ray's ray_resources USED, cAdvisor's CPU and DCGM's utilization all 0, stack/kwok-metrics
// .yaml) becomes idle once a window old, while one at work does not; once the second's use drops to
// nothing too, it follows a window later. The list item (and the idle filter), the detail's health, the
// list stream and the overview show it.
func TestIdleClusters(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "ray-service-idle.log", "--idle-window=30s", "--idle-interval=5s")
	ns := namespace(t, "idle")
	admin := env.tokens["admin"]
	withGPU := func(usage string) func(map[string]any) {
		return func(obj map[string]any) {
			for _, tpl := range []map[string]any{group(obj, "spec", "headGroupSpec", "template"), group(obj, "spec", "workerGroupSpecs", 0, "template")} {
				if usage != "" {
					group(tpl, "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": usage, "ray-service.local/gpu-utilization": usage}
				}
			}
			res := group(obj, "spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources")
			group(res, "requests")["nvidia.com/gpu"] = "1"
			group(res, "limits")["nvidia.com/gpu"] = "1"
		}
	}
	require.Equal(t, 201, createCluster(t, admin, ns, "sleepy", withGPU("0")).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "busy", withGPU("")).Status)
	waitStatus(t, ns, "rayclusters", "sleepy", "Running")
	waitStatus(t, ns, "rayclusters", "busy", "Running")
	_, stream := openWatch(t, svc.url, watchPath(ns, "rayclusters"), admin, "")
	stream.snapshot(t)

	list := func(query string) []idleSummary {
		r, err := sendTo(svc.url, "GET", nsPath(ns, "rayclusters")+query, admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[struct{ Items []idleSummary }](t, r).Items
	}
	names := func(items []idleSummary) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Name)
		}
		return out
	}
	started := time.Now()
	defer func() {
		if t.Failed() { // what the detection was told, to see why
			for name, expr := range metrics.WorkExpressions(30*time.Second, 5*time.Second) {
				_, body, err := httpGetHeaders(context.Background(), env.vars["PROMETHEUS_URL"]+"/api/v1/query?query="+url.QueryEscape(expr), nil)
				t.Logf("%s: %v %s", name, err, body)
			}
		}
	}()
	eventually(t, 2*time.Minute, "sleepy idle", func() bool { return len(list("?idle=true")) == 1 })
	t.Logf("idle %s after both ran", time.Since(started).Round(time.Second))
	assert.Equal(t, []string{"sleepy"}, names(list("?idle=true")))
	assert.Equal(t, []string{"busy"}, names(list("?idle=false")), "at work: not idle")
	r, err := sendTo(svc.url, "GET", nsPath(ns, "rayclusters")+"?idle=maybe", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 400, r.Status, "%s", r.Raw)
	assert.Contains(t, r.Msg, "idle")

	r, err = sendTo(svc.url, "GET", itemPath(ns, "rayclusters", "sleepy"), admin, "", nil)
	require.NoError(t, err)
	d := decode[idleSummary](t, r)
	require.NotNil(t, d.Idle, "%s", r.Raw)
	assert.Equal(t, int64(2), d.Idle.Holding.GPU, "two workers, a GPU each")
	assert.Equal(t, "30s", d.Idle.Evidence.Window)
	assert.Zero(t, d.Idle.Evidence.RayUsed)
	if assert.NotNil(t, d.Idle.Evidence.CPU) {
		assert.Zero(t, *d.Idle.Evidence.CPU)
	}
	if assert.NotNil(t, d.Idle.Evidence.GPU, "DCGM's utilization, emulated") {
		assert.Zero(t, *d.Idle.Evidence.GPU)
	}
	assert.Equal(t, "Idle", d.Health.Reason)
	assert.Equal(t, fmt.Sprintf("idle since %s, holding 2 GPUs", d.Idle.Since.UTC().Format("15:04 UTC")), d.Health.Message)
	stream.until(t, 30*time.Second, "sleepy idle on the stream", func(ev sseEvent) bool {
		var s idleSummary
		return ev.Name == "MODIFIED" && json.Unmarshal([]byte(ev.Data), &s) == nil && s.Name == "sleepy" && s.Idle != nil
	})
	overview := func() (int64, int64) {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/overview?namespace="+ns, admin, "", nil)
		require.NoError(t, err)
		o := decode[struct {
			Counts struct {
				IdleRayClusters int64               `json:"idleRayClusters"`
				IdleHolding     struct{ GPU int64 } `json:"idleHolding"`
			}
		}](t, r)
		return o.Counts.IdleRayClusters, o.Counts.IdleHolding.GPU
	}
	n, gpus := overview()
	assert.Equal(t, int64(1), n)
	assert.Equal(t, int64(2), gpus)

	// busy's use drops to nothing: idle a window later.
	for _, p := range clusterPods(t, ns, "busy") {
		_, err := env.admin.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"kwok.x-k8s.io/usage-cpu":"0","ray-service.local/gpu-utilization":"0"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	dropped := time.Now()
	eventually(t, 2*time.Minute, "busy idle once its use dropped", func() bool { return len(list("?idle=true")) == 2 })
	t.Logf("idle %s after its use dropped", time.Since(dropped).Round(time.Second))
	n, gpus = overview()
	assert.Equal(t, int64(2), n)
	assert.Equal(t, int64(4), gpus)
}
