package idle

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"ray-service/internal/signing"
)

// A namespace's idle policy is a ConfigMap of a fixed name in it, written through the service by
// someone who may stop its RayClusters and write its ConfigMaps, and signed by the service as its
// templates are: a ConfigMap of the same name that anyone else wrote is no policy. internal/k8s reads
// and writes it; this file says what it holds and which of it is the service's.
const (
	// PolicyName is the policy ConfigMap's name.
	PolicyName = "ray-service-idle-policy"
	// PolicyLabel marks it (value "true").
	PolicyLabel = "ray.openfuyao.com/idle-policy"
	// PolicyStopAfterKey holds how long a RayCluster may idle before it is stopped.
	PolicyStopAfterKey = "stopAfter"
	// PolicySignatureKey is the annotation with the service's signature; PolicySetByKey names who
	// wrote it and PolicySetAtKey when (RFC 3339).
	PolicySignatureKey = "ray.openfuyao.com/idle-policy-signature"
	PolicySetByKey     = "ray.openfuyao.com/idle-policy-set-by"
	PolicySetAtKey     = "ray.openfuyao.com/idle-policy-set-at"
	// PolicyGenerationKey holds the generation the service gave this version of the policy.
	PolicyGenerationKey = "ray.openfuyao.com/idle-policy-generation"
)

// signedParts is what the policy's signature covers (signing.Policy): what the policy says, the
// ConfigMap's UID and the generation the service gave this version of it (see PolicyGenerations in
// internal/k8s, which keeps it apart from the namespace).
func signedParts(cm *corev1.ConfigMap) signing.Policy {
	return signing.Policy{Namespace: cm.Namespace, Name: cm.Name, UID: string(cm.UID), Generation: cm.Annotations[PolicyGenerationKey],
		StopAfter: cm.Data[PolicyStopAfterKey], SetBy: cm.Annotations[PolicySetByKey], SetAt: cm.Annotations[PolicySetAtKey]}
}

// SignPolicy signs a policy ConfigMap, which must have its UID (it is created before it is signed) and
// its generation annotation.
func SignPolicy(s *signing.Signer, cm *corev1.ConfigMap) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[PolicySignatureKey] = s.PolicySignature(signedParts(cm))
}

// PolicySigned tells whether the service signed a policy ConfigMap as it is: this ConfigMap (its UID),
// this generation, these contents.
func PolicySigned(s *signing.Signer, cm *corev1.ConfigMap) bool {
	return cm.Name == PolicyName && cm.UID != "" && s.PolicySigned(signedParts(cm), cm.Annotations[PolicySignatureKey])
}

// PolicyRefusal says why a ConfigMap of the policy's name is no policy: "" where the service signed it
// as it is and it is the generation the service last gave the ConfigMap of that UID (lastUID and
// lastGeneration, from PolicyGenerations; "" and 0 where it keeps none). One the service never signed is
// refused too; signed is false only where it carries no signature at all (someone else's ConfigMap).
func PolicyRefusal(s *signing.Signer, cm *corev1.ConfigMap, lastUID string, lastGeneration int64) (reason string, signed bool) {
	if cm.Annotations[PolicySignatureKey] == "" {
		return "it carries no signature of ray-service", false
	}
	if !PolicySigned(s, cm) {
		return "its signature does not hold for this ConfigMap: it was created again from a copy, or edited, since ray-service wrote it", true
	}
	gen := cm.Annotations[PolicyGenerationKey]
	if lastUID != string(cm.UID) || strconv.FormatInt(lastGeneration, 10) != gen {
		return fmt.Sprintf("it is generation %s of ConfigMap %s, not the one ray-service last wrote: an older version written back", gen, cm.UID), true
	}
	return "", true
}

// MinStopAfter is the shortest idle time a policy may ask for before a stop.
const MinStopAfter = time.Minute

// ParseStopAfter reads a policy's idle time: a Go duration of a minute or more, or "never" (0, ok).
func ParseStopAfter(v string) (time.Duration, error) {
	if v == "never" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 2h or 90m, nor never", v)
	}
	if d < MinStopAfter {
		return 0, fmt.Errorf("%s is shorter than the least idle time a policy may ask for, %s", v, MinStopAfter)
	}
	return d, nil
}
