package cache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/accel"
	"ray-service/internal/ray"
)

// followNodes keeps what the nodes' labels say of their devices (the device plugins' and GPU feature
// discovery's, package accel) in the kinds' device catalog: a pod's slices are worth their share on its
// node, a template's on what every node agrees on. Only the labels of a node are kept. Where what the
// nodes agree on changes, every object is published again, its estimated equivalents valued anew.
func (s *Store) followNodes(core kubernetes.Interface) (func(stop <-chan struct{}), error) {
	f := informers.NewSharedInformerFactory(core, 0)
	inf := f.Core().V1().Nodes().Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return obj, nil
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion, Labels: n.Labels}}, nil
	}); err != nil {
		return nil, err
	}
	set := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			s.nodeChanged(n.Name, accel.NodeOf(n.Labels))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				s.nodeChanged(n.Name, accel.Node{})
			}
		},
	}); err != nil {
		return nil, err
	}
	return f.Start, nil
}

// nodeChanged records what a node says now; where what the nodes agree on changed, the objects are
// published again, and the overview's sums are made again (its pods' slices are valued on their nodes).
func (s *Store) nodeChanged(name string, n accel.Node) {
	devices := s.kinds.Devices()
	before, was := devices.Default(), devices.Of(name)
	devices.Set(name, n)
	if devices.Of(name) != was {
		s.podsSeq.Add(1)
	}
	if devices.Default() == before {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for _, k := range s.kinds.All() {
		for _, obj := range s.informers[k].GetStore().List() {
			if e, ok := obj.(*Entry); ok {
				changed = s.putInstanceLocked(k, e) || changed
			}
		}
	}
	if changed {
		s.notify.Notify()
	}
}

// withDevicesLocked values a summary's estimated device equivalents on what the nodes agree on now.
func (s *Store) withDevices(sum *ray.Summary) *ray.Summary {
	return ray.WithDevices(sum, s.kinds.Devices().Default())
}
