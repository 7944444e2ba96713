package auth

import (
	"context"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Attributes name an action on a resource, as a SelfSubjectAccessReview asks it. An empty Namespace
// asks for all namespaces.
type Attributes struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

// ClientsFor returns a Kubernetes client that acts as the holder of token.
type ClientsFor func(token string) (kubernetes.Interface, error)

// Reviewer asks the apiserver, with the caller's own token, who the caller is and what the caller may do.
// Verdicts are cached briefly under a hash of the token, at most maxEntries of them, so that no caller
// can grow the cache at will by naming ever new namespaces or tokens.
type Reviewer struct {
	clients    ClientsFor
	ttl        time.Duration
	maxEntries int
	now        func() time.Time

	mu      sync.RWMutex // lookups share it; only a new verdict takes it alone
	allowed map[string]verdict
	users   map[string]userEntry
	swept   time.Time
}

type verdict struct {
	allowed bool
	expires time.Time
}

type userEntry struct {
	name    string
	expires time.Time
}

// DefaultMaxEntries bounds the verdicts and user names a Reviewer caches, where NewReviewer is given 0.
const DefaultMaxEntries = 10000

// NewReviewer returns a reviewer that caches verdicts for ttl, at most maxEntries (0: DefaultMaxEntries).
func NewReviewer(clients ClientsFor, ttl time.Duration, maxEntries int) *Reviewer {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &Reviewer{clients: clients, ttl: ttl, maxEntries: maxEntries, now: time.Now,
		allowed: map[string]verdict{}, users: map[string]userEntry{}}
}

// Len is how many verdicts and user names are cached.
func (r *Reviewer) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.allowed) + len(r.users)
}

// Allowed tells whether the holder of token may do a. An invalid token is an Unauthorized error.
func (r *Reviewer) Allowed(ctx context.Context, token string, a Attributes) (bool, error) {
	return r.allowedAs(ctx, token, TokenHash(token), a)
}

// verdictKey is the cache key of a verdict on a for the token of that hash.
func verdictKey(hash string, a Attributes) string {
	return hash + "\x00" + a.Verb + "\x00" + a.Group + "\x00" + a.Resource + "\x00" + a.Subresource +
		"\x00" + a.Namespace + "\x00" + a.Name
}

// cached returns the cached verdict under key, if there is one still fresh.
func (r *Reviewer) cached(key string, now time.Time) (allowed, ok bool) {
	r.mu.RLock()
	v, found := r.allowed[key]
	r.mu.RUnlock()
	return v.allowed, found && now.Before(v.expires)
}

func (r *Reviewer) allowedAs(ctx context.Context, token, hash string, a Attributes) (bool, error) {
	key := verdictKey(hash, a)
	now := r.now()
	if allowed, ok := r.cached(key, now); ok {
		return allowed, nil
	}
	cs, err := r.clients(token)
	if err != nil {
		return false, err
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource,
			Namespace: a.Namespace, Name: a.Name,
		},
	}}
	res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.makeRoomLocked(now)
	r.allowed[key] = verdict{allowed: res.Status.Allowed, expires: now.Add(r.ttl)}
	r.mu.Unlock()
	return res.Status.Allowed, nil
}

// UserName returns the user name the apiserver authenticates token as.
func (r *Reviewer) UserName(ctx context.Context, token string) (string, error) {
	key := TokenHash(token)
	now := r.now()
	r.mu.RLock()
	u, ok := r.users[key]
	r.mu.RUnlock()
	if ok && now.Before(u.expires) {
		return u.name, nil
	}
	cs, err := r.clients(token)
	if err != nil {
		return "", err
	}
	res, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	name := res.Status.UserInfo.Username
	r.mu.Lock()
	r.makeRoomLocked(now)
	r.users[key] = userEntry{name: name, expires: now.Add(r.ttl)}
	r.mu.Unlock()
	return name, nil
}

// makeRoomLocked keeps room for one more entry: it drops stale entries at most once a ttl, and when the
// cache is full all the same, a tenth of it (map order, so no caller can choose what goes).
func (r *Reviewer) makeRoomLocked(now time.Time) {
	r.expireLocked(now, false)
	if len(r.allowed)+len(r.users) < r.maxEntries {
		return
	}
	r.expireLocked(now, true)
	drop := len(r.allowed) + len(r.users) - r.maxEntries*9/10
	for k := range r.allowed {
		if drop <= 0 {
			return
		}
		delete(r.allowed, k)
		drop--
	}
	for k := range r.users {
		if drop <= 0 {
			return
		}
		delete(r.users, k)
		drop--
	}
}

// expireLocked drops stale entries, at most once a ttl unless forced, so that the cache holds only the
// entries of the last two ttls.
func (r *Reviewer) expireLocked(now time.Time, force bool) {
	if !force && now.Sub(r.swept) < r.ttl {
		return
	}
	r.swept = now
	for k, v := range r.allowed {
		if !now.Before(v.expires) {
			delete(r.allowed, k)
		}
	}
	for k, u := range r.users {
		if !now.Before(u.expires) {
			delete(r.users, k)
		}
	}
}
