package ray

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"ray-service/internal/accel"
)

// Object types: an instance is handed to KubeRay; a template is a stored manifest (a ConfigMap).
const (
	TypeInstance = "instance"
	TypeTemplate = "template"
)

// Normalized statuses (see API.md, "Status").
const (
	StatusPending   = "Pending"
	StatusRunning   = "Running"
	StatusRetrying  = "Retrying"
	StatusUpgrading = "Upgrading"
	// StatusRollingBack: a RayService's upgrade is being undone (RollbackInProgress, KubeRay v1.6).
	StatusRollingBack = "RollingBack"
	StatusStopping    = "Stopping"
	StatusStopped     = "Stopped"
	StatusSucceeded   = "Succeeded"
	StatusFailed      = "Failed"
)

// DeletionRule is one rule of a RayJob's deletionStrategy (KubeRay v1.6 apis/ray/v1/rayjob_types.go):
// once the job ends as On says, the operator applies Policy after TTLSeconds from its end time.
type DeletionRule struct {
	// Policy is DeleteCluster, DeleteWorkers, DeleteSelf or DeleteNone, cut to 128 bytes.
	Policy string `json:"policy"`
	// On is the ending the rule waits for: a job status (SUCCEEDED, FAILED) or the deployment status
	// Failed, cut to 128 bytes.
	On         string `json:"on"`
	TTLSeconds int64  `json:"ttlSeconds"`
}

// MaxDeletionRules is how many deletion rules a summary lists.
const MaxDeletionRules = 16

// RolloutCluster is one Ray cluster of a RayService's incremental upgrade (activeServiceStatus or
// pendingServiceStatus: targetCapacity, trafficRoutedPercent, lastTrafficMigratedTime; KubeRay v1.5+).
type RolloutCluster struct {
	// Role is "active" (serving before the upgrade) or "pending" (the one upgraded to).
	Role string `json:"role" enums:"active,pending"`
	// Cluster is the RayCluster's name, cut to 253 bytes.
	Cluster string `json:"cluster"`
	// TargetCapacity is the percentage of its Serve replicas' capacity the cluster is asked to hold.
	TargetCapacity *int64 `json:"targetCapacity,omitempty"`
	// TrafficPercent is the percentage of requests routed to it.
	TrafficPercent      *int64     `json:"trafficPercent,omitempty"`
	LastTrafficMigrated *time.Time `json:"lastTrafficMigrated,omitempty"`
}

// Resources are requested amounts: CPU in cores, memory in bytes, GPUs and NPUs in device equivalents
// (a slice counted as its share of a device: package accel), with the raw counts of each accelerator
// resource beside them.
type Resources struct {
	CPU         float64 `json:"cpu"`
	MemoryBytes int64   `json:"memoryBytes"`
	// GPU is in whole GPUs: a MIG instance counts as its compute slices over its GPU's (3g.40gb: 3/7), a
	// shared GPU's replica as one over its replicas.
	GPU float64 `json:"gpu" example:"0.5"`
	// NPU is in whole chips: a vNPU counts as its AI cores over its chip's (Ascend910-4c of a 32-core chip:
	// 1/8).
	NPU float64 `json:"npu" example:"1"`
	// Accelerators are the raw counts per accelerator resource and model, with what each is worth.
	// Devices allocated through Dynamic Resource Allocation are held as "dra:<device class>" (see
	// accel.DRAPrefix): a pod's claims as allocated (Model the device's productName), a template's as its
	// claim templates ask (exactly.count devices of the class, Model empty), or as its pods' claims were
	// allocated where that is more.
	Accelerators accel.Holdings `json:"accelerators,omitempty"`
	// claims are the claims one pod of a group's template names, and its pods (WithClaims counts them).
	claims *podClaims
}

// podClaims are the resource claims of a pod template and how many pods it makes.
type podClaims struct {
	list []corev1.PodResourceClaim
	pods int64
}

func claimsOf(pod corev1.PodSpec, pods int64) *podClaims {
	if len(pod.ResourceClaims) == 0 {
		return nil
	}
	return &podClaims{list: pod.ResourceClaims, pods: pods}
}

// Add adds n times r2 to r.
func (r *Resources) Add(r2 Resources, n int64) {
	r.CPU += r2.CPU * float64(n)
	r.MemoryBytes += r2.MemoryBytes * n
	r.GPU += r2.GPU * float64(n)
	r.NPU += r2.NPU * float64(n)
	if len(r2.Accelerators) > 0 {
		held := slices.Clone(r.Accelerators) // r's may be shared with the summary it was copied from
		held.AddAll(r2.Accelerators, float64(n))
		r.Accelerators = held
	}
}

// HeadSummary is what a list shows of the head group.
type HeadSummary struct {
	Resources Resources `json:"resources"`
	// RayResources are the Ray logical resources one head pod offers (CPU, GPU, memory, custom; at most
	// 16, names cut to 64 bytes).
	RayResources Logical `json:"rayResources,omitempty" swaggertype:"object,number"`
}

// WorkerGroup is what a list shows of a worker group.
type WorkerGroup struct {
	// Name is the group's name, cut to 253 bytes.
	Name          string `json:"name"`
	Replicas      int64  `json:"replicas"`
	MinReplicas   int64  `json:"minReplicas"`
	MaxReplicas   int64  `json:"maxReplicas"`
	ReadyReplicas int64  `json:"readyReplicas"`
	// Priority is the group's priority (KubeRay v1.7.0 WorkerGroupSpec.priority): the autoscaler
	// prefers groups of higher priority to scale up (Ray Autoscaler v2, Ray 2.56 and later). Absent where
	// unset (0).
	Priority *int64 `json:"priority,omitempty"`
	// Resources are the requests of one pod of the group.
	Resources Resources `json:"resources"`
	// RayResources are the Ray logical resources one pod of the group offers (at most 16, names cut to
	// 64 bytes).
	RayResources Logical `json:"rayResources,omitempty" swaggertype:"object,number"`
}

// Summary is a list item: the same fields for every kind, plus a few per kind. What it takes from the
// object is bounded (see bounds.go): a longer string is cut and ends with "…".
type Summary struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Type      string `json:"type"`
	// Status is normalized per kind (API.md, "Status"). A RayService is Upgrading while
	// UpgradeInProgress is True, and RollingBack while RollbackInProgress is True (KubeRay v1.6: its
	// spec changed again mid-upgrade and traffic returns to the active cluster).
	Status string `json:"status" enums:"Pending,Running,Retrying,Upgrading,RollingBack,Stopping,Stopped,Succeeded,Failed"`
	// RayVersion is spec.rayVersion, cut to 128 bytes.
	RayVersion string `json:"rayVersion"`
	// Creator is the annotation ray.openfuyao.com/creator, cut to 256 bytes.
	Creator string `json:"creator"`
	// CreatorSigned says whether the service wrote the creator (signed, at a create made through it,
	// for this very object: its UID); false where anyone who may edit the object could have set it, or
	// copied it from another object, and for an object started from a template, or a template, of an
	// object whose creator was not signed.
	CreatorSigned bool      `json:"creatorSigned"`
	CreatedAt     time.Time `json:"createdAt"`
	// DeletingSince is metadata.deletionTimestamp: a delete was accepted, and the object stays until the
	// finalizers on it are done (KubeRay's, on a RayJob, a RayService from v1.6.2, a RayCluster with GCS
	// fault tolerance). No action is allowed meanwhile.
	DeletingSince *time.Time `json:"deletingSince,omitempty"`
	// Image is the head's first container's image, cut to 512 bytes.
	Image string      `json:"image"`
	Head  HeadSummary `json:"head"`
	// WorkerGroups are the first 64 worker groups (Requested counts them all).
	WorkerGroups []WorkerGroup `json:"workerGroups"`
	// Requested totals the head and every worker replica.
	Requested Resources `json:"requested"`
	// Options are the cluster spec's options a user should know of (authentication, mTLS, GCS fault
	// tolerance, network policy, history collector, ingress); absent where it sets none.
	Options *ClusterOptions `json:"options,omitempty"`

	// RayJob only. JobStatus is status.jobStatus, cut to 128 bytes.
	JobStatus string `json:"jobStatus,omitempty"`
	// JobDeploymentStatus is status.jobDeploymentStatus, cut to 128 bytes.
	JobDeploymentStatus string `json:"jobDeploymentStatus,omitempty"`
	// Entrypoint is spec.entrypoint, cut to 4096 bytes (the manifest holds it whole).
	Entrypoint string `json:"entrypoint,omitempty"`
	// SubmissionMode is spec.submissionMode, cut to 128 bytes.
	SubmissionMode string     `json:"submissionMode,omitempty"`
	StartTime      *time.Time `json:"startTime,omitempty"`
	EndTime        *time.Time `json:"endTime,omitempty"`
	// RayClusterName is the RayJob's Ray cluster, cut to 253 bytes.
	RayClusterName string `json:"rayClusterName,omitempty"`
	// PreRunningDeadlineSeconds is spec.preRunningDeadlineSeconds (KubeRay v1.6): how long it may take
	// from its start to Running before the operator fails it (PreRunningDeadlineExceeded).
	PreRunningDeadlineSeconds *int64 `json:"preRunningDeadlineSeconds,omitempty"`
	// DeletionRules are what the operator deletes once it ends (spec.deletionStrategy: its
	// deletionRules, or the older onSuccess/onFailure), at most 16.
	DeletionRules []DeletionRule `json:"deletionRules,omitempty"`

	// RayCronJob only: its schedule, the last and the next runs.
	Schedule *CronSchedule `json:"schedule,omitempty"`
	// Runs are what its runs (the RayJobs it made) are doing: how many, how many active, the newest,
	// and the last outcome.
	Runs *RunsState `json:"runs,omitempty"`

	// RayService only. ServiceStatus is status.serviceStatus, cut to 128 bytes.
	ServiceStatus string `json:"serviceStatus,omitempty"`
	// ActiveRayClusterName is the Ray cluster serving, cut to 253 bytes.
	ActiveRayClusterName string `json:"activeRayClusterName,omitempty"`
	// PendingRayClusterName is the Ray cluster being prepared, cut to 253 bytes.
	PendingRayClusterName string `json:"pendingRayClusterName,omitempty"`
	NumServeEndpoints     *int64 `json:"numServeEndpoints,omitempty"`
	// UpgradeStrategy is spec.upgradeStrategy.type (NewCluster, NewClusterWithIncrementalUpgrade, None;
	// "" for the operator's default, NewCluster), cut to 128 bytes.
	UpgradeStrategy string `json:"upgradeStrategy,omitempty"`
	// Rollout is where an incremental upgrade stands: each cluster's role, target capacity and share of
	// traffic, as the operator reports them. Absent where it reports none.
	Rollout []RolloutCluster `json:"rollout,omitempty"`

	// Scheduling is where the object stands with the queue manager that admits it (Volcano), absent
	// where none manages it.
	Scheduling *Scheduling `json:"scheduling,omitempty"`
	// Idle is set while the object's Ray cluster is idle: no Ray work over the detection's window while
	// it holds its resources (see the idle detection's settings); absent otherwise, and where the
	// service reads no Prometheus.
	Idle *Idle `json:"idle,omitempty"`

	// Health is derived in the watch cache from the object's status and conditions, its pods and the
	// Warning events about them; its reason is cut to 128 bytes and its message to 1024.
	Health Health `json:"health"`
	// Actions are what the caller may do now (see Kind.Possible); set in list items and details, for
	// each caller, not in the cache.
	Actions []string `json:"actions,omitzero" example:"stop,edit,scale,logs,dashboard"`
	// problems are what holds the object back (see Problems); waiting is the condition that says why
	// it is not ready yet, when nothing is known to hold it back.
	problems []Problem
	waiting  *Health
}

// Summarize computes the summary of an object of kind k from its manifest and status.
func (k *Kind) Summarize(o *unstructured.Unstructured) Summary {
	s := Summary{
		Name:         o.GetName(),
		Namespace:    o.GetNamespace(),
		Kind:         k.Kind,
		Type:         TypeInstance,
		Creator:      o.GetAnnotations()[CreatorKey],
		CreatedAt:    o.GetCreationTimestamp().UTC(),
		WorkerGroups: []WorkerGroup{},
	}
	if dt := o.GetDeletionTimestamp(); dt != nil {
		t := dt.UTC()
		s.DeletingSince = &t
	}
	if spec, ok := nestedMap(o.Object, k.ClusterSpecPath...); ok {
		summarizeClusterSpec(spec, &s, k.devices.Default())
	}
	s.Status = k.StatusOf(o)
	if k.SummarizeOwn != nil {
		k.SummarizeOwn(o, &s)
	}
	k.objectSignals(o, &s)
	k.deriveHealth(&s, nil)
	s.bound()
	return s
}

// WithPods returns the summary completed by what the pods of its current Ray cluster say: ready
// replicas per worker group and, for a kind that fails with its head, Failed when the head pod cannot
// start. When the pods change nothing (none ready, no failing head), it returns base itself.
func (k *Kind) WithPods(base *Summary, pods []*corev1.Pod, warnings []Problem) *Summary {
	var ready map[string]int64
	headFailing := false
	for _, p := range pods {
		if p.Labels[RayNodeTypeLabel] == NodeTypeHead {
			headFailing = headFailing || podFailing(p)
			continue
		}
		if podReady(p) {
			if ready == nil {
				ready = map[string]int64{}
			}
			ready[p.Labels[RayGroupLabel]]++
		}
	}
	failed := k.FailsWithHead && headFailing && (base.Status == StatusPending || base.Status == StatusRunning)
	issues := podProblems(pods)
	if ready == nil && !failed && len(issues) == 0 && len(warnings) == 0 && !slices.ContainsFunc(base.WorkerGroups, func(g WorkerGroup) bool { return g.ReadyReplicas != 0 }) {
		return base
	}
	s := *base
	s.WorkerGroups = slices.Clone(base.WorkerGroups)
	for i := range s.WorkerGroups {
		s.WorkerGroups[i].ReadyReplicas = ready[s.WorkerGroups[i].Name]
	}
	if failed {
		s.Status = StatusFailed
	}
	k.deriveHealth(&s, issues, warnings...)
	s.bound()
	return &s
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failingWaitReasons are waiting reasons from which a container does not recover by itself.
var failingWaitReasons = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// podFailing tells whether a pod cannot run. A submitter sidecar that restarts (KubeRay v1.7's
// SidecarSubmitterRestart gate gives it restartPolicy OnFailure, rayjob_controller.go:619, and the kubelet
// backs its restarts off) is the RayJob's retry, which the RayJob's own status tells; its cluster is not
// failing for it. Without the gate the head pod's restartPolicy is Never and the submitter ends
// Terminated, never in CrashLoopBackOff.
func podFailing(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && failingWaitReasons[cs.State.Waiting.Reason] &&
			(cs.Name != SubmitterContainer || cs.State.Waiting.Reason != "CrashLoopBackOff") {
			return true
		}
	}
	return false
}

// summarizeClusterSpec fills the fields every kind takes from its Ray cluster spec; node is what the
// cluster's nodes agree on of their devices, for what the pods' slices are worth before they are placed.
func summarizeClusterSpec(spec map[string]any, s *Summary, node accel.Node) {
	s.RayVersion, _, _ = unstructured.NestedString(spec, "rayVersion")
	s.Options = clusterOptionsOf(spec)
	if head, ok := nestedMap(spec, "headGroupSpec", "template"); ok {
		pod := podSpecOf(head)
		s.Head.Resources = PodRequestsOn(pod, node, softShared(head))
		s.Head.Resources.claims = claimsOf(pod, 1)
		params, _ := nestedMap(spec, "headGroupSpec", "rayStartParams")
		s.Head.RayResources = LogicalResources(params, pod)
		if len(pod.Containers) > 0 {
			s.Image = pod.Containers[0].Image
		}
		s.Requested.Add(s.Head.Resources, 1)
	}
	groups := nestedSlice(spec, "workerGroupSpecs")
	for _, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			continue
		}
		wg := WorkerGroup{}
		wg.Name, _, _ = unstructured.NestedString(gm, "groupName")
		wg.MinReplicas, _ = nestedInt(gm, "minReplicas")
		wg.MaxReplicas, _ = nestedInt(gm, "maxReplicas")
		replicas, found := nestedInt(gm, "replicas")
		if !found {
			replicas = wg.MinReplicas
		}
		if suspended, _, _ := unstructured.NestedBool(gm, "suspend"); suspended {
			replicas = 0
		}
		numHosts, found := nestedInt(gm, "numOfHosts")
		if !found || numHosts < 1 {
			numHosts = 1
		}
		wg.Replicas = replicas
		if p, _ := nestedInt(gm, "priority"); p != 0 {
			wg.Priority = &p
		}
		if tmpl, ok := nestedMap(gm, "template"); ok {
			pod := podSpecOf(tmpl)
			wg.Resources = PodRequestsOn(pod, node, softShared(tmpl))
			wg.Resources.claims = claimsOf(pod, replicas*numHosts)
			params, _ := nestedMap(gm, "rayStartParams")
			wg.RayResources = LogicalResources(params, pod)
		}
		s.Requested.Add(wg.Resources, replicas*numHosts)
		s.WorkerGroups = append(s.WorkerGroups, wg)
	}
}

// LogicalResources are the logical resources a Ray node started with params offers: num-cpus, num-gpus,
// memory and resources where rayStartParams set them, else what KubeRay derives from the Ray container's
// limits (or requests): CPUs rounded up, GPUs from nvidia.com/gpu, NPUs from huawei.com/Ascend*, memory
// in bytes.
func LogicalResources(params map[string]any, pod corev1.PodSpec) Logical {
	out := map[string]float64{}
	var limits corev1.ResourceList
	if len(pod.Containers) > 0 {
		limits = corev1.ResourceList{}
		c := pod.Containers[0]
		maps.Copy(limits, c.Resources.Requests)
		maps.Copy(limits, c.Resources.Limits)
	}
	if v, ok := paramFloat(params, "num-cpus"); ok {
		out["CPU"] = v
	} else if q, ok := limits[corev1.ResourceCPU]; ok {
		out["CPU"] = float64(q.Value())
	}
	if v, ok := paramFloat(params, "num-gpus"); ok {
		out["GPU"] = v
	} else if q, ok := limits["nvidia.com/gpu"]; ok {
		out["GPU"] = float64(q.Value())
	}
	if v, ok := paramFloat(params, "memory"); ok {
		out["memory"] = v
	} else if q, ok := limits[corev1.ResourceMemory]; ok {
		out["memory"] = float64(q.Value())
	}
	for n, q := range limits {
		if strings.HasPrefix(string(n), "huawei.com/Ascend") {
			out["NPU"] += float64(q.Value())
		}
	}
	if raw, ok := params["resources"].(string); ok {
		// rayStartParams carries custom resources as a JSON object in a string, often with quotes escaped.
		var custom map[string]float64
		if json.Unmarshal([]byte(strings.Trim(strings.ReplaceAll(raw, `\"`, `"`), `'" `)), &custom) == nil {
			maps.Copy(out, custom)
		}
	}
	return NewLogical(out)
}

func paramFloat(params map[string]any, key string) (float64, bool) {
	switch v := params[key].(type) {
	case string:
		f, err := strconv.ParseFloat(strings.Trim(v, `'" `), 64)
		return f, err == nil
	case int64:
		return float64(v), true
	case float64:
		return v, true
	}
	return 0, false
}

// podSpecOf reads of a pod template given as unstructured content what summaries use: each container's
// name, image, requests, limits and restart policy, and the pod's overhead. It reads them in place:
// decoding the whole spec through the unstructured converter took 70 % of an informer's transform,
// which every object of a first list goes through. A field of the wrong type reads as absent; a
// quantity that does not parse is left out, which counts no request for it.
// softShared tells whether a pod template asks whole Ascend chips in percent (accel.SoftShareAnnotation).
func softShared(template map[string]any) bool {
	_, found, _ := unstructured.NestedString(template, "metadata", "annotations", accel.SoftShareAnnotation)
	return found
}

func podSpecOf(template map[string]any) corev1.PodSpec {
	var pod corev1.PodSpec
	spec, ok := nestedMap(template, "spec")
	if !ok {
		return pod
	}
	pod.Containers = containersOf(spec["containers"])
	pod.InitContainers = containersOf(spec["initContainers"])
	pod.Overhead = resourceListOf(spec["overhead"])
	pod.ResourceClaims = podClaimsOf(spec["resourceClaims"])
	return pod
}

// podClaimsOf reads a pod template's resourceClaims (name, resourceClaimName | resourceClaimTemplateName),
// at most MaxPodClaims of them.
func podClaimsOf(v any) []corev1.PodResourceClaim {
	list, _ := v.([]any)
	var out []corev1.PodResourceClaim
	for _, x := range list {
		m, ok := x.(map[string]any)
		if !ok || len(out) == MaxPodClaims {
			continue
		}
		var pc corev1.PodResourceClaim
		pc.Name, _ = m["name"].(string)
		if n, ok := m["resourceClaimName"].(string); ok && n != "" {
			pc.ResourceClaimName = &n
		}
		if n, ok := m["resourceClaimTemplateName"].(string); ok && n != "" {
			pc.ResourceClaimTemplateName = &n
		}
		if pc.ResourceClaimName != nil || pc.ResourceClaimTemplateName != nil {
			out = append(out, pc)
		}
	}
	return out
}

func containersOf(v any) []corev1.Container {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]corev1.Container, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c corev1.Container
		c.Name, _ = m["name"].(string)
		c.Image, _ = m["image"].(string)
		if res, ok := m["resources"].(map[string]any); ok {
			c.Resources.Requests = resourceListOf(res["requests"])
			c.Resources.Limits = resourceListOf(res["limits"])
		}
		if p, ok := m["restartPolicy"].(string); ok {
			policy := corev1.ContainerRestartPolicy(p)
			c.RestartPolicy = &policy
		}
		out = append(out, c)
	}
	return out
}

// resourceListOf reads a resource list: quantities as strings ("500m", "2Gi") or JSON numbers.
func resourceListOf(v any) corev1.ResourceList {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil
	}
	out := make(corev1.ResourceList, len(m))
	for name, q := range m {
		var text string
		switch x := q.(type) {
		case string:
			text = x
		case int64:
			text = strconv.FormatInt(x, 10)
		case int:
			text = strconv.Itoa(x)
		case float64:
			text = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			continue
		}
		if parsed, err := resource.ParseQuantity(text); err == nil {
			out[corev1.ResourceName(name)] = parsed
		}
	}
	return out
}

// PodRequests is the effective request of a pod, as the scheduler counts it: the larger of the largest init
// container and the sum of the app containers, plus the pod overhead. A container without requests counts
// its limits, as the apiserver defaults requests to limits.
func PodRequests(pod corev1.PodSpec) Resources {
	return PodRequestsOn(pod, accel.Node{}, false)
}

// PodRequestsOn is PodRequests of a pod on a node whose labels say what its devices' slices are worth;
// softShare: the pod asks whole Ascend chips in percent of one (accel.SoftShareAnnotation).
func PodRequestsOn(pod corev1.PodSpec, node accel.Node, softShare bool) Resources {
	var app, init Resources
	for _, c := range pod.Containers {
		app.Add(containerRequests(c, node, softShare), 1)
	}
	for _, c := range pod.InitContainers {
		r := containerRequests(c, node, softShare)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar runs beside the app containers for the pod's whole life.
			app.Add(r, 1)
			continue
		}
		init = maxResources(init, r)
	}
	out := maxResources(app, init)
	out.Add(fromList(pod.Overhead, node, softShare), 1)
	return out
}

func containerRequests(c corev1.Container, node accel.Node, softShare bool) Resources {
	list := corev1.ResourceList{}
	maps.Copy(list, c.Resources.Limits)
	maps.Copy(list, c.Resources.Requests)
	return fromList(list, node, softShare)
}

// fromList reads CPU, memory and every GPU and NPU resource package accel knows from a resource list.
func fromList(list corev1.ResourceList, node accel.Node, softShare bool) Resources {
	var r Resources
	for name, q := range list {
		if q.Sign() <= 0 {
			continue // a template may say a negative request (the CRD takes it); it holds nothing
		}
		switch name {
		case corev1.ResourceCPU:
			r.CPU += float64(q.MilliValue()) / 1000
		case corev1.ResourceMemory:
			r.MemoryBytes += q.Value()
		default:
			// The RayCluster CRD takes any key (its resources are additionalProperties), where a pod's
			// resource is a qualified name (k8s.io/apimachinery validation.IsQualifiedName, what the
			// apiserver checks of a pod's): a key no pod may be given holds nothing, and is not carried
			// (its length has no other bound) into the summaries and the utilization's stored keys.
			if u, ok := accel.UnitOf(string(name), node, softShare); ok && len(validation.IsQualifiedName(string(name))) == 0 {
				r.Accelerators.Add(string(name), u, float64(q.Value()))
			}
		}
	}
	r.GPU, r.NPU = r.Accelerators.Devices(accel.GPU), r.Accelerators.Devices(accel.NPU)
	return r
}

func maxResources(a, b Resources) Resources {
	if b.CPU > a.CPU {
		a.CPU = b.CPU
	}
	if b.MemoryBytes > a.MemoryBytes {
		a.MemoryBytes = b.MemoryBytes
	}
	// Init containers run one after another, before the app's: per resource, the larger of the two,
	// as the scheduler counts them.
	if len(b.Accelerators) > 0 {
		a.Accelerators = a.Accelerators.Max(b.Accelerators)
		a.GPU, a.NPU = a.Accelerators.Devices(accel.GPU), a.Accelerators.Devices(accel.NPU)
	}
	return a
}

// statusCondition is one of an object's status.conditions.
type statusCondition struct {
	Status, Reason, Message string
	// Since is its lastTransitionTime, when it has one.
	Since *time.Time
}

// condition returns the named condition in status.conditions, and whether there is one.
func condition(o *unstructured.Unstructured, typ string) (statusCondition, bool) {
	conds := nestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]any)
		if !ok || cm["type"] != typ {
			continue
		}
		var sc statusCondition
		sc.Status, _ = cm["status"].(string)
		sc.Reason, _ = cm["reason"].(string)
		sc.Message, _ = cm["message"].(string)
		if t, err := time.Parse(time.RFC3339, fmt.Sprint(cm["lastTransitionTime"])); err == nil {
			sc.Since = &t
		}
		return sc, true
	}
	return statusCondition{}, false
}

func nestedTime(o *unstructured.Unstructured, fields ...string) *time.Time {
	v, ok, _ := unstructured.NestedString(o.Object, fields...)
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// nestedInt reads an integer field whether it was decoded as int64 (from the apiserver) or as float64
// (from a plain JSON or YAML decoder).
// nestedMap and nestedSlice read a field of unstructured content as unstructured's NestedMap and
// NestedSlice do, without copying it: what summarizes an object only reads it, and a copy of a Ray
// cluster's spec at each read was most of what summarizing cost.
func nestedMap(obj map[string]any, fields ...string) (map[string]any, bool) {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	m, ok := v.(map[string]any)
	return m, ok
}

func nestedSlice(obj map[string]any, fields ...string) []any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	s, _ := v.([]any)
	return s
}

func nestedInt(obj map[string]any, fields ...string) (int64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	}
	return 0, false
}

// revalue values again, on node, the holdings of r whose share was estimated; it tells whether any
// changed. A copy of the holdings is changed, never those r shares with another summary.
func (r *Resources) revalue(node accel.Node) bool {
	changed := false
	for i, h := range r.Accelerators {
		if !h.Estimated || h.Count == 0 {
			continue
		}
		u, ok := accel.UnitOf(h.Resource, node, false)
		if !ok || u.Share*h.Count == h.Devices && u.Exact == !h.Estimated {
			continue
		}
		if !changed {
			r.Accelerators = slices.Clone(r.Accelerators)
			changed = true
		}
		r.Accelerators[i].Devices, r.Accelerators[i].Estimated = u.Share*h.Count, !u.Exact
		if r.Accelerators[i].Model == "" {
			r.Accelerators[i].Model = u.Model
		}
	}
	if changed {
		r.GPU, r.NPU = r.Accelerators.Devices(accel.GPU), r.Accelerators.Devices(accel.NPU)
	}
	return changed
}

// WithDevices returns the summary with the device equivalents of its estimated holdings valued on
// node, what the cluster's nodes agree on now (its pods' templates name no node): base itself where
// that changes nothing.
func WithDevices(base *Summary, node accel.Node) *Summary {
	s := *base
	changed := s.Head.Resources.revalue(node)
	changed = s.Requested.revalue(node) || changed
	cloned := false
	for i := range s.WorkerGroups {
		r := s.WorkerGroups[i].Resources
		if r.revalue(node) {
			if !cloned {
				s.WorkerGroups, cloned = slices.Clone(s.WorkerGroups), true
			}
			s.WorkerGroups[i].Resources = r
			changed = true
		}
	}
	if !changed {
		return base
	}
	return &s
}
