//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/ray"
)

// A tenant who may read and create RayClusters in a namespace copies the signed creator of another
// user's RayCluster (annotation, signature and label) and, once that cluster is gone, creates one of the
// same name straight through the apiserver with them. The service must not take it as the victim's:
// utilization is billed only to a creator it signed, and this one it signed for another object. Before,
// the signature covered the kind, namespace, name and creator alone, so the copy held: the detail said
// creatorSigned, and the copy's hours were billed to the victim.
func TestAttackReplayedCreatorSignature(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "creator-replay")
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	ctx := context.Background()

	require.Equal(t, 201, createCluster(t, admin, ns, "victims", nil).Status)
	clusters := dynamicWithToken(t, token).Resource(rayClusters).Namespace(ns)
	seen, err := clusters.Get(ctx, "victims", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, seen.GetAnnotations()[ray.CreatorSignatureKey], "the service signed the victim's creator")
	victim := seen.GetAnnotations()[ray.CreatorKey]

	r := call(t, "DELETE", itemPath(ns, "rayclusters", "victims"), admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	eventually(t, 30*time.Second, "the victim's cluster gone", func() bool {
		_, err := env.adminDyn.Resource(rayClusters).Namespace(ns).Get(ctx, "victims", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})

	copied := clusterManifest(t, "victims")
	copied.SetAnnotations(map[string]string{ray.CreatorKey: victim, ray.CreatorSignatureKey: seen.GetAnnotations()[ray.CreatorSignatureKey]})
	copied.SetLabels(map[string]string{ray.CreatorKey: seen.GetLabels()[ray.CreatorKey]})
	_, err = clusters.Create(ctx, copied, metav1.CreateOptions{})
	require.NoError(t, err)

	var s summary
	eventually(t, 30*time.Second, "the copy in the cache", func() bool {
		r := call(t, "GET", itemPath(ns, "rayclusters", "victims"), admin, "", nil)
		if r.Status != 200 {
			return false
		}
		s = decode[summary](t, r)
		meta, _ := s.Object["metadata"].(map[string]any)
		return meta != nil && meta["uid"] != string(seen.GetUID())
	})
	assert.Equal(t, victim, s.Creator, "the claim is shown")
	assert.False(t, s.CreatorSigned, "a signature copied from another object is not the service's for this one")
}
