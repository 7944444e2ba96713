package ray

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A template is a manifest stored, not handed to KubeRay: a ConfigMap in the object's namespace,
// labelled ray.openfuyao.com/template=true and ray.openfuyao.com/kind=<Kind>, named after the kind and
// the object (so that each name has at most one template per kind and cannot clash with the user's own
// ConfigMaps), and signed by the service. Anyone who may create ConfigMaps can write one that looks
// the same, so only what carries the service's signature is a template: anything else is never listed,
// started, adopted or deleted. This file says what a template's ConfigMap holds; internal/signing signs
// it and reads only what it signed.
const (
	// TemplateDataKey is the key under which a template's ConfigMap holds the manifest.
	TemplateDataKey = "manifest"
	// TemplateParkedUIDKey is the annotation that names the UID of the instance a stop or a re-run
	// stored in the template ("" for a template created as one).
	TemplateParkedUIDKey = "ray.openfuyao.com/parked-uid"
)

// TemplateConfigMap builds the ConfigMap, not signed yet, that stores a prepared manifest; parkedUID
// names the instance it parks, if any. creatorSigned says whether the service vouches for the creator o
// records (it set it at a create made through it, or signed it on the instance stored): only then does
// the ConfigMap's creator annotation, which the template's signature covers, name it
// (Template.CreatorSigned), so that an object created with another user's name, stopped and started
// again through the service, is not signed as that user's.
func (k *Kind) TemplateConfigMap(o *unstructured.Unstructured, parkedUID string, creatorSigned bool) (*corev1.ConfigMap, error) {
	m := o.DeepCopy()
	clearServerFields(m)
	// Owners and finalizers belong to the instance, not to a manifest that may be created again; a
	// creator's signature to the object it was made for (a provisional one, readable in the template,
	// would hold for an object of that name created straight through the apiserver within its minute).
	unstructured.RemoveNestedField(m.Object, "metadata", "finalizers")
	unstructured.RemoveNestedField(m.Object, "metadata", "ownerReferences")
	unstructured.RemoveNestedField(m.Object, "metadata", "annotations", CreatorSignatureKey)
	data, err := yaml.Marshal(m.Object)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{TemplateLabel: "true", TemplateKindLabel: k.Kind}
	if v := o.GetLabels()[CreatorKey]; v != "" {
		labels[CreatorKey] = v
	}
	vouched := ""
	if creatorSigned {
		vouched = o.GetAnnotations()[CreatorKey]
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: k.TemplateName(o.GetName()), Namespace: o.GetNamespace(), Labels: labels,
			Annotations: map[string]string{CreatorKey: vouched, TemplateParkedUIDKey: parkedUID}},
		Data: map[string]string{TemplateDataKey: string(data)},
	}, nil
}

// TemplateObjectName is the name of the object cm holds the template of: "" where cm is not labelled and
// named as a template of kind k.
func (k *Kind) TemplateObjectName(cm *corev1.ConfigMap) string {
	if cm.Labels[TemplateLabel] != "true" || cm.Labels[TemplateKindLabel] != k.Kind {
		return ""
	}
	return k.templateObjectName(cm.Name)
}

// ParseTemplate returns the template a ConfigMap holds, which it trusts: only signing.Signer.Read calls
// it, once it has checked the service's signature. ErrNotATemplate when cm is not labelled and named as
// a template of kind k; a Conflict when its manifest is unreadable or names another object than the
// ConfigMap's namespace and name say.
func (k *Kind) ParseTemplate(cm *corev1.ConfigMap) (*Template, error) {
	name := k.TemplateObjectName(cm)
	if name == "" {
		return nil, ErrNotATemplate
	}
	gr := k.GVR().GroupResource()
	m := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(cm.Data[TemplateDataKey]), &m.Object); err != nil || m.Object == nil {
		return nil, apierrors.NewConflict(gr, name, fmt.Errorf("template %s/%s holds no readable manifest", cm.Namespace, cm.Name))
	}
	// The path decides what a template creates; a signed manifest agrees, and one that does not is
	// refused rather than followed.
	if m.GetAPIVersion() != k.APIVersion() || m.GetKind() != k.Kind || m.GetName() != name ||
		m.GetNamespace() != "" && m.GetNamespace() != cm.Namespace {
		return nil, apierrors.NewConflict(gr, name, fmt.Errorf("template %s/%s holds a manifest of %s %s %s/%s, not of %s %s/%s",
			cm.Namespace, cm.Name, m.GetAPIVersion(), m.GetKind(), m.GetNamespace(), m.GetName(), k.Kind, cm.Namespace, name))
	}
	m.SetNamespace(cm.Namespace)
	// A template written before carries the signature of the object it was made from: it is no one's.
	unstructured.RemoveNestedField(m.Object, "metadata", "annotations", CreatorSignatureKey)
	return &Template{ConfigMap: cm, Manifest: m}, nil
}

// TemplateName is the name of the ConfigMap that holds the template of the named object.
func (k *Kind) TemplateName(name string) string {
	return "ray-template." + strings.ToLower(k.Kind) + "." + name
}

// templateObjectName returns the object name of a template ConfigMap of kind k, or "".
func (k *Kind) templateObjectName(cmName string) string {
	prefix := k.TemplateName("")
	if !strings.HasPrefix(cmName, prefix) {
		return ""
	}
	return strings.TrimPrefix(cmName, prefix)
}

// Template is a stored manifest and the ConfigMap that holds it.
type Template struct {
	ConfigMap *corev1.ConfigMap
	Manifest  *unstructured.Unstructured
}

// CreatorSigned tells whether the service vouches for the creator the manifest records: its signature
// covers the ConfigMap's creator annotation, which is that creator only where the service set or signed
// it (see Kind.TemplateConfigMap); a creator anyone could have written leaves it empty.
func (t *Template) CreatorSigned() bool {
	c := t.Manifest.GetAnnotations()[CreatorKey]
	return c != "" && t.ConfigMap.Annotations[CreatorKey] == c
}

// Summary is the template's list item: the manifest's summary, type template, status Stopped.
func (k *Kind) templateSummary(cm *corev1.ConfigMap, manifest *unstructured.Unstructured) Summary {
	m := manifest.DeepCopy()
	unstructured.RemoveNestedField(m.Object, "status")
	m.SetName(k.templateObjectName(cm.Name))
	m.SetNamespace(cm.Namespace)
	m.SetCreationTimestamp(cm.CreationTimestamp)
	s := k.Summarize(m)
	s.Type = TypeTemplate
	s.Status = StatusStopped
	// Only a template the service signed is read, and its signature covers the creator it vouches for.
	s.CreatorSigned = (&Template{ConfigMap: cm, Manifest: manifest}).CreatorSigned()
	k.deriveHealth(&s, nil)
	return s
}

// DetailObject is the manifest as a detail or an export shows it: metadata.resourceVersion is the
// ConfigMap's, so that a replace of an outdated copy is refused as Conflict.
func (t *Template) DetailObject() *unstructured.Unstructured {
	o := t.Manifest.DeepCopy()
	o.SetResourceVersion(t.ConfigMap.ResourceVersion)
	o.SetCreationTimestamp(t.ConfigMap.CreationTimestamp)
	return o
}

// TemplateSummary is the template's list item.
func (k *Kind) TemplateSummary(t *Template) Summary {
	return k.templateSummary(t.ConfigMap, t.Manifest)
}

// CreatorSignatureKey is the annotation that holds the service's signature of an instance's creator:
// anyone who may edit the object can set the creator annotation, but only the service can sign it
// (internal/signing).
const CreatorSignatureKey = "ray.openfuyao.com/creator-signature"

// ErrNotATemplate tells that the ConfigMap is not labelled as a template of the kind.
var ErrNotATemplate = errors.New("not a template")
