//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"ray-service/internal/promql"
)

const overviewCluster = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: ova
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {num-cpus: "0"}
    template:
      spec:
        initContainers:
        - name: warm-up
          image: busybox
          resources: {requests: {cpu: "3", memory: 1Gi}}
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            requests: {cpu: "1", memory: 2Gi}
            limits: {cpu: "1", memory: 2Gi}
  workerGroupSpecs:
  - groupName: gpu
    replicas: 2
    minReplicas: 0
    maxReplicas: 2
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            requests: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
            limits: {cpu: "2", memory: 4Gi, nvidia.com/gpu: "1"}
`

// The overview: counts and allocated from Kubernetes, exactly; used and series from a real Prometheus
// fed with generated exporter data for the stack's real pods; and a Prometheus outage.
func TestOverview(t *testing.T) {
	ns := namespace(t, "overview")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayclusters"), admin, "application/yaml", []byte(overviewCluster))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	require.Equal(t, 201, createClusterAt(t, admin, ns, "idle", "?start=false").Status)
	r = call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status)
	// A suspended RayJob and a RayJob template: one kind with an instance and a template in a namespace.
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, "held", true)).Status)
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs")+"?start=false", admin, "application/json", rayJob(t, "kept", false)).Status)
	waitStatus(t, ns, "rayclusters", "ova", "Running")
	waitStatus(t, ns, "rayjobs", "held", "Stopped")
	waitStatus(t, ns, "rayclusters", "idle", "Stopped")

	// The test's own computation of the requests, with Kubernetes' own helper.
	pods := clusterPods(t, ns, "ova")
	require.Len(t, pods, 3)
	var wantCPU float64
	var wantMem, wantGPU int64
	for i := range pods {
		req := resourcehelper.PodRequests(&pods[i], resourcehelper.PodResourcesOptions{})
		wantCPU += float64(req.Cpu().MilliValue()) / 1000
		wantMem += req.Memory().Value()
		g := req[corev1.ResourceName("nvidia.com/gpu")]
		wantGPU += g.Value()
	}
	assert.InDelta(t, 7.0, wantCPU, 1e-9, "head: the init container's 3 CPUs; workers: 2 each")

	overview := func(base, query string) overviewData {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		status, body, err := httpGetHeaders(ctx, base+"/rest/ray/v1/overview?"+query, map[string]string{"Authorization": "Bearer " + admin})
		require.NoError(t, err)
		require.Equal(t, 200, status, "%s", body)
		return decode[overviewData](t, &response{Data: dataOf(t, body)})
	}
	d := overview(env.serviceURL, "namespace="+ns)
	require.NotNil(t, d.Counts)
	assert.Equal(t, 2, d.Counts.RayClusters.Total)
	assert.Equal(t, 1, d.Counts.RayClusters.Active)
	assert.Equal(t, 1, d.Counts.RayServices.Total, "the template counts")
	assert.Equal(t, 2, d.Counts.RayJobs.Total)
	assert.Equal(t, 0, d.Counts.RayJobs.Active)
	assert.Equal(t, 0, d.Counts.RayServices.Active)
	assert.Equal(t, 1, d.Counts.ActiveRayClusters)
	assert.InDelta(t, wantCPU, d.Allocated.CPU, 1e-9)
	assert.Equal(t, wantMem, d.Allocated.MemoryBytes)
	assert.InDelta(t, float64(wantGPU), d.Allocated.GPU, 0)
	assert.Equal(t, map[string]float64{"CPU": 4, "GPU": 2, "memory": float64(2<<30 + 2*(4<<30))}, d.Allocated.Ray)

	// A caller allowed in this namespace only (carol is bound nowhere else) sees the same figures in
	// its cluster-wide overview.
	bind(t, ns, "carol", "ray-viewer")
	grantRole(t, ns, "carol", "templates", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}})
	r = call(t, "GET", "/rest/ray/v1/overview", env.tokens["carol"], "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	bd := decode[overviewData](t, r)
	assert.Equal(t, *d.Counts, *bd.Counts)
	assert.InDelta(t, d.Allocated.CPU, bd.Allocated.CPU, 1e-9)

	// A Prometheus of our own, backfilled with exporter data for these pods.
	end := time.Now().Add(-2 * time.Hour).Truncate(time.Minute)
	start := end.Add(-5 * time.Minute)
	fixture := prometheusFixture(ns, pods, end.Add(-10*time.Minute), end)
	promURL, stopProm := startPrometheus(t, fixture)
	svc := startInstance(t, "ray-service-overview.log", "--prometheus-url", promURL,
		"--grafana-url", "http://grafana.example/", "--grafana-dashboard-uid", "rayDefaultDashboard")
	window := fmt.Sprintf("start=%d&end=%d&step=30s", start.Unix(), end.Unix())

	d = overview(svc.url, "namespace="+ns+"&"+window)
	assert.Empty(t, d.Warnings)
	want := map[string]float64{"cpu": 1.75, "memoryBytes": 3 << 30, "gpu": 0.8, "gpuMemoryBytes": 2 << 30, "npu": 0.4, "npuMemoryBytes": 2 << 30}
	got := map[string]*float64{"cpu": d.Used.CPU, "memoryBytes": d.Used.MemoryBytes, "gpu": d.Used.GPU,
		"gpuMemoryBytes": d.Used.GPUMemoryBytes, "npu": d.Used.NPU, "npuMemoryBytes": d.Used.NPUMemoryBytes}
	for name, w := range want {
		require.NotNil(t, got[name], name)
		assert.InDelta(t, w, *got[name], 1e-9, name)
		pts := d.Series.Used[name]
		require.Len(t, pts, 11, name)
		for i, p := range pts {
			assert.Equal(t, start.Unix()+int64(i*30), p.T)
			assert.InDelta(t, w, p.V, 1e-9, "%s at %d", name, p.T)
		}
	}
	assert.Equal(t, map[string]float64{"CPU": 3, "GPU": 1}, d.Used.Ray)
	for name, w := range map[string]float64{"cpu": 5, "memoryBytes": 10 << 30, "gpu": 2} {
		pts := d.Series.Allocated[name]
		require.Len(t, pts, 11, name)
		assert.InDelta(t, w, pts[10].V, 1e-9, "requested %s of Pending and Running Ray pods", name)
	}
	assert.Equal(t, fmt.Sprintf("http://grafana.example/d/rayDefaultDashboard/?from=%d&to=%d", start.UnixMilli(), end.UnixMilli()), d.GrafanaURL)

	// Identical callers share one evaluation per query, and a repeat within the step is served from the
	// cache: Prometheus' own request counter tells.
	rangeQueries := func() int {
		_, body, err := httpGet(context.Background(), promURL+"/metrics")
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^prometheus_http_requests_total\{code="200",handler="/api/v1/query_range"\} (\d+)`).FindSubmatch(body)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	before := rangeQueries()
	other := fmt.Sprintf("start=%d&end=%d&step=60s", start.Unix(), end.Unix())
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { ; overview(svc.url, "namespace="+ns+"&"+other) })
	}
	wg.Wait()
	exprs, err := promql.Expressions(promql.Scope{}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, len(exprs), rangeQueries()-before, "10 identical overviews: one evaluation of each query")
	overview(svc.url, "namespace="+ns+"&"+other)
	assert.Equal(t, len(exprs), rangeQueries()-before, "a repeat is served from the cache")

	// One cluster's figures.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	status, body, err := httpGetHeaders(ctx, svc.url+itemPath(ns, "rayclusters", "ova")+"/metrics?"+window, map[string]string{"Authorization": "Bearer " + admin})
	require.NoError(t, err)
	require.Equal(t, 200, status, "%s", body)
	cd := decode[overviewData](t, &response{Data: dataOf(t, body)})
	assert.Nil(t, cd.Counts)
	assert.InDelta(t, 1.75, *cd.Used.CPU, 1e-9)
	assert.InDelta(t, wantCPU, cd.Allocated.CPU, 1e-9)
	assert.Contains(t, cd.GrafanaURL, "&var-Cluster=ova")

	// Prometheus goes away: counts and allocated still exact, a warning for each figure.
	stopProm()
	d = overview(svc.url, "namespace="+ns+"&range=1h")
	assert.Equal(t, 1, d.Counts.ActiveRayClusters)
	assert.InDelta(t, wantCPU, d.Allocated.CPU, 1e-9)
	assert.Nil(t, d.Used.CPU)
	assert.Len(t, d.Warnings, len(exprs))
	for _, w := range d.Warnings {
		assert.Contains(t, w, "Prometheus query failed")
	}

	// Callers see only what they may list; bad windows are 400.
	r = call(t, "GET", "/rest/ray/v1/overview?namespace="+ns, env.tokens["nobody"], "", nil)
	assert.Equal(t, 403, r.Status)
	r = call(t, "GET", "/rest/ray/v1/overview", env.tokens["nobody"], "", nil)
	require.Equal(t, 200, r.Status)
	nd := decode[overviewData](t, r)
	assert.Zero(t, nd.Counts.RayClusters.Total)
	assert.Zero(t, nd.Allocated.CPU)
	for _, bad := range []string{"range=2h", "start=1&end=0", "start=abc&end=10", "range=1h&start=1&end=2", "step=30s", "namespace=Bad_NS"} {
		r = call(t, "GET", "/rest/ray/v1/overview?"+bad, admin, "", nil)
		assert.Equal(t, 400, r.Status, bad)
	}
	assert.Equal(t, 401, call(t, "GET", "/rest/ray/v1/overview", "", "", nil).Status)
}

// prometheusFixture writes OpenMetrics for the window: cAdvisor (with pod-level and pause rows that must
// not count, and a counter reset), kube-state-metrics (with a Succeeded Ray pod and a pod of no Ray
// cluster), DCGM, npu-exporter and Ray series, a sample every 15 s.
func prometheusFixture(ns string, pods []corev1.Pod, from, to time.Time) string {
	var head string
	var workers []string
	for _, p := range pods {
		if p.Labels["ray.io/node-type"] == "head" {
			head = p.Name
		} else {
			workers = append(workers, p.Name)
		}
	}
	type series struct {
		name, labels string
		value        func(i int, ts float64) float64
		kind         string
	}
	constant := func(v float64) func(int, float64) float64 { return func(int, float64) float64 { return v } }
	linear := func(base, slope float64) func(int, float64) float64 {
		return func(i int, _ float64) float64 { return base + slope*15*float64(i) }
	}
	reset := func(slope float64, at int) func(int, float64) float64 {
		return func(i int, _ float64) float64 {
			if i < at {
				return 5000 + slope*15*float64(i)
			}
			return slope * 15 * float64(i-at+1) // restarted from zero just before sample at
		}
	}
	pod := func(p string, extra string) string { return fmt.Sprintf(`namespace="%s",pod="%s"%s`, ns, p, extra) }
	var all []series
	rayPods := append([]string{head}, workers...)
	for _, p := range append(rayPods, "ova-gpu-worker-done") {
		all = append(all, series{"kube_pod_info", pod(p, `,created_by_kind="RayCluster",created_by_name="ova",node="kwok-node-0"`), constant(1), "gauge"})
	}
	all = append(all, series{"kube_pod_info", pod("web-1", `,created_by_kind="ReplicaSet",created_by_name="web"`), constant(1), "gauge"})
	for _, p := range rayPods {
		all = append(all, series{"kube_pod_status_phase", pod(p, `,phase="Running"`), constant(1), "gauge"},
			series{"kube_pod_status_phase", pod(p, `,phase="Succeeded"`), constant(0), "gauge"})
	}
	all = append(all, series{"kube_pod_status_phase", pod("ova-gpu-worker-done", `,phase="Succeeded"`), constant(1), "gauge"},
		series{"kube_pod_status_phase", pod("ova-gpu-worker-done", `,phase="Running"`), constant(0), "gauge"})
	req := func(p, c, res, unit string, v float64) series {
		return series{"kube_pod_container_resource_requests", pod(p, fmt.Sprintf(`,container="%s",resource="%s",unit="%s"`, c, res, unit)), constant(v), "gauge"}
	}
	all = append(all, req(head, "ray-head", "cpu", "core", 1), req(head, "ray-head", "memory", "byte", 2<<30))
	for _, w := range append(workers, "ova-gpu-worker-done") {
		all = append(all, req(w, "ray-worker", "cpu", "core", 2), req(w, "ray-worker", "memory", "byte", 4<<30),
			req(w, "ray-worker", "nvidia_com_gpu", "integer", 1))
	}
	all = append(all, req("web-1", "web", "cpu", "core", 16))
	cpu := func(p, c string, v func(int, float64) float64) series {
		return series{"container_cpu_usage_seconds_total", pod(p, fmt.Sprintf(`,container="%s",image="x"`, c)), v, "counter"}
	}
	// Ray containers use 0.5 + 0.75 + 0.5 cores; the worker's counter resets midway.
	all = append(all, cpu(head, "ray-head", linear(1000, 0.5)), cpu(workers[0], "ray-worker", reset(0.75, 20)),
		cpu(workers[1], "ray-worker", linear(200, 0.5)),
		cpu(head, "", linear(1000, 9)), cpu(head, "POD", linear(10, 7)), cpu("web-1", "web", linear(0, 4)))
	mem := func(p, c string, v float64) series {
		return series{"container_memory_working_set_bytes", pod(p, fmt.Sprintf(`,container="%s",image="x"`, c)), constant(v), "gauge"}
	}
	all = append(all, mem(head, "ray-head", 1<<30), mem(workers[0], "ray-worker", 1<<30), mem(workers[1], "ray-worker", 1<<30),
		mem(head, "", 50<<30), mem(head, "POD", 1<<20), mem("web-1", "web", 8<<30))
	// DCGM as its chart scrapes it (honorLabels: false): the target's pod and namespace are the
	// exporter's, the GPU's pod arrives as exported_pod; a GPU no pod is assigned to has none.
	dcgm := func(p, c string, gpu int) string {
		return fmt.Sprintf(`namespace="gpu-operator",pod="nvidia-dcgm-exporter-x",container="nvidia-dcgm-exporter",exported_namespace="%s",exported_pod="%s",exported_container="%s",gpu="%d",UUID="GPU-%d",device="nvidia%d",modelName="NVIDIA A100-SXM4-40GB",Hostname="kwok-node-0"`, ns, p, c, gpu, gpu, gpu)
	}
	for i, w := range workers {
		all = append(all,
			series{"DCGM_FI_DEV_GPU_UTIL", dcgm(w, "ray-worker", i), constant([]float64{50, 30}[i]), "gauge"},
			series{"DCGM_FI_DEV_FB_USED", dcgm(w, "ray-worker", i), constant(1024), "gauge"})
	}
	// npu-exporter without honorLabels: its namespace arrives as exported_namespace.
	npu := func(p string, id int) string {
		return fmt.Sprintf(`namespace="npu-exporter",pod="npu-exporter-x",exported_namespace="%s",pod_name="%s",container_name="ray-worker",id="%d",model_name="910B3"`, ns, p, id)
	}
	all = append(all,
		series{"DCGM_FI_DEV_GPU_UTIL", dcgm("web-1", "web", 9), constant(100), "gauge"},
		series{"DCGM_FI_DEV_GPU_UTIL", `namespace="gpu-operator",pod="nvidia-dcgm-exporter-x",gpu="3",UUID="GPU-3"`, constant(0), "gauge"},
		series{"container_npu_utilization", npu(workers[0], 0), constant(40), "gauge"},
		series{"container_npu_used_memory", npu(workers[0], 0), constant(2048), "gauge"},
		series{"container_npu_utilization", npu("web-1", 1), constant(90), "gauge"},
		series{"npu_chip_info_utilization", `namespace="npu-exporter",pod="npu-exporter-x",id="0",model_name="910B3"`, constant(40), "gauge"},
		series{"ray_resources", pod(head, `,Name="CPU",State="USED"`), constant(3), "gauge"},
		series{"ray_resources", pod(head, `,Name="GPU",State="USED"`), constant(1), "gauge"},
		series{"ray_resources", pod(head, `,Name="CPU",State="AVAILABLE"`), constant(1), "gauge"},
	)
	var b strings.Builder
	byName := map[string][]series{}
	var order []string
	for _, s := range all {
		if byName[s.name] == nil {
			order = append(order, s.name)
		}
		byName[s.name] = append(byName[s.name], s)
	}
	n := int(to.Sub(from)/(15*time.Second)) + 1
	for _, name := range order {
		// An OpenMetrics counter family is named without the _total its samples carry.
		fmt.Fprintf(&b, "# TYPE %s %s\n", strings.TrimSuffix(name, "_total"), byName[name][0].kind)
		for _, s := range byName[name] {
			for i := range n {
				ts := float64(from.Unix()) + 15*float64(i)
				fmt.Fprintf(&b, "%s{%s} %s %s\n", name, s.labels, strconv.FormatFloat(s.value(i, ts), 'f', -1, 64), strconv.FormatFloat(ts, 'f', -1, 64))
			}
		}
	}
	b.WriteString("# EOF\n")
	return b.String()
}

// The local stack shows what Ray clusters use: KWOK emulates cAdvisor, kube-state-metrics, DCGM,
// npu-exporter and Ray's series from each pod's requests and annotations, and the stack's Prometheus
// scrapes them as their monitors do (DCGM's and npu-exporter's pod labels renamed exported_*, the Ray
// dashboard's endpoint too). The overview, the cluster's metrics and its health tab then show live
// figures, through the real scrape path, with no warning for what the stack emulates. The cluster runs
// the image of a current Ray (2.52) and another the seed's Ray 2.41 with RAY_event_stats_metrics=1: both
// health tabs have every panel.
func TestOverviewLiveUsage(t *testing.T) {
	t.Parallel() // its own namespace; most of it is waiting for Prometheus to scrape
	ns := namespace(t, "live")
	admin := env.tokens["admin"]
	r := createCluster(t, admin, ns, "busy", func(obj map[string]any) {
		group(obj, "spec", "headGroupSpec", "template", "metadata")["annotations"] = map[string]any{
			"kwok.x-k8s.io/usage-cpu": "1500m", "kwok.x-k8s.io/usage-memory": "3Gi", "ray-service.local/npu-utilization": "70"}
		head := group(obj, "spec", "headGroupSpec", "template", "spec", "containers", 0)
		head["image"] = "rayproject/ray:2.52.0"
		group(head, "resources", "requests")["huawei.com/Ascend910"] = "1"
		group(head, "resources", "limits")["huawei.com/Ascend910"] = "1"
		w := group(obj, "spec", "workerGroupSpecs", 0, "template")
		// What the workers' tasks and actors hold of Ray's logical resources, apart from what they use.
		group(w, "metadata")["annotations"] = map[string]any{
			"kwok.x-k8s.io/usage-cpu": "250m", "kwok.x-k8s.io/usage-memory": "1Gi", "ray-service.local/gpu-utilization": "80",
			"ray-service.local/ray-reserved-cpu": "2", "ray-service.local/ray-reserved-gpu": "1"}
		res := group(w, "spec", "containers", 0, "resources")
		group(res, "requests")["nvidia.com/gpu"] = "1"
		group(res, "limits")["nvidia.com/gpu"] = "1"
	})
	require.Equal(t, 201, r.Status, string(r.Raw))
	waitStatus(t, ns, "rayclusters", "busy", "Running")

	get := func(path string, into any) {
		t.Helper()
		r := call(t, "GET", path, admin, "", nil)
		require.Equal(t, 200, r.Status, string(r.Raw))
		require.NoError(t, json.Unmarshal(r.Data, into))
	}
	// Head 1.5 CPUs, 3 GiB and 70 % of an NPU; two workers 0.25 CPU, 1 GiB and 80 % of one GPU each.
	const wantCPU, wantMem, wantGPU, wantNPU = 2.0, float64(5 << 30), 1.6, 0.7
	var d overviewData
	started := time.Now()
	eventually(t, 2*time.Minute, "live used figures in the overview", func() bool {
		get("/rest/ray/v1/overview?namespace="+ns, &d)
		_, rayScraped := d.Used.Ray["CPU"]
		return d.Used.CPU != nil && d.Used.MemoryBytes != nil && d.Used.GPU != nil && d.Used.NPU != nil &&
			math.Abs(*d.Used.CPU-wantCPU) < 0.05*wantCPU && *d.Used.MemoryBytes == wantMem && math.Abs(*d.Used.GPU-wantGPU) < 1e-9 &&
			math.Abs(*d.Used.NPU-wantNPU) < 1e-9 && rayScraped
	})
	t.Logf("used CPU %.3f, memory %.0f, GPU %.2f, %s after the cluster ran", *d.Used.CPU, *d.Used.MemoryBytes, *d.Used.GPU,
		time.Since(started).Round(time.Second))
	assert.Empty(t, d.Warnings, "nothing the stack emulates is missing")
	require.NotNil(t, d.Used.GPUMemoryBytes)
	assert.InDelta(t, float64(2*4096<<20), *d.Used.GPUMemoryBytes, 0, "two GPUs, 4 GiB each by default")
	require.NotNil(t, d.Used.NPUMemoryBytes)
	assert.InDelta(t, float64(8192<<20), *d.Used.NPUMemoryBytes, 0, "one NPU, 8 GiB by default")
	// Ray's logical resources held: the workers' 2 CPUs and a GPU each, the head's nothing (its NPU, and
	// the memory, held by no task).
	assert.Equal(t, map[string]float64{"CPU": 4, "GPU": 2, "NPU": 0, "memory": 0}, d.Used.Ray, "Ray's logical resources held, not used")

	var m overviewData
	get(itemPath(ns, "rayclusters", "busy")+"/metrics", &m)
	require.NotNil(t, m.Used.MemoryBytes)
	assert.InDelta(t, wantMem, *m.Used.MemoryBytes, 0, "the cluster's own metrics")
	healthy := func(name string) clusterHealthData {
		var h clusterHealthData
		eventually(t, time.Minute, "the health tab of "+name+" from the head's Ray metrics", func() bool {
			get(itemPath(ns, "rayclusters", name)+"/health", &h)
			for _, p := range h.Panels {
				if p.Value == nil {
					return false
				}
			}
			return h.Verdict.Level == "ok"
		})
		return h
	}
	h := healthy("busy")
	assert.Contains(t, panelOf(h, "gcsEventPressure").Source, "Ray 2.50 and later")
	assert.InDelta(t, 5, *panelOf(h, "gcsEventPressure").Value, 0.01, "the main loop's mean queueing time, 5 ms by default (sum and count are read a moment apart)")
	require.NotEmpty(t, panelOf(h, "jobAPIPressure").Split, "the job API by method")

	// The seed's Ray 2.41, with the event stats exported.
	r = createCluster(t, admin, ns, "seed241", func(obj map[string]any) {
		head := group(obj, "spec", "headGroupSpec", "template", "spec", "containers", 0)
		head["image"] = "rayproject/ray:2.41.0"
		head["env"] = []any{map[string]any{"name": "RAY_event_stats_metrics", "value": "1"}}
		// What stands for the environment in the stack's emulation (kwok-metrics.yaml).
		group(obj, "spec", "headGroupSpec", "template", "metadata")["annotations"] = map[string]any{
			"ray-service.local/gcs-queue-ms": "150", "ray-service.local/ray-event-stats-metrics": "1",
			"ray-service.local/gpu-utilization": "40", "ray-service.local/npu-utilization": "30"}
		for _, req := range []string{"requests", "limits"} {
			group(head, "resources", req)["nvidia.com/gpu"] = "1"
			group(head, "resources", req)["huawei.com/Ascend910"] = "2"
		}
	})
	require.Equal(t, 201, r.Status, string(r.Raw))
	waitStatus(t, ns, "rayclusters", "seed241", "Running")
	var old clusterHealthData
	eventually(t, time.Minute, "the seed's cluster's panels, its GCS panel from the older gauge", func() bool {
		get(itemPath(ns, "rayclusters", "seed241")+"/health", &old)
		for _, p := range old.Panels {
			// The dashboard's own port is scraped apart from the head's metrics port, maybe a scrape later.
			if p.Value == nil {
				return false
			}
		}
		p := panelOf(old, "gcsEventPressure")
		return p.Value != nil && *p.Value == 150
	})
	assert.Contains(t, panelOf(old, "gcsEventPressure").Source, "Ray 2.49 and before")
	var sm overviewData
	eventually(t, time.Minute, "the seed's cluster's GPU and NPU use", func() bool {
		get(itemPath(ns, "rayclusters", "seed241")+"/metrics", &sm)
		return sm.Used.GPU != nil && sm.Used.NPU != nil && math.Abs(*sm.Used.GPU-0.4) < 1e-9 && math.Abs(*sm.Used.NPU-0.6) < 1e-9
	})
	assert.Empty(t, sm.Warnings)
	assert.Equal(t, "warning", panelOf(old, "gcsEventPressure").Level)
	for _, p := range old.Panels {
		assert.NotNil(t, p.Value, "%s has a value: %s", p.Name, p.Reason)
	}
}
