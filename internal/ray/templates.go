package ray

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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

// creatorSignature covers the creator and the object it is recorded on: its kind, namespace, name and
// UID. The UID makes it this object's alone: one copied onto an object of the same kind, namespace and
// name made later (once the signed one is gone) does not hold, as utilization is billed to a signed
// creator.
func (s *TemplateSigner) creatorSignature(k *Kind, o *unstructured.Unstructured) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-creator/v2", k.Kind, o.GetNamespace(), o.GetName(), string(o.GetUID()), o.GetAnnotations()[CreatorKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// CreatorSignature is the signature of the creator recorded on o, an object made already (it has its
// UID): "" where none is recorded or o has no UID yet.
func (s *TemplateSigner) CreatorSignature(k *Kind, o *unstructured.Unstructured) string {
	if s == nil || o.GetAnnotations()[CreatorKey] == "" || o.GetUID() == "" {
		return ""
	}
	return s.creatorSignature(k, o)
}

// SignCreator signs the creator recorded on o, an object made already (nothing when none is recorded or
// o has no UID).
func (s *TemplateSigner) SignCreator(k *Kind, o *unstructured.Unstructured) {
	sig := s.CreatorSignature(k, o)
	if sig == "" {
		return
	}
	ann := o.GetAnnotations()
	ann[CreatorSignatureKey] = sig
	o.SetAnnotations(ann)
}

// SignCreatorAt signs the creator recorded on o, about to be created at now, for the moment until it can
// be signed over its UID (SignCreator): the signature holds only for an object created within
// provisionalSkew of now, so that a copy outlives no object of that name by more.
func (s *TemplateSigner) SignCreatorAt(k *Kind, o *unstructured.Unstructured, now time.Time) {
	ann := o.GetAnnotations()
	if s == nil || ann[CreatorKey] == "" {
		return
	}
	at := strconv.FormatInt(now.Unix(), 10)
	ann[CreatorSignatureKey] = provisionalPrefix + at + ":" + s.provisionalSignature(k, o, at)
	o.SetAnnotations(ann)
}

// provisionalPrefix starts a signature made before the object existed: "at:<Unix seconds>:<MAC>".
const provisionalPrefix = "at:"

// provisionalSkew is how far an object's creation may be from its provisional signature's time: the
// create follows the signature at once, and the apiserver's clock may differ from the service's.
const provisionalSkew = time.Minute

func (s *TemplateSigner) provisionalSignature(k *Kind, o *unstructured.Unstructured, at string) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-creator-at/v1", k.Kind, o.GetNamespace(), o.GetName(), at, o.GetAnnotations()[CreatorKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// CreatorSigned tells whether the service wrote o's creator annotation, on this very object: signed over
// its UID, or provisionally for an object created when the signature was made.
func (s *TemplateSigner) CreatorSigned(k *Kind, o *unstructured.Unstructured) bool {
	sig := o.GetAnnotations()[CreatorSignatureKey]
	if s == nil || sig == "" || o.GetAnnotations()[CreatorKey] == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(sig, provisionalPrefix); ok {
		at, mac, ok := strings.Cut(rest, ":")
		unix, err := strconv.ParseInt(at, 10, 64)
		created := o.GetCreationTimestamp().Time
		if !ok || err != nil || created.IsZero() || created.Sub(time.Unix(unix, 0)).Abs() > provisionalSkew {
			return false
		}
		return hmac.Equal([]byte(mac), []byte(s.provisionalSignature(k, o, at)))
	}
	want := s.CreatorSignature(k, o)
	return want != "" && hmac.Equal([]byte(sig), []byte(want))
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

// Sign signs a template's ConfigMap with the service's key (see signature).
func (s *TemplateSigner) Sign(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[TemplateSignatureKey] = s.signature(cm)
}

// trusted tells whether the service wrote cm as it is.
func (s *TemplateSigner) trusted(cm *corev1.ConfigMap) bool {
	return hmac.Equal([]byte(cm.Annotations[TemplateSignatureKey]), []byte(s.signature(cm)))
}

// Read returns the template a ConfigMap holds: ErrNotATemplate when it is not labelled and named as a
// template of kind k, a Conflict when the service did not write it as it is, or when its manifest names
// another object than the ConfigMap's namespace and name say.
func (s *TemplateSigner) Read(k *Kind, cm *corev1.ConfigMap) (*Template, error) {
	name := k.templateObjectName(cm.Name)
	if cm.Labels[TemplateLabel] != "true" || cm.Labels[TemplateKindLabel] != k.Kind || name == "" {
		return nil, ErrNotATemplate
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
	// A template written before carries the signature of the object it was made from: it is no one's.
	unstructured.RemoveNestedField(m.Object, "metadata", "annotations", CreatorSignatureKey)
	return &Template{ConfigMap: cm, Manifest: m}, nil
}

// ConfigMap builds the signed ConfigMap that stores a prepared manifest; parkedUID names the instance
// it parks, if any. creatorSigned says whether the service vouches for the creator o records (it set it
// at a create made through it, or signed it on the instance stored): only then does the template's
// signature cover it (Template.CreatorSigned), so that an object created with another user's name,
// stopped and started again through the service, is not signed as that user's.
func (s *TemplateSigner) ConfigMap(k *Kind, o *unstructured.Unstructured, parkedUID string, creatorSigned bool) (*corev1.ConfigMap, error) {
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
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: k.TemplateName(o.GetName()), Namespace: o.GetNamespace(), Labels: labels,
			Annotations: map[string]string{CreatorKey: vouched, TemplateParkedUIDKey: parkedUID}},
		Data: map[string]string{TemplateDataKey: string(data)},
	}
	s.Sign(cm)
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

// CreatorSigned tells whether the service vouches for the creator the manifest records: its signature
// covers the ConfigMap's creator annotation, which is that creator only where the service set or signed
// it (see TemplateSigner.ConfigMap); a creator anyone could have written leaves it empty.
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
// anyone who may edit the object can set the creator annotation, but only the service can sign it.
const CreatorSignatureKey = "ray.openfuyao.com/creator-signature"

// MinTemplateKeyBytes is the shortest key a TemplateSigner takes.
const MinTemplateKeyBytes = 32

// ErrNotATemplate tells that the ConfigMap is not labelled as a template of the kind.
var ErrNotATemplate = errors.New("not a template")
