package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/discovery"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// readiness: ready once the caches have synced, the apiserver is ready itself (its storage answers)
// and it serves the KubeRay resources every KubeRay version has.
func readiness(store *cache.Store, bindings *auth.Bindings, disc discovery.DiscoveryInterface, kinds *ray.Kinds) func(context.Context) error {
	return func(ctx context.Context) error {
		if !store.HasSynced() {
			return errors.New("watch caches not synced yet")
		}
		if bindings != nil && !bindings.HasSynced() {
			return errors.New("the RoleBindings not listed yet")
		}
		if err := disc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
			return fmt.Errorf("the apiserver is not ready: %w", err)
		}
		list, err := disc.ServerResourcesForGroupVersion(ray.RayGroupVersion.String())
		if err != nil {
			return fmt.Errorf("KubeRay CRDs (%s): %w", ray.RayGroupVersion, err)
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		for _, k := range kinds.All() {
			if !served[k.Resource] && !k.Optional {
				return fmt.Errorf("the apiserver does not serve %s.%s", k.Resource, k.GVR().GroupVersion())
			}
		}
		return nil
	}
}

// lastReadiness keeps whether the last readiness check passed, for the service's metrics: a replica
// that is up but not ready is still scraped, and says so there.
type lastReadiness struct{ ready atomic.Bool }

// track is check, its answer kept.
func (l *lastReadiness) track(check func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		err := check(ctx)
		l.ready.Store(err == nil)
		return err
	}
}

func (l *lastReadiness) value() float64 {
	if l.ready.Load() {
		return 1
	}
	return 0
}
