package ray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// A policy's signature holds for its ConfigMap (UID) and generation alone: the same contents in a
// ConfigMap made again, or an older generation written back, are refused, saying why; a ConfigMap
// without a signature is simply none.
func TestPolicyRefusal(t *testing.T) {
	s, err := NewTemplateSigner([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	policy := func(uid, gen, stopAfter string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: IdlePolicyName, Namespace: "team", UID: k8stypes.UID("u-" + uid),
			Annotations: map[string]string{IdlePolicyGenerationKey: gen, IdlePolicySetByKey: "admin"}},
			Data: map[string]string{IdlePolicyStopAfterKey: stopAfter}}
		s.SignPolicy(cm)
		return cm
	}
	first, second := policy("1", "1", "1h"), policy("1", "2", "2h")
	reason, signed := s.PolicyRefusal(second, "u-1", 2)
	assert.Empty(t, reason, "the version written last")
	assert.True(t, signed)
	reason, signed = s.PolicyRefusal(first, "u-1", 2)
	assert.Contains(t, reason, "older version")
	assert.True(t, signed)
	copied := first.DeepCopy()
	copied.UID = "u-2"
	reason, _ = s.PolicyRefusal(copied, "", 0)
	assert.Contains(t, reason, "created again")
	edited := second.DeepCopy()
	edited.Data[IdlePolicyStopAfterKey] = "1m"
	reason, _ = s.PolicyRefusal(edited, "u-1", 2)
	assert.Contains(t, reason, "edited")
	delete(edited.Annotations, IdlePolicySignatureKey)
	_, signed = s.PolicyRefusal(edited, "u-1", 2)
	assert.False(t, signed, "not the service's at all")
}
