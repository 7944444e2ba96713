package auth

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
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

// ReviewClients are the APIs a Reviewer asks with a caller's token (a kubernetes.Interface has them).
type ReviewClients interface {
	AuthorizationV1() authorizationv1client.AuthorizationV1Interface
	AuthenticationV1() authenticationv1client.AuthenticationV1Interface
}

// ClientsFor returns the clients that act as the holder of token.
type ClientsFor func(token string) (ReviewClients, error)

// Reviewer asks the apiserver, with the caller's own token, who the caller is and what the caller may do.
// Verdicts are cached briefly under a hash of the token, at most maxEntries of them, so that no caller
// can grow the cache at will by naming ever new namespaces or tokens.
type Reviewer struct {
	clients    ClientsFor
	ttl        time.Duration
	maxEntries int
	now        func() time.Time

	mu      sync.RWMutex // lookups share it; only a new verdict takes it alone
	allowed map[verdictKey]verdict
	users   map[string]userEntry
	swept   time.Time
	// bindings, when set, tells where RoleBindings name a caller (see Scope).
	bindings *Bindings
	// asking joins the callers that miss the same verdict at once into one review.
	asking singleflight.Group
}

// UseBindings has Scope review a caller only in the namespaces where a RoleBinding names it (see
// Bindings); call it before the reviewer is used.
func (r *Reviewer) UseBindings(b *Bindings) { r.bindings = b }

type verdict struct {
	allowed bool
	expires time.Time
}

type userEntry struct {
	id      Identity
	expires time.Time
}

// Identity is who the apiserver authenticates a token as.
type Identity struct {
	Name   string
	Groups []string
}

// reviewTimeout bounds one access review.
const reviewTimeout = 30 * time.Second

// DefaultMaxEntries bounds the verdicts and user names a Reviewer caches, where NewReviewer is given 0.
const DefaultMaxEntries = 10000

// NewReviewer returns a reviewer that caches verdicts for ttl, at most maxEntries (0: DefaultMaxEntries).
func NewReviewer(clients ClientsFor, ttl time.Duration, maxEntries int) *Reviewer {
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	return &Reviewer{clients: clients, ttl: ttl, maxEntries: maxEntries, now: time.Now,
		allowed: map[verdictKey]verdict{}, users: map[string]userEntry{}}
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

// key is a text that names a, field by field.
func (a Attributes) key() string {
	return strings.Join([]string{a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name}, "\x00")
}

// resourceAttributes is a as an access review asks it.
func (a Attributes) resourceAttributes() *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource,
		Namespace: a.Namespace, Name: a.Name}
}

// verdictKey is the cache key of a verdict on an action for the token of that hash.
type verdictKey struct {
	hash string
	Attributes
}

// AllowedAll tells, for each of asks, whether the holder of token may do it: the cached verdicts read
// at once, the others asked for in parallel (reviewsInParallel at a time). The token is hashed once,
// however many verdicts a request needs (a list page needs one per permission and namespace).
//
// With bindings (UseBindings), asks in namespaces that grant the caller the same are asked once: in a
// namespace where no RoleBinding names the caller, as cluster-wide (RBAC answers the same from its
// ClusterRoleBindings); where RoleBindings bind it the same ClusterRoles, in the first such namespace
// (see Bindings.Classes). A list across a thousand namespaces and the actions of its page then need a
// review per role the caller holds, not per namespace.
func (r *Reviewer) AllowedAll(ctx context.Context, token string, asks []Attributes) ([]bool, error) {
	if same := r.equivalent(ctx, token, asks); same != nil {
		unique := slices.Compact(slices.SortedFunc(slices.Values(same), compareAttributes))
		answers, err := r.allowedAll(ctx, token, unique)
		verdicts := make([]bool, len(asks))
		for i, a := range same {
			j, _ := slices.BinarySearchFunc(unique, a, compareAttributes)
			verdicts[i] = answers[j]
		}
		return verdicts, err
	}
	return r.allowedAll(ctx, token, asks)
}

// equivalent returns, for each of asks, the ask the apiserver answers the same for the caller under
// RBAC (see AllowedAll); nil without bindings, or before they or the caller are known.
func (r *Reviewer) equivalent(ctx context.Context, token string, asks []Attributes) []Attributes {
	if r.bindings == nil {
		return nil
	}
	id, err := r.Identity(ctx, token)
	if err != nil {
		return nil
	}
	classes, ok := r.bindings.Classes(id)
	if !ok {
		return nil
	}
	first := map[string]string{} // the least namespace of each class, the same at every request
	for ns, class := range classes {
		if f, ok := first[class]; !ok || ns < f {
			first[class] = ns
		}
	}
	out := make([]Attributes, len(asks))
	for i, a := range asks {
		if a.Namespace != "" {
			class, named := classes[a.Namespace]
			a.Namespace = "" // named nowhere: as cluster-wide
			if named {
				a.Namespace = first[class]
			}
		}
		out[i] = a
	}
	return out
}

func compareAttributes(a, b Attributes) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Resource, b.Resource), strings.Compare(a.Verb, b.Verb),
		strings.Compare(a.Group, b.Group), strings.Compare(a.Subresource, b.Subresource), strings.Compare(a.Name, b.Name))
}

// allowedAll is AllowedAll for each ask as it is.
func (r *Reviewer) allowedAll(ctx context.Context, token string, asks []Attributes) ([]bool, error) {
	hash := TokenHash(token)
	verdicts := make([]bool, len(asks))
	now := r.now()
	var missing []int
	r.mu.RLock()
	for i, a := range asks {
		v, found := r.allowed[verdictKey{hash, a}]
		if verdicts[i] = v.allowed; !found || !now.Before(v.expires) {
			missing = append(missing, i)
		}
	}
	r.mu.RUnlock()
	switch len(missing) {
	case 0:
		return verdicts, nil
	case 1:
		var err error
		verdicts[missing[0]], err = r.review(ctx, token, hash, asks[missing[0]], now)
		return verdicts, err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsInParallel)
	for _, i := range missing {
		g.Go(func() error {
			var err error
			verdicts[i], err = r.review(gctx, token, hash, asks[i], now)
			return err
		})
	}
	return verdicts, g.Wait()
}

// cached returns the cached verdict on a, if there is one still fresh.
func (r *Reviewer) cached(hash string, a Attributes, now time.Time) (allowed, ok bool) {
	return cachedVerdict(r.mu.RLocker(), r.allowed, verdictKey{hash, a}, now)
}

// cachedVerdict returns the verdict verdicts hold under key, read under mu, if there is one still fresh.
func cachedVerdict[K comparable](mu sync.Locker, verdicts map[K]verdict, key K, now time.Time) (allowed, ok bool) {
	mu.Lock()
	v, found := verdicts[key]
	mu.Unlock()
	return v.allowed, found && now.Before(v.expires)
}

func (r *Reviewer) allowedAs(ctx context.Context, token, hash string, a Attributes) (bool, error) {
	now := r.now()
	if allowed, ok := r.cached(hash, a, now); ok {
		return allowed, nil
	}
	return r.review(ctx, token, hash, a, now)
}

// review asks the apiserver whether the holder of token may do a, and caches the verdict. Requests that
// miss the same verdict at once (all of a page's clients when it expires) share one review.
func (r *Reviewer) review(ctx context.Context, token, hash string, a Attributes, now time.Time) (bool, error) {
	key := hash + "\x00" + a.key()
	v, err, _ := r.asking.Do(key, func() (any, error) {
		// Shared: one caller going away does not fail the others.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return r.reviewOnce(ctx, token, hash, a, now)
	})
	allowed, _ := v.(bool)
	return allowed, err
}

func (r *Reviewer) reviewOnce(ctx context.Context, token, hash string, a Attributes, now time.Time) (bool, error) {
	cs, err := r.clients(token)
	if err != nil {
		return false, err
	}
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: a.resourceAttributes(),
	}}
	res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.makeRoomLocked(now)
	r.allowed[verdictKey{hash, a}] = verdict{allowed: res.Status.Allowed, expires: now.Add(r.ttl)}
	r.mu.Unlock()
	return res.Status.Allowed, nil
}

// UserName returns the user name the apiserver authenticates token as.
func (r *Reviewer) UserName(ctx context.Context, token string) (string, error) {
	id, err := r.Identity(ctx, token)
	return id.Name, err
}

// Identity returns who the apiserver authenticates token as: its user name and groups.
func (r *Reviewer) Identity(ctx context.Context, token string) (Identity, error) {
	key := TokenHash(token)
	now := r.now()
	r.mu.RLock()
	u, ok := r.users[key]
	r.mu.RUnlock()
	if ok && now.Before(u.expires) {
		return u.id, nil
	}
	// Callers who ask at once (a list's two scopes, a stream's first check) share one review.
	v, err, _ := r.asking.Do("identity\x00"+key, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		cs, err := r.clients(token)
		if err != nil {
			return Identity{}, err
		}
		res, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return Identity{}, err
		}
		id := Identity{Name: res.Status.UserInfo.Username, Groups: res.Status.UserInfo.Groups}
		r.mu.Lock()
		r.makeRoomLocked(now)
		r.users[key] = userEntry{id: id, expires: now.Add(r.ttl)}
		r.mu.Unlock()
		return id, nil
	})
	id, _ := v.(Identity)
	return id, err
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
