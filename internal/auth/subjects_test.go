package auth

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Subjects ask as the service for a user by name and groups (no token), and cache each verdict for the
// ttl under the user, its groups and the action.
func TestSubjectsAskForTheUserAndItsGroups(t *testing.T) {
	cs := fake.NewClientset()
	var asked atomic.Int32
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked.Add(1)
		spec := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).Spec
		allowed := spec.User == "bob" && len(spec.Groups) == 2 && spec.Groups[0] == "a-team" && spec.ResourceAttributes.Resource == "rayjobs" &&
			spec.ResourceAttributes.Namespace == "team-a"
		return true, &authorizationv1.SubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: allowed}}, nil
	})
	s := NewSubjects(cs.AuthorizationV1().SubjectAccessReviews(), time.Minute)
	now := time.Now()
	s.now = func() time.Time { return now }
	ctx := context.Background()
	jobs := Attributes{Verb: "list", Group: "ray.io", Resource: "rayjobs", Namespace: "team-a"}
	for range 3 {
		ok, err := s.AllowedAs(ctx, Identity{Name: "bob", Groups: []string{"z-team", "a-team"}}, jobs)
		require.NoError(t, err)
		assert.True(t, ok)
	}
	assert.Equal(t, int32(1), asked.Load(), "cached")
	ok, err := s.AllowedAs(ctx, Identity{Name: "bob"}, jobs)
	require.NoError(t, err)
	assert.False(t, ok, "without the groups, another verdict")
	ok, err = s.AllowedAs(ctx, Identity{Name: "bob", Groups: []string{"a-team", "z-team"}}, Attributes{Verb: "list", Group: "ray.io", Resource: "rayjobs", Namespace: "team-b"})
	require.NoError(t, err)
	assert.False(t, ok)
	now = now.Add(2 * time.Minute)
	_, err = s.AllowedAs(ctx, Identity{Name: "bob", Groups: []string{"z-team", "a-team"}}, jobs)
	require.NoError(t, err)
	assert.Equal(t, int32(4), asked.Load(), "asked again once the ttl passed")
}
