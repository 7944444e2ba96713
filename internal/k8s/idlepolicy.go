package k8s

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
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
	return "namespace policy " + p.Namespace + "/" + ray.IdlePolicyName + " (stopAfter " + p.StopAfter + ", set by " + p.SetBy + ")"
}

func policyOf(cm *corev1.ConfigMap) *IdlePolicy {
	at, _ := time.Parse(time.RFC3339, cm.Annotations[ray.IdlePolicySetAtKey])
	return &IdlePolicy{Namespace: cm.Namespace, StopAfter: cm.Data[ray.IdlePolicyStopAfterKey], SetBy: cm.Annotations[ray.IdlePolicySetByKey], SetAt: at}
}

var configMaps = schema.GroupResource{Resource: "configmaps"}

func noPolicy(ns string) error {
	return apierrors.NewNotFound(configMaps, fmt.Sprintf("%s: namespace %s has no idle policy", ray.IdlePolicyName, ns))
}

// ReadIdlePolicy reads ns's policy with the service's own client: nil where it has none, or where the
// ConfigMap of its name is not the service's.
func ReadIdlePolicy(ctx context.Context, cms corev1client.ConfigMapsGetter, signer *ray.TemplateSigner, ns string) (*IdlePolicy, error) {
	cm, err := cms.ConfigMaps(ns).Get(ctx, ray.IdlePolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !signer.PolicySigned(cm):
		return nil, nil
	}
	return policyOf(cm), nil
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

// Get reads ns's policy: NotFound where it has none.
func (p *IdlePolicies) Get(ctx context.Context, ns string) (*IdlePolicy, error) {
	cm, err := p.c.Core.ConfigMaps(ns).Get(ctx, ray.IdlePolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, noPolicy(ns)
	case err != nil:
		return nil, err
	case !p.m.Templates.PolicySigned(cm):
		return nil, noPolicy(ns)
	}
	return policyOf(cm), nil
}

// Put writes ns's policy as user's; created tells whether there was none.
func (p *IdlePolicies) Put(ctx context.Context, ns, stopAfter, user string) (pol *IdlePolicy, created bool, err error) {
	if d, err := ray.ParseIdleStopAfter(stopAfter); err != nil || d == 0 {
		if err == nil {
			err = errors.New("never is for an object's annotation: delete the namespace's policy instead")
		}
		return nil, false, apierrors.NewBadRequest("stopAfter: " + err.Error())
	}
	if err := p.mayStop(ctx, ns); err != nil {
		return nil, false, err
	}
	cms := p.c.Core.ConfigMaps(ns)
	cm, err := cms.Get(ctx, ray.IdlePolicyName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm, created = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ray.IdlePolicyName, Namespace: ns}}, true
	case err != nil:
		return nil, false, err
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Labels[ray.IdlePolicyLabel] = "true"
	cm.Annotations[ray.IdlePolicySetByKey] = user
	cm.Annotations[ray.IdlePolicySetAtKey] = time.Now().UTC().Format(time.RFC3339)
	cm.Data = map[string]string{ray.IdlePolicyStopAfterKey: stopAfter}
	p.m.Templates.SignPolicy(cm)
	if created {
		cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
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
	return p.c.Core.ConfigMaps(ns).Delete(ctx, ray.IdlePolicyName, metav1.DeleteOptions{})
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
