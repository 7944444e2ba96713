package api

import (
	"context"
	"sync"

	"golang.org/x/sync/errgroup"

	"ray-service/internal/auth"
	"ray-service/internal/k8s"
)

// reviewsAtOnce bounds the access reviews one page's actions make at once.
const reviewsAtOnce = 8

// withActions sets, in each summary, the actions its caller may take now: those its state allows
// whose every permission the caller has in the object's namespace. Each distinct permission of the
// page is reviewed once (the verdicts are cached as for lists), not once per item.
func (s *Server) withActions(ctx context.Context, tok string, k *k8s.Kind, items []k8s.Summary) error {
	possible := make([]map[string][]auth.Attributes, len(items))
	verdicts := map[auth.Attributes]bool{}
	for i := range items {
		possible[i] = k.Possible(&items[i])
		for _, needs := range possible[i] {
			for _, a := range needs {
				a.Name = ""
				verdicts[a] = false
			}
		}
	}
	asks := make([]auth.Attributes, 0, len(verdicts))
	for a := range verdicts {
		asks = append(asks, a)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsAtOnce)
	for _, a := range asks {
		g.Go(func() error {
			ok, err := s.Authz.Allowed(gctx, tok, a)
			mu.Lock()
			verdicts[a] = ok
			mu.Unlock()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range items {
		actions := []string{}
		for _, action := range k8s.ActionOrder {
			needs, ok := possible[i][action]
			if !ok {
				continue
			}
			allowed := true
			for _, a := range needs {
				a.Name = ""
				allowed = allowed && verdicts[a]
			}
			if allowed {
				actions = append(actions, action)
			}
		}
		items[i].Actions = actions
	}
	return nil
}
