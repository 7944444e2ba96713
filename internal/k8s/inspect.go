package k8s

import (
	"context"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// Pods lists the pods of an instance: those of its Ray clusters and of a submitter Job. Head pods come
// first, then workers, then submitters, each by name.
func (o *Objects) Pods(ctx context.Context, obj *unstructured.Unstructured) ([]corev1.Pod, error) {
	ns := obj.GetNamespace()
	var pods []corev1.Pod
	for _, sel := range o.Kind.PodSelectors(obj.GetName(), o.Kind.ObjectClusters(obj)) {
		list, err := o.Clients.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		pods = append(pods, list.Items...)
	}
	ray.SortPods(pods)
	return pods, nil
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

// Events lists the events of what Resolve returned: of the instance, its Ray clusters, their pods and its
// submitter Job, newest first. A template has none. Pods the caller may not list are left out. The pods
// and the events are listed at once.
func (o *Objects) Events(ctx context.Context, cur *Current) ([]ray.EventInfo, error) {
	if cur.Instance == nil {
		return []ray.EventInfo{}, nil
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
func (o *Objects) ResolveWithEvents(ctx context.Context, ns, name string) (*Current, []ray.EventInfo, error) {
	var list *corev1.EventList
	var listErr error
	var submitters []corev1.Pod
	var wg sync.WaitGroup
	// Events are informational: served from the apiserver's watch cache (resourceVersion 0), not read
	// through to etcd.
	wg.Go(func() { list, listErr = o.Clients.Core.Events(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"}) })
	if o.Kind.HasSubmitter {
		wg.Go(func() {
			if l, err := o.Clients.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: ray.JobNameLabel + "=" + name}); err == nil {
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
		return cur, []ray.EventInfo{}, nil
	case apierrors.IsForbidden(listErr):
		return cur, nil, nil
	case listErr != nil:
		return nil, nil, listErr
	}
	var names []string
	for _, p := range submitters {
		names = append(names, p.Name)
	}
	if o.m != nil && o.m.Cache != nil {
		for _, c := range o.Kind.ObjectClusters(cur.Instance) {
			for _, p := range o.m.Cache.ClusterPods(ns, c) {
				names = append(names, p.Name)
			}
		}
	}
	return cur, o.eventsOf(cur.Instance, names, list.Items), nil
}

// eventsOf returns those of events that concern obj, its Ray clusters, the named pods and its
// submitter Job, newest first.
func (o *Objects) eventsOf(obj *unstructured.Unstructured, pods []string, events []corev1.Event) []ray.EventInfo {
	return o.Kind.EventsOf(obj.GetName(), o.Kind.ObjectClusters(obj), pods, events)
}
