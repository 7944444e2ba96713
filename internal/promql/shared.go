package promql

import "time"

// The helpers the queries of several features share: the idle detection's (internal/idle) and the
// utilization accounting's (clusteruse.go) ask by Ray cluster, over the same pods.

// RayClusterPods is 1 for each (namespace, pod) of a Ray cluster, labelled with the cluster's name
// (kube-state-metrics' kube_pod_info: created_by_name of a pod a RayCluster owns).
const RayClusterPods = `max by (namespace, pod, created_by_name) (kube_pod_info{created_by_kind="RayCluster"})`

// RateWindow is the range of a CPU rate sampled every step: four steps, at least 20 s (a few scrapes).
func RateWindow(step time.Duration) time.Duration { return max(4*step, 20*time.Second) }

// GPUUtilizationByPod is the utilization of each GPU (percent), labelled with the namespace and pod it
// is assigned to, however the exporter was scraped (dcgmPods): DCGM exporter's DCGM_FI_DEV_GPU_UTIL of a
// whole GPU, and of a MIG instance its DCGM_FI_PROF_GR_ENGINE_ACTIVE (a ratio, times 100), the busy
// share of the instance itself (slices.go), as the idle detection judges each device the pod holds.
func GPUUtilizationByPod() string {
	return `(` + byPodWhere("DCGM_FI_DEV_GPU_UTIL", wholeGPU, dcgmPods) + ` or ` + byPodWhere(migActive, migInstance, dcgmPods) + ` * 100)`
}

// NPUUtilizationByPod is the utilization of each NPU (percent), labelled with the namespace and pod it
// is assigned to, however the exporter was scraped (npuPods): npu-exporter's container_npu_utilization
// of a whole chip and vnpu_pod_aicore_utilization of a vNPU (percent of the vNPU; written for 310P only).
func NPUUtilizationByPod() string {
	return `(` + byPod("container_npu_utilization", npuPods) + ` or ` + byPod(vnpuUtilization, npuPods) + `)`
}
