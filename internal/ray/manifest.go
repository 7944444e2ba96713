package ray

import (
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PrepareCreate checks a manifest sent for creation in namespace ns and clears what the server sets.
// kind and apiVersion may be left out (they follow from the path); when present they must match, as
// must metadata.namespace.
func (k *Kind) PrepareCreate(o *unstructured.Unstructured, ns string) error {
	if err := k.checkTypeAndNamespace(o, ns); err != nil {
		return err
	}
	if err := k.checkName(o.GetName()); err != nil {
		return err
	}
	clearServerFields(o)
	return nil
}

// serverFields are the metadata fields the apiserver sets; a manifest sent for creation drops them.
var serverFields = []string{"managedFields", "uid", "resourceVersion", "creationTimestamp", "generation",
	"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}

// clearServerFields drops status and the server-set metadata of a manifest.
func clearServerFields(o *unstructured.Unstructured) {
	unstructured.RemoveNestedField(o.Object, "status")
	for _, f := range serverFields {
		unstructured.RemoveNestedField(o.Object, "metadata", f)
	}
}

// PrepareUpdate checks a full manifest sent to replace ns/name. metadata.resourceVersion is kept: a stale
// one makes the apiserver answer Conflict.
func (k *Kind) PrepareUpdate(o *unstructured.Unstructured, ns, name string) error {
	if err := k.checkTypeAndNamespace(o, ns); err != nil {
		return err
	}
	switch o.GetName() {
	case "":
		o.SetName(name)
	case name:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("metadata.name %q does not match %q of the path: a replace cannot rename", o.GetName(), name))
	}
	unstructured.RemoveNestedField(o.Object, "status")
	unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
	return nil
}

func (k *Kind) checkTypeAndNamespace(o *unstructured.Unstructured, ns string) error {
	switch o.GetAPIVersion() {
	case "":
		o.SetAPIVersion(k.APIVersion())
	case k.APIVersion():
	case RayGroupVersion.Group + "/v1alpha1":
		// Served by KubeRay's CRDs beside v1, deprecated from v1.7 (its CRDs' deprecationWarning) and
		// stored as v1: what was made through it is listed and shown through v1 like the rest.
		return apierrors.NewBadRequest(fmt.Sprintf("apiVersion %q is deprecated (KubeRay v1.7): write %s, the version KubeRay stores every %s as",
			o.GetAPIVersion(), k.APIVersion(), k.Kind))
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("apiVersion %q does not match %s of %s", o.GetAPIVersion(), k.APIVersion(), k.Resource))
	}
	switch o.GetKind() {
	case "":
		o.SetKind(k.Kind)
	case k.Kind:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("kind %q does not match %s of %s", o.GetKind(), k.Kind, k.Resource))
	}
	switch o.GetNamespace() {
	case "":
		o.SetNamespace(ns)
	case ns:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("metadata.namespace %q does not match namespace %q of the path", o.GetNamespace(), ns))
	}
	return nil
}

func (k *Kind) checkName(name string) error {
	path := field.NewPath("metadata", "name")
	var errs field.ErrorList
	switch {
	case name == "":
		errs = append(errs, field.Required(path, "a name is required"))
	case len(name) > k.MaxNameLength:
		errs = append(errs, field.TooLong(path, name, k.MaxNameLength))
	default:
		for _, msg := range validation.IsDNS1035Label(name) {
			errs = append(errs, field.Invalid(path, name, msg))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: RayGroupVersion.Group, Kind: k.Kind}, name, errs)
}

// SetCreator records the creator's user name: exactly in the annotation, label-safe in the label.
func SetCreator(o *unstructured.Unstructured, user string) {
	ann := o.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[CreatorKey] = user
	o.SetAnnotations(ann)
	lbl := o.GetLabels()
	if lbl == nil {
		lbl = map[string]string{}
	}
	lbl[CreatorKey] = CreatorLabelValue(user)
	o.SetLabels(lbl)
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// CreatorLabelValue turns a user name into a label value: characters a label may not hold become "_",
// and the result is cut to 63 characters and begins and ends with a letter or digit.
func CreatorLabelValue(user string) string {
	v := labelUnsafe.ReplaceAllString(user, "_")
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	return strings.TrimFunc(v, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
}

// KeepCreator copies the creator recorded on current (and its signature) to o, so that a replace neither loses
// nor changes it.
func KeepCreator(o, current *unstructured.Unstructured) {
	ann, lbl := o.GetAnnotations(), o.GetLabels()
	for _, m := range []struct {
		from map[string]string
		to   *map[string]string
		key  string
	}{{current.GetAnnotations(), &ann, CreatorKey}, {current.GetAnnotations(), &ann, CreatorSignatureKey}, {current.GetLabels(), &lbl, CreatorKey}} {
		v, ok := m.from[m.key]
		switch {
		case ok && *m.to == nil:
			*m.to = map[string]string{m.key: v}
		case ok:
			(*m.to)[m.key] = v
		case *m.to != nil:
			delete(*m.to, m.key)
		}
	}
	o.SetAnnotations(ann)
	o.SetLabels(lbl)
}
