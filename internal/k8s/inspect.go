package k8s

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Node types of the pods an object shows.
const (
	NodeTypeHead      = "head"
	NodeTypeWorker    = "worker"
	NodeTypeSubmitter = "submitter"
	// SubmitterContainer is the container of a RayJob's submitter pod (K8sJobMode).
	SubmitterContainer = "ray-job-submitter"
	jobNameLabel       = "batch.kubernetes.io/job-name"
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

// clustersOf returns the Ray clusters an instance runs on, the current one first.
func (k *Kind) clustersOf(o *unstructured.Unstructured) []string {
	s := k.Summarize(o)
	return k.Clusters(&s)
}

// Pods lists the pods of an instance: those of its Ray clusters and of a submitter Job. Head pods come
// first, then workers, then submitters, each by name.
func (o *Objects) Pods(ctx context.Context, obj *unstructured.Unstructured) ([]corev1.Pod, error) {
	ns := obj.GetNamespace()
	var pods []corev1.Pod
	for _, sel := range o.Kind.podSelectors(obj.GetName(), o.Kind.clustersOf(obj)) {
		list, err := o.Clients.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		pods = append(pods, list.Items...)
	}
	sortPods(pods)
	return pods, nil
}

// podSelectors are the label selectors of the pods of an object named name that runs on the Ray
// clusters named: theirs, and its submitter Job's.
func (k *Kind) podSelectors(name string, clusters []string) []string {
	var selectors []string
	if len(clusters) > 0 {
		selectors = append(selectors, RayClusterLabel+" in ("+strings.Join(clusters, ",")+")")
	}
	if k.hasSubmitter {
		selectors = append(selectors, jobNameLabel+"="+name)
	}
	return selectors
}

// sortPods puts head pods first, then workers, then submitters, each by name.
func sortPods(pods []corev1.Pod) {
	rank := map[string]int{NodeTypeHead: 0, NodeTypeWorker: 1, NodeTypeSubmitter: 2}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := nodeType(&pods[i]), nodeType(&pods[j])
		if a != b {
			return rank[a] < rank[b]
		}
		return pods[i].Name < pods[j].Name
	})
}

// CachedPods describes the cached Ray pods of the clusters the object s sums up runs on (of kind k),
// ordered as Pods orders them: what an object stream shows. Submitter pods are not cached.
func (s *Store) CachedPods(k *Kind, sum *Summary) []PodInfo {
	var pods []corev1.Pod
	for _, c := range k.Clusters(sum) {
		for _, p := range s.ClusterPods(sum.Namespace, c) {
			pods = append(pods, *p)
		}
	}
	sortPods(pods)
	out := make([]PodInfo, 0, len(pods))
	for i := range pods {
		out = append(out, Info(&pods[i]))
	}
	return out
}

func nodeType(p *corev1.Pod) string {
	if t := p.Labels[RayNodeTypeLabel]; t != "" {
		return t
	}
	if p.Labels[jobNameLabel] != "" {
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
	if clusters := k.clustersOf(o); len(clusters) > 0 {
		current = clusters[0]
	}
	return k.logTarget(current, pods, pod, container)
}

// logTarget is LogTarget for an object that runs on the Ray cluster current now.
func (k *Kind) logTarget(current string, pods []corev1.Pod, pod, container string) (*corev1.Pod, string, error) {
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

// LogStream is an open log stream and the pod and container it reads.
type LogStream struct {
	io.ReadCloser
	Pod, Container string
}

// OpenLogs opens the log stream of one of the instance's pods (see LogTarget for the defaults and
// refusals). A named pod that does not exist at all is NotFound, as is one that goes before its stream
// opens.
func (o *Objects) OpenLogs(ctx context.Context, obj *unstructured.Unstructured, pod, container string,
	opts *corev1.PodLogOptions) (*LogStream, error) {
	core := o.Clients.Core
	pods, err := o.Pods(ctx, obj)
	if err != nil {
		return nil, err
	}
	target, container, err := o.Kind.LogTarget(obj, pods, pod, container)
	if err != nil && pod != "" && apierrors.IsBadRequest(err) {
		if _, gerr := core.Pods(obj.GetNamespace()).Get(ctx, pod, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			gone := apierrors.NewNotFound(corev1.Resource("pods"), pod)
			gone.ErrStatus.Message = fmt.Sprintf("pod %q does not exist (any more)", pod)
			err = gone
		}
	}
	if err != nil {
		return nil, err
	}
	o2 := *opts
	o2.Container = container
	stream, err := core.Pods(target.Namespace).GetLogs(target.Name, &o2).Stream(ctx)
	if apierrors.IsNotFound(err) {
		gone := apierrors.NewNotFound(corev1.Resource("pods"), target.Name)
		gone.ErrStatus.Message = fmt.Sprintf("pod %q is gone", target.Name)
		err = gone
	}
	if err != nil {
		return nil, err
	}
	return &LogStream{ReadCloser: stream, Pod: target.Name, Container: container}, nil
}

// EventInfo is one Kubernetes event.
type EventInfo struct {
	Type           string            `json:"type" example:"Warning"`
	Reason         string            `json:"reason" example:"FailedScheduling"`
	Message        string            `json:"message"`
	Count          int32             `json:"count"`
	FirstTime      *time.Time        `json:"firstTime,omitempty"`
	LastTime       *time.Time        `json:"lastTime,omitempty"`
	InvolvedObject InvolvedObjectRef `json:"involvedObject"`
}

// InvolvedObjectRef names what an event is about.
type InvolvedObjectRef struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// Events lists the events of what Resolve returned: of the instance, its Ray clusters, their pods and its
// submitter Job, newest first. A template has none. Pods the caller may not list are left out. The pods
// and the events are listed at once.
func (o *Objects) Events(ctx context.Context, cur *Current) ([]EventInfo, error) {
	if cur.Instance == nil {
		return []EventInfo{}, nil
	}
	obj := cur.Instance
	var pods []corev1.Pod
	var podsErr error
	var wg sync.WaitGroup
	wg.Go(func() { pods, podsErr = o.Pods(ctx, obj) })
	list, err := o.Clients.Core.Events(obj.GetNamespace()).List(ctx, metav1.ListOptions{})
	wg.Wait()
	if podsErr != nil && !apierrors.IsForbidden(podsErr) {
		return nil, podsErr
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return o.eventsOf(obj, names, list.Items), nil
}

// ResolveWithEvents is Resolve and Events for a detail, with the apiserver reads made at once: the
// object, its namespace's events and (for a kind with a submitter) the submitter's pods. The Ray pods
// whose events are shown are the cached ones. Events the caller may not list are left out (nil), not
// refused.
func (o *Objects) ResolveWithEvents(ctx context.Context, ns, name string) (*Current, []EventInfo, error) {
	var list *corev1.EventList
	var listErr error
	var submitters []corev1.Pod
	var wg sync.WaitGroup
	// Events are informational: served from the apiserver's watch cache (resourceVersion 0), not read
	// through to etcd.
	wg.Go(func() { list, listErr = o.Clients.Core.Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"}) })
	if o.Kind.hasSubmitter {
		wg.Go(func() {
			if l, err := o.Clients.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobNameLabel + "=" + name}); err == nil {
				submitters = l.Items
			}
		})
	}
	cur, err := o.Resolve(ctx, ns, name)
	wg.Wait()
	switch {
	case err != nil:
		return nil, nil, err
	case cur.Instance == nil:
		return cur, []EventInfo{}, nil
	case apierrors.IsForbidden(listErr):
		return cur, nil, nil
	case listErr != nil:
		return nil, nil, listErr
	}
	var names []string
	for _, p := range submitters {
		names = append(names, p.Name)
	}
	if o.m != nil && o.m.Store != nil {
		for _, c := range o.Kind.clustersOf(cur.Instance) {
			for _, p := range o.m.Store.ClusterPods(ns, c) {
				names = append(names, p.Name)
			}
		}
	}
	return cur, o.eventsOf(cur.Instance, names, list.Items), nil
}

// eventsOf returns those of events that concern obj, its Ray clusters, the named pods and its
// submitter Job, newest first.
func (o *Objects) eventsOf(obj *unstructured.Unstructured, pods []string, events []corev1.Event) []EventInfo {
	return o.Kind.eventsOf(obj.GetName(), o.Kind.clustersOf(obj), pods, events)
}

// eventsOf returns those of events that concern the object name of k, the Ray clusters it runs on,
// the named pods and its submitter Job, newest first.
func (k *Kind) eventsOf(name string, clusters, pods []string, events []corev1.Event) []EventInfo {
	want := map[InvolvedObjectRef]bool{{Kind: k.Kind, Name: name}: true}
	for _, c := range clusters {
		want[InvolvedObjectRef{Kind: rayCluster, Name: c}] = true
	}
	for _, p := range pods {
		want[InvolvedObjectRef{Kind: "Pod", Name: p}] = true
	}
	if k.hasSubmitter {
		want[InvolvedObjectRef{Kind: "Job", Name: name}] = true
	}
	out := []EventInfo{}
	for _, e := range events {
		ref := InvolvedObjectRef{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name}
		if !want[ref] {
			continue
		}
		info := EventInfo{Type: e.Type, Reason: e.Reason, Message: e.Message, Count: e.Count, InvolvedObject: ref}
		first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		if last.IsZero() {
			last = e.CreationTimestamp.Time
		}
		if first.IsZero() {
			first = last
		}
		if info.Count == 0 {
			info.Count = 1
		}
		first, last = first.UTC(), last.UTC()
		info.FirstTime, info.LastTime = &first, &last
		out = append(out, info)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTime.After(*out[j].LastTime) })
	return out
}

// DefaultDashboardPort is the Ray dashboard's port when the head container names none "dashboard".
const DefaultDashboardPort = 8265

// Dashboards reaches Ray dashboards the way the KubeRay operator does: by the head service's in-cluster
// name, through a client that honours HTTP_PROXY and NO_PROXY.
type Dashboards struct {
	Client        *http.Client
	ClusterDomain string
}

// NewDashboards returns Dashboards for a cluster DNS domain. timeout bounds connecting to a dashboard
// and waiting for its answer's headers (0: 30 s); a whole call of the service's own, such as a job's
// stop, is bounded by it too.
func NewDashboards(clusterDomain string, timeout time.Duration) *Dashboards {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: min(timeout, 10*time.Second)}).DialContext,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ResponseHeaderTimeout: timeout,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   8,
	}
	return &Dashboards{Client: &http.Client{Transport: transport, Timeout: timeout}, ClusterDomain: clusterDomain}
}

// inNamespaceZone returns host:port of a dashboard URL that names a service of namespace ns
// (<service>.<ns>.svc.<cluster domain>:<port>), and whether it does.
func (d *Dashboards) inNamespaceZone(dashboardURL, ns string) (string, bool) {
	addr := strings.TrimPrefix(strings.TrimPrefix(dashboardURL, "http://"), "https://")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false
	}
	svc, ok := strings.CutSuffix(host, "."+ns+".svc."+d.ClusterDomain)
	if !ok || len(validation.IsDNS1123Label(svc)) > 0 {
		return "", false
	}
	return addr, true
}

// Transport is how the dashboards are reached: through the HTTP proxy the environment names, if any.
func (d *Dashboards) Transport() http.RoundTripper { return d.Client.Transport }

// Address is host:port of the Ray dashboard of the cluster object o of kind k runs on: what the operator
// recorded for a RayJob where it names a service of the object's own namespace, else <head
// service>.<namespace>.svc.<cluster domain>:<the head's dashboard port>. "" when the object has no
// cluster yet. Whoever may write an object's status cannot send the proxy anywhere else.
func (d *Dashboards) Address(k *Kind, o *unstructured.Unstructured) string {
	if v, _, _ := unstructured.NestedString(o.Object, "status", "dashboardURL"); v != "" {
		if addr, ok := d.inNamespaceZone(v, o.GetNamespace()); ok {
			return addr
		}
	}
	s := k.Summarize(o)
	svc := k.HeadService(o, &s)
	if svc == "" {
		return ""
	}
	port := int64(DefaultDashboardPort)
	containers, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(k.clusterSpecPath), "headGroupSpec", "template", "spec", "containers")...)
	for _, c := range containers {
		cm, _ := c.(map[string]any)
		ports, _, _ := unstructured.NestedSlice(cm, "ports")
		for _, p := range ports {
			pm, _ := p.(map[string]any)
			if pm["name"] == "dashboard" {
				if n, ok := nestedInt(pm, "containerPort"); ok {
					port = n
				}
			}
		}
	}
	return fmt.Sprintf("%s.%s.svc.%s:%d", svc, o.GetNamespace(), d.ClusterDomain, port)
}
