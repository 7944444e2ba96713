package k8s

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/ray"
)

func (o *Objects) configMaps(ns string) corev1client.ConfigMapInterface {
	return o.Clients.Core.ConfigMaps(ns)
}

// GetTemplate reads the template of ns/name: NotFound where there is none, Conflict where a ConfigMap
// of its name is no template the service wrote.
func (o *Objects) GetTemplate(ctx context.Context, ns, name string) (*ray.Template, error) {
	cm, err := o.configMaps(ns).Get(ctx, o.Kind.TemplateName(name), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(o.Kind.GVR().GroupResource(), name)
		}
		return nil, err
	}
	tpl, err := o.m.Templates.Read(o.Kind, cm)
	if errors.Is(err, ray.ErrNotATemplate) {
		return nil, apierrors.NewNotFound(o.Kind.GVR().GroupResource(), name)
	}
	return tpl, err
}

// createTemplate validates the manifest with a server-side dry run of the real object and stores it as
// a template. An object or a template of that name already there is AlreadyExists.
func (o *Objects) createTemplate(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*ray.Template, error) {
	gr := o.Kind.GVR().GroupResource()
	if _, err := o.Get(ctx, obj.GetNamespace(), obj.GetName()); err == nil {
		return nil, apierrors.NewAlreadyExists(gr, obj.GetName())
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	if _, err := o.create(ctx, obj, true, true); err != nil {
		return nil, err
	}
	cm, err := o.m.Templates.ConfigMap(o.Kind, obj, "", true)
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
	return &ray.Template{ConfigMap: created, Manifest: obj}, nil
}

// updateTemplate validates a replacement manifest like createTemplate and replaces the template. The
// manifest's resourceVersion, when set, must be the ConfigMap's (Conflict otherwise).
func (o *Objects) updateTemplate(ctx context.Context, current *ray.Template, obj *unstructured.Unstructured, dryRun bool) (*ray.Template, error) {
	rv := obj.GetResourceVersion()
	if rv != "" && rv != current.ConfigMap.ResourceVersion {
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), obj.GetName(),
			fmt.Errorf("the template has changed since resourceVersion %s; read it again", rv))
	}
	probe := obj.DeepCopy()
	probe.SetResourceVersion("")
	if _, err := o.create(ctx, probe, true, true); err != nil {
		return nil, err
	}
	// The creator is the one the template recorded (ray.KeepCreator), vouched for as it was.
	cm, err := o.m.Templates.ConfigMap(o.Kind, probe, current.ConfigMap.Annotations[ray.TemplateParkedUIDKey], current.CreatorSigned())
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
	return &ray.Template{ConfigMap: updated, Manifest: probe}, nil
}

// deleteTemplate deletes the template of ns/name, exactly the one read (a ConfigMap changed since is
// Conflict), and nothing when the ConfigMap of that name is no template the service wrote.
func (o *Objects) deleteTemplate(ctx context.Context, tpl *ray.Template) error {
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
