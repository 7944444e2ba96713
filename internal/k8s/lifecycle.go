package k8s

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// How a kind is stopped when it cannot be suspended in place.
type stopMode int

const (
	// stopUnsupported: nothing but suspension stops it.
	stopUnsupported stopMode = iota
	// stopViaDashboard: stop the Ray job through its cluster's Ray dashboard (RayJob).
	stopViaDashboard
	// stopToTemplate: store the manifest as a template and delete the instance (RayService).
	stopToTemplate
)

// Lifecycle starts and stops Ray objects as the caller (see API.md, "Start, stop, and templates").
type Lifecycle struct {
	// Dashboards reaches Ray dashboards, to stop a RayJob's Ray job.
	Dashboards *Dashboards
	// DeleteWait bounds how long a re-run waits for the finished object to go.
	DeleteWait time.Duration
	// Store completes statuses with what the pods say (a RayCluster whose head cannot start is Failed).
	Store *Store
}

// NewLifecycle returns a Lifecycle.
func NewLifecycle(dashboards *Dashboards, store *Store) *Lifecycle {
	return &Lifecycle{Dashboards: dashboards, Store: store, DeleteWait: 30 * time.Second}
}

// Current is an object as it is now: an instance, or a template.
type Current struct {
	Instance *unstructured.Unstructured
	Template *Template
}

// Resolve reads ns/name as the caller: the instance when there is one, else the template. Neither is
// NotFound.
func (k *Kind) Resolve(ctx context.Context, c *Clients, ns, name string) (*Current, error) {
	obj, err := k.Get(ctx, c.Dynamic, ns, name)
	if err == nil {
		return &Current{Instance: obj}, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	tpl, terr := k.GetTemplate(ctx, c.Core, ns, name)
	if terr != nil {
		if apierrors.IsNotFound(terr) || apierrors.IsForbidden(terr) {
			return nil, err // the instance's NotFound
		}
		return nil, terr
	}
	return &Current{Template: tpl}, nil
}

// Suspendable tells whether KubeRay can suspend this object in place.
func (k *Kind) Suspendable(o *unstructured.Unstructured) bool {
	return k.suspendable != nil && k.suspendable(o)
}

// Status is the normalized status of an instance.
func (k *Kind) Status(o *unstructured.Unstructured) string { return k.status(o) }

func finished(status string) bool {
	return status == StatusSucceeded || status == StatusFailed
}

// CreateStopped creates o without starting it: suspended where KubeRay allows, else as a template.
func (l *Lifecycle) CreateStopped(ctx context.Context, c *Clients, k *Kind, o *unstructured.Unstructured, dryRun bool) (*Current, error) {
	if k.Suspendable(o) {
		if err := unstructured.SetNestedField(o.Object, true, "spec", "suspend"); err != nil {
			return nil, err
		}
		obj, err := k.Create(ctx, c.Dynamic, o, dryRun)
		if err != nil {
			return nil, err
		}
		return &Current{Instance: obj}, nil
	}
	tpl, err := k.CreateTemplate(ctx, c, o, dryRun)
	if err != nil {
		return nil, err
	}
	return &Current{Template: tpl}, nil
}

// Start starts ns/name and returns it as it is afterwards. Starting what already runs changes nothing.
func (l *Lifecycle) Start(ctx context.Context, c *Clients, k *Kind, ns, name string) (*Current, error) {
	cur, err := k.Resolve(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	if cur.Template != nil {
		return l.fromTemplate(ctx, c, k, cur.Template)
	}
	obj := cur.Instance
	if obj.GetDeletionTimestamp() != nil {
		// A re-run or a stop that stored a template was cut short: finish it.
		if tpl, err := k.GetTemplate(ctx, c.Core, ns, name); err == nil {
			if err := l.waitGone(ctx, c, k, ns, name); err != nil {
				return nil, err
			}
			return l.fromTemplate(ctx, c, k, tpl)
		}
		return nil, apierrors.NewConflict(k.GVR().GroupResource(), name, fmt.Errorf("it is being deleted"))
	}
	// An instance exists: a template left beside it by an interrupted start or stop is stale.
	if err := k.DeleteTemplate(ctx, c.Core, ns, name); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if suspended, _, _ := unstructured.NestedBool(obj.Object, "spec", "suspend"); suspended {
		out, err := k.patchSuspend(ctx, c, ns, name, false)
		return &Current{Instance: out}, err
	}
	status := k.status(obj)
	if k.rerunnable != nil && k.rerunnable(obj, status) {
		return l.rerun(ctx, c, k, obj)
	}
	return cur, nil
}

// Stop stops ns/name and returns it as it is afterwards. Stopping what is stopped changes nothing.
func (l *Lifecycle) Stop(ctx context.Context, c *Clients, k *Kind, ns, name string) (*Current, error) {
	cur, err := k.Resolve(ctx, c, ns, name)
	if err != nil || cur.Template != nil {
		return cur, err // a template is stopped
	}
	obj := cur.Instance
	status := k.status(obj)
	switch {
	case status == StatusStopped || status == StatusStopping:
		return cur, nil
	case finished(status):
		return nil, apierrors.NewConflict(k.GVR().GroupResource(), name,
			fmt.Errorf("it has finished (%s): there is nothing to stop; start runs it again", status))
	case k.Suspendable(obj):
		out, err := k.patchSuspend(ctx, c, ns, name, true)
		return &Current{Instance: out}, err
	}
	switch k.stopMode {
	case stopViaDashboard:
		return cur, l.stopRayJob(ctx, c, k, obj)
	case stopToTemplate:
		return l.toTemplate(ctx, c, k, obj)
	}
	return nil, apierrors.NewConflict(k.GVR().GroupResource(), name, fmt.Errorf("this kind cannot be stopped"))
}

// Delete deletes ns/name, as the caller: the instance, refused while it is Running unless force, and
// any template of the name.
func (l *Lifecycle) Delete(ctx context.Context, c *Clients, k *Kind, ns, name string, force bool) error {
	cur, err := k.Resolve(ctx, c, ns, name)
	if err != nil {
		return err
	}
	if cur.Instance != nil {
		sum := k.Summarize(cur.Instance)
		if l.Store != nil {
			l.Store.CompleteSummary(&sum)
		}
		if sum.Status == StatusRunning && !force {
			return apierrors.NewConflict(k.GVR().GroupResource(), name, fmt.Errorf("it is Running: stop it first, or delete with force=true"))
		}
		if err := k.Delete(ctx, c.Dynamic, ns, name); err != nil {
			return err
		}
	}
	// A caller who may not delete ConfigMaps deletes instances all the same, where there is no template.
	if err := k.DeleteTemplate(ctx, c.Core, ns, name); err != nil && !apierrors.IsNotFound(err) &&
		(cur.Template != nil || !apierrors.IsForbidden(err)) {
		return err
	}
	return nil
}

func (k *Kind) patchSuspend(ctx context.Context, c *Clients, ns, name string, suspend bool) (*unstructured.Unstructured, error) {
	patch := fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)
	return c.Dynamic.Resource(k.GVR()).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
}

// fromTemplate creates the object a template holds, then removes the template. If the create fails the
// template stays, so that nothing is lost and starting again completes the start.
func (l *Lifecycle) fromTemplate(ctx context.Context, c *Clients, k *Kind, tpl *Template) (*Current, error) {
	o := tpl.Manifest.DeepCopy()
	o.SetResourceVersion("")
	obj, err := k.Create(ctx, c.Dynamic, o, false)
	if apierrors.IsAlreadyExists(err) { // created by an earlier start that did not get to remove the template
		obj, err = k.Get(ctx, c.Dynamic, o.GetNamespace(), o.GetName())
	}
	if err != nil {
		return nil, err
	}
	if err := k.DeleteTemplate(ctx, c.Core, o.GetNamespace(), o.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return &Current{Instance: obj}, nil
}

// saveTemplate stores obj's manifest as its template (keeping one an interrupted step left).
func (l *Lifecycle) saveTemplate(ctx context.Context, c *Clients, k *Kind, obj *unstructured.Unstructured) (*Template, error) {
	cm, err := k.templateConfigMap(obj)
	if err != nil {
		return nil, err
	}
	created, err := c.Core.CoreV1().ConfigMaps(obj.GetNamespace()).Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return k.GetTemplate(ctx, c.Core, obj.GetNamespace(), obj.GetName())
	}
	if err != nil {
		return nil, err
	}
	m, err := templateManifest(created)
	if err != nil {
		return nil, err
	}
	return &Template{ConfigMap: created, Manifest: m}, nil
}

// toTemplate stops an object that cannot be suspended: its manifest is stored first, then the instance
// is deleted, so that a failure in between leaves at least one of them.
func (l *Lifecycle) toTemplate(ctx context.Context, c *Clients, k *Kind, obj *unstructured.Unstructured) (*Current, error) {
	tpl, err := l.saveTemplate(ctx, c, k, obj)
	if err != nil {
		return nil, err
	}
	if err := k.Delete(ctx, c.Dynamic, obj.GetNamespace(), obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return &Current{Template: tpl}, nil
}

// rerun runs a finished object again by re-creating it from its spec: stored as a template, deleted,
// created anew, template removed. Each step can be repeated; a start after an interruption completes it.
func (l *Lifecycle) rerun(ctx context.Context, c *Clients, k *Kind, obj *unstructured.Unstructured) (*Current, error) {
	tpl, err := l.saveTemplate(ctx, c, k, obj)
	if err != nil {
		return nil, err
	}
	ns, name := obj.GetNamespace(), obj.GetName()
	if err := k.Delete(ctx, c.Dynamic, ns, name); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := l.waitGone(ctx, c, k, ns, name); err != nil {
		return nil, err
	}
	return l.fromTemplate(ctx, c, k, tpl)
}

func (l *Lifecycle) waitGone(ctx context.Context, c *Clients, k *Kind, ns, name string) error {
	deadline := time.Now().Add(l.DeleteWait)
	for {
		_, err := k.Get(ctx, c.Dynamic, ns, name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return apierrors.NewConflict(k.GVR().GroupResource(), name,
				fmt.Errorf("the previous run is still being deleted; start it again to finish"))
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
func (l *Lifecycle) stopRayJob(ctx context.Context, c *Clients, k *Kind, obj *unstructured.Unstructured) error {
	ns, name := obj.GetNamespace(), obj.GetName()
	review, err := c.Core.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: "update", Group: RayGroupVersion.Group, Resource: k.Resource, Namespace: ns, Name: name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !review.Status.Allowed {
		return apierrors.NewForbidden(k.GVR().GroupResource(), name, fmt.Errorf("the caller may not update it"))
	}
	jobID, _, _ := unstructured.NestedString(obj.Object, "status", "jobId")
	dashboard := l.Dashboards.Address(k, obj)
	if jobID == "" || dashboard == "" {
		return apierrors.NewConflict(k.GVR().GroupResource(), name,
			fmt.Errorf("its Ray job has not been submitted yet; stop it again once it runs, or delete it"))
	}
	u := "http://" + dashboard + "/api/jobs/" + url.PathEscape(jobID) + "/stop"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	res, err := l.Dashboards.Client.Do(req)
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
