package cache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"ray-service/internal/accel"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// entryTransform turns an object from the watch into its cache entry, showing it whole to the
// observer first.
func (s *Store) entryTransform(k *ray.Kind) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // already an entry, or a tombstone
		}
		e := &Entry{
			TypeMeta: metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind},
			ObjectMeta: metav1.ObjectMeta{
				Name:              u.GetName(),
				Namespace:         u.GetNamespace(),
				UID:               u.GetUID(),
				ResourceVersion:   u.GetResourceVersion(),
				CreationTimestamp: u.GetCreationTimestamp(),
				DeletionTimestamp: u.GetDeletionTimestamp(),
			},
			item: newItem(s.summarize(k, u), ray.NewLabelSet(u.GetLabels())),
		}
		e.item.UID = u.GetUID()
		if k.IsCluster {
			if v, ok := u.GetAnnotations()[ray.IdleStopAfterKey]; ok {
				e.item.IdleStopAfter = ray.Clip(v, 64)
			}
			e.item.MadeBy = ray.MadeBy(u)
		} else {
			e.item.Makes = k.MadeClusters(u)
		}
		if s.observer != nil {
			s.observer.Observe(k, u, s.valued(k, &e.item.Summary))
		}
		s.manifests.observe(k, u)
		return e, nil
	}
}

// templateTransform turns a template ConfigMap into an entry of its kind. A ConfigMap that is not a
// template of a known kind that the service wrote is kept as an entry without a kind, which is never
// published.
func templateTransform(kinds *ray.Kinds, signer *signing.Signer) cache.TransformFunc {
	return func(obj any) (any, error) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return obj, nil
		}
		e := &Entry{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID,
			ResourceVersion: cm.ResourceVersion, CreationTimestamp: cm.CreationTimestamp}}
		k := kinds.ByKind(cm.Labels[ray.TemplateKindLabel])
		if k == nil {
			return e, nil
		}
		tpl, err := signer.Read(k, cm)
		if err != nil {
			return e, nil
		}
		e.TypeMeta = metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: k.Kind}
		e.item = newItem(k.TemplateSummary(tpl), ray.NewLabelSet(tpl.Manifest.GetLabels()))
		return e, nil
	}
}

// trimPod keeps of a Ray pod what summaries, pod lists and the overview read.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	t := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			OwnerReferences: p.OwnerReferences, Annotations: softShareOf(p.Annotations),
		},
		Spec: corev1.PodSpec{
			NodeName: p.Spec.NodeName, Overhead: p.Spec.Overhead, ResourceClaims: p.Spec.ResourceClaims,
			Containers: trimContainers(p.Spec.Containers), InitContainers: trimContainers(p.Spec.InitContainers),
		},
		Status: p.Status,
	}
	return t, nil
}

func trimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// softShareOf keeps of a pod's annotations the one that says it asks whole Ascend chips in percent.
func softShareOf(annotations map[string]string) map[string]string {
	if v, ok := annotations[accel.SoftShareAnnotation]; ok {
		return map[string]string{accel.SoftShareAnnotation: v}
	}
	return nil
}
