package idle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"ray-service/internal/signing"
)

// A policy's signature holds for its ConfigMap (UID) and generation alone: the same contents in a
// ConfigMap made again, or an older generation written back, are refused, saying why; a ConfigMap
// without a signature is simply none.
func TestPolicyRefusal(t *testing.T) {
	s, err := signing.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	policy := func(uid, gen, stopAfter string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: "team", UID: k8stypes.UID("u-" + uid),
			Annotations: map[string]string{PolicyGenerationKey: gen, PolicySetByKey: "admin"}},
			Data: map[string]string{PolicyStopAfterKey: stopAfter}}
		SignPolicy(s, cm)
		return cm
	}
	first, second := policy("1", "1", "1h"), policy("1", "2", "2h")
	reason, signed := PolicyRefusal(s, second, "u-1", 2)
	assert.Empty(t, reason, "the version written last")
	assert.True(t, signed)
	reason, signed = PolicyRefusal(s, first, "u-1", 2)
	assert.Contains(t, reason, "older version")
	assert.True(t, signed)
	copied := first.DeepCopy()
	copied.UID = "u-2"
	reason, _ = PolicyRefusal(s, copied, "", 0)
	assert.Contains(t, reason, "created again")
	edited := second.DeepCopy()
	edited.Data[PolicyStopAfterKey] = "1m"
	reason, _ = PolicyRefusal(s, edited, "u-1", 2)
	assert.Contains(t, reason, "edited")
	delete(edited.Annotations, PolicySignatureKey)
	_, signed = PolicyRefusal(s, edited, "u-1", 2)
	assert.False(t, signed, "not the service's at all")
}

// A policy signed before its signing moved here still holds: the same ConfigMap signs to the same
// signature ("ray-idle-policy/v2" over the same parts, in the same order).
func TestPolicySignatureIsUnchanged(t *testing.T) {
	s, err := signing.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Namespace: "team", UID: "u-9",
		Annotations: map[string]string{PolicyGenerationKey: "3", PolicySetByKey: "admin", PolicySetAtKey: "2026-03-01T12:00:00Z"}},
		Data: map[string]string{PolicyStopAfterKey: "2h"}}
	SignPolicy(s, cm)
	assert.Equal(t, "VziGOu6O0uAQod06EZSbMdJn7x7XkVX0YCgipyKqw0M", cm.Annotations[PolicySignatureKey])
	assert.True(t, PolicySigned(s, cm))
	assert.False(t, PolicySigned(nil, cm), "no signer trusts nothing")
}
