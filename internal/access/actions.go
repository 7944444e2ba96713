package access

import (
	"context"
	"math/bits"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// Granted returns, for each namespace of the summaries, the permissions the caller has there of those
// their possible actions and their health reasons need. Each distinct permission of a page is reviewed
// once (the verdicts are cached as for lists), not once per item, and all at once.
func (r *Rules) Granted(ctx context.Context, tok string, k *ray.Kind, sums []*ray.Summary) (map[string]ray.Permissions, error) {
	needed := map[string]ray.Permissions{}
	for _, sum := range sums {
		n := k.Possible(sum)
		need := n.All()
		if p, ok := ray.Seeing(sum.Health.SeenOn()); ok {
			need |= ray.Of(p)
		}
		needed[sum.Namespace] |= need
	}
	type asked struct {
		ns string
		p  ray.Permission
	}
	count := 0
	for _, need := range needed {
		count += bits.OnesCount16(uint16(need))
	}
	asks, of := make([]auth.Attributes, 0, count), make([]asked, 0, count)
	for ns, need := range needed {
		need.Each(func(p ray.Permission) {
			asks = append(asks, k.Attributes(p, ns))
			of = append(of, asked{ns, p})
		})
	}
	verdicts, err := r.Authz.AllowedAll(ctx, tok, asks)
	if err != nil {
		return nil, err
	}
	granted := make(map[string]ray.Permissions, len(needed))
	for i, a := range of {
		if verdicts[i] {
			granted[a.ns] |= ray.Of(a.p)
		}
	}
	return granted, nil
}

// ShownAs returns what a caller with the granted permissions in the summary's namespace may do with
// the object now: the actions its state allows whose every permission is granted; and whether its
// health reason is withheld, read from pods or events the caller may not list there, as the pods and
// events routes would refuse them.
func ShownAs(k *ray.Kind, sum *ray.Summary, granted ray.Permissions) (actions []string, withheld bool) {
	n := k.Possible(sum)
	p, ok := ray.Seeing(sum.Health.SeenOn())
	return n.Allowed(granted), ok && !granted.Has(p)
}

// Asked asks a caller's rights once each and remembers the answers; an answer it could not get is
// false and asked again next time.
type Asked struct {
	authz Authorizer
	k     *ray.Kind
	ctx   context.Context
	token string
	known map[auth.Attributes]bool
}

// Ask returns what asks the rights of the caller holding token about kind k, while ctx lasts.
func (r *Rules) Ask(ctx context.Context, token string, k *ray.Kind) *Asked {
	return &Asked{authz: r.Authz, k: k, ctx: ctx, token: token}
}

// Forget has every right asked again at its next use.
func (r *Asked) Forget() { r.known = nil }

// Sees tells whether the caller may be shown what was read from seenOn in ns (see ray.Seeing): the one
// rule lists, details and streams follow.
func (r *Asked) Sees(seenOn, ns string) bool {
	p, needed := ray.Seeing(seenOn)
	return !needed || r.allowed(r.k.Attributes(p, ns))
}

func (r *Asked) allowed(a auth.Attributes) bool {
	if ok, asked := r.known[a]; asked {
		return ok
	}
	ok, err := r.authz.Allowed(r.ctx, r.token, a)
	if err != nil {
		return false
	}
	if r.known == nil {
		r.known = map[auth.Attributes]bool{}
	}
	r.known[a] = ok
	return ok
}

// Shown is sum as the caller may see it: a health reason read from pods or events it may not list in
// the namespace is withheld, as in a list.
func (r *Asked) Shown(sum *ray.Summary) *ray.Summary {
	if r.Sees(sum.Health.SeenOn(), sum.Namespace) {
		return sum
	}
	c := *sum
	c.Health = c.Health.Withheld()
	return &c
}

// VisibleProblems are the problems of a detail the caller may be shown: those read from pods or
// events only where it may list them in ns.
func (r *Asked) VisibleProblems(ns string, problems []ray.Problem) []ray.Problem {
	shown := []ray.Problem{}
	for _, p := range problems {
		if r.Sees(p.SeenOn(), ns) {
			shown = append(shown, p)
		}
	}
	return shown
}
