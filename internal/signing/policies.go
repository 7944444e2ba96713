package signing

// Policy is what the signature of a namespace's idle policy covers: what the policy says and what
// cannot be copied, the ConfigMap's UID (a policy deleted and created again from a copy is another
// ConfigMap) and the generation the service gave this version of it, kept apart from the namespace, so
// that an older version written back is refused too. internal/idle reads it from the policy's ConfigMap.
type Policy struct {
	Namespace, Name, UID, Generation string
	StopAfter, SetBy, SetAt          string
}

// PolicySignature is the service's signature of a policy.
func (s *Signer) PolicySignature(p Policy) string {
	return s.mac("ray-idle-policy/v2", p.Namespace, p.Name, p.UID, p.Generation, p.StopAfter, p.SetBy, p.SetAt)
}

// PolicySigned tells whether sig is the service's signature of the policy (false for a nil Signer or
// no signature).
func (s *Signer) PolicySigned(p Policy, sig string) bool {
	return s != nil && sig != "" && equal(sig, s.PolicySignature(p))
}
