package k8s

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"
)

// TemplateDataKey is the key under which a template's ConfigMap holds the manifest. A template is a
// manifest stored, not handed to KubeRay: a ConfigMap in the object's namespace, labelled
// ray.openfuyao.com/template=true and ray.openfuyao.com/kind=<Kind>. Its ConfigMap is named after the
// kind and the object, so that each name has at most one template per kind and the name cannot clash
// with the user's own ConfigMaps.
const TemplateDataKey = "manifest"

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

// templateManifest returns the manifest a template ConfigMap holds.
func templateManifest(cm *corev1.ConfigMap) (*unstructured.Unstructured, error) {
	o := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(cm.Data[TemplateDataKey]), &o.Object); err != nil {
		return nil, fmt.Errorf("template %s/%s holds no readable manifest: %w", cm.Namespace, cm.Name, err)
	}
	if o.Object == nil {
		return nil, fmt.Errorf("template %s/%s is empty", cm.Namespace, cm.Name)
	}
	return o, nil
}

// Template is a stored manifest and the ConfigMap that holds it.
type Template struct {
	ConfigMap *corev1.ConfigMap
	Manifest  *unstructured.Unstructured
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

func (o *Objects) configMaps(ns string) corev1client.ConfigMapInterface {
	return o.Clients.Core.CoreV1().ConfigMaps(ns)
}

// GetTemplate reads the template of ns/name.
func (o *Objects) GetTemplate(ctx context.Context, ns, name string) (*Template, error) {
	k := o.Kind
	cm, err := o.configMaps(ns).Get(ctx, k.TemplateName(name), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(k.GVR().GroupResource(), name)
		}
		return nil, err
	}
	if cm.Labels[TemplateLabel] != "true" || cm.Labels[TemplateKindLabel] != k.Kind {
		return nil, apierrors.NewNotFound(k.GVR().GroupResource(), name)
	}
	m, err := templateManifest(cm)
	if err != nil {
		return nil, err
	}
	return &Template{ConfigMap: cm, Manifest: m}, nil
}

// templateConfigMap builds the ConfigMap that stores a prepared manifest.
func (k *Kind) templateConfigMap(o *unstructured.Unstructured) (*corev1.ConfigMap, error) {
	m := o.DeepCopy()
	clearServerFields(m)
	// Owners and finalizers belong to the instance, not to a manifest that may be created again.
	unstructured.RemoveNestedField(m.Object, "metadata", "finalizers")
	unstructured.RemoveNestedField(m.Object, "metadata", "ownerReferences")
	data, err := yaml.Marshal(m.Object)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{TemplateLabel: "true", TemplateKindLabel: k.Kind}
	if v := o.GetLabels()[CreatorKey]; v != "" {
		labels[CreatorKey] = v
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: k.TemplateName(o.GetName()), Namespace: o.GetNamespace(), Labels: labels,
			Annotations: map[string]string{CreatorKey: o.GetAnnotations()[CreatorKey]}},
		Data: map[string]string{TemplateDataKey: string(data)},
	}, nil
}

// createTemplate validates the manifest with a server-side dry run of the real object and stores it as
// a template. An object or a template of that name already there is AlreadyExists.
func (o *Objects) createTemplate(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*Template, error) {
	gr := o.Kind.GVR().GroupResource()
	if _, err := o.Get(ctx, obj.GetNamespace(), obj.GetName()); err == nil {
		return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if _, err := o.create(ctx, obj, true); err != nil {
		return nil, err
	}
	cm, err := o.Kind.templateConfigMap(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	created, err := o.configMaps(obj.GetNamespace()).Create(ctx, cm, opts)
	if apierrors.IsAlreadyExists(err) {
		return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
	}
	if err != nil {
		return nil, err
	}
	return &Template{ConfigMap: created, Manifest: obj}, nil
}

// updateTemplate validates a replacement manifest like createTemplate and replaces the template. The
// manifest's resourceVersion, when set, must be the ConfigMap's (Conflict otherwise).
func (o *Objects) updateTemplate(ctx context.Context, current *Template, obj *unstructured.Unstructured, dryRun bool) (*Template, error) {
	rv := obj.GetResourceVersion()
	if rv != "" && rv != current.ConfigMap.ResourceVersion {
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), obj.GetName(),
			fmt.Errorf("the template has changed since resourceVersion %s; read it again", rv))
	}
	probe := obj.DeepCopy()
	probe.SetResourceVersion("")
	if _, err := o.create(ctx, probe, true); err != nil {
		return nil, err
	}
	cm, err := o.Kind.templateConfigMap(obj)
	if err != nil {
		return nil, err
	}
	cm.ResourceVersion = current.ConfigMap.ResourceVersion
	opts := metav1.UpdateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	updated, err := o.configMaps(obj.GetNamespace()).Update(ctx, cm, opts)
	if err != nil {
		return nil, err
	}
	probe.SetResourceVersion("")
	return &Template{ConfigMap: updated, Manifest: probe}, nil
}

// deleteTemplate deletes the template of ns/name.
func (o *Objects) deleteTemplate(ctx context.Context, ns, name string) error {
	err := o.configMaps(ns).Delete(ctx, o.Kind.TemplateName(name), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(o.Kind.GVR().GroupResource(), name)
	}
	return err
}
