package ray

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A namespace's idle policy is a ConfigMap of a fixed name in it, written through the service by
// someone who may stop its RayClusters and write its ConfigMaps, and signed by the service as its
// templates are: a ConfigMap of the same name that anyone else wrote is no policy.
const (
	// IdlePolicyName is the policy ConfigMap's name.
	IdlePolicyName = "ray-service-idle-policy"
	// IdlePolicyLabel marks it (value "true").
	IdlePolicyLabel = "ray.openfuyao.com/idle-policy"
	// IdlePolicyStopAfterKey holds how long a RayCluster may idle before it is stopped.
	IdlePolicyStopAfterKey = "stopAfter"
	// IdlePolicySignatureKey is the annotation with the service's signature; IdlePolicySetByKey names
	// who wrote it and IdlePolicySetAtKey when (RFC 3339).
	IdlePolicySignatureKey = "ray.openfuyao.com/idle-policy-signature"
	IdlePolicySetByKey     = "ray.openfuyao.com/idle-policy-set-by"
	IdlePolicySetAtKey     = "ray.openfuyao.com/idle-policy-set-at"
	// IdlePolicyGenerationKey holds the generation the service gave this version of the policy.
	IdlePolicyGenerationKey = "ray.openfuyao.com/idle-policy-generation"
)

// policySignature covers what the policy says and what cannot be copied: the ConfigMap's UID (a policy
// deleted and created again from a copy is another ConfigMap) and the generation the service gave this
// version of it, which it keeps apart from the namespace (PolicyGenerations), so that an older version
// written back is refused too.
func (s *TemplateSigner) policySignature(cm *corev1.ConfigMap) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-idle-policy/v2", cm.Namespace, cm.Name, string(cm.UID), cm.Annotations[IdlePolicyGenerationKey],
		cm.Data[IdlePolicyStopAfterKey], cm.Annotations[IdlePolicySetByKey], cm.Annotations[IdlePolicySetAtKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// SignPolicy signs a policy ConfigMap, which must have its UID (it is created before it is signed) and
// its generation annotation.
func (s *TemplateSigner) SignPolicy(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[IdlePolicySignatureKey] = s.policySignature(cm)
}

// PolicySigned tells whether the service signed a policy ConfigMap as it is: this ConfigMap (its UID),
// this generation, these contents.
func (s *TemplateSigner) PolicySigned(cm *corev1.ConfigMap) bool {
	sig := cm.Annotations[IdlePolicySignatureKey]
	return s != nil && cm.Name == IdlePolicyName && cm.UID != "" && sig != "" && hmac.Equal([]byte(sig), []byte(s.policySignature(cm)))
}

// PolicyRefusal says why a ConfigMap of the policy's name is no policy: "" where the service signed it
// as it is and it is the generation the service last gave the ConfigMap of that UID (lastUID and
// lastGeneration, from PolicyGenerations; "" and 0 where it keeps none). One the service never signed is
// refused too; signed is false only where it carries no signature at all (someone else's ConfigMap).
func (s *TemplateSigner) PolicyRefusal(cm *corev1.ConfigMap, lastUID string, lastGeneration int64) (reason string, signed bool) {
	if cm.Annotations[IdlePolicySignatureKey] == "" {
		return "it carries no signature of ray-service", false
	}
	if !s.PolicySigned(cm) {
		return "its signature does not hold for this ConfigMap: it was created again from a copy, or edited, since ray-service wrote it", true
	}
	gen := cm.Annotations[IdlePolicyGenerationKey]
	if lastUID != string(cm.UID) || strconv.FormatInt(lastGeneration, 10) != gen {
		return fmt.Sprintf("it is generation %s of ConfigMap %s, not the one ray-service last wrote: an older version written back", gen, cm.UID), true
	}
	return "", true
}

// MinIdleStopAfter is the shortest idle time a policy may ask for before a stop.
const MinIdleStopAfter = time.Minute

// ParseIdleStopAfter reads a policy's idle time: a Go duration of a minute or more, or "never" (0, ok).
func ParseIdleStopAfter(v string) (time.Duration, error) {
	if v == "never" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 2h or 90m, nor never", v)
	}
	if d < MinIdleStopAfter {
		return 0, fmt.Errorf("%s is shorter than the least idle time a policy may ask for, %s", v, MinIdleStopAfter)
	}
	return d, nil
}
