package auth

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Subjects asks the apiserver, with the service's own identity (SubjectAccessReviews), what a user known
// by its name and groups may do: for what the service does for a caller after the caller's request has
// ended, such as a subscription's deliveries, where the caller's token is not kept. Verdicts are cached
// for ttl, at most maxEntries of them.
type Subjects struct {
	reviews    authorizationv1client.SubjectAccessReviewInterface
	ttl        time.Duration
	maxEntries int
	now        func() time.Time

	mu      sync.Mutex
	allowed map[string]verdict
}

// NewSubjects returns Subjects that ask with reviews and cache verdicts for ttl (0: not cached).
func NewSubjects(reviews authorizationv1client.SubjectAccessReviewInterface, ttl time.Duration) *Subjects {
	return &Subjects{reviews: reviews, ttl: ttl, maxEntries: DefaultMaxEntries, now: time.Now, allowed: map[string]verdict{}}
}

// AllowedAs tells whether the user id may do a.
func (s *Subjects) AllowedAs(ctx context.Context, id Identity, a Attributes) (bool, error) {
	groups := slices.Sorted(slices.Values(id.Groups))
	key := strings.Join(append([]string{id.Name, a.key()}, groups...), "\x00")
	now := s.now()
	if allowed, ok := cachedVerdict(&s.mu, s.allowed, key, now); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	res, err := s.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: id.Name, Groups: groups, ResourceAttributes: a.resourceAttributes(),
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.allowed) >= s.maxEntries {
			for k, v := range s.allowed {
				if !now.Before(v.expires) || len(s.allowed) >= s.maxEntries {
					delete(s.allowed, k)
				}
			}
		}
		s.allowed[key] = verdict{allowed: res.Status.Allowed, expires: now.Add(s.ttl)}
		s.mu.Unlock()
	}
	return res.Status.Allowed, nil
}
