//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/idle"
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

// Idle clusters, on an instance that judges them over 30 s every 5 s: a cluster of which Ray holds nothing
// and whose pods use nothing (Ray's ray_resources USED at its default 0, cAdvisor's CPU and DCGM's
// utilization 0, stack/kwok-metrics.yaml) becomes idle once a window old, while one whose pods use their
// default (half their CPU, 50 % of their GPUs) does not; once the second's use drops to nothing too, it
// follows a window later. The list item (and the idle filter), the detail's health, the
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
	// Under load the clusters may take longer than the window to run: sleepy may be idle already in the
	// snapshot, and then no change of it follows.
	snap, _ := stream.snapshot(t)
	idleInSnapshot := len(snap["sleepy"].Idle) > 0 && string(snap["sleepy"].Idle) != "null"

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
	defer logIdleQueries(t)
	eventually(t, 2*time.Minute, "sleepy idle", func() bool { return len(list("?idle=true")) == 1 })
	t.Logf("idle %s after both ran", time.Since(started).Round(time.Second))
	assert.Equal(t, []string{"sleepy"}, names(list("?idle=true")))
	assert.Equal(t, []string{"busy"}, names(list("?idle=false")), "at work: not idle")
	r, err := sendTo(svc.url, "GET", nsPath(ns, "rayclusters")+"?idle=maybe", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 400, r.Status, "%s", r.Raw)
	assert.Contains(t, r.Msg, "idle")

	// Judged on what Prometheus has: DCGM's series of a new pod may come a scrape after the CPU's and
	// Ray's, and a GPU without one is judged on those (the evidence then has no GPU figure).
	var d idleSummary
	eventually(t, 2*time.Minute, "sleepy's evidence with DCGM's utilization", func() bool {
		r, err = sendTo(svc.url, "GET", itemPath(ns, "rayclusters", "sleepy"), admin, "", nil)
		require.NoError(t, err)
		d = decode[idleSummary](t, r)
		require.NotNil(t, d.Idle, "%s", r.Raw)
		return d.Idle.Evidence.GPU != nil
	})
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
	if !idleInSnapshot {
		stream.until(t, 30*time.Second, "sleepy idle on the stream", func(ev sseEvent) bool {
			var s idleSummary
			return ev.Name == "MODIFIED" && json.Unmarshal([]byte(ev.Data), &s) == nil && s.Name == "sleepy" && s.Idle != nil
		})
	}
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

// What Ray's tasks and actors hold and what the pods use, apart: the stack's Ray series follow the pods'
// annotations ray-service.local/ray-reserved-* (Ray's ray_resources, USED what is held, AVAILABLE the
// node's total less it), cAdvisor's and DCGM's the usage annotations (stack/kwok-metrics.yaml). Idle, as
// docs/concepts.md and the Swagger text of idle say, is no Ray work: Ray's ray_resources{State="USED"} at 0 over
// the window, and the CPU and accelerators nearly unused. Judged over 30 s every 5 s:
//   - holding: on each worker an actor holds its GPU (Ray's GPU USED 1, AVAILABLE 0) and nothing
//     computes (no CPU, GPU utilization 0): Ray's reservation is Ray work, so not idle; idle a window
//     after the actors are gone.
//   - unheld: Ray holds nothing (USED 0, AVAILABLE the nodes' totals) while the workers' containers
//     compute (1.5 cores and 80 % of their GPU each): not idle, for what they use.
//   - quiet: nothing held, nothing used: idle.
func TestIdleReservationsApartFromUse(t *testing.T) {
	t.Parallel()
	svc := startInstance(t, "ray-service-idle-reserved.log", "--idle-window=30s", "--idle-interval=5s")
	ns := namespace(t, "reserved")
	admin := env.tokens["admin"]
	// Each worker holds a GPU of Kubernetes; of Ray's, it holds gpuHeld ("": none) and uses cpu cores and
	// gpu percent of its GPU. The head uses and holds nothing.
	cluster := func(cpu, gpu, gpuHeld string) func(map[string]any) {
		return func(obj map[string]any) {
			group(obj, "spec", "headGroupSpec", "template", "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": "0"}
			ann := map[string]any{"kwok.x-k8s.io/usage-cpu": cpu, "ray-service.local/gpu-utilization": gpu}
			if gpuHeld != "" {
				ann["ray-service.local/ray-reserved-gpu"] = gpuHeld
			}
			w := group(obj, "spec", "workerGroupSpecs", 0, "template")
			group(w, "metadata")["annotations"] = ann
			res := group(w, "spec", "containers", 0, "resources")
			group(res, "requests")["nvidia.com/gpu"] = "1"
			group(res, "limits")["nvidia.com/gpu"] = "1"
		}
	}
	require.Equal(t, 201, createCluster(t, admin, ns, "holding", cluster("0", "0", "1")).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "unheld", cluster("1500m", "80", "")).Status)
	waitStatus(t, ns, "rayclusters", "holding", "Running")
	waitStatus(t, ns, "rayclusters", "unheld", "Running")
	// The last to run: once it is idle, the detection has judged the others over a whole window.
	require.Equal(t, 201, createCluster(t, admin, ns, "quiet", cluster("0", "0", "")).Status)
	waitStatus(t, ns, "rayclusters", "quiet", "Running")
	started := time.Now()
	defer logIdleQueries(t)

	// Ray's own figures, per cluster, as Prometheus scraped them: a head of 1 CPU and 2 GiB, two workers
	// of 2 CPUs, 4 GiB and a GPU each.
	type key struct{ cluster, name, state string }
	const gib = float64(1 << 30)
	want := map[key]float64{}
	for _, c := range []string{"holding", "unheld", "quiet"} {
		want[key{c, "CPU", "USED"}], want[key{c, "CPU", "AVAILABLE"}] = 0, 5
		want[key{c, "memory", "USED"}], want[key{c, "memory", "AVAILABLE"}] = 0, 10*gib
		want[key{c, "GPU", "USED"}], want[key{c, "GPU", "AVAILABLE"}] = 0, 2
	}
	want[key{"holding", "GPU", "USED"}], want[key{"holding", "GPU", "AVAILABLE"}] = 2, 0
	got := map[key]float64{}
	rayFigures := func() bool {
		clear(got)
		for _, s := range promQuery(t, `sum by (ray_io_cluster, Name, State) (ray_resources{namespace="`+ns+`"})`) {
			got[key{s.Metric["ray_io_cluster"], s.Metric["Name"], s.Metric["State"]}] = s.Value
		}
		return maps.Equal(got, want)
	}
	// Every pod's series scraped, or a minute gone: then the difference is the failure.
	waitFor(time.Minute, rayFigures)
	assert.Equal(t, want, got, "Ray's ray_resources, by cluster, Name and State")

	// The overview keeps them apart: Ray's GPUs held (holding's) beside the GPUs' use (unheld's workers
	// use 80 % of theirs each), and no logical CPU held whatever the containers use (its CPU figure, a rate
	// over minutes, is left to the overview's own tests). Waited for, then asserted: on a failure the test
	// goes on to the judgements.
	var o overviewData
	waitFor(time.Minute, func() bool {
		r := call(t, "GET", "/rest/ray/v1/overview?namespace="+ns, admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		o = decode[overviewData](t, r)
		return o.Used.GPU != nil && math.Abs(*o.Used.GPU-1.6) < 1e-9 && o.Used.Ray["GPU"] == 2
	})
	if assert.NotNil(t, o.Used.GPU) {
		assert.InDelta(t, 1.6, *o.Used.GPU, 1e-9, "the GPUs' use")
	}
	assert.InDelta(t, 2, o.Used.Ray["GPU"], 1e-9, "Ray's GPUs held")
	assert.Zero(t, o.Used.Ray["CPU"], "no logical CPU held, whatever the containers use")

	list := func(query string) []string {
		r, err := sendTo(svc.url, "GET", nsPath(ns, "rayclusters")+query, admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		var names []string
		for _, it := range decode[struct{ Items []idleSummary }](t, r).Items {
			names = append(names, it.Name)
		}
		return names
	}
	detail := func(name string) idleSummary {
		r, err := sendTo(svc.url, "GET", itemPath(ns, "rayclusters", name), admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[idleSummary](t, r)
	}
	eventually(t, 2*time.Minute, "quiet idle", func() bool { return detail("quiet").Idle != nil })
	t.Logf("quiet idle %s after it ran", time.Since(started).Round(time.Second))
	assert.Equal(t, []string{"quiet"}, list("?idle=true"))
	assert.ElementsMatch(t, []string{"holding", "unheld"}, list("?idle=false"), "held by Ray, or used: not idle")
	for _, name := range []string{"holding", "unheld"} {
		d := detail(name)
		assert.Nil(t, d.Idle, "%s", name)
		assert.NotEqual(t, "Idle", d.Health.Reason, "%s", name)
	}

	// holding's actors are gone: nothing held, nothing used, idle a window later.
	for _, p := range clusterPods(t, ns, "holding") {
		if _, held := p.Annotations["ray-service.local/ray-reserved-gpu"]; !held {
			continue
		}
		_, err := env.admin.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"ray-service.local/ray-reserved-gpu":"0"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	released := time.Now()
	eventually(t, 2*time.Minute, "holding idle once its actors are gone", func() bool { return detail("holding").Idle != nil })
	t.Logf("holding idle %s after its actors were gone", time.Since(released).Round(time.Second))
	d := detail("holding")
	assert.Zero(t, d.Idle.Evidence.RayUsed)
	if assert.NotNil(t, d.Idle.Evidence.GPU, "DCGM's utilization, emulated") {
		assert.Zero(t, *d.Idle.Evidence.GPU)
	}
	assert.Equal(t, int64(2), d.Idle.Holding.GPU)
	assert.Equal(t, "Idle", d.Health.Reason)
	assert.ElementsMatch(t, []string{"holding", "quiet"}, list("?idle=true"))
	assert.Equal(t, []string{"unheld"}, list("?idle=false"), "still at work")
}

// promSample is one series of an instant vector: its labels and value.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// promAnswer is the stack's Prometheus' answer to an instant query, now.
func promAnswer(expr string) (int, []byte, error) {
	return httpGetHeaders(context.Background(), env.vars["PROMETHEUS_URL"]+"/api/v1/query?query="+url.QueryEscape(expr), nil)
}

// promQuery asks the stack's Prometheus an instant query, now.
func promQuery(t *testing.T, expr string) []promSample {
	t.Helper()
	code, body, err := promAnswer(expr)
	require.NoError(t, err)
	require.Equal(t, 200, code, "%s", body)
	var answer struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &answer), "%s", body)
	out := make([]promSample, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err, "%s", body)
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out
}

// logIdleQueries logs, where the test failed, what the idle detection's queries answer now, to see why.
func logIdleQueries(t *testing.T) {
	if !t.Failed() {
		return
	}
	for name, expr := range idle.WorkExpressions(30*time.Second, 5*time.Second) {
		_, body, err := promAnswer(expr)
		t.Logf("%s: %v %s", name, err, body)
	}
}
