package promql

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/validation"

	"ray-service/internal/accel"
)

// Scope narrows the figures: to namespaces (nil: all; empty: none) and to one Ray cluster.
type Scope struct {
	Namespaces []string
	Cluster    string
	// Held is what the Ray pods in scope hold now, as the allocated totals count it: the allocated
	// series count each slice resource at the devices it is worth there.
	Held accel.Holdings
}

// Point is one sample of a series: Unix seconds and value.
type Point struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

// Used is what Ray pods use, as Prometheus measured it at the end of the window. A figure that could not
// be measured is null, with a warning saying why.
type Used struct {
	CPU         *float64 `json:"cpu"`
	MemoryBytes *float64 `json:"memoryBytes"`
	// GPU is the GPUs busy, in device equivalents: whole GPUs by DCGM_FI_DEV_GPU_UTIL, MIG instances by
	// DCGM_FI_PROF_GR_ENGINE_ACTIVE times their share of their GPU.
	GPU            *float64 `json:"gpu"`
	GPUMemoryBytes *float64 `json:"gpuMemoryBytes"`
	// NPU is the NPUs busy, in device equivalents: whole chips by container_npu_utilization, 310P vNPUs by
	// vnpu_pod_aicore_utilization times their share of the chip; vNPUs without series are left out.
	NPU            *float64           `json:"npu"`
	NPUMemoryBytes *float64           `json:"npuMemoryBytes"`
	Ray            map[string]float64 `json:"ray"`
}

// Series are the figures over the window, for charts.
type Series struct {
	Used      map[string][]Point `json:"used"`
	Allocated map[string][]Point `json:"allocated"`
	RayUsed   map[string][]Point `json:"rayUsed"`
}

// query is one PromQL question of the overview.
type query struct {
	// group and name place the answer: used or allocated, and the figure.
	group, name string
	// byName splits the answer by the label Name (Ray logical resources).
	byName bool
	// expr renders the PromQL from checked parts.
	expr func(p parts) string
	// missing says what a query without samples probably lacks.
	missing string
	// metric is the series whose presence tells an empty answer (no pod in scope uses it: 0) from a
	// missing exporter (no answer: a warning).
	metric string
	// requests names the allocated figure of the same resource: where Ray pods in scope request it and
	// none of metric's series names one of them, the figure is unknown, not 0.
	requests string
	// present, where set, is the series that tells the exporter is scraped in metric's stead: one the
	// exporter writes whether or not a pod uses the device.
	present string
}

// parts are the pieces a query is assembled from; each is built from checked input only.
type parts struct {
	ns      string // extra matchers on namespace, e.g. `,namespace=~"a|b"`, or ""
	rayPods string // an expression that is 1 for each (namespace, pod) of a Ray cluster in scope
	rate    string // the rate window, e.g. "1m"
	// held is what the Ray pods in scope hold at the end of the window (the allocated totals): the
	// allocated series value each accelerator resource as these do.
	held accel.Holdings
}

const (
	usedGroup      = "used"
	allocatedGroup = "allocated"
	// unmeasuredVNPU names the query of the vNPU slices no exporter's series measures.
	unmeasuredVNPU = "unmeasuredVNPU"
)

var queries = []query{
	{group: usedGroup, name: "cpu", missing: "cAdvisor's container_cpu_usage_seconds_total", metric: "container_cpu_usage_seconds_total",
		expr: func(p parts) string {
			return `sum(rate(container_cpu_usage_seconds_total{container!="",container!="POD"` + p.ns + `}[` + p.rate + `]) * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	{group: usedGroup, name: "memoryBytes", missing: "cAdvisor's container_memory_working_set_bytes", metric: "container_memory_working_set_bytes",
		expr: func(p parts) string {
			return `sum(container_memory_working_set_bytes{container!="",container!="POD"` + p.ns + `} * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	{group: usedGroup, name: "gpu", missing: "DCGM exporter's DCGM_FI_DEV_GPU_UTIL or DCGM_FI_PROF_GR_ENGINE_ACTIVE", metric: "DCGM_FI_DEV_GPU_UTIL",
		requests: "gpu", present: gpuPresence,
		expr: func(p parts) string {
			return `sum(` + GPUsInUseByPod() + ` * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	{group: usedGroup, name: "gpuMemoryBytes", missing: "DCGM exporter's DCGM_FI_DEV_FB_USED", metric: "DCGM_FI_DEV_FB_USED", requests: "gpu",
		expr: func(p parts) string {
			return `sum(` + byPod("DCGM_FI_DEV_FB_USED", dcgmPods) + ` * on(namespace, pod) group_left() ` + p.rayPods + `) * 1048576`
		}},
	{group: usedGroup, name: "npu", missing: "Ascend npu-exporter's npu_chip_info_utilization", metric: "container_npu_utilization", requests: "npu", present: npuPresence,
		expr: func(p parts) string {
			return `sum(` + NPUsInUseByPod() + ` * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	// Whole chips' memory in MB (container_npu_used_memory, collector_for_npu.go), vNPUs' in KB.
	{group: usedGroup, name: "npuMemoryBytes", missing: "Ascend npu-exporter's npu_chip_info_utilization", metric: "container_npu_used_memory", requests: "npu", present: npuPresence,
		expr: func(p parts) string {
			return `sum((` + byPod("container_npu_used_memory", npuPods) + ` * 1048576 or ` + byPod(vnpuUsedMemory, npuPods) + ` * 1024)` +
				` * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	{group: usedGroup, name: "ray", byName: true, missing: "Ray's ray_resources",
		expr: func(p parts) string {
			return `sum by (Name) (ray_resources{State="USED"` + p.ns + `} * on(namespace, pod) group_left() ` + p.rayPods + `)`
		}},
	{group: allocatedGroup, name: "cpu", missing: "kube-state-metrics' kube_pod_container_resource_requests", metric: "kube_pod_container_resource_requests",
		expr: func(p parts) string { return requested(p, `resource="cpu"`) }},
	{group: allocatedGroup, name: "memoryBytes", missing: "kube-state-metrics' kube_pod_container_resource_requests", metric: "kube_pod_container_resource_requests",
		expr: func(p parts) string { return requested(p, `resource="memory"`) }},
	{group: allocatedGroup, name: "gpu", missing: "kube-state-metrics' kube_pod_container_resource_requests", metric: "kube_pod_container_resource_requests",
		expr: func(p parts) string { return requestedDevices(p, allocatedShares(accel.GPU, p.held)) }},
	{group: allocatedGroup, name: "npu", missing: "kube-state-metrics' kube_pod_container_resource_requests", metric: "kube_pod_container_resource_requests",
		expr: func(p parts) string { return requestedDevices(p, allocatedShares(accel.NPU, p.held)) }},
	// The vNPU slices whose use npu-exporter does not measure, by resource: for warnings.
	{group: allocatedGroup, name: unmeasuredVNPU, missing: "kube-state-metrics' kube_pod_container_resource_requests",
		expr: unmeasuredVNPUs},
}

// Ascend's resources as kube-state-metrics names them (each character outside [a-zA-Z0-9_] an
// underscore: internal/store/utils.go, kube-state-metrics v2.20.0). Whole chips are huawei.com/Ascend910,
// Ascend310, Ascend310P (and the mixed-insert Ascend310P-V, -VPro, -IPro) and, on Atlas 350 and later,
// huawei.com/npu (mind-cluster v26.1.0, component/ascend-common/api/default_name.go); a static vNPU is a
// template slice of a chip, huawei.com/Ascend910-2c or Ascend310P-4c.3cpu (ascend-device-plugin
// pkg/common/constants.go), a dynamic one huawei.com/npu-core: counted apart, never as chips.
const (
	vnpuSlices = `resource=~"` + vnpuPattern + `"`
	// vnpuPattern matches the vNPU resources' names.
	vnpuPattern = `huawei_com_Ascend[0-9A-Za-z]+_[0-9]+c.*|huawei_com_npu_core`
)

// npuChipSeries is npu-exporter's per-chip utilization, written for every chip whether a container uses
// it or not (its container series only for chips in use): what tells the exporter is scraped.
const npuChipSeries = "npu_chip_info_utilization"

// podLabels says where a series names the workload's pod: the matchers that pick the series labelled
// this way, and the labels holding the pod's name and namespace ("": the series' own pod or namespace).
type podLabels struct{ match, pod, namespace string }

// dcgmPods are the ways DCGM exporter's series name the pod a GPU is assigned to. The exporter writes
// pod, namespace and container (internal/pkg/transformation/const.go, dcgm-exporter 4.5.3-4.8.2), or
// pod_name, pod_namespace and container_name with --use-old-namespace. Its chart's ServiceMonitor keeps
// honorLabels: false (deployment/values.yaml), so the Prometheus Operator's own pod and namespace of the
// target (the exporter's pod) win, and the exporter's arrive as exported_pod and exported_namespace.
var dcgmPods = []podLabels{
	{match: `exported_pod!=""`, pod: "exported_pod", namespace: "exported_namespace"},
	{match: `exported_pod="",pod_name!=""`, pod: "pod_name", namespace: "pod_namespace"},
	{match: `exported_pod="",pod_name="",pod!=""`},
}

// npuPods are the ways npu-exporter's container series name their pod: labels id, model_name, vdie_id,
// pcie_bus_info, namespace, pod_name and container_name (component/npu-exporter collector/common/
// metrics_collector.go, Ascend mind-cluster v26.1.0). Only namespace collides with a target's label:
// scraped without honorLabels (its documented ServiceMonitor), it arrives as exported_namespace.
var npuPods = []podLabels{
	{match: `pod_name!="",exported_namespace!=""`, pod: "pod_name", namespace: "exported_namespace"},
	{match: `pod_name!="",exported_namespace=""`, pod: "pod_name"},
}

// unmappedCause says, by resource, what keeps an exporter's series from naming the pods using it.
var unmappedCause = map[string]string{
	"gpu": "dcgm-exporter maps GPUs to pods only with its Kubernetes mapping on (DCGM_EXPORTER_KUBERNETES=true, " +
		"as its chart sets, and the kubelet's pod-resources socket mounted); its series are read by the labels " +
		"exported_pod, pod_name or pod",
	"npu": "npu-exporter names the pod of a chip in pod_name only for whole chips mapped through its container " +
		"runtime (containerd or docker socket mounted); its series are read by pod_name with namespace or " +
		"exported_namespace",
}

// byPod is metric's series with the labels namespace and pod naming the workload's pod, however the
// scrape labelled them: one selection for each way, which pick disjoint series.
func byPod(metric string, ways []podLabels) string {
	sels := make([]string, 0, len(ways))
	for _, w := range ways {
		e := metric + "{" + w.match + "}"
		if w.pod != "" {
			e = `label_replace(` + e + `, "pod", "$1", "` + w.pod + `", "(.+)")`
		}
		if w.namespace != "" {
			e = `label_replace(` + e + `, "namespace", "$1", "` + w.namespace + `", "(.+)")`
		}
		sels = append(sels, e)
	}
	return "(" + strings.Join(sels, " or ") + ")"
}

// requested sums the requests of Ray pods that are Pending or Running.
func requested(p parts, resource string) string {
	return `sum(kube_pod_container_resource_requests{` + resource + p.ns + `} * on(namespace, pod) group_left() ` + p.rayPods +
		` * on(namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"` + p.ns + `} == 1))`
}

// Expressions renders every overview query for a scope, for tests of the PromQL itself.
func Expressions(sc Scope, step time.Duration) (map[string]string, error) {
	p, err := scopeParts(sc, step)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, q := range queries {
		out[q.group+"."+q.name] = q.promql(p)
	}
	return out, nil
}

// unmappedLabel marks the answer of a query whose exporter is scraped while none of its series names a
// pod in scope: 0 if no Ray pod in scope asked for the resource, else unknown.
const unmappedLabel = "unmapped"

// promql is the query as sent: where the exporter is scraped but no pod in scope has the figure, 0,
// marked with unmappedLabel where the figure is a device's use.
func (q query) promql(p parts) string {
	switch {
	case q.metric == "":
		return q.expr(p)
	case q.requests == "":
		return "(" + q.expr(p) + ") or on() (0 * max(" + q.metric + "))"
	}
	present := cmp.Or(q.present, q.metric)
	return "(" + q.expr(p) + `) or on() label_replace(0 * max(` + present + `), "` + unmappedLabel + `", "true", "", "")`
}

// scopeParts checks the scope and builds the query parts from it. Namespaces and cluster names must be
// Kubernetes names, so that nothing but a name can reach a query.
func scopeParts(sc Scope, step time.Duration) (parts, error) {
	p := parts{held: sc.Held}
	for _, ns := range sc.Namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return p, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	if sc.Namespaces != nil {
		p.ns = `,namespace=~"` + strings.Join(sc.Namespaces, "|") + `"`
	}
	podMatchers := `created_by_kind="RayCluster"` + p.ns
	if sc.Cluster != "" {
		if errs := validation.IsDNS1123Subdomain(sc.Cluster); len(errs) > 0 {
			return p, fmt.Errorf("cluster %q: %s", sc.Cluster, strings.Join(errs, "; "))
		}
		podMatchers += `,created_by_name="` + sc.Cluster + `"`
	}
	p.rayPods = `max by (namespace, pod) (kube_pod_info{` + podMatchers + `})`
	rate := max(step,
		// at least a few scrapes
		time.Minute)
	p.rate = model.Duration(rate).String()
	return p, nil
}

// Usage returns the used figures at the end of the window, the series over it, and a warning for each
// figure that could not be measured. It never fails: a Prometheus outage is a set of warnings.
func (q *Querier) Usage(ctx context.Context, w Window, sc Scope) (Used, Series, []string) {
	used := Used{Ray: map[string]float64{}}
	series := Series{Used: map[string][]Point{}, Allocated: map[string][]Point{}, RayUsed: map[string][]Point{}}
	if sc.Namespaces != nil && len(sc.Namespaces) == 0 {
		zero := 0.0
		used.CPU, used.MemoryBytes, used.GPU, used.GPUMemoryBytes, used.NPU, used.NPUMemoryBytes = &zero, &zero, &zero, &zero, &zero, &zero
		return used, series, nil // nothing the caller may see
	}
	p, err := scopeParts(sc, w.Step)
	if err != nil {
		return used, series, []string{err.Error()}
	}
	results := make([]model.Matrix, len(queries))
	errs := make([]error, len(queries))
	var wg sync.WaitGroup
	for i, qu := range queries {
		wg.Go(func() {
			results[i], errs[i] = q.rangeQuery(ctx, qu.promql(p), w)
		})
	}
	wg.Wait()
	// What Ray pods in scope request at the end of the window, by figure: whether a used figure whose
	// exporter names none of them is 0 or unknown.
	requested := map[string]float64{}
	unmeasured := map[string]float64{}
	for i, qu := range queries {
		if qu.group != allocatedGroup || errs[i] != nil {
			continue
		}
		for _, s := range results[i] {
			if v, ok := lastAt(points(s), w.End); ok {
				if qu.name == unmeasuredVNPU {
					unmeasured[string(s.Metric["resource"])] = v
				} else {
					requested[qu.name] = v
				}
			}
		}
	}
	// vNPU slices whose use no series measures are said by name; the NPUs in use are then only what the
	// series measure, and unknown where the slices are all the NPUs the pods hold.
	warnings, unmeasuredNPUs := vnpuWarnings(unmeasured, sc.Held)
	warnings = append(warnings, claimWarnings(sc.Held)...)
	for i, qu := range queries {
		label := qu.group + " " + qu.name
		if errs[i] != nil {
			warnings = append(warnings, fmt.Sprintf("%s: Prometheus query failed: %v", label, errs[i]))
			continue
		}
		if qu.name == unmeasuredVNPU {
			continue
		}
		if len(results[i]) == 0 {
			warnings = append(warnings, fmt.Sprintf("%s: no samples in the window (%s not scraped?)", label, qu.missing))
			if qu.group == usedGroup && !qu.byName {
				continue
			}
		}
		if qu.byName {
			for _, s := range results[i] {
				name := string(s.Metric["Name"])
				pts := points(s)
				series.RayUsed[name] = pts
				if last, ok := lastAt(pts, w.End); ok {
					used.Ray[name] = last
				}
			}
			continue
		}
		pts, unmapped := mergeMapped(results[i], w.End)
		if qu.group == allocatedGroup {
			series.Allocated[qu.name] = pts
			continue
		}
		if unmapped {
			if n := requested[qu.requests]; n > 0 {
				if qu.requests == "npu" && n <= unmeasuredNPUs+1e-9 {
					continue // every NPU held is a vNPU no series measures: said above
				}
				warnings = append(warnings, fmt.Sprintf("%s: %s is scraped, but none of its series names a Ray pod in "+
					"scope while they request %g %s: %s", label, qu.metric, n, strings.ToUpper(qu.requests), unmappedCause[qu.requests]))
				continue
			}
		}
		series.Used[qu.name] = pts
		v, ok := lastAt(pts, w.End)
		if !ok {
			warnings = append(warnings, fmt.Sprintf("%s: no sample at the end of the window", label))
			continue
		}
		switch qu.name {
		case "cpu":
			used.CPU = &v
		case "memoryBytes":
			used.MemoryBytes = &v
		case "gpu":
			used.GPU = &v
		case "gpuMemoryBytes":
			used.GPUMemoryBytes = &v
		case "npu":
			used.NPU = &v
		case "npuMemoryBytes":
			used.NPUMemoryBytes = &v
		}
	}
	return used, series, warnings
}

// mergeMapped is a figure's series over the window: where a device's exporter named no pod in scope at
// some steps, the answer holds a second series, the 0 marked unmappedLabel, for those steps (the query's
// "or on()" takes it only where the figure has no sample). It tells whether the sample at end is that 0.
func mergeMapped(m model.Matrix, end time.Time) ([]Point, bool) {
	if len(m) == 1 {
		return points(m[0]), m[0].Metric[unmappedLabel] != ""
	}
	var out []Point
	unmapped := false
	for _, s := range m {
		pts := points(s)
		if s.Metric[unmappedLabel] != "" && len(pts) > 0 && pts[len(pts)-1].T == end.Unix() {
			unmapped = true
		}
		out = append(out, pts...)
	}
	slices.SortFunc(out, func(a, b Point) int { return cmp.Compare(a.T, b.T) })
	return out, unmapped
}

// A NaN or infinite sample (PromQL's answer to 0/0, e.g. a mean over a window with no observations) is
// no figure: it is left out, as a gap, so that no answer carries a value JSON cannot hold.
func points(s *model.SampleStream) []Point {
	out := make([]Point, 0, len(s.Values))
	for _, v := range s.Values {
		if f := float64(v.Value); !math.IsNaN(f) && !math.IsInf(f, 0) {
			out = append(out, Point{T: v.Timestamp.Unix(), V: f})
		}
	}
	return out
}

// lastAt is the value of the point at the end of the window.
func lastAt(pts []Point, end time.Time) (float64, bool) {
	if len(pts) == 0 || pts[len(pts)-1].T != end.Unix() {
		return 0, false
	}
	return pts[len(pts)-1].V, true
}

// GrafanaURL links to the Ray dashboard in Grafana for the window (and one cluster when given); "" when
// no Grafana is configured.
func GrafanaURL(base, uid string, w Window, cluster string) string {
	if base == "" {
		return ""
	}
	u := fmt.Sprintf("%s/d/%s/?from=%d&to=%d", strings.TrimSuffix(base, "/"), uid, w.Start.UnixMilli(), w.End.UnixMilli())
	if cluster != "" {
		u += "&var-Cluster=" + cluster
	}
	return u
}

// GrafanaGPUExpression is the GPUs in use by each Ray cluster the chart's Grafana dashboard's variable
// Cluster selects, in device equivalents, read as the overview reads them (a MIG instance's too).
func GrafanaGPUExpression() string {
	return `sum by (namespace, created_by_name) (` + GPUsInUseByPod() +
		` * on(namespace, pod) group_left(created_by_name) max by (namespace, pod, created_by_name) (kube_pod_info{created_by_kind="RayCluster", created_by_name=~"$Cluster"}))`
}
