package app

import (
	"os"
	"strings"

	"github.com/google/uuid"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"ray-service/internal/config"
	"ray-service/internal/lease"
)

// newLease is the Lease the replicas compete for, with a client of its own: its renewals do not wait
// behind other requests' rate.
func newLease(cfg *config.Config, restCfg *rest.Config, instance string, log *zap.Logger) (*lease.Lease, error) {
	core, err := kubernetes.NewForConfig(rest.CopyConfig(restCfg))
	if err != nil {
		return nil, err
	}
	ns := cfg.LeaseNamespace
	if ns == "" {
		ns = serviceNamespace()
	}
	lock := &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Name: cfg.Lease, Namespace: ns},
		Client: core.CoordinationV1(), LockConfig: resourcelock.ResourceLockConfig{Identity: instance + "-" + uuid.NewString()[:8]}}
	log.Info("the Lease", zap.String("lease", ns+"/"+cfg.Lease))
	return &lease.Lease{Lock: lock, Log: log, Timings: lease.Timings{Duration: cfg.LeaseDuration, RenewDeadline: cfg.LeaseRenewDeadline,
		RetryPeriod: cfg.LeaseRetryPeriod}}, nil
}

// serviceNamespace is the service's own namespace (its ServiceAccount's), else default.
func serviceNamespace() string {
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
		return strings.TrimSpace(string(b))
	}
	return "default"
}
