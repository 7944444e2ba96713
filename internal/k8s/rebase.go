package k8s

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"ray-service/internal/ray"
)

// A replace of an exported object while KubeRay reconciles it.
//
// A console exports an object, its user edits the YAML and sends it back. Meanwhile KubeRay writes the
// object's status (and a RayJob's or RayService's finalizers), each write a new resourceVersion, so a
// replace conditioned on the version the export carries would be refused although nobody changed what
// the caller changes. Such a replace is rebased, part by part, as a three-way merge of the caller's
// manifest, the export it started from and the object as it is now:
//   - a part the caller sent as exported keeps the current one (the operator's finalizer, another user's
//     label);
//   - a part the caller changed is written when nobody else changed it since the export;
//   - a part both changed, differently, is a conflict: 409, naming the part.
//
// The parts are the spec, the labels, the annotations, the finalizers and the owner references, each
// whole (status is never written by a replace). The export is read back at its resourceVersion, with
// the caller's rights, by a list with resourceVersionMatch=Exact, which the apiserver answers until it
// compacts that version (every 5 minutes by default, keeping the last interval). When the export cannot
// be read any more, a part counts as changed by someone else unless it is the same now as the caller
// sent it, and the spec as unchanged since when the generation sent is the current one (a spec write
// moves the generation; status and metadata writes do not).
//
// An object deleted and created again under the same name (another UID) is always a conflict.

// rebasedParts are the parts of an object a replace writes.
var rebasedParts = [][]string{
	{"spec"},
	{"metadata", "labels"},
	{"metadata", "annotations"},
	{"metadata", "finalizers"},
	{"metadata", "ownerReferences"},
}

// rebaseAttempts bounds the rebases of one replace: each follows a write by someone else between the
// read of the current object and the update.
const rebaseAttempts = 5

// replaceInstance updates an instance with obj, rebased on the current object where obj carries an
// older resourceVersion (see above).
func (o *Objects) replaceInstance(ctx context.Context, obj, current *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	sent := obj.GetResourceVersion()
	if sent == "" {
		ray.KeepCreator(obj, current)
		return o.update(ctx, obj, dryRun)
	}
	var base *unstructured.Unstructured
	baseRead := false
	for attempt := 1; ; attempt++ {
		next := obj
		if current.GetResourceVersion() != sent {
			if !baseRead {
				base, baseRead = o.at(ctx, obj.GetNamespace(), obj.GetName(), sent), true
			}
			var err error
			if next, err = rebase(obj, base, current); err != nil {
				return nil, apierrors.NewConflict(o.Kind.GVR().GroupResource(), obj.GetName(), err)
			}
		}
		ray.KeepCreator(next, current)
		updated, err := o.update(ctx, next, dryRun)
		if !apierrors.IsConflict(err) || attempt == rebaseAttempts {
			return updated, err
		}
		if current, err = o.Get(ctx, obj.GetNamespace(), obj.GetName()); err != nil {
			return nil, err
		}
	}
}

// at reads ns/name as it was at resourceVersion rv, or nil where the apiserver no longer has it or the
// caller may not list the kind.
func (o *Objects) at(ctx context.Context, ns, name, rv string) *unstructured.Unstructured {
	list, err := o.resource(ns).List(ctx, metav1.ListOptions{
		FieldSelector:        fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion:      rv,
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil || len(list.Items) != 1 {
		return nil
	}
	return &list.Items[0]
}

// rebase returns the caller's manifest sent, written over current: each part as the three-way merge
// above decides, with current's resourceVersion. base is the object sent was exported from, or nil
// where it could not be read. The error names the first part both changed.
func rebase(sent, base, current *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if uid := sent.GetUID(); uid != "" && uid != current.GetUID() {
		return nil, fmt.Errorf("the object was deleted and created again since resourceVersion %s: read it again", sent.GetResourceVersion())
	}
	if base != nil && base.GetUID() != current.GetUID() {
		return nil, fmt.Errorf("the object was deleted and created again since resourceVersion %s: read it again", sent.GetResourceVersion())
	}
	out := sent.DeepCopy()
	for _, path := range rebasedParts {
		mine, now := part(sent, path), part(current, path)
		var was any
		known := base != nil
		switch {
		case known:
			was = part(base, path)
		case path[0] == "spec" && sent.GetUID() != "" && sent.GetGeneration() != 0 && sent.GetGeneration() == current.GetGeneration():
			// Only for the object sent: one created again under the name counts its generations anew.
			was, known = now, true
		}
		switch {
		case equality.Semantic.DeepEqual(mine, now):
			setPart(out, path, current) // the same either way: as it is written now
		case known && equality.Semantic.DeepEqual(mine, was):
			setPart(out, path, current) // the caller left it: someone else's change stays
		case known && equality.Semantic.DeepEqual(now, was):
			// only the caller changed it
		default:
			return nil, fmt.Errorf("%s was changed since resourceVersion %s by someone else, and the manifest changes it too: read the object again and make the change on it",
				strings.Join(path, "."), sent.GetResourceVersion())
		}
	}
	out.SetResourceVersion(current.GetResourceVersion())
	return out, nil
}

// part is o's value at path, as compared: the empty fields a typed write adds are absent, and the
// creator's label and annotations are left out (a replace keeps the ones recorded at creation, see
// ray.KeepCreator). KubeRay updates a new RayJob through its Go types to add its finalizer
// (ray-operator/controllers/ray/rayjob_controller.go, v1.6.0: r.Update in JobDeploymentStatusNew),
// which writes the empty structs the manifest left out (`template.metadata: {}`, `scaleStrategy: {}`):
// the spec's generation moves, its meaning does not. Other empty values keep their meaning (an
// affinity term's `namespaceSelector: {}` is every namespace, its absence the pod's own).
func part(o *unstructured.Unstructured, path []string) any {
	v, ok, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
	if !ok {
		return nil
	}
	if t, ok := v.(map[string]any); ok && path[0] == "metadata" {
		t = maps.Clone(t)
		delete(t, ray.CreatorKey)
		delete(t, ray.CreatorSignatureKey)
		v = t
	}
	return pruned(v)
}

// typedEmpty are the fields a write through Go types adds, empty, where a manifest left them out: struct
// fields without omitempty's effect (ObjectMeta, ScaleStrategy, ResourceRequirements) and a metadata's
// creationTimestamp: null.
var typedEmpty = map[string]bool{"metadata": true, "scaleStrategy": true, "resources": true, "creationTimestamp": true}

// pruned is v without the typedEmpty fields that are empty or null, at any depth; nil where an object or
// a list is left empty. Any other field left empty stays, as an empty object or list (or null).
func pruned(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			p := pruned(e)
			switch {
			case p != nil:
				out[k] = p
			case typedEmpty[k]:
			case isList(e):
				out[k] = []any{}
			case e != nil:
				out[k] = map[string]any{}
			default:
				out[k] = nil
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = pruned(e)
		}
		return out
	}
	return v
}

// setPart sets out's value at path to from's.
func setPart(out *unstructured.Unstructured, path []string, from *unstructured.Unstructured) {
	v, ok, _ := unstructured.NestedFieldCopy(from.Object, path...)
	if !ok {
		unstructured.RemoveNestedField(out.Object, path...)
		return
	}
	_ = unstructured.SetNestedField(out.Object, v, path...)
}

func isList(v any) bool {
	_, ok := v.([]any)
	return ok
}
