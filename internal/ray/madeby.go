package ray

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Maker names the object that made a Ray cluster (a RayJob or a RayService): its kind, name and UID.
type Maker struct {
	Kind, Name string
	UID        types.UID
}

// MadeBy is the object that made the Ray cluster o, as KubeRay marks it: the labels
// ray.io/originated-from-crd and ray.io/originated-from-cr-name, and the controller owner reference it
// sets to that object (ray-operator/controllers/ray/{rayjob,rayservice}_controller.go, v1.5-v1.6). Anyone
// who may create a RayCluster may set the labels; they are believed only with an owner reference of
// ray.io of that kind and name, whose UID the caller then checks against the maker it knows (a reference
// to a UID that is not the maker's is no more than the labels). nil: none, or not believed.
func MadeBy(o *unstructured.Unstructured) *Maker {
	labels := o.GetLabels()
	kind, name := labels[OriginatedFromCRDLabel], labels[OriginatedFromCRNameLabel]
	if kind == "" || name == "" {
		return nil
	}
	for _, ref := range o.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != RayGroupVersion.Group || ref.Controller == nil || !*ref.Controller {
			continue
		}
		if ref.Kind == kind && ref.Name == name && ref.UID != "" {
			return &Maker{Kind: kind, Name: name, UID: ref.UID}
		}
	}
	return nil
}
