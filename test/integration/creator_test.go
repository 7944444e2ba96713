//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The creator annotation is only a claim: anyone who may edit the object can write it with kubectl. A
// summary says whether the service wrote it: true for a create made through the service (and a
// template it signed), false for one written past it or changed since.
func TestCreatorSaysWhetherTheServiceWroteIt(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "creator")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "through-service", "?start=false").Status)
	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)

	// Past the service, straight to the apiserver: a RayCluster claiming the admin made it.
	var forged unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal([]byte(strings.Replace(minimalCluster, "NAME", "forged", 1)), &forged.Object))
	forged.SetAnnotations(map[string]string{"ray.openfuyao.com/creator": "admin"})
	_, err := env.adminDyn.Resource(rayClusters).Namespace(ns).Create(context.Background(), &forged, metav1.CreateOptions{})
	require.NoError(t, err)

	item := func(kind, name string) summary {
		r := call(t, "GET", itemPath(ns, kind, name), admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[summary](t, r)
	}
	eventually(t, 10*time.Second, "the forged cluster in the cache", func() bool {
		return decode[listData](t, call(t, "GET", nsPath(ns, "rayclusters")+"?search=forged", admin, "", nil)).Total == 1
	})
	made := item("rayclusters", "through-service")
	assert.Equal(t, "admin", made.Creator)
	assert.True(t, made.CreatorSigned, "a create made through the service is signed")
	tpl := item("rayservices", "minimal-service")
	assert.True(t, tpl.CreatorSigned, "a template the service signed")
	f := item("rayclusters", "forged")
	assert.Equal(t, "admin", f.Creator, "the claim is shown")
	assert.False(t, f.CreatorSigned, "but not as the service's")

	// Changing the creator of a signed object past the service breaks the signature; the list says so too.
	patchRay(t, rayClusters, ns, "through-service", types.MergePatchType, `{"metadata":{"annotations":{"ray.openfuyao.com/creator":"bob"}}}`)
	eventually(t, 10*time.Second, "the changed creator listed, unsigned", func() bool {
		for _, it := range decode[listData](t, call(t, "GET", nsPath(ns, "rayclusters"), admin, "", nil)).Items {
			if it.Name == "through-service" {
				return it.Creator == "bob" && !it.CreatorSigned
			}
		}
		return false
	})
	// A replace through the service keeps the creator as recorded, signature and all.
	patchRay(t, rayClusters, ns, "through-service", types.MergePatchType, `{"metadata":{"annotations":{"ray.openfuyao.com/creator":"admin"}}}`)
	// The YAML is read as the object is now; a replace of it is taken whatever the operator wrote since
	// (see TestYAMLRoundTrip).
	exp := call(t, "GET", itemPath(ns, "rayclusters", "through-service")+"/yaml", admin, "", nil)
	require.Equal(t, 200, exp.Status)
	require.Contains(t, string(exp.Raw), "ray.openfuyao.com/creator: admin")
	put := call(t, "PUT", itemPath(ns, "rayclusters", "through-service"), admin, "application/yaml", exp.Raw)
	require.Equal(t, 200, put.Status, "%s", put.Raw)
	assert.True(t, item("rayclusters", "through-service").CreatorSigned)
}
