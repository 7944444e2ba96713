package signing

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/ray"
)

// creatorSignature covers the creator and the object it is recorded on: its kind, namespace, name and
// UID. The UID makes it this object's alone: one copied onto an object of the same kind, namespace and
// name made later (once the signed one is gone) does not hold, as utilization is billed to a signed
// creator.
func (s *Signer) creatorSignature(k *ray.Kind, o *unstructured.Unstructured) string {
	return s.mac("ray-creator/v2", k.Kind, o.GetNamespace(), o.GetName(), string(o.GetUID()), o.GetAnnotations()[ray.CreatorKey])
}

// CreatorSignature is the signature of the creator recorded on o, an object made already (it has its
// UID): "" where none is recorded or o has no UID yet.
func (s *Signer) CreatorSignature(k *ray.Kind, o *unstructured.Unstructured) string {
	if s == nil || o.GetAnnotations()[ray.CreatorKey] == "" || o.GetUID() == "" {
		return ""
	}
	return s.creatorSignature(k, o)
}

// SignCreator signs the creator recorded on o, an object made already (nothing when none is recorded or
// o has no UID).
func (s *Signer) SignCreator(k *ray.Kind, o *unstructured.Unstructured) {
	sig := s.CreatorSignature(k, o)
	if sig == "" {
		return
	}
	ann := o.GetAnnotations()
	ann[ray.CreatorSignatureKey] = sig
	o.SetAnnotations(ann)
}

// SignCreatorAt signs the creator recorded on o, about to be created at now, for the moment until it can
// be signed over its UID (SignCreator): the signature holds only for an object created within
// provisionalSkew of now, so that a copy outlives no object of that name by more.
func (s *Signer) SignCreatorAt(k *ray.Kind, o *unstructured.Unstructured, now time.Time) {
	ann := o.GetAnnotations()
	if s == nil || ann[ray.CreatorKey] == "" {
		return
	}
	at := strconv.FormatInt(now.Unix(), 10)
	ann[ray.CreatorSignatureKey] = provisionalPrefix + at + ":" + s.provisionalSignature(k, o, at)
	o.SetAnnotations(ann)
}

// provisionalPrefix starts a signature made before the object existed: "at:<Unix seconds>:<MAC>".
const provisionalPrefix = "at:"

// provisionalSkew is how far an object's creation may be from its provisional signature's time: the
// create follows the signature at once, and the apiserver's clock may differ from the service's.
const provisionalSkew = time.Minute

func (s *Signer) provisionalSignature(k *ray.Kind, o *unstructured.Unstructured, at string) string {
	return s.mac("ray-creator-at/v1", k.Kind, o.GetNamespace(), o.GetName(), at, o.GetAnnotations()[ray.CreatorKey])
}

// CreatorSigned tells whether the service wrote o's creator annotation, on this very object: signed over
// its UID, or provisionally for an object created when the signature was made.
func (s *Signer) CreatorSigned(k *ray.Kind, o *unstructured.Unstructured) bool {
	sig := o.GetAnnotations()[ray.CreatorSignatureKey]
	if s == nil || sig == "" || o.GetAnnotations()[ray.CreatorKey] == "" {
		return false
	}
	if rest, ok := strings.CutPrefix(sig, provisionalPrefix); ok {
		at, mac, ok := strings.Cut(rest, ":")
		unix, err := strconv.ParseInt(at, 10, 64)
		created := o.GetCreationTimestamp().Time
		if !ok || err != nil || created.IsZero() || created.Sub(time.Unix(unix, 0)).Abs() > provisionalSkew {
			return false
		}
		return equal(mac, s.provisionalSignature(k, o, at))
	}
	want := s.CreatorSignature(k, o)
	return want != "" && equal(sig, want)
}
