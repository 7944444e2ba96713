//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The stack itself: the operator reconciles a RayCluster into pods, KWOK runs them, suspension removes
// them, and deletion garbage-collects them. Everything here goes through the Kubernetes API as the admin.
func TestStackReconcilesRayCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := namespace(t, "stack-e2e")
	rc := env.adminDyn.Resource(rayClusters).Namespace(ns)
	_, err := rc.Create(ctx, clusterManifest(t, "demo"), metav1.CreateOptions{})
	require.NoError(t, err)

	start := time.Now()
	eventually(t, 60*time.Second, "head and 2 worker pods Running and Ready", func() bool {
		pods := clusterPods(t, ns, "demo")
		return len(pods) == 3 && allRunningReady(pods)
	})
	eventually(t, 60*time.Second, "status.state ready", func() bool {
		o, err := getRay(t, rayClusters, ns, "demo")
		require.NoError(t, err)
		state, _, _ := unstructured.NestedString(o.Object, "status", "state")
		return state == "ready"
	})
	t.Logf("RayCluster ready in %s", time.Since(start).Round(10*time.Millisecond))

	start = time.Now()
	_, err = rc.Patch(ctx, "demo", types.MergePatchType, []byte(`{"spec":{"suspend":true}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "pods gone and state suspended", func() bool {
		o, err := getRay(t, rayClusters, ns, "demo")
		require.NoError(t, err)
		state, _, _ := unstructured.NestedString(o.Object, "status", "state")
		return state == "suspended" && len(clusterPods(t, ns, "demo")) == 0
	})
	t.Logf("RayCluster suspended in %s", time.Since(start).Round(10*time.Millisecond))

	_, err = rc.Patch(ctx, "demo", types.MergePatchType, []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "pods back after resume", func() bool {
		pods := clusterPods(t, ns, "demo")
		return len(pods) == 3 && allRunningReady(pods)
	})
	require.NoError(t, rc.Delete(ctx, "demo", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, "pods garbage-collected", func() bool {
		_, err := getRay(t, rayClusters, ns, "demo")
		return apierrors.IsNotFound(err) && len(clusterPods(t, ns, "demo")) == 0
	})
}

// The user without permissions is refused by Kubernetes RBAC on the same create.
func TestStackRefusesUserWithoutPermissions(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "stack-rbac")
	cfg := &rest.Config{Host: env.vars["KUBE_APISERVER_URL"], BearerToken: env.tokens["nobody"],
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.vars["KUBE_CA_FILE"]}}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = dyn.Resource(rayClusters).Namespace(ns).Create(context.Background(), clusterManifest(t, "denied"), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "want 403, got %v", err)
	_, err = getRay(t, rayClusters, ns, "denied")
	require.True(t, apierrors.IsNotFound(err), "nothing may be stored: %v", err)
}
