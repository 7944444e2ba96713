//go:build integration

package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"ray-service/internal/ray"
)

// templateTenant is a tenant who may edit Ray objects in ns and the ConfigMaps that hold their templates
// (a stop through the service stores one as the caller).
func templateTenant(t *testing.T, ns string) (user, token string) {
	t.Helper()
	user, token = tenant(t, ns, "mallory")
	bind(t, ns, user, "ray-editor")
	grantRole(t, ns, user, "templates", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get", "list", "create", "update", "delete"}})
	return user, token
}

// detailAs is the service's detail of ns/name as the holder of token, once its object has the given type.
func detailAs(t *testing.T, token, ns, kind, name, typ string) summary {
	t.Helper()
	var s summary
	eventually(t, 30*time.Second, name+" as a "+typ, func() bool {
		r := call(t, "GET", itemPath(ns, kind, name), token, "", nil)
		if r.Status != 200 {
			return false
		}
		s = decode[summary](t, r)
		return s.Type == typ
	})
	return s
}

// A tenant makes a RayService straight through the apiserver with another user's name as its creator
// annotation (unsigned: billed to no one, shown unverified), then stops it and starts it again through
// the service. The stop stores the instance as a template, which the service signs; the start creates the
// object again from it. The service must not vouch for a creator it never set nor signed: neither the
// template nor the object made from it may say creatorSigned, or the tenant's hours are billed to the
// user named. Before, the template's signature covered whatever creator the instance carried, and the
// start signed it on the new object.
func TestAttackCreatorLaunderedThroughTemplate(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "creator-launder")
	_, token := templateTenant(t, ns)
	ctx := context.Background()

	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(testdata(t, "rayservice-minimal.yaml"), &obj))
	forged := &unstructured.Unstructured{Object: obj}
	name := forged.GetName()
	forged.SetAnnotations(map[string]string{ray.CreatorKey: "victim-user"})
	forged.SetLabels(map[string]string{ray.CreatorKey: "victim-user"})
	_, err := dynamicWithToken(t, token).Resource(rayServices).Namespace(ns).Create(ctx, forged, metav1.CreateOptions{})
	require.NoError(t, err)
	s := detailAs(t, token, ns, "rayservices", name, "instance")
	require.Equal(t, "victim-user", s.Creator)
	require.False(t, s.CreatorSigned, "made straight through the apiserver, its creator is a claim")

	r := call(t, "POST", itemPath(ns, "rayservices", name)+"/stop", token, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	s = decode[summary](t, r)
	require.Equal(t, "template", s.Type)
	assert.False(t, s.CreatorSigned, "the template of an object whose creator the service never signed")

	r = call(t, "POST", itemPath(ns, "rayservices", name)+"/start", token, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	s = decode[summary](t, r)
	assert.Equal(t, "victim-user", s.Creator, "the claim is kept")
	assert.False(t, s.CreatorSigned, "started from its template, the claim is not signed")
	s = detailAs(t, env.tokens["admin"], ns, "rayservices", name, "instance")
	assert.False(t, s.CreatorSigned, "the object made from the template, as the cache reads it")
}

// The admin creates a RayService stopped (?start=false): the service keeps it as a template until it is
// started, and signs its creator. A tenant who may read the template copies the creator and its signature
// and, within the minute, creates the RayService of that name straight through the apiserver with them
// (no object of that name exists: none has to be deleted). The service must not take it as the admin's.
// Before, the template's manifest held the signature of the dry run the service made to check it, which
// holds for an object of that kind, namespace, name and creator created within a minute of it.
func TestAttackTemplateSignatureCopied(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "creator-template")
	_, token := templateTenant(t, ns)
	admin := env.tokens["admin"]
	ctx := context.Background()

	r := call(t, "POST", nsPath(ns, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	created := decode[summary](t, r)
	require.Equal(t, "template", created.Type)
	victim := created.Creator

	seen := detailAs(t, token, ns, "rayservices", created.Name, "template")
	meta, _ := seen.Object["metadata"].(map[string]any)
	require.NotNil(t, meta)
	ann, _ := meta["annotations"].(map[string]any)
	sig, _ := ann[ray.CreatorSignatureKey].(string)
	labels, _ := meta["labels"].(map[string]any)
	label, _ := labels[ray.CreatorKey].(string)

	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(testdata(t, "rayservice-minimal.yaml"), &obj))
	copied := &unstructured.Unstructured{Object: obj}
	copied.SetAnnotations(map[string]string{ray.CreatorKey: victim, ray.CreatorSignatureKey: sig})
	copied.SetLabels(map[string]string{ray.CreatorKey: label})
	_, err := dynamicWithToken(t, token).Resource(rayServices).Namespace(ns).Create(ctx, copied, metav1.CreateOptions{})
	require.NoError(t, err)

	s := detailAs(t, admin, ns, "rayservices", created.Name, "instance")
	assert.Equal(t, victim, s.Creator, "the claim is shown")
	assert.False(t, s.CreatorSigned, "a signature read from a template is not the service's for an object made by another client")
}
