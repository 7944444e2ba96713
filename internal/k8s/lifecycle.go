package k8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/auth"
	"ray-service/internal/dashboard"
	"ray-service/internal/ray"
)

// createStopped creates obj without starting it: suspended where KubeRay allows, else as a template.
func (o *Objects) createStopped(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*Current, error) {
	if o.Kind.Suspendable(obj) {
		if err := unstructured.SetNestedField(obj.Object, true, "spec", "suspend"); err != nil {
			return nil, err
		}
		created, err := o.create(ctx, obj, dryRun, true)
		if err != nil {
			return nil, err
		}
		return &Current{Instance: created}, nil
	}
	tpl, err := o.createTemplate(ctx, obj, dryRun)
	if err != nil {
		return nil, err
	}
	return &Current{Template: tpl}, nil
}

// Start starts ns/name and returns it as it is afterwards. Starting what already runs changes nothing.
func (o *Objects) Start(ctx context.Context, ns, name string) (*Current, error) {
	cur, err := o.Resolve(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if cur.Template != nil {
		return o.fromTemplate(ctx, cur.Template)
	}
	obj := cur.Instance
	if obj.GetDeletionTimestamp() != nil {
		// A re-run or a stop that stored a template was cut short: finish it.
		if tpl, err := o.GetTemplate(ctx, ns, name); err == nil {
			if err := o.waitGone(ctx, ns, name); err != nil {
				return nil, err
			}
			return o.fromTemplate(ctx, tpl)
		}
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("it is being deleted"))
	}
	// An instance exists: a template left beside it by an interrupted start or stop is stale. A caller
	// who may not read ConfigMaps starts the instance all the same.
	if err := o.deleteTemplateOf(ctx, ns, name); err != nil && !apierrors.IsForbidden(err) {
		return nil, err
	}
	if kueueManaged(obj) && !ray.Ended(o.Kind.Status(obj)) {
		return o.setWorkloadActive(ctx, cur, true)
	}
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		out, err := o.patchSuspend(ctx, ns, name, false)
		return &Current{Instance: out}, err
	}
	if o.Kind.Reruns(o.Kind.Status(obj)) {
		return o.rerun(ctx, obj)
	}
	return o.nothingToDo(ctx, cur, o.Kind.StartVerb())
}

// Stop stops ns/name and returns it as it is afterwards. Stopping what is stopped changes nothing.
func (o *Objects) Stop(ctx context.Context, ns, name string) (*Current, error) {
	cur, err := o.Resolve(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if cur.Template != nil {
		// A template is stopped; stopping it was deleting its instance.
		return o.nothingToDo(ctx, cur, "delete")
	}
	obj := cur.Instance
	if obj.GetDeletionTimestamp() != nil {
		// What is being deleted stays deleted: a stop that stored it as a template would bring it back,
		// signed with its creator, once the finalizers are done.
		if err := o.mayDo(ctx, o.Kind.StopVerb(), ns, name); err != nil {
			return nil, err
		}
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("it is being deleted"))
	}
	status := o.Kind.Status(obj)
	// Where KubeRay suspends in place, the spec says what was asked: a stop right after a start finds the
	// status still Stopped while the spec says run, and must suspend it again.
	suspendable := o.Kind.Suspendable(obj)
	asked, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
	switch {
	case kueueManaged(obj) && !ray.Ended(status):
		return o.setWorkloadActive(ctx, cur, false)
	case suspendable && asked:
		return o.nothingToDo(ctx, cur, "patch")
	case ray.Ended(status):
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name,
			fmt.Errorf("it has finished (%s): there is nothing to stop; start runs it again", status))
	case suspendable:
		out, err := o.patchSuspend(ctx, ns, name, true)
		return &Current{Instance: out}, err
	case status == ray.StatusStopped || status == ray.StatusStopping:
		return o.nothingToDo(ctx, cur, o.Kind.StopVerb())
	}
	switch o.Kind.StopBy {
	case ray.StopViaDashboard:
		return cur, o.stopRayJob(ctx, obj)
	case ray.StopToTemplate:
		return o.toTemplate(ctx, obj)
	}
	return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("this kind cannot be stopped"))
}

// Delete deletes ns/name: the instance, refused while it is Running unless force, and any template of
// the name. pending: the instance is still there, being deleted, until the finalizers on it are done
// (KubeRay's on a RayJob, a RayService from v1.6.2, and a RayCluster with GCS fault tolerance): a delete of
// an instance already being deleted says so, and deletes only a template of the name that a stop or re-run
// cut short left beside it, which would bring the object back once it is gone.
func (o *Objects) Delete(ctx context.Context, ns, name string, force bool) (pending bool, err error) {
	cur, err := o.Resolve(ctx, ns, name)
	if err != nil {
		return false, err
	}
	switch {
	case cur.Instance != nil && cur.Instance.GetDeletionTimestamp() != nil:
		if err := o.mayDo(ctx, "delete", ns, name); err != nil {
			return false, err
		}
		pending = true
	case cur.Instance != nil:
		if o.Summarize(cur).Status == ray.StatusRunning && !force {
			// The refusal of a Running object is advice to one who could delete it; whoever may not is
			// told that, as the apiserver would tell them.
			if err := o.mayDo(ctx, "delete", ns, name); err != nil {
				return false, err
			}
			return false, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("it is Running: stop it first, or delete with force=true"))
		}
		if err := o.deleteInstance(ctx, ns, name); err != nil {
			return false, err
		}
		// The apiserver answers a delete before finalizers are done: what is read right after tells.
		got, err := o.resource(ns).Get(ctx, name, metav1.GetOptions{})
		pending = err == nil && got.GetUID() == cur.Instance.GetUID()
	}
	if cur.Template != nil {
		return pending, o.deleteTemplate(ctx, cur.Template)
	}
	// A caller who may not read or delete ConfigMaps deletes instances all the same, where there is
	// no template.
	if err := o.deleteTemplateOf(ctx, ns, name); err != nil && !apierrors.IsForbidden(err) {
		return false, err
	}
	return pending, nil
}

// nothingToDo answers a start or stop that finds nothing to do: cur as it is, marked unchanged, once the
// caller is seen to hold verb on the object, the right the action would have needed. The apiserver
// authorizes a patch that changes nothing all the same, and so does this: a caller who may only read the
// object gets 403 (as kubectl's patch would), never a 200 that looks like a write.
func (o *Objects) nothingToDo(ctx context.Context, cur *Current, verb string) (*Current, error) {
	var ns, name string
	if cur.Instance != nil {
		ns, name = cur.Instance.GetNamespace(), cur.Instance.GetName()
	} else {
		ns, name = cur.Template.ConfigMap.Namespace, cur.Template.Manifest.GetName()
	}
	if err := o.mayDo(ctx, verb, ns, name); err != nil {
		return nil, err
	}
	out := *cur
	out.Unchanged = true
	return &out, nil
}

// mayDo is Forbidden unless the caller may do verb on ns/name of the kind.
func (o *Objects) mayDo(ctx context.Context, verb, ns, name string) error {
	gr := o.Kind.GVR().GroupResource()
	allowed, err := o.may(ctx, auth.Attributes{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	if !allowed {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("the caller may not %s it", verb))
	}
	return nil
}

func (o *Objects) patchSuspend(ctx context.Context, ns, name string, suspend bool) (*unstructured.Unstructured, error) {
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	return o.resource(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

// fromTemplate creates the object a template holds, then removes the template. If the create fails the
// template stays, so that nothing is lost and starting again completes the start.
func (o *Objects) fromTemplate(ctx context.Context, tpl *ray.Template) (*Current, error) {
	m := tpl.Manifest.DeepCopy()
	m.SetResourceVersion("")
	obj, err := o.create(ctx, m, false, tpl.CreatorSigned())
	if apierrors.IsAlreadyExists(err) { // created by an earlier start that did not get to remove the template
		obj, err = o.Get(ctx, m.GetNamespace(), m.GetName())
	}
	if err != nil {
		return nil, err
	}
	if err := o.deleteTemplate(ctx, tpl); err != nil {
		return nil, err
	}
	return &Current{Instance: obj}, nil
}

// saveTemplate stores obj's manifest as its template.
//
// A template already there is adopted only where this service stored it for this very instance (an
// earlier attempt that was cut short); an older template of its own is replaced by the instance,
// which is what runs; and a ConfigMap it did not write is refused (Conflict), never adopted.
func (o *Objects) saveTemplate(ctx context.Context, obj *unstructured.Unstructured) (*ray.Template, error) {
	cm, err := o.m.Templates.ConfigMap(o.Kind, obj, string(obj.GetUID()), o.m.Templates.CreatorSigned(o.Kind, obj))
	if err != nil {
		return nil, err
	}
	cms := o.configMaps(obj.GetNamespace())
	saved, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, gerr := o.GetTemplate(ctx, obj.GetNamespace(), obj.GetName())
		if gerr != nil {
			return nil, gerr
		}
		if existing.ConfigMap.Annotations[ray.TemplateParkedUIDKey] == string(obj.GetUID()) {
			return existing, nil
		}
		cm.ResourceVersion = existing.ConfigMap.ResourceVersion
		saved, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	return o.m.Templates.Read(o.Kind, saved)
}

// toTemplate stops an object that cannot be suspended: its manifest is stored first, then the instance
// is deleted, so that a failure in between leaves at least one of them.
func (o *Objects) toTemplate(ctx context.Context, obj *unstructured.Unstructured) (*Current, error) {
	tpl, err := o.saveTemplate(ctx, obj)
	if err != nil {
		return nil, err
	}
	if err := o.deleteInstance(ctx, obj.GetNamespace(), obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return &Current{Template: tpl}, nil
}

// rerun runs a finished object again by re-creating it from its spec: stored as a template, deleted,
// created anew, template removed. Each step can be repeated; a start after an interruption completes it.
func (o *Objects) rerun(ctx context.Context, obj *unstructured.Unstructured) (*Current, error) {
	tpl, err := o.saveTemplate(ctx, obj)
	if err != nil {
		return nil, err
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	if err := o.deleteInstance(ctx, ns, name); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := o.waitGone(ctx, ns, name); err != nil {
		return nil, err
	}
	return o.fromTemplate(ctx, tpl)
}

// defaultDeleteWait bounds a re-run's wait for the finished object to go, where the Manager sets none.
const defaultDeleteWait = 30 * time.Second

func (o *Objects) waitGone(ctx context.Context, ns, name string) error {
	wait := o.m.DeleteWait
	if wait == 0 {
		wait = defaultDeleteWait
	}
	deadline := time.Now().Add(wait)
	for {
		_, err := o.Get(ctx, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return apierrors.NewConflict(o.Kind.GVR().GroupResource(), name,
				errors.New("the previous run is still being deleted; start it again to finish"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopRayJob stops a RayJob's Ray job through the Ray dashboard job API of its cluster, after checking
// that the caller may update the RayJob (the dashboard itself knows no Kubernetes users).
func (o *Objects) stopRayJob(ctx context.Context, obj *unstructured.Unstructured) error {
	ns, name := obj.GetNamespace(), obj.GetName()
	gr := o.Kind.GVR().GroupResource()
	allowed, err := o.may(ctx, auth.Attributes{Verb: "update", Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	if !allowed {
		return apierrors.NewForbidden(gr, name, errors.New("the caller may not update it"))
	}
	jobID, _, _ := unstructured.NestedString(obj.Object, "status", "jobId")
	addr := ""
	if o.m.Dashboards != nil {
		sum := o.Kind.Summarize(obj)
		addr = o.m.Dashboards.Address(o.Kind, obj, &sum)
	}
	if jobID == "" || addr == "" {
		return apierrors.NewConflict(gr, name,
			errors.New("its Ray job has not been submitted yet; stop it again once it runs, or delete it"))
	}
	token, err := o.DashboardToken(ctx, obj)
	if err != nil {
		if errors.Is(err, ErrNoRayToken) {
			return apierrors.NewConflict(gr, name, fmt.Errorf("its Ray cluster takes a token, and there is none to send: %w", err))
		}
		return err
	}
	if err := o.m.Dashboards.StopJob(ctx, addr, jobID, token); err != nil {
		if errors.Is(err, dashboard.ErrNoSuchJob) {
			return apierrors.NewConflict(gr, name, fmt.Errorf("its Ray job %s has not been submitted yet (%w); stop it again once it runs, or delete it", jobID, err))
		}
		// A dashboard that wants a token the spec gives none for: what the user must change, which the
		// API answers as a conflict with the object's spec.
		if tokenErr := o.Kind.TokenRequired(obj); errors.Is(err, ray.ErrTokenRequired) && tokenErr != nil {
			return tokenErr
		}
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the Ray dashboard of %s/%s %v", ns, name, err))
	}
	return nil
}
