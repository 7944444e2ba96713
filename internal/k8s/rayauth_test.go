package k8s

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"ray-service/internal/ray"
)

// The token sent to a cluster's dashboard comes only from a Secret that lists the cluster among its
// owners, as the one KubeRay makes for it does: not from one its author named, nor one whose name the
// author gave the cluster.
func TestDashboardTokenOnlyFromTheClustersOwnSecret(t *testing.T) {
	owner := func(kind, apiVersion, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}}
	}
	secret := func(name string, owners []metav1.OwnerReference) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", OwnerReferences: owners},
			Data: map[string][]byte{ray.AuthTokenKey: []byte("tok-" + name)}}
	}
	clusters, _ := ray.NewKinds().Lookup("rayclusters")
	cluster := func(name string, auth map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster",
			"metadata": map[string]any{"name": name, "namespace": "team", "uid": "uid-" + name},
			"spec":     map[string]any{"authOptions": auth}}}
		return o
	}
	token := map[string]any{"mode": "token"}
	for _, c := range []struct {
		name   string
		obj    *unstructured.Unstructured
		secret *corev1.Secret
		want   string
	}{
		{"KubeRay's own", cluster("c", token), secret("c", owner("RayCluster", "ray.io/v1", "c", "uid-c")), "tok-c"},
		{"a Secret whose name the cluster took", cluster("db", token), secret("db", nil), ""},
		{"owned by another cluster of the name (gone)", cluster("c", token), secret("c", owner("RayCluster", "ray.io/v1", "c", "uid-old")), ""},
		{"owned by another kind", cluster("c", token), secret("c", owner("Deployment", "apps/v1", "c", "uid-c")), ""},
		{"owned by a RayCluster of another group", cluster("c", token), secret("c", owner("RayCluster", "evil.io/v1", "c", "uid-c")), ""},
		{"a named Secret the cluster does not own", cluster("c", map[string]any{"mode": "token", "secretName": "db"}), secret("db", nil), ""},
		{"a named Secret that lists the cluster", cluster("c", map[string]any{"mode": "token", "secretName": "shared"}),
			secret("shared", append(owner("RayCluster", "ray.io/v1", "other", "uid-other"), owner("RayCluster", "ray.io/v1", "c", "uid-c")...)), "tok-shared"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &Objects{Kind: clusters, Clients: &Clients{Core: fake.NewClientset(c.secret).CoreV1()}}
			got, err := o.DashboardToken(t.Context(), c.obj)
			if c.want == "" {
				require.ErrorIs(t, err, ErrNoRayToken)
				assert.Contains(t, err.Error(), "is not the Ray cluster's own")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}
