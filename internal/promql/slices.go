package promql

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"ray-service/internal/accel"
)

// What the exporters write of sliced devices, and how the service turns it into device equivalents in
// use, the unit the allocated figures count in (package accel).
//
// NVIDIA MIG. dcgm-exporter (NVIDIA/dcgm-exporter 4.5.3-4.8.2) monitors, by default, every GPU instance
// of a MIG-enabled GPU (pkg/cmd/app.go, device selection "f"), a series per instance with the labels
// GPU_I_PROFILE ("3g.40gb") and GPU_I_ID beside the parent GPU's gpu and UUID
// (internal/pkg/rendermetrics/render_metrics.go). DCGM_FI_DEV_GPU_UTIL is not measured on a MIG instance
// (the maintainers, NVIDIA/dcgm-exporter issues 216 and 430: "Use DCGM_FI_PROF_GR_ENGINE_ACTIVE ... which
// is reported for MIG devices"); DCGM_FI_PROF_GR_ENGINE_ACTIVE is, a gauge, "Ratio of time the graphics
// engine is active" (etc/default-counters.csv), 0 to 1. Whole GPUs are read from DCGM_FI_DEV_GPU_UTIL
// without GPU_I_PROFILE; MIG instances from DCGM_FI_PROF_GR_ENGINE_ACTIVE with it, never both.
//
// Assumption: GR_ENGINE_ACTIVE of a MIG instance is taken as a share of that instance (a ratio of the
// time its own engines are busy: DCGM profiles each GPU instance as an entity of its own, as the
// instance's own series say), so an instance busy all the time is worth its share of the GPU, its
// compute slices over the GPU's (3g of a 7-slice H100: 3/7). No source we found says whether DCGM
// normalises it to the instance or to the whole GPU; were it the GPU's, these figures would be low by
// the instance's share.
//
// Ascend vNPUs. npu-exporter (Ascend/mind-cluster v26.1.0 component/npu-exporter
// collector/metrics/collector_for_vnpu.go) writes vnpu_pod_aicore_utilization (percent of the vNPU),
// vnpu_pod_total_memory and vnpu_pod_used_memory (KB), gauges labelled id, model_name, v_dev_id,
// aicore_count (the vNPU's AI cores, two decimals: "2.00"), namespace, pod_name, container_name and
// is_virtual, for Ascend 310P chips only (supportedVnpuDevices): for a vNPU of a 910 it writes none. A
// 310P chip has 8 AI cores (docs/en/scheduling/usage/virtual_instance/virtual_instance_with_hdk/
// 03_virtualization_templates.md, Table 1): a vNPU in use is worth aicore_count/8 of a chip times its
// utilization.

const (
	// migInstance picks dcgm-exporter's series of MIG instances; wholeGPU its series of whole GPUs.
	migInstance = `GPU_I_PROFILE!=""`
	wholeGPU    = `GPU_I_PROFILE=""`
	// migActive is the MIG instances' utilization, a ratio.
	migActive = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
	// vnpuUtilization, vnpuUsedMemory are npu-exporter's vNPU series (percent, KB).
	vnpuUtilization = "vnpu_pod_aicore_utilization"
	vnpuUsedMemory  = "vnpu_pod_used_memory"
	// vnpuChipCores is the AI cores of a 310P chip, the only chip whose vNPUs npu-exporter writes.
	vnpuChipCores = 8
	// vnpuSeriesFor says where npu-exporter writes its vNPU series, for warnings.
	vnpuSeriesFor = "npu-exporter writes its vNPU series (vnpu_pod_aicore_utilization) for vNPUs of Ascend 310P chips only " +
		"(mind-cluster v26.1.0 component/npu-exporter collector/metrics/collector_for_vnpu.go), none for vNPUs of a 910"
)

// byPodWhere is byPod of metric's series that match the matchers where too.
func byPodWhere(metric, where string, ways []podLabels) string {
	sels := make([]string, 0, len(ways))
	for _, w := range ways {
		e := metric + "{" + where + "," + w.match + "}"
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

// table is a vector of constants, one for each set of labels: what a series joined on those labels
// multiplies by.
func table(rows map[string]float64, labels ...string) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range rows {
			if !yield(k) {
				return
			}
		}
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		e := "vector(" + strconv.FormatFloat(rows[k], 'g', -1, 64) + ")"
		for i, v := range strings.Split(k, "|") {
			e = `label_replace(` + e + `, "` + labels[i] + `", "` + v + `", "", "")`
		}
		parts = append(parts, e)
	}
	return "(" + strings.Join(parts, " or ") + ")"
}

// migShares are the shares of its GPU a MIG instance is, by its compute slices (g of GPU_I_PROFILE
// "<g>g.<memory>gb") and its GPU's: 4 on an A30 and the RTX PRO Blackwell GPUs, 7 on every other MIG
// GPU (package accel, from NVIDIA's MIG user guide and NVIDIA/mig-parted v0.15.0). dcgm-exporter's
// modelName says the GPU ("NVIDIA A30").
func migShares(series string) string {
	rows := map[string]float64{}
	for _, total := range []int{4, 7} {
		for g := 1; g <= total; g++ {
			rows[strconv.Itoa(g)+"|"+strconv.Itoa(total)] = float64(g) / float64(total)
		}
	}
	withSlices := `label_replace(label_replace(label_replace(` + series + `, "mig_g", "$1", "GPU_I_PROFILE", "([0-9]+)g\\..*"), ` +
		`"mig_total", "7", "", ""), "mig_total", "4", "modelName", ".*(A30|RTX PRO).*")`
	return `(` + withSlices + ` * on(mig_g, mig_total) group_left() ` + table(rows, "mig_g", "mig_total") + `)`
}

// vnpuShares are the shares of a 310P chip a vNPU is, by its aicore_count.
func vnpuShares(series string) string {
	rows := map[string]float64{}
	for c := 1; c <= vnpuChipCores; c++ {
		rows[strconv.Itoa(c)] = float64(c) / vnpuChipCores
	}
	withCores := `label_replace(` + series + `, "vnpu_cores", "$1", "aicore_count", "0*([0-9]+)(\\.0*)?")`
	return `(` + withCores + ` * on(vnpu_cores) group_left() ` + table(rows, "vnpu_cores") + `)`
}

// GPUsInUseByPod is the GPUs in use by each pod, in device equivalents: a whole GPU's utilization
// (DCGM_FI_DEV_GPU_UTIL, percent) over 100, and a MIG instance's GR_ENGINE_ACTIVE times its share of its
// GPU; labelled with the namespace and pod each is assigned to, however the exporter was scraped.
func GPUsInUseByPod() string {
	return `(` + byPodWhere("DCGM_FI_DEV_GPU_UTIL", wholeGPU, dcgmPods) + ` / 100 or ` +
		migShares(byPodWhere(migActive, migInstance, dcgmPods)) + `)`
}

// NPUsInUseByPod is the NPUs in use by each pod, in device equivalents: a whole chip's utilization
// (container_npu_utilization, percent) over 100, and a vNPU's (vnpu_pod_aicore_utilization, percent of
// the vNPU) over 100 times its share of the chip.
func NPUsInUseByPod() string {
	return `(` + byPod("container_npu_utilization", npuPods) + ` / 100 or ` +
		vnpuShares(byPod(vnpuUtilization, npuPods)) + ` / 100)`
}

// gpuPresence and npuPresence are series the exporters write whether or not a pod uses a device: what
// tells them scraped.
const (
	gpuPresence = `{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_PROF_GR_ENGINE_ACTIVE"}`
	npuPresence = npuChipSeries
)

// allocatedShares are what one unit of each accelerator resource is worth in the allocated series, by
// its kube-state-metrics name: 1 for whole devices, and for every resource the Ray pods in scope hold
// at the end of the window what the allocated totals value it at (their devices over their count, the
// pods valued on their nodes). kube-state-metrics writes a request, not the node's labels, so a slice
// no Ray pod in scope holds at the end of the window has no value here and is left out of the series.
func allocatedShares(kind accel.Kind, held accel.Holdings) map[string]float64 {
	shares := map[string]float64{}
	switch kind {
	case accel.GPU:
		shares[ksmName("nvidia.com/gpu")] = 1
	case accel.NPU:
		for _, n := range accel.WholeNPUResources() {
			shares[ksmName(n)] = 1
		}
	}
	count, devices := map[string]float64{}, map[string]float64{}
	for _, h := range held {
		if h.Kind == kind {
			count[h.Resource] += h.Count
			devices[h.Resource] += h.Devices
		}
	}
	for r, n := range count {
		if n > 0 {
			shares[ksmName(r)] = devices[r] / n
		}
	}
	return shares
}

// ksmName is a resource's name as kube-state-metrics labels it: each character outside [a-zA-Z0-9_] an
// underscore (kube-state-metrics v2.20.0 internal/store/utils.go).
func ksmName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// requestedDevices sums the requests of Ray pods in scope, Pending or Running, of the resources shares
// names, each times its share: device equivalents.
func requestedDevices(p parts, shares map[string]float64) string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range shares {
			if !yield(k) {
				return
			}
		}
	})
	return `sum(kube_pod_container_resource_requests{resource=~"` + strings.Join(names, "|") + `"` + p.ns + `} * on(resource) group_left() ` +
		table(shares, "resource") + ` * on(namespace, pod) group_left() ` + p.rayPods +
		` * on(namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"` + p.ns + `} == 1))`
}

// unmeasuredVNPUs are, by resource, the vNPU slices Ray pods in scope request (Pending or Running) on
// pods npu-exporter writes no vNPU series of.
func unmeasuredVNPUs(p parts) string {
	return `sum by (resource) ((kube_pod_container_resource_requests{` + vnpuSlices + p.ns + `} * on(namespace, pod) group_left() ` + p.rayPods +
		` * on(namespace, pod) group_left() max by (namespace, pod) (kube_pod_status_phase{phase=~"Pending|Running"` + p.ns + `} == 1)) unless on(namespace, pod) ` +
		byPod(vnpuUtilization, npuPods) + `)`
}

// vnpuWarnings says, for each vNPU resource whose use no series measures, what is not counted; and
// the device equivalents they are worth.
func vnpuWarnings(unmeasured map[string]float64, held accel.Holdings) ([]string, float64) {
	shares := allocatedShares(accel.NPU, held)
	var out []string
	var devices float64
	names := slices.SortedFunc(func(yield func(string) bool) {
		for k := range unmeasured {
			if !yield(k) {
				return
			}
		}
	}, cmp.Compare[string])
	for _, r := range names {
		n := unmeasured[r]
		if n <= 0 {
			continue
		}
		share := shares[r]
		devices += n * share
		out = append(out, fmt.Sprintf("used npu: Ray pods in scope hold %g vNPU slices of %s (as kube-state-metrics names the "+
			"resource) that no series of npu-exporter measures, so their use is not counted in used npu and npuMemoryBytes: %s",
			n, r, vnpuSeriesFor))
	}
	return out, devices
}

// claimWarnings says what the series leave out of the devices Ray pods in scope hold through resource
// claims (Dynamic Resource Allocation): kube-state-metrics writes pods' requests, and no claim's
// allocation, so the allocated series have none of them (the totals do); dcgm-exporter labels a claimed
// GPU's series with its pod only where it runs with --kubernetes-enable-dra (dcgm-exporter 4.5.3-4.8.2,
// pkg/cmd/app.go:101, internal/pkg/transformation/kubernetes.go:454-500), so used gpu counts them only there.
func claimWarnings(held accel.Holdings) []string {
	var claimed float64
	var classes []string
	for _, h := range held {
		if h.Kind == accel.GPU && strings.HasPrefix(h.Resource, accel.DRAPrefix) {
			claimed += h.Devices
			if c := strings.TrimPrefix(h.Resource, accel.DRAPrefix); !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
	}
	if claimed == 0 {
		return nil
	}
	return []string{fmt.Sprintf("allocated gpu: Ray pods in scope hold %g GPUs through resource claims (device classes %s), "+
		"counted in the totals but not in the series (kube-state-metrics writes pods' requests, not claims' allocations); "+
		"used gpu counts their use where dcgm-exporter runs with --kubernetes-enable-dra, which labels their series with the pod",
		claimed, strings.Join(classes, ", "))}
}
