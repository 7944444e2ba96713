package k8s

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// kueueManaged tells whether Kueue admits the object (its label kueue.x-k8s.io/queue-name): then Kueue
// owns spec.suspend (its webhook suspends the object at create and it resumes it on admission, and
// undoes a suspend it did not make, kueue#8900), and a start or stop acts on its Workload instead.
func kueueManaged(obj *unstructured.Unstructured) bool {
	return obj.GetLabels()[ray.KueueQueueLabel] != ""
}

// setWorkloadActive starts or stops a Kueue-managed object the way Kueue documents it: its Workload's
// spec.active (false: Kueue evicts it with reason Deactivated and suspends the object; true: it queues
// again and Kueue resumes it once admitted). Made as the caller, who needs the right to patch
// workloads.kueue.x-k8s.io there. The object is returned as it is; a Workload already so changes nothing, once
// the caller is seen to hold that right.
func (o *Objects) setWorkloadActive(ctx context.Context, cur *Current, active bool) (*Current, error) {
	obj := cur.Instance
	workloads := o.Clients.Dynamic.Resource(ray.WorkloadResource()).Namespace(obj.GetNamespace())
	list, err := workloads.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		wl := &list.Items[i]
		if !ownedBy(wl, obj) {
			continue
		}
		if now, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); (found && now == active) || (!found && active) {
			// Nothing to do still needs the right the patch would have: a reader gets 403, as elsewhere.
			gr := ray.WorkloadResource().GroupResource()
			allowed, err := o.may(ctx, auth.Attributes{Verb: "patch", Group: gr.Group, Resource: gr.Resource, Namespace: wl.GetNamespace(),
				Name: wl.GetName()})
			if err != nil {
				return nil, err
			}
			if !allowed {
				return nil, apierrors.NewForbidden(gr, wl.GetName(), fmt.Errorf("the caller may not patch the Workload of %s %s", o.Kind.Kind, obj.GetName()))
			}
			out := *cur
			out.Unchanged = true
			return &out, nil
		}
		patch := fmt.Sprintf(`{"spec":{"active":%t}}`, active)
		if _, err := workloads.Patch(ctx, wl.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return nil, err
		}
		return cur, nil
	}
	return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), obj.GetName(),
		fmt.Errorf("it is admitted by Kueue (label %s=%s), which has made no Workload for it yet: try again shortly",
			ray.KueueQueueLabel, obj.GetLabels()[ray.KueueQueueLabel]))
}

// ownedBy tells whether the object controls wl.
func ownedBy(wl, obj *unstructured.Unstructured) bool {
	for _, ref := range wl.GetOwnerReferences() {
		if ref.UID == obj.GetUID() && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
