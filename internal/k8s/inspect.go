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

// Pods lists the pods of the instance cur holds: those of its Ray clusters and of a submitter Job. Head
// pods come first, then workers, then submitters, each by name.
func (o *Objects) Pods(ctx context.Context, cur *Current) ([]corev1.Pod, error) {
	return o.podsOn(ctx, cur.Instance, o.clusters(cur))
}

// podsOn lists the pods of instance obj that runs on the Ray clusters named, as Pods does.
func (o *Objects) podsOn(ctx context.Context, obj *unstructured.Unstructured, clusters []string) ([]corev1.Pod, error) {
	ns := obj.GetNamespace()
	var pods []corev1.Pod
	for _, sel := range o.Kind.PodSelectors(obj.GetName(), clusters) {
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

// OpenLogs opens the log stream of one of the pods of the instance cur holds (see ray.Kind.LogTarget
// for the defaults and refusals). A named pod that does not exist at all is NotFound, as is one that
// goes before its stream opens.
func (o *Objects) OpenLogs(ctx context.Context, cur *Current, pod, container string,
	opts *corev1.PodLogOptions) (*LogStream, error) {
	core, obj := o.Clients.Core, cur.Instance
	clusters := o.clusters(cur)
	pods, err := o.podsOn(ctx, obj, clusters)
	if err != nil {
		return nil, err
	}
	current := ""
	if len(clusters) > 0 {
		current = clusters[0]
	}
	target, container, err := o.Kind.LogTargetOn(current, pods, pod, container)
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
	obj, clusters := cur.Instance, o.clusters(cur)
	var pods []corev1.Pod
	var podsErr error
	var wg sync.WaitGroup
	wg.Go(func() { pods, podsErr = o.podsOn(ctx, obj, clusters) })
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
	return o.Kind.EventsOf(obj.GetName(), clusters, names, list.Items), nil
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
	// With no clusters named, the selector is the submitter's (none for a kind without one, or a name
	// no pod's label can hold).
	if sel := o.Kind.PodSelectors(name, nil); len(sel) == 1 {
		wg.Go(func() {
			if l, err := o.Clients.Core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel[0]}); err == nil {
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
	clusters := o.clusters(cur)
	if o.m != nil && o.m.Cache != nil {
		for _, c := range clusters {
			for _, p := range o.m.Cache.ClusterPods(ns, c) {
				names = append(names, p.Name)
			}
		}
	}
	return cur, o.Kind.EventsOf(name, clusters, names, list.Items), nil
}
