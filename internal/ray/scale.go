package ray

import (
	"fmt"
	"math"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ScaleRequest sets the replica count and bounds of one worker group; a field left out stays as it is.
type ScaleRequest struct {
	// Group names the worker group (its groupName).
	Group       string `json:"group" example:"workers"`
	Replicas    *int64 `json:"replicas,omitempty" example:"3"`
	MinReplicas *int64 `json:"minReplicas,omitempty" example:"1"`
	MaxReplicas *int64 `json:"maxReplicas,omitempty" example:"5"`
}

// ApplyScale sets what r asks in the worker group of the manifest o of kind k, after checking that
// the group exists and that minReplicas ≤ replicas ≤ maxReplicas hold afterwards (Invalid, naming the
// field, otherwise). It returns the warnings of the change.
func (k *Kind) ApplyScale(o *unstructured.Unstructured, r ScaleRequest) ([]string, error) {
	invalid := func(errs ...*field.Error) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: RayGroupVersion.Group, Kind: k.Kind}, o.GetName(), errs)
	}
	if r.Group == "" {
		return nil, invalid(field.Required(field.NewPath("group"), "name the worker group to scale"))
	}
	if r.Replicas == nil && r.MinReplicas == nil && r.MaxReplicas == nil {
		return nil, invalid(field.Required(field.NewPath("replicas"), "give replicas, minReplicas or maxReplicas"))
	}
	var errs field.ErrorList
	for name, v := range map[string]*int64{"replicas": r.Replicas, "minReplicas": r.MinReplicas, "maxReplicas": r.MaxReplicas} {
		if v != nil && (*v < 0 || *v > math.MaxInt32) {
			errs = append(errs, field.Invalid(field.NewPath(name), *v, "must be from 0 to 2147483647"))
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Field, b.Field) })
		return nil, invalid(errs...)
	}
	specPath := slices.Clone(k.ClusterSpecPath)
	groups, _, _ := unstructured.NestedSlice(o.Object, append(specPath, "workerGroupSpecs")...)
	var names []string
	at := -1
	for i, g := range groups {
		gm, _ := g.(map[string]any)
		name, _, _ := unstructured.NestedString(gm, "groupName")
		names = append(names, name)
		if name == r.Group {
			at = i
		}
	}
	if at < 0 {
		e := field.NotFound(field.NewPath("group"), r.Group)
		e.Detail = "the worker groups are " + quoteAll(names)
		return nil, invalid(e)
	}
	group := groups[at].(map[string]any)
	current := func(key string, given *int64, def int64) int64 {
		if given != nil {
			return *given
		}
		if v, ok, _ := unstructured.NestedInt64(group, key); ok {
			return v
		}
		return def
	}
	lo := current("minReplicas", r.MinReplicas, 0)
	hi := current("maxReplicas", r.MaxReplicas, math.MaxInt32)
	replicas := current("replicas", r.Replicas, lo)
	switch {
	case lo > hi:
		return nil, invalid(field.Invalid(field.NewPath("minReplicas"), lo, fmt.Sprintf("must not exceed maxReplicas (%d)", hi)))
	case replicas < lo:
		return nil, invalid(field.Invalid(field.NewPath("replicas"), replicas, fmt.Sprintf("must be at least minReplicas (%d)", lo)))
	case replicas > hi:
		return nil, invalid(field.Invalid(field.NewPath("replicas"), replicas, fmt.Sprintf("must be at most maxReplicas (%d)", hi)))
	}
	for key, v := range map[string]*int64{"replicas": r.Replicas, "minReplicas": r.MinReplicas, "maxReplicas": r.MaxReplicas} {
		if v != nil {
			group[key] = *v
		}
	}
	groups[at] = group
	if err := unstructured.SetNestedSlice(o.Object, groups, append(specPath, "workerGroupSpecs")...); err != nil {
		return nil, err
	}
	warnings := []string{}
	if auto, _, _ := unstructured.NestedBool(o.Object, append(specPath, "enableInTreeAutoscaling")...); auto && r.Replicas != nil {
		warnings = append(warnings, AutoscalerWarning)
	}
	return warnings, nil
}

func quoteAll(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// AutoscalerWarning is the warning a scale answers with when the Ray autoscaler owns the replica count.
const AutoscalerWarning = "the Ray autoscaler (enableInTreeAutoscaling) sets the replicas of this group between " +
	"minReplicas and maxReplicas: the replicas given may be changed by it"
