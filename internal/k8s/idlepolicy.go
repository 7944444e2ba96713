package k8s

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/auth"
	"ray-service/internal/idle"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// IdlePolicy is a namespace's idle policy: its RayClusters that idle StopAfter are stopped (those that
// a RayJob or a RayService made, and those annotated ray.openfuyao.com/idle-stop-after, excepted).
type IdlePolicy struct {
	Namespace string `json:"namespace" example:"team-a"`
	// StopAfter is a Go duration of a minute or more.
	StopAfter string    `json:"stopAfter" example:"2h"`
	SetBy     string    `json:"setBy" example:"alice"`
	SetAt     time.Time `json:"setAt"`
}

// Name names the policy where a cluster's idleness, its events and the audit trail cite it.
func (p *IdlePolicy) Name() string {
	return "namespace policy " + p.Namespace + "/" + idle.PolicyName + " (stopAfter " + p.StopAfter + ", set by " + p.SetBy + ")"
}

func policyOf(cm *corev1.ConfigMap) *IdlePolicy {
	at, _ := time.Parse(time.RFC3339, cm.Annotations[idle.PolicySetAtKey])
	return &IdlePolicy{Namespace: cm.Namespace, StopAfter: cm.Data[idle.PolicyStopAfterKey], SetBy: cm.Annotations[idle.PolicySetByKey], SetAt: at}
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

func noPolicy(ns string) error {
	return apierrors.NewNotFound(configMaps, fmt.Sprintf("%s: namespace %s has no idle policy", idle.PolicyName, ns))
}

// ReadIdlePolicy reads ns's policy with the service's own client: nil where it has none, or where the
// ConfigMap of its name is not the service's; an error that says why where it carries the service's
// signature but is refused (created again from a copy, or an older version written back), so that the
// refusal is logged.
func ReadIdlePolicy(ctx context.Context, cms corev1client.ConfigMapsGetter, signer *signing.Signer, gens *PolicyGenerations,
	ns string) (*IdlePolicy, error) {
	cm, err := cms.ConfigMaps(ns).Get(ctx, idle.PolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	reason, signed, err := refusal(ctx, signer, gens, cm)
	switch {
	case err != nil:
		return nil, err
	case reason != "" && signed:
		return nil, fmt.Errorf("ConfigMap %s/%s is refused as the namespace's idle policy: %s", ns, idle.PolicyName, reason)
	case reason != "":
		return nil, nil
	}
	return policyOf(cm), nil
}

// refusal says why cm is no policy ("": it is one), and whether it carries the service's signature.
func refusal(ctx context.Context, signer *signing.Signer, gens *PolicyGenerations, cm *corev1.ConfigMap) (string, bool, error) {
	if gens == nil {
		return "ray-service keeps no generations of idle policies", false, nil
	}
	uid, gen, err := gens.Last(ctx, cm.Namespace)
	if err != nil {
		return "", false, err
	}
	reason, signed := idle.PolicyRefusal(signer, cm, uid, gen)
	return reason, signed, nil
}

// IdlePolicies are the namespaces' idle policies as one caller reads and writes them: with its own
// token, and only where it may also patch RayClusters (a policy stops them).
type IdlePolicies struct {
	c     *Clients
	token string
	m     *Manager
}

// IdlePolicies returns the policies as the token's holder reads and writes them.
func (m *Manager) IdlePolicies(token string) (*IdlePolicies, error) {
	c, err := m.Clients.ForToken(token)
	if err != nil {
		return nil, err
	}
	return &IdlePolicies{c: c, token: token, m: m}, nil
}

// Get reads ns's policy: NotFound where it has none, saying why where a ConfigMap of its name is refused.
func (p *IdlePolicies) Get(ctx context.Context, ns string) (*IdlePolicy, error) {
	cm, err := p.c.Core.ConfigMaps(ns).Get(ctx, idle.PolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, noPolicy(ns)
	case err != nil:
		return nil, err
	}
	reason, signed, err := refusal(ctx, p.m.Templates, p.m.PolicyGenerations, cm)
	switch {
	case err != nil:
		return nil, err
	case reason != "" && signed:
		return nil, apierrors.NewNotFound(configMaps, fmt.Sprintf("%s: namespace %s has no idle policy: ConfigMap %s is refused, %s",
			idle.PolicyName, ns, idle.PolicyName, reason))
	case reason != "":
		return nil, noPolicy(ns)
	}
	return policyOf(cm), nil
}

// Put writes ns's policy as user's; created tells whether there was none.
func (p *IdlePolicies) Put(ctx context.Context, ns, stopAfter, user string) (pol *IdlePolicy, created bool, err error) {
	if d, err := idle.ParseStopAfter(stopAfter); err != nil || d == 0 {
		if err == nil {
			err = errors.New("never is for an object's annotation: delete the namespace's policy instead")
		}
		return nil, false, apierrors.NewBadRequest("stopAfter: " + err.Error())
	}
	if err := p.mayStop(ctx, ns); err != nil {
		return nil, false, err
	}
	cms := p.c.Core.ConfigMaps(ns)
	cm, err := cms.Get(ctx, idle.PolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm, created = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: idle.PolicyName, Namespace: ns}}, true
	case err != nil:
		return nil, false, err
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Labels[idle.PolicyLabel] = "true"
	cm.Annotations[idle.PolicySetByKey] = user
	cm.Annotations[idle.PolicySetAtKey] = time.Now().UTC().Format(time.RFC3339)
	delete(cm.Annotations, idle.PolicySignatureKey)
	cm.Data = map[string]string{idle.PolicyStopAfterKey: stopAfter}
	if p.m.PolicyGenerations == nil {
		return nil, false, errors.New("no generations of idle policies configured")
	}
	// The signature covers the ConfigMap's UID: a new one is created unsigned (no policy until signed),
	// then given its generation and signed.
	if created {
		if cm, err = cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, false, err
		}
	}
	gen, err := p.m.PolicyGenerations.Next(ctx, ns, cm.UID)
	if err != nil {
		return nil, false, err
	}
	cm.Annotations[idle.PolicyGenerationKey] = strconv.FormatInt(gen, 10)
	idle.SignPolicy(p.m.Templates, cm)
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return nil, false, err
	}
	return policyOf(cm), created, nil
}

// Delete removes ns's policy: NotFound where it has none.
func (p *IdlePolicies) Delete(ctx context.Context, ns string) error {
	if _, err := p.Get(ctx, ns); err != nil {
		return err
	}
	if err := p.mayStop(ctx, ns); err != nil {
		return err
	}
	if err := p.c.Core.ConfigMaps(ns).Delete(ctx, idle.PolicyName, metav1.DeleteOptions{}); err != nil {
		return err
	}
	// A ConfigMap made again has another UID and is refused all the same; forgetting it is tidiness.
	if p.m.PolicyGenerations == nil {
		return nil
	}
	return p.m.PolicyGenerations.Forget(ctx, ns)
}

// mayStop is Forbidden unless the caller is an admin of ns: who writes a policy decides what is stopped
// there, for everyone. It must be allowed to patch RayClusters there and to create RoleBindings (what
// Kubernetes' admin role grants, and its edit role does not).
func (p *IdlePolicies) mayStop(ctx context.Context, ns string) error {
	if p.m.Authz == nil {
		return errors.New("no authorizer configured")
	}
	for _, a := range []auth.Attributes{{Verb: "patch", Group: ray.RayGroupVersion.Group, Resource: "rayclusters", Namespace: ns},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: ns}} {
		ok, err := p.m.Authz.Allowed(ctx, p.token, a)
		if err != nil {
			return err
		}
		if !ok {
			return apierrors.NewForbidden(schema.GroupResource{Group: a.Group, Resource: a.Resource}, "",
				fmt.Errorf("an idle policy stops the namespace's RayClusters, for its admins to set: the caller may not %s %s in %s",
					a.Verb, a.Resource, ns))
		}
	}
	return nil
}
