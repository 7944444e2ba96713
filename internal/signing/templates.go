package signing

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// TemplateSignatureKey is the annotation that holds the service's signature of a template.
const TemplateSignatureKey = "ray.openfuyao.com/template-signature"

// templateSignature covers everything a template is trusted for: its kind, namespace, name, creator,
// the instance it parks and the manifest. Each part is length-prefixed, so no two templates share one.
func (s *Signer) templateSignature(cm *corev1.ConfigMap) string {
	return s.mac("ray-template/v1", cm.Labels[ray.TemplateKindLabel], cm.Namespace, cm.Name,
		cm.Annotations[ray.CreatorKey], cm.Annotations[ray.TemplateParkedUIDKey], cm.Data[ray.TemplateDataKey])
}

// Sign signs a template's ConfigMap with the service's key (see templateSignature).
func (s *Signer) Sign(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[TemplateSignatureKey] = s.templateSignature(cm)
}

// trusted tells whether the service wrote cm as it is.
func (s *Signer) trusted(cm *corev1.ConfigMap) bool {
	return equal(cm.Annotations[TemplateSignatureKey], s.templateSignature(cm))
}

// Read returns the template a ConfigMap holds: ray.ErrNotATemplate when it is not labelled and named as
// a template of kind k, a Conflict when the service did not write it as it is, or when its manifest
// names another object than the ConfigMap's namespace and name say (ray.Kind.ParseTemplate).
func (s *Signer) Read(k *ray.Kind, cm *corev1.ConfigMap) (*ray.Template, error) {
	name := k.TemplateObjectName(cm)
	if name == "" {
		return nil, ray.ErrNotATemplate
	}
	if !s.trusted(cm) {
		return nil, apierrors.NewConflict(k.GVR().GroupResource(), name, fmt.Errorf("ConfigMap %s/%s is named as its template, but ray-service did not "+
			"write it as it is now: it is not used; delete the ConfigMap, or create the object anew", cm.Namespace, cm.Name))
	}
	return k.ParseTemplate(cm)
}

// ConfigMap builds the signed ConfigMap that stores a prepared manifest (ray.Kind.TemplateConfigMap);
// parkedUID names the instance it parks, if any, and creatorSigned says whether the service vouches for
// the creator o records.
func (s *Signer) ConfigMap(k *ray.Kind, o *unstructured.Unstructured, parkedUID string, creatorSigned bool) (*corev1.ConfigMap, error) {
	cm, err := k.TemplateConfigMap(o, parkedUID, creatorSigned)
	if err != nil {
		return nil, err
	}
	s.Sign(cm)
	return cm, nil
}
