package k8s

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"
)

// A template is a manifest stored, not handed to KubeRay: a ConfigMap in the object's namespace,
// labelled ray.openfuyao.com/template=true and ray.openfuyao.com/kind=<Kind>, named after the kind and
// the object (so that each name has at most one template per kind and cannot clash with the user's own
// ConfigMaps), and signed by the service. Anyone who may create ConfigMaps can write one that looks
// the same, so only what carries the service's signature is a template: anything else is never listed,
// started, adopted or deleted.
const (
	// TemplateDataKey is the key under which a template's ConfigMap holds the manifest.
	TemplateDataKey = "manifest"
	// TemplateSignatureKey is the annotation that holds the service's signature of a template.
	TemplateSignatureKey = "ray.openfuyao.com/template-signature"
	// TemplateParkedUIDKey is the annotation that names the UID of the instance a stop or a re-run
	// stored in the template ("" for a template created as one).
	TemplateParkedUIDKey = "ray.openfuyao.com/parked-uid"
)

// CreatorSignatureKey is the annotation that holds the service's signature of an instance's creator:
// anyone who may edit the object can set the creator annotation, but only the service can sign it.
const CreatorSignatureKey = "ray.openfuyao.com/creator-signature"

// MinTemplateKeyBytes is the shortest key a TemplateSigner takes.
const MinTemplateKeyBytes = 32

// TemplateSigner signs the template ConfigMaps the service writes, with a key only the service holds
// (every replica the same), and tells them from any other ConfigMap.
type TemplateSigner struct{ key []byte }

// NewTemplateSigner returns a signer with the given key, at least MinTemplateKeyBytes long.
func NewTemplateSigner(key []byte) (*TemplateSigner, error) {
	if len(key) < MinTemplateKeyBytes {
		return nil, fmt.Errorf("the template signing key has %d bytes: want at least %d", len(key), MinTemplateKeyBytes)
	}
	return &TemplateSigner{key: key}, nil
}

// creatorSignature covers the creator and what names the object: its kind, namespace and name. (Its UID
// is not known before it is created; a signature copied from an earlier object of the same kind,
// namespace and name still holds.)
func (s *TemplateSigner) creatorSignature(k *Kind, o *unstructured.Unstructured) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-creator/v1", k.Kind, o.GetNamespace(), o.GetName(), o.GetAnnotations()[CreatorKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// signCreator signs the creator recorded on o (nothing when none is).
func (s *TemplateSigner) signCreator(k *Kind, o *unstructured.Unstructured) {
	ann := o.GetAnnotations()
	if s == nil || ann[CreatorKey] == "" {
		return
	}
	ann[CreatorSignatureKey] = s.creatorSignature(k, o)
	o.SetAnnotations(ann)
}

// CreatorSigned tells whether the service wrote o's creator annotation.
func (s *TemplateSigner) CreatorSigned(k *Kind, o *unstructured.Unstructured) bool {
	sig := o.GetAnnotations()[CreatorSignatureKey]
	return s != nil && sig != "" && o.GetAnnotations()[CreatorKey] != "" && hmac.Equal([]byte(sig), []byte(s.creatorSignature(k, o)))
}

// signature covers everything a template is trusted for: its kind, namespace, name, creator, the
// instance it parks and the manifest. Each part is length-prefixed, so no two templates share one.
func (s *TemplateSigner) signature(cm *corev1.ConfigMap) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-template/v1", cm.Labels[TemplateKindLabel], cm.Namespace, cm.Name,
		cm.Annotations[CreatorKey], cm.Annotations[TemplateParkedUIDKey], cm.Data[TemplateDataKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

func (s *TemplateSigner) sign(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[TemplateSignatureKey] = s.signature(cm)
}

// trusted tells whether the service wrote cm as it is.
func (s *TemplateSigner) trusted(cm *corev1.ConfigMap) bool {
	return hmac.Equal([]byte(cm.Annotations[TemplateSignatureKey]), []byte(s.signature(cm)))
}

// errNotATemplate: the ConfigMap is not labelled as a template of the kind.
var errNotATemplate = errors.New("not a template")

// read returns the template a ConfigMap holds: errNotATemplate when it is not labelled and named as a
// template of kind k, a Conflict when the service did not write it as it is, or when its manifest names
// another object than the ConfigMap's namespace and name say.
func (s *TemplateSigner) read(k *Kind, cm *corev1.ConfigMap) (*Template, error) {
	name := k.templateObjectName(cm.Name)
	if cm.Labels[TemplateLabel] != "true" || cm.Labels[TemplateKindLabel] != k.Kind || name == "" {
		return nil, errNotATemplate
	}
	gr := k.GVR().GroupResource()
	if !s.trusted(cm) {
		return nil, apierrors.NewConflict(gr, name, fmt.Errorf("ConfigMap %s/%s is named as its template, but ray-service did not "+
			"write it as it is now: it is not used; delete the ConfigMap, or create the object anew", cm.Namespace, cm.Name))
	}
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
	return &Template{ConfigMap: cm, Manifest: m}, nil
}

// configMap builds the signed ConfigMap that stores a prepared manifest; parkedUID names the instance
// it parks, if any.
func (s *TemplateSigner) configMap(k *Kind, o *unstructured.Unstructured, parkedUID string) (*corev1.ConfigMap, error) {
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
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: k.TemplateName(o.GetName()), Namespace: o.GetNamespace(), Labels: labels,
			Annotations: map[string]string{CreatorKey: o.GetAnnotations()[CreatorKey], TemplateParkedUIDKey: parkedUID}},
		Data: map[string]string{TemplateDataKey: string(data)},
	}
	s.sign(cm)
	return cm, nil
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
	// Only a template the service signed is read, and its signature covers the creator.
	s.CreatorSigned = s.Creator != ""
	deriveHealth(&s, nil)
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
	return o.Clients.Core.ConfigMaps(ns)
}

// GetTemplate reads the template of ns/name: NotFound where there is none, Conflict where a ConfigMap
// of its name is no template the service wrote.
func (o *Objects) GetTemplate(ctx context.Context, ns, name string) (*Template, error) {
	cm, err := o.configMaps(ns).Get(ctx, o.Kind.TemplateName(name), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(o.Kind.GVR().GroupResource(), name)
		}
		return nil, err
	}
	tpl, err := o.m.Templates.read(o.Kind, cm)
	if errors.Is(err, errNotATemplate) {
		return nil, apierrors.NewNotFound(o.Kind.GVR().GroupResource(), name)
	}
	return tpl, err
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
	cm, err := o.m.Templates.configMap(o.Kind, obj, "")
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
	cm, err := o.m.Templates.configMap(o.Kind, probe, current.ConfigMap.Annotations[TemplateParkedUIDKey])
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
	return &Template{ConfigMap: updated, Manifest: probe}, nil
}

// deleteTemplate deletes the template of ns/name, exactly the one read (a ConfigMap changed since is
// Conflict), and nothing when the ConfigMap of that name is no template the service wrote.
func (o *Objects) deleteTemplate(ctx context.Context, tpl *Template) error {
	uid, rv := tpl.ConfigMap.UID, tpl.ConfigMap.ResourceVersion
	err := o.configMaps(tpl.ConfigMap.Namespace).Delete(ctx, tpl.ConfigMap.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteTemplateOf deletes the template of ns/name if there is one the service wrote. A ConfigMap of
// that name that the service did not write (GetTemplate's Conflict) is left alone.
func (o *Objects) deleteTemplateOf(ctx context.Context, ns, name string) error {
	tpl, err := o.GetTemplate(ctx, ns, name)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case err != nil:
		return err
	}
	return o.deleteTemplate(ctx, tpl)
}
