package k8s

import (
	"context"

	"k8s.io/client-go/util/retry"

	"ray-service/internal/ray"
)

// Scale sets a worker group's replicas and bounds, as the caller: in the instance, else in the
// template. Each write is an update guarded by the resourceVersion read, so nothing changed in between
// is lost: on a conflict (the operator updating the status, most often) the object is read again and
// the change applied to it, a few times, before the conflict is the answer.
func (o *Objects) Scale(ctx context.Context, ns, name string, r ray.ScaleRequest) (*Current, []string, error) {
	var cur *Current
	var warnings []string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		cur, warnings, err = o.scaleOnce(ctx, ns, name, r)
		return err
	})
	return cur, warnings, err
}

func (o *Objects) scaleOnce(ctx context.Context, ns, name string, r ray.ScaleRequest) (*Current, []string, error) {
	cur, err := o.Resolve(ctx, ns, name)
	if err != nil {
		return nil, nil, err
	}
	if cur.Template != nil {
		manifest := cur.Template.Manifest.DeepCopy()
		warnings, err := o.Kind.ApplyScale(manifest, r)
		if err != nil {
			return nil, nil, err
		}
		manifest.SetResourceVersion(cur.Template.ConfigMap.ResourceVersion)
		tpl, err := o.updateTemplate(ctx, cur.Template, manifest, false)
		if err != nil {
			return nil, nil, err
		}
		return &Current{Template: tpl}, warnings, nil
	}
	obj := cur.Instance.DeepCopy()
	warnings, err := o.Kind.ApplyScale(obj, r)
	if err != nil {
		return nil, nil, err
	}
	updated, err := o.update(ctx, obj, false)
	if err != nil {
		return nil, nil, err
	}
	return &Current{Instance: updated}, warnings, nil
}
