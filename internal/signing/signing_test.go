package signing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/ray"
)

// A creator's signature is that object's alone: copied onto an object of the same kind, namespace and
// name made later (another UID), it does not hold; an object not made yet (no UID) is not signed.
func TestCreatorSignatureHoldsForItsObjectAlone(t *testing.T) {
	s, err := New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	k := ray.NewKinds().Cluster()
	obj := func(uid string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster"}}
		o.SetNamespace("team")
		o.SetName("train")
		o.SetUID(types.UID(uid))
		o.SetAnnotations(map[string]string{ray.CreatorKey: "alice"})
		return o
	}
	unmade := obj("")
	s.SignCreator(k, unmade)
	assert.Empty(t, unmade.GetAnnotations()[ray.CreatorSignatureKey], "an object without its UID is not signed")
	assert.False(t, s.CreatorSigned(k, unmade))

	first := obj("u-1")
	s.SignCreator(k, first)
	require.True(t, s.CreatorSigned(k, first))

	later := obj("u-2")
	later.SetAnnotations(first.GetAnnotations())
	assert.False(t, s.CreatorSigned(k, later), "a signature copied onto a later object of the same name")
	first.SetAnnotations(map[string]string{ray.CreatorKey: "bob", ray.CreatorSignatureKey: first.GetAnnotations()[ray.CreatorSignatureKey]})
	assert.False(t, s.CreatorSigned(k, first), "another creator")
}

// Before the object exists its creator is signed for the moment of its create: the signature holds for an
// object created then, not for one of the same name created later from a copy.
func TestProvisionalCreatorSignatureHoldsAtItsCreateAlone(t *testing.T) {
	s, err := New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	k := ray.NewKinds().Cluster()
	signedAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster"}}
	o.SetNamespace("team")
	o.SetName("train")
	o.SetAnnotations(map[string]string{ray.CreatorKey: "alice"})
	s.SignCreatorAt(k, o, signedAt)
	require.NotEmpty(t, o.GetAnnotations()[ray.CreatorSignatureKey])
	assert.False(t, s.CreatorSigned(k, o), "not created yet")

	o.SetUID("u-1")
	o.SetCreationTimestamp(metav1.NewTime(signedAt.Add(2 * time.Second)))
	assert.True(t, s.CreatorSigned(k, o), "the object created then")

	later := o.DeepCopy()
	later.SetUID("u-2")
	later.SetCreationTimestamp(metav1.NewTime(signedAt.Add(10 * time.Minute)))
	assert.False(t, s.CreatorSigned(k, later), "a copy on an object of the same name created later")

	other := o.DeepCopy()
	other.SetAnnotations(map[string]string{ray.CreatorKey: "bob", ray.CreatorSignatureKey: o.GetAnnotations()[ray.CreatorSignatureKey]})
	assert.False(t, s.CreatorSigned(k, other), "another creator")
}

// A template vouches for the creator its manifest records only where the service said it set or signed
// it when it wrote the template: an object created with another user's name, stopped into a template,
// is not started again as that user's. The manifest holds no signature of the object it was made from.
func TestTemplateVouchesOnlyForASignedCreator(t *testing.T) {
	s, err := New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	k := ray.NewKinds().ByKind("RayService")
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayService"}}
	o.SetNamespace("team")
	o.SetName("serve")
	o.SetUID("u-1")
	o.SetAnnotations(map[string]string{ray.CreatorKey: "alice"})
	s.SignCreatorAt(k, o, time.Now())
	for _, signed := range []bool{true, false} {
		cm, err := s.ConfigMap(k, o, "u-1", signed)
		require.NoError(t, err)
		tpl, err := s.Read(k, cm)
		require.NoError(t, err, "the service's template is read either way")
		assert.Equal(t, "alice", tpl.Manifest.GetAnnotations()[ray.CreatorKey], "the creator is kept as a claim")
		assert.NotContains(t, tpl.Manifest.GetAnnotations(), ray.CreatorSignatureKey, "no signature is stored")
		assert.Equal(t, signed, tpl.CreatorSigned())
		assert.Equal(t, signed, k.TemplateSummary(tpl).CreatorSigned)
	}
}

// What the service signed before its signing moved here still holds: the same creator, provisional
// creator and template sign to the same signatures (their names, versions and parts unchanged).
func TestSignaturesAreUnchanged(t *testing.T) {
	s, err := New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	k := ray.NewKinds().Cluster()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": map[string]any{"x": int64(1)}}}
	o.SetNamespace("team")
	o.SetName("train")
	o.SetUID("u-1")
	o.SetAnnotations(map[string]string{ray.CreatorKey: "alice"})
	assert.Equal(t, "P46dh0p9ul7Q6CFodwqiZkcYi+pnSqCy1LVhCw58I+s", s.CreatorSignature(k, o))
	p := o.DeepCopy()
	s.SignCreatorAt(k, p, time.Unix(1772366400, 0))
	assert.Equal(t, "at:1772366400:xNimBgDbn0XppDkNQ1fS+WoiPnlIsBKVxY2zjmWIFlk", p.GetAnnotations()[ray.CreatorSignatureKey])
	cm, err := s.ConfigMap(k, o, "u-1", true)
	require.NoError(t, err)
	assert.Equal(t, "+ce+gWtvcmzRZCwaZCOPy2H/WIEk33aSMTIM4ZN2/l4", cm.Annotations[TemplateSignatureKey])
	assert.Equal(t, "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  annotations:\n    ray.openfuyao.com/creator: alice\n"+
		"  name: train\n  namespace: team\nspec:\n  x: 1\n", cm.Data[ray.TemplateDataKey])
}

// A key shorter than MinKeyBytes is refused.
func TestNewRefusesAShortKey(t *testing.T) {
	_, err := New(make([]byte, MinKeyBytes-1))
	require.Error(t, err)
	_, err = New(make([]byte, MinKeyBytes))
	require.NoError(t, err)
}
