package ray

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Node types of the pods an object shows.
const (
	NodeTypeHead      = "head"
	NodeTypeWorker    = "worker"
	NodeTypeSubmitter = "submitter"
	// SubmitterContainer is the container of a RayJob's submitter pod (K8sJobMode), and of the sidecar
	// KubeRay adds to its head pod in SidecarMode (utils/constant.go:356, v1.6.2-v1.7.0).
	SubmitterContainer = "ray-job-submitter"
	// JobNameLabel is set by Kubernetes on the pods of a Job, naming it: a RayJob's submitter Job.
	JobNameLabel = "batch.kubernetes.io/job-name"
)

// ContainerInfo is one container of a pod.
type ContainerInfo struct {
	Name     string `json:"name"`
	Image    string `json:"image"`
	State    string `json:"state" example:"running"`
	Reason   string `json:"reason,omitempty" example:"CrashLoopBackOff"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
}

// PodInfo is one pod of a Ray object.
type PodInfo struct {
	Name       string          `json:"name"`
	NodeType   string          `json:"nodeType" example:"head"`
	Group      string          `json:"group" example:"headgroup"`
	Cluster    string          `json:"cluster,omitempty"`
	Phase      string          `json:"phase" example:"Running"`
	Ready      bool            `json:"ready"`
	Restarts   int32           `json:"restarts"`
	Node       string          `json:"node"`
	IP         string          `json:"ip"`
	StartTime  *time.Time      `json:"startTime,omitempty"`
	Containers []ContainerInfo `json:"containers"`
}

// ObjectClusters returns the Ray clusters an instance runs on, the current one first.
func (k *Kind) ObjectClusters(o *unstructured.Unstructured) []string {
	s := k.Summarize(o)
	return k.Clusters(&s)
}

// PodSelectors are the label selectors of the pods of an object named name that runs on the Ray
// clusters named: theirs, and its submitter Job's. A name that is no label value (past 63 characters:
// Kubernetes allows 253 in an object's name) names no pod, and is left out: the apiserver refuses a
// selector with it.
func (k *Kind) PodSelectors(name string, clusters []string) []string {
	var selectors []string
	labelled := make([]string, 0, len(clusters))
	for _, c := range clusters {
		if isLabelValue(c) {
			labelled = append(labelled, c)
		}
	}
	if len(labelled) > 0 {
		selectors = append(selectors, RayClusterLabel+" in ("+strings.Join(labelled, ",")+")")
	}
	if k.HasSubmitter && isLabelValue(name) {
		selectors = append(selectors, JobNameLabel+"="+name)
	}
	return selectors
}

// isLabelValue tells whether s can be the value of a label (an object's name always has a label
// value's characters; only its length can be too much).
func isLabelValue(s string) bool {
	return len(validation.IsValidLabelValue(s)) == 0
}

// SortPods puts head pods first, then workers, then submitters, each by name.
func SortPods(pods []corev1.Pod) {
	rank := map[string]int{NodeTypeHead: 0, NodeTypeWorker: 1, NodeTypeSubmitter: 2}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := nodeType(&pods[i]), nodeType(&pods[j])
		if a != b {
			return rank[a] < rank[b]
		}
		return pods[i].Name < pods[j].Name
	})
}

func nodeType(p *corev1.Pod) string {
	if t := p.Labels[RayNodeTypeLabel]; t != "" {
		return t
	}
	if p.Labels[JobNameLabel] != "" {
		return NodeTypeSubmitter
	}
	return NodeTypeWorker
}

// Info describes a pod for the pods route.
func Info(p *corev1.Pod) PodInfo {
	info := PodInfo{Name: p.Name, NodeType: nodeType(p), Group: p.Labels[RayGroupLabel], Cluster: p.Labels[RayClusterLabel],
		Phase: string(p.Status.Phase), Ready: podReady(p), Node: p.Spec.NodeName, IP: p.Status.PodIP, Containers: []ContainerInfo{}}
	if info.NodeType == NodeTypeSubmitter {
		info.Group = "submitter"
	}
	if p.Status.StartTime != nil {
		t := p.Status.StartTime.UTC()
		info.StartTime = &t
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, cs := range p.Status.ContainerStatuses {
		statuses[cs.Name] = cs
	}
	for _, c := range p.Spec.Containers {
		ci := ContainerInfo{Name: c.Name, Image: c.Image, State: "waiting"}
		if cs, ok := statuses[c.Name]; ok {
			ci.Ready, ci.Restarts = cs.Ready, cs.RestartCount
			info.Restarts += cs.RestartCount
			switch {
			case cs.State.Running != nil:
				ci.State = "running"
			case cs.State.Terminated != nil:
				ci.State, ci.Reason = "terminated", cs.State.Terminated.Reason
			case cs.State.Waiting != nil:
				ci.Reason = cs.State.Waiting.Reason
			}
		}
		info.Containers = append(info.Containers, ci)
	}
	return info
}

// LogTarget picks the pod and container whose logs are asked for, among the pods of object o. pod and
// container may be empty: the defaults are a RayJob's submitter (container ray-job-submitter), else the
// head pod of the cluster o runs on now (a RayService's active one) and its first container. A pod or
// container that is not the object's is BadRequest; a container that has not started is Conflict,
// naming why.
func (k *Kind) LogTarget(o *unstructured.Unstructured, pods []corev1.Pod, pod, container string) (*corev1.Pod, string, error) {
	current := ""
	if clusters := k.ObjectClusters(o); len(clusters) > 0 {
		current = clusters[0]
	}
	return k.LogTargetOn(current, pods, pod, container)
}

// LogTargetOn is LogTarget for an object that runs on the Ray cluster current now.
func (k *Kind) LogTargetOn(current string, pods []corev1.Pod, pod, container string) (*corev1.Pod, string, error) {
	var target *corev1.Pod
	switch {
	case pod != "":
		for i := range pods {
			if pods[i].Name == pod {
				target = &pods[i]
			}
		}
		if target == nil {
			return nil, "", apierrors.NewBadRequest(fmt.Sprintf("pod %q is not a pod of this %s: see its pods", pod, k.Kind))
		}
	default:
		for i := range pods {
			if nodeType(&pods[i]) == NodeTypeSubmitter && target == nil {
				target = &pods[i]
			}
		}
		for i := range pods {
			if nodeType(&pods[i]) == NodeTypeHead && pods[i].Labels[RayClusterLabel] == current && target == nil {
				target = &pods[i]
			}
		}
		if target == nil {
			return nil, "", apierrors.NewNotFound(corev1.Resource("pods"), "head pod of "+k.Kind)
		}
	}
	if container == "" {
		container = target.Spec.Containers[0].Name
		for _, c := range target.Spec.Containers {
			if c.Name == SubmitterContainer {
				container = c.Name
			}
		}
	}
	found := false
	for _, c := range append(append([]corev1.Container{}, target.Spec.InitContainers...), target.Spec.Containers...) {
		found = found || c.Name == container
	}
	if !found {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("pod %s has no container %q", target.Name, container))
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, target.Status.InitContainerStatuses...), target.Status.ContainerStatuses...) {
		if cs.Name == container && cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil {
			return nil, "", apierrors.NewConflict(corev1.Resource("pods"), target.Name,
				fmt.Errorf("container %s has not started yet: %s %s", container, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		}
	}
	if target.Status.Phase == corev1.PodPending && len(target.Status.ContainerStatuses) == 0 {
		return nil, "", apierrors.NewConflict(corev1.Resource("pods"), target.Name,
			fmt.Errorf("the pod has not started yet (Pending)"))
	}
	return target, container, nil
}
