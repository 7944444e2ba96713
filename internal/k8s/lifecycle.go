package k8s

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/auth"
)

// How a kind is stopped when it cannot be suspended in place.
type stopMode int

const (
	// stopBySuspendOnly: nothing but suspension stops it (the zero value: RayCluster).
	_ stopMode = iota
	// stopViaDashboard: stop the Ray job through its cluster's Ray dashboard (RayJob).
	stopViaDashboard
	// stopToTemplate: store the manifest as a template and delete the instance (RayService).
	stopToTemplate
)

// Suspendable tells whether KubeRay can suspend this object in place.
func (k *Kind) Suspendable(o *unstructured.Unstructured) bool {
	return k.suspendable != nil && k.suspendable(o)
}

// Status is the normalized status of an instance.
func (k *Kind) Status(o *unstructured.Unstructured) string { return k.status(o) }

func finished(status string) bool {
	return status == StatusSucceeded || status == StatusFailed
}

// createStopped creates obj without starting it: suspended where KubeRay allows, else as a template.
func (o *Objects) createStopped(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*Current, error) {
	if o.Kind.Suspendable(obj) {
		if err := unstructured.SetNestedField(obj.Object, true, "spec", "suspend"); err != nil {
			return nil, err
		}
		created, err := o.create(ctx, obj, dryRun)
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
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		out, err := o.patchSuspend(ctx, ns, name, false)
		return &Current{Instance: out}, err
	}
	if o.Kind.rerunnable != nil && o.Kind.rerunnable(o.Kind.status(obj)) {
		return o.rerun(ctx, obj)
	}
	return o.nothingToDo(ctx, cur, o.Kind.startVerb())
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
	status := o.Kind.status(obj)
	// Where KubeRay suspends in place, the spec says what was asked: a stop right after a start finds the
	// status still Stopped while the spec says run, and must suspend it again.
	suspendable := o.Kind.Suspendable(obj)
	asked, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend")
	switch {
	case suspendable && asked:
		return o.nothingToDo(ctx, cur, "patch")
	case finished(status):
		return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name,
			fmt.Errorf("it has finished (%s): there is nothing to stop; start runs it again", status))
	case suspendable:
		out, err := o.patchSuspend(ctx, ns, name, true)
		return &Current{Instance: out}, err
	case status == StatusStopped || status == StatusStopping:
		return o.nothingToDo(ctx, cur, o.Kind.stopVerb())
	}
	switch o.Kind.stopMode {
	case stopViaDashboard:
		return cur, o.stopRayJob(ctx, obj)
	case stopToTemplate:
		return o.toTemplate(ctx, obj)
	}
	return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("this kind cannot be stopped"))
}

// Delete deletes ns/name: the instance, refused while it is Running unless force, and any template of
// the name.
func (o *Objects) Delete(ctx context.Context, ns, name string, force bool) error {
	cur, err := o.Resolve(ctx, ns, name)
	if err != nil {
		return err
	}
	if cur.Instance != nil {
		if o.Summarize(cur).Status == StatusRunning && !force {
			return apierrors.NewConflict(o.Kind.GVR().GroupResource(), name, errors.New("it is Running: stop it first, or delete with force=true"))
		}
		if err := o.deleteInstance(ctx, ns, name); err != nil {
			return err
		}
	}
	if cur.Template != nil {
		return o.deleteTemplate(ctx, cur.Template)
	}
	// A caller who may not read or delete ConfigMaps deletes instances all the same, where there is
	// no template.
	if err := o.deleteTemplateOf(ctx, ns, name); err != nil && !apierrors.IsForbidden(err) {
		return err
	}
	return nil
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
	gr := o.Kind.GVR().GroupResource()
	allowed, err := o.may(ctx, auth.Attributes{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name})
	if err != nil {
		return nil, err
	}
	if !allowed {
		return nil, apierrors.NewForbidden(gr, name, fmt.Errorf("the caller may not %s it", verb))
	}
	out := *cur
	out.Unchanged = true
	return &out, nil
}

// startVerb is the right a start needs: create for a kind started from a template, patch otherwise.
func (k *Kind) startVerb() string {
	if k.stopMode == stopToTemplate {
		return "create"
	}
	return "patch"
}

// stopVerb is the right a stop of an instance that cannot be suspended needs: update for a Ray job stopped
// through its dashboard (see stopRayJob), delete for one stopped to a template, patch otherwise.
func (k *Kind) stopVerb() string {
	switch k.stopMode {
	case stopViaDashboard:
		return "update"
	case stopToTemplate:
		return "delete"
	}
	return "patch"
}

func (o *Objects) patchSuspend(ctx context.Context, ns, name string, suspend bool) (*unstructured.Unstructured, error) {
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	return o.resource(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

// fromTemplate creates the object a template holds, then removes the template. If the create fails the
// template stays, so that nothing is lost and starting again completes the start.
func (o *Objects) fromTemplate(ctx context.Context, tpl *Template) (*Current, error) {
	m := tpl.Manifest.DeepCopy()
	m.SetResourceVersion("")
	obj, err := o.create(ctx, m, false)
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
func (o *Objects) saveTemplate(ctx context.Context, obj *unstructured.Unstructured) (*Template, error) {
	cm, err := o.m.Templates.configMap(o.Kind, obj, string(obj.GetUID()))
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
		if existing.ConfigMap.Annotations[TemplateParkedUIDKey] == string(obj.GetUID()) {
			return existing, nil
		}
		cm.ResourceVersion = existing.ConfigMap.ResourceVersion
		saved, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	return o.m.Templates.read(o.Kind, saved)
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
	dashboard := ""
	if o.m.Dashboards != nil {
		dashboard = o.m.Dashboards.Address(o.Kind, obj)
	}
	if jobID == "" || dashboard == "" {
		return apierrors.NewConflict(gr, name,
			errors.New("its Ray job has not been submitted yet; stop it again once it runs, or delete it"))
	}
	u := "http://" + dashboard + "/api/jobs/" + url.PathEscape(jobID) + "/stop"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	res, err := o.m.Dashboards.Client.Do(req)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the Ray dashboard of %s/%s is unreachable: %v", ns, name, err))
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusOK {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("the Ray dashboard of %s/%s refused to stop job %s: %s %s",
			ns, name, jobID, res.Status, strings.TrimSpace(string(body))))
	}
	return nil
}
