//go:build integration

package integration

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The chart's Role for the service's Lease reaches that Lease alone. The release's namespace may be one
// other controllers share (the console's), each electing its leader by a Lease there: with get and
// update on every Lease, whoever holds the service's token could read and take theirs, and hold it, so
// that none of them leads. Before, the Role granted get, create and update on all Leases of the
// namespace: the service's account took another controller's Lease.
func TestAttackLeaseRoleHoldsToItsLease(t *testing.T) {
	t.Parallel()
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	chart := filepath.Join(env.root, "charts", "ray-package")
	ns := namespace(t, "lease-rbac")
	var leaseRole rbacv1.Role
	for _, d := range docs(t, runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns)) {
		if d["kind"] == "Role" && nested(d, "metadata", "name") == "ray-service-lease" {
			b, _ := yaml.Marshal(d)
			require.NoError(t, yaml.Unmarshal(b, &leaseRole))
		}
	}
	require.NotEmpty(t, leaseRole.Rules, "the chart's Role for the Lease")
	sa := clientFromKubeconfig(t, grant(t, ns, "ray-service", roles{namespaced: leaseRole.Rules}))
	ctx := context.Background()

	// Another controller of the namespace holds its Lease.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "console-controller"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("console-controller-0"), LeaseDurationSeconds: new(int32(15))}}
	other, err := env.admin.CoordinationV1().Leases(ns).Create(ctx, other, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = sa.CoordinationV1().Leases(ns).Get(ctx, "console-controller", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the service's account reads another controller's Lease: %v", err)
	// Taken as a leader elector takes a Lease: the version read, a holder of its own.
	other.Spec.HolderIdentity = new("ray-service-taken")
	_, err = sa.CoordinationV1().Leases(ns).Update(ctx, other, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the service's account takes another controller's Lease: %v", err)
	held, err := env.admin.CoordinationV1().Leases(ns).Get(ctx, "console-controller", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "console-controller-0", *held.Spec.HolderIdentity, "the other controller still holds its Lease")

	// Its own Lease it makes, reads and renews.
	own := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "ray-service-history"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("replica-a"), LeaseDurationSeconds: new(int32(15))}}
	_, err = sa.CoordinationV1().Leases(ns).Create(ctx, own, metav1.CreateOptions{})
	require.NoError(t, err, "the service makes its Lease")
	got, err := sa.CoordinationV1().Leases(ns).Get(ctx, "ray-service-history", metav1.GetOptions{})
	require.NoError(t, err, "and reads it")
	got.Spec.HolderIdentity = new("replica-b")
	_, err = sa.CoordinationV1().Leases(ns).Update(ctx, got, metav1.UpdateOptions{})
	require.NoError(t, err, "and renews or takes it over")
}
