package auth

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	k8stesting "k8s.io/client-go/testing"
)

func TestTokenFromRequest(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	assert.Empty(t, TokenFromRequest(r))
	r.Header.Set("Authorization", "Basic abc")
	assert.Empty(t, TokenFromRequest(r), "only bearer tokens")
	r.Header.Set("Authorization", "Bearer  std ")
	assert.Equal(t, "std", TokenFromRequest(r))
	r.Header.Set("X-OpenFuyao-Authorization", "bearer fuyao")
	assert.Equal(t, "fuyao", TokenFromRequest(r), "the openFuyao header first")
	assert.NotContains(t, TokenHash("secret-token"), "secret")
	first, again := TokenHash("a"), TokenHash("a")
	assert.Equal(t, first, again, "the same token, the same name")
	assert.NotEqual(t, TokenHash("a"), TokenHash("b"))
}

// The reviewer caches verdicts per token for the TTL and passes the apiserver's errors on uncached.
func TestReviewerCachesPerToken(t *testing.T) {
	reviews := 0
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	cs.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: "alice"}}}, nil
	})
	tokens := map[string]bool{}
	r := NewReviewer(func(token string) (ReviewClients, error) {
		tokens[token] = true
		if token == "bad" {
			bad := fake.NewSimpleClientset()
			bad.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewUnauthorized("invalid token")
			})
			return bad, nil
		}
		return cs, nil
	}, 30*time.Second, 0)
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	ctx := context.Background()
	a := Attributes{Verb: "list", Group: "ray.io", Resource: "rayclusters", Namespace: "ns"}
	for range 3 {
		ok, err := r.Allowed(ctx, "t1", a)
		require.NoError(t, err)
		assert.True(t, ok)
	}
	assert.Equal(t, 1, reviews, "cached")
	_, _ = r.Allowed(ctx, "t2", a)
	assert.Equal(t, 2, reviews, "per token")
	b := a
	b.Namespace = "other"
	_, _ = r.Allowed(ctx, "t1", b)
	assert.Equal(t, 3, reviews, "per namespace")
	now = now.Add(31 * time.Second)
	_, _ = r.Allowed(ctx, "t1", a)
	assert.Equal(t, 4, reviews, "expired after the TTL")
	name, err := r.UserName(ctx, "t1")
	require.NoError(t, err)
	assert.Equal(t, "alice", name)

	_, err = r.Allowed(ctx, "bad", a)
	assert.True(t, apierrors.IsUnauthorized(err), "%v", err)
	_, err = r.UserName(ctx, "bad")
	assert.True(t, apierrors.IsUnauthorized(err))
	assert.NotErrorIs(t, err, context.Canceled)
}

// The cache holds at most its bound, however many namespaces callers name.
func TestReviewerCacheIsBounded(t *testing.T) {
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	r := NewReviewer(func(string) (ReviewClients, error) { return cs, nil }, time.Hour, 100)
	for i := range 1000 {
		ok, err := r.Allowed(context.Background(), "t", Attributes{Verb: "list", Resource: "rayclusters", Namespace: fmt.Sprint("ns-", i)})
		require.NoError(t, err)
		require.True(t, ok)
		require.LessOrEqual(t, r.Len(), 100)
	}
	assert.GreaterOrEqual(t, r.Len(), 90, "a full cache drops a tenth, not everything")
}

// With the RoleBindings known, a list across a thousand namespaces reviews the caller once per role it
// is bound in a namespace (its user, one of its groups, a ServiceAccount by its user name), and once
// cluster-wide for the namespaces that bind it nothing; and finds the same namespaces as reviewing
// every one, where RBAC decides (the namespaces that bind the same ClusterRoles answer the same).
func TestScopeReviewsOncePerRoleTheCallerIsBound(t *testing.T) {
	cs := fake.NewSimpleClientset()
	allowedIn := map[string]bool{}
	var reviewed atomic.Int32
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviewed.Add(1)
		attrs := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{
			Allowed: allowedIn[attrs.Namespace+" "+attrs.Verb]}}, nil
	})
	cs.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: "system:serviceaccount:home:alice", Groups: []string{"ml-team", "system:authenticated"}}}}, nil
	})
	var candidates []string
	for i := range 1000 {
		candidates = append(candidates, fmt.Sprintf("ns-%04d", i))
	}
	bind := func(ns string, role rbacv1.RoleRef, s rbacv1.Subject) {
		_, err := cs.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: ns},
			RoleRef: role, Subjects: []rbacv1.Subject{s}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	viewer := rbacv1.RoleRef{Kind: "ClusterRole", Name: "ray-viewer"}
	bind("ns-0001", viewer, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "ml-team"})
	bind("ns-0002", viewer, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "alice", Namespace: "home"})
	bind("ns-0003", viewer, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}) // someone else
	bind("ns-0004", rbacv1.RoleRef{Kind: "Role", Name: "own"}, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "ml-team"})
	// What RBAC would answer: the viewer's namespaces alike, ns-0004's Role lets it get only.
	allowedIn["ns-0001 list"], allowedIn["ns-0002 list"], allowedIn["ns-0004 get"] = true, true, true
	allowedIn["ns-0001 get"], allowedIn["ns-0002 get"] = true, true
	r := NewReviewer(func(string) (ReviewClients, error) { return cs, nil }, time.Minute, 0)
	b, err := NewBindings(cs, 0)
	require.NoError(t, err)
	go b.Run(t.Context())
	require.Eventually(t, b.HasSynced, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return b.Version() == 4 }, 5*time.Second, 10*time.Millisecond, "each RoleBinding counted")
	r.UseBindings(b)
	a := Attributes{Verb: "list", Group: "ray.io", Resource: "rayclusters"}
	scope, err := r.Scope(t.Context(), "t", a, candidates)
	require.NoError(t, err)
	assert.Equal(t, []string{"ns-0001", "ns-0002"}, scope.List())
	assert.EqualValues(t, 1+2, reviewed.Load(), "cluster-wide, then the viewer's first namespace and ns-0004")

	// A page's actions: one review per verb and class, not per namespace.
	reviewed.Store(0)
	var asks []Attributes
	for _, ns := range []string{"ns-0001", "ns-0002", "ns-0004", "ns-0500"} {
		for _, verb := range []string{"get", "delete"} {
			asks = append(asks, Attributes{Verb: verb, Group: "ray.io", Resource: "rayclusters", Namespace: ns})
		}
	}
	verdicts, err := r.AllowedAll(t.Context(), "t", asks)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true, false, true, false, false, false}, verdicts)
	assert.EqualValues(t, 2*3, reviewed.Load(), "two verbs in each of three classes: the viewer's namespaces, ns-0004, and cluster-wide for ns-0500")

	// Without bindings, every namespace is reviewed.
	reviewed.Store(0)
	r = NewReviewer(func(string) (ReviewClients, error) { return cs, nil }, time.Minute, 0)
	scope, err = r.Scope(t.Context(), "t", a, candidates)
	require.NoError(t, err)
	assert.Equal(t, []string{"ns-0001", "ns-0002"}, scope.List())
	assert.EqualValues(t, 1001, reviewed.Load())
}

// splitClients asks access reviews and identity reviews of two fakes, which answer at once: one fake
// answers one request at a time.
type splitClients struct{ authz, authn *fake.Clientset }

func (s splitClients) AuthorizationV1() authorizationv1client.AuthorizationV1Interface {
	return s.authz.AuthorizationV1()
}
func (s splitClients) AuthenticationV1() authenticationv1client.AuthenticationV1Interface {
	return s.authn.AuthenticationV1()
}

// A tenant's first list needs the cluster-wide verdict and, when that is no, who the caller is (for
// the classes of its namespaces): both are asked at once, and two asks of who it is at once share one.
func TestScopeAsksWhoTheCallerIsWhileReviewingClusterWide(t *testing.T) {
	authz, authn := fake.NewSimpleClientset(), fake.NewSimpleClientset()
	asked := make(chan struct{})
	var identities atomic.Int32
	authn.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		if identities.Add(1) == 1 {
			close(asked)
		}
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: "carol", Groups: []string{"system:authenticated"}}}}, nil
	})
	overlapped := false
	authz.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview).Spec.ResourceAttributes.Namespace == "" {
			select { // the cluster-wide review answers once the identity is asked, or after a second
			case <-asked:
				overlapped = true
			case <-time.After(time.Second):
			}
		}
		return true, &authorizationv1.SelfSubjectAccessReview{}, nil
	})
	cs := fake.NewSimpleClientset()
	b, err := NewBindings(cs, 0)
	require.NoError(t, err)
	go b.Run(t.Context())
	require.Eventually(t, b.HasSynced, 5*time.Second, 10*time.Millisecond)
	r := NewReviewer(func(string) (ReviewClients, error) { return splitClients{authz, authn}, nil }, time.Minute, 0)
	r.UseBindings(b)
	scope, err := r.Scope(t.Context(), "t", Attributes{Verb: "list", Group: "ray.io", Resource: "rayclusters"}, []string{"a", "b"})
	require.NoError(t, err)
	assert.True(t, scope.IsEmpty())
	assert.True(t, overlapped, "who the caller is was asked while the cluster-wide review was under way")

	slow := fake.NewSimpleClientset()
	var slowAsked atomic.Int32
	slow.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		slowAsked.Add(1)
		time.Sleep(100 * time.Millisecond)
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: "dave"}}}, nil
	})
	r = NewReviewer(func(string) (ReviewClients, error) { return splitClients{authz, slow}, nil }, time.Minute, 0)
	var same sync.WaitGroup
	ids, errs := make([]Identity, 8), make([]error, 8)
	for i := range 8 {
		same.Go(func() { ids[i], errs[i] = r.Identity(t.Context(), "u") })
	}
	same.Wait()
	for i := range 8 {
		require.NoError(t, errs[i])
		assert.Equal(t, "dave", ids[i].Name)
	}
	assert.EqualValues(t, 1, slowAsked.Load(), "eight asks at once, one review")
}
