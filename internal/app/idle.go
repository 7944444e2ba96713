package app

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/api"
	"ray-service/internal/audit"
	"ray-service/internal/idle"
	"ray-service/internal/k8s"
	"ray-service/internal/notify"
	"ray-service/internal/promql"
)

// The idle detection asks Prometheus through the one querier.
var _ idle.Prometheus = (*promql.Querier)(nil)

// enforceIdlePolicies gives the idle detection its policy and starts it once the watch cache has synced.
// Clusters are stopped by policy only where an identity is given for it (idle-stop-identity): it
// returns the idle policies' store then, nil otherwise.
func enforceIdlePolicies(ctx context.Context, p *parts, detector *idle.Detector, trail *audit.Trail, events corev1client.EventsGetter,
	addNotice func(context.Context, notify.Notice) error) func(string) (api.IdlePolicies, error) {
	cfg, core, manager := p.cfg, p.core, p.manager
	var idlePolicies func(string) (api.IdlePolicies, error)
	policy := &idle.Policy{Warning: cfg.IdleStopWarning, Leading: p.leading, Log: p.log}
	enforcer := &idle.Enforcer{Audit: trail.Record, Events: events, Notify: addNotice, Instance: p.instance, Log: p.log}
	if cfg.IdleStopIdentity != "" {
		ns, name, _ := strings.Cut(cfg.IdleStopIdentity, "/")
		identity := &k8s.TokenSource{Accounts: core.CoreV1(), Namespace: ns, Name: name}
		enforcer.Identity = identity.User()
		enforcer.StopCluster = func(ctx context.Context, ns, name string) (types.UID, error) {
			tok, err := identity.Token(ctx)
			if err != nil {
				return "", fmt.Errorf("a token of %s: %w", identity.User(), err)
			}
			objs, err := manager.For(p.kinds.Cluster(), tok)
			if err != nil {
				return "", err
			}
			cur, err := objs.Stop(ctx, ns, name)
			if err != nil {
				return "", err
			}
			if cur.Instance != nil {
				return cur.Instance.GetUID(), nil
			}
			return "", nil
		}
		storeNS, storeName, _ := strings.Cut(cfg.IdlePolicyStore, "/")
		if cfg.IdlePolicyStore == "" {
			storeNS, storeName = serviceNamespace(), "ray-service-idle-policies"
		}
		manager.PolicyGenerations = &k8s.PolicyGenerations{ConfigMaps: core.CoreV1().ConfigMaps(storeNS), Name: storeName}
		p.log.Info("idle policies", zap.String("generations", storeNS+"/"+storeName))
		policy.Stopping = true
		policy.Namespaces = func(ctx context.Context, ns string) (*idle.NamespacePolicy, error) {
			pol, err := k8s.ReadIdlePolicy(ctx, core.CoreV1(), p.templates, manager.PolicyGenerations, ns)
			if pol == nil || err != nil {
				return nil, err
			}
			after, err := idle.ParseStopAfter(pol.StopAfter)
			if err != nil {
				return nil, err
			}
			return &idle.NamespacePolicy{StopAfter: after, Name: pol.Name()}, nil
		}
		idlePolicies = func(tok string) (api.IdlePolicies, error) { return manager.IdlePolicies(tok) }
	}
	policy.Enforce = enforcer
	detector.Policy = policy
	go func() {
		if p.store.WaitForSync(ctx) {
			detector.Run(ctx)
		}
	}()
	return idlePolicies
}
