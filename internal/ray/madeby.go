package ray

import (
	"slices"

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
// ray.io of that kind and name. Anyone may set such a reference too, with the maker's real UID (which
// get reads): the caller believes it only where the UID is that of the maker it knows and the maker's
// status names o (Maker.Names). nil: none, or not believed.
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

// Names tells whether the maker, as its status reads (Kind.MadeClusters, made), names the Ray cluster
// of the given name: KubeRay writes a cluster's name there, and nobody who may only create and edit Ray
// objects can. KubeRay creates the cluster before its maker's status names it: a caller counts it to
// its maker from when the status does.
func Names(made []string, cluster string) bool {
	return cluster != "" && slices.Contains(made, cluster)
}
