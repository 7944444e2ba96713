package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"ray-service/internal/auth"
	"ray-service/internal/dashboard"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// Authorizer answers what a caller may do, with the caller's token (auth.Reviewer).
type Authorizer interface {
	Allowed(ctx context.Context, token string, a auth.Attributes) (bool, error)
}

// Cache is what the watch cache (package cache) tells the caller's operations: an object's summary
// completed by what its pods and Warning events say, and the cached pods of a Ray cluster.
type Cache interface {
	Summarize(k *ray.Kind, o *unstructured.Unstructured) ray.Summary
	ClusterPods(namespace, cluster string) []*corev1.Pod
}

// Manager hands out the objects of a kind as one caller sees them, and holds what they all share.
type Manager struct {
	Clients *ClientFactory
	// Dashboards reaches Ray dashboards, to stop a RayJob's Ray job.
	Dashboards *dashboard.Dashboards
	// Cache completes statuses with what the pods say (a RayCluster whose head cannot start is Failed).
	Cache Cache
	// Templates signs the templates the service writes and tells them from other ConfigMaps.
	Templates *signing.Signer
	// PolicyGenerations keeps the generations of the namespaces' idle policies (nil: no policy is set
	// or read).
	PolicyGenerations *PolicyGenerations
	// Authz checks what the apiserver is not asked: that the caller may update a RayJob its dashboard
	// stops, and holds the right a start or stop with nothing to do would have needed.
	Authz Authorizer
	// DeleteWait bounds how long a re-run waits for the finished object to go.
	DeleteWait time.Duration
}

// For returns the objects of kind k as the holder of token reads and writes them.
func (m *Manager) For(k *ray.Kind, token string) (*Objects, error) {
	c, err := m.Clients.ForToken(token)
	if err != nil {
		return nil, err
	}
	return &Objects{Kind: k, Clients: c, token: token, m: m}, nil
}

// Objects are the objects of one kind as one caller reads and writes them: every call is made with the
// caller's own token, so that Kubernetes RBAC and admission decide.
type Objects struct {
	Kind    *ray.Kind
	Clients *Clients
	token   string
	m       *Manager
}

func (o *Objects) resource(ns string) dynamic.ResourceInterface {
	return o.Clients.Dynamic.Resource(o.Kind.GVR()).Namespace(ns)
}

// Get reads one instance from the apiserver.
func (o *Objects) Get(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return o.resource(ns).Get(ctx, name, metav1.GetOptions{})
}

// create creates a prepared manifest. Unknown fields are refused (strict field validation). signed says
// whether the service vouches for the creator the manifest records: it set it (a create made through
// it), or a template holds it signed (Template.CreatorSigned). Otherwise the creator stays as a claim,
// unsigned: a manifest copied from an object anyone could have annotated with another user's name.
func (o *Objects) create(ctx context.Context, obj *unstructured.Unstructured, dryRun, signed bool) (*unstructured.Unstructured, error) {
	opts := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	// The caller's manifest stays as it was: a dry run's is stored as a template, which holds no
	// signature.
	obj = obj.DeepCopy()
	// A signature the manifest carries is no one's: the service signs the creator for the moment of the
	// create, and over the object's UID once it exists.
	if ann := obj.GetAnnotations(); ann[ray.CreatorSignatureKey] != "" {
		delete(ann, ray.CreatorSignatureKey)
		obj.SetAnnotations(ann)
	}
	if signed {
		o.m.Templates.SignCreatorAt(o.Kind, obj, time.Now())
	}
	out, err := o.resource(obj.GetNamespace()).Create(ctx, obj, opts)
	if err != nil || dryRun || !signed {
		return out, o.Kind.StrictError(err, obj.GetName())
	}
	return o.signCreator(ctx, out), nil
}

// signCreator signs the creator recorded on out, just created, and returns it as it is then: its
// signature covers its UID, which it has only now, so that it cannot be copied onto an object of the same
// name made later (see signing.Signer.CreatorSignature). Written as the caller, held to that UID; where
// the write fails the object stays unsigned (its creator shown unverified, its use billed to no one).
func (o *Objects) signCreator(ctx context.Context, out *unstructured.Unstructured) *unstructured.Unstructured {
	sig := o.m.Templates.CreatorSignature(o.Kind, out)
	if sig == "" {
		return out
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": out.GetUID(),
		"annotations": map[string]string{ray.CreatorSignatureKey: sig}}})
	if err != nil {
		return out
	}
	signed, err := o.resource(out.GetNamespace()).Patch(ctx, out.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return out
	}
	return signed
}

// update replaces an instance with a prepared manifest.
func (o *Objects) update(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	opts := metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := o.resource(obj.GetNamespace()).Update(ctx, obj, opts)
	return out, o.Kind.StrictError(err, obj.GetName())
}

// deleteInstance deletes an instance; its Ray cluster and pods go with it through garbage collection.
func (o *Objects) deleteInstance(ctx context.Context, ns, name string) error {
	policy := metav1.DeletePropagationBackground
	return o.resource(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy})
}

// Current is an object as it is now: an instance, or a template.
type Current struct {
	Instance *unstructured.Unstructured
	Template *ray.Template
	// Unchanged says that a start or stop found nothing to do and wrote nothing.
	Unchanged bool
	// summary is its summary once Summarize made it: a request that reads the object summarizes it once,
	// whatever its parts (clusters, pods, events, the answer) ask of it.
	summary *ray.Summary
}

// Resolve reads ns/name: the instance when there is one, else the template. Neither is NotFound.
//
// Start and stop write the new one of the two before they remove the old one, but the two reads are
// not one: another replica's start can create the instance after the first read and remove the
// template before the second. No template at the second read means the instance, if any, was there
// then, so the instance is read once more before the answer is NotFound.
func (o *Objects) Resolve(ctx context.Context, ns, name string) (*Current, error) {
	obj, err := o.Get(ctx, ns, name)
	if err == nil {
		return &Current{Instance: obj}, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	tpl, terr := o.GetTemplate(ctx, ns, name)
	switch {
	case terr == nil:
		return &Current{Template: tpl}, nil
	case apierrors.IsForbidden(terr):
		return nil, err // a caller who may not read templates sees instances only
	case !apierrors.IsNotFound(terr):
		return nil, terr
	}
	if obj, err = o.Get(ctx, ns, name); err != nil {
		return nil, err
	}
	return &Current{Instance: obj}, nil
}

// Create creates a prepared manifest (see Kind.PrepareCreate): started, or stopped where start is false.
func (o *Objects) Create(ctx context.Context, obj *unstructured.Unstructured, start, dryRun bool) (*Current, error) {
	if !start {
		return o.createStopped(ctx, obj, dryRun)
	}
	created, err := o.create(ctx, obj, dryRun, true)
	if err != nil {
		return nil, err
	}
	return &Current{Instance: created}, nil
}

// Replace replaces ns/name, instance or template, with a prepared manifest (see Kind.PrepareUpdate),
// keeping the creator recorded at creation. An instance's manifest with an older resourceVersion is
// rebased on the current object where nobody else changed what it changes (see replaceInstance).
func (o *Objects) Replace(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*Current, error) {
	current, err := o.Resolve(ctx, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil, err
	}
	if current.Template != nil {
		ray.KeepCreator(obj, current.Template.Manifest)
		tpl, err := o.updateTemplate(ctx, current.Template, obj, dryRun)
		if err != nil {
			return nil, err
		}
		return &Current{Template: tpl}, nil
	}
	updated, err := o.replaceInstance(ctx, obj, current.Instance, dryRun)
	if err != nil {
		return nil, err
	}
	return &Current{Instance: updated}, nil
}

// Summarize is the whole summary of what Resolve returned: an instance's status completed with what
// its pods say, or a template's. It is made once for cur, at the first call.
func (o *Objects) Summarize(cur *Current) ray.Summary {
	if cur.summary == nil {
		var sum ray.Summary
		switch {
		case cur.Template != nil:
			sum = o.Kind.TemplateSummary(cur.Template)
		case o.m.Cache == nil:
			sum = o.Kind.Summarize(cur.Instance)
		default:
			sum = o.m.Cache.Summarize(o.Kind, cur.Instance)
		}
		cur.summary = &sum
	}
	return *cur.summary
}

// clusters are the Ray clusters of the instance cur holds, the current one first.
func (o *Objects) clusters(cur *Current) []string {
	sum := o.Summarize(cur)
	return o.Kind.Clusters(&sum)
}

// may asks whether the caller may do a, through the shared, cached reviewer.
func (o *Objects) may(ctx context.Context, a auth.Attributes) (bool, error) {
	if o.m.Authz == nil {
		return false, errors.New("no authorizer configured")
	}
	return o.m.Authz.Allowed(ctx, o.token, a)
}
