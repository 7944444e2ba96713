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
)

func (s *TemplateSigner) policySignature(cm *corev1.ConfigMap) string {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ray-idle-policy/v1", cm.Namespace, cm.Name, cm.Data[IdlePolicyStopAfterKey],
		cm.Annotations[IdlePolicySetByKey], cm.Annotations[IdlePolicySetAtKey]} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// SignPolicy signs a policy ConfigMap.
func (s *TemplateSigner) SignPolicy(cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[IdlePolicySignatureKey] = s.policySignature(cm)
}

// PolicySigned tells whether the service signed a policy ConfigMap as it is.
func (s *TemplateSigner) PolicySigned(cm *corev1.ConfigMap) bool {
	sig := cm.Annotations[IdlePolicySignatureKey]
	return s != nil && cm.Name == IdlePolicyName && sig != "" && hmac.Equal([]byte(sig), []byte(s.policySignature(cm)))
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
