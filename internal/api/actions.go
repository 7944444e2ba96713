package api

import (
	"context"

	"ray-service/internal/access"
	"ray-service/internal/ray"
)

// withActions sets, in each summary, the actions its caller may take now and withholds a health
// reason it may not be shown (see access.Rules.Granted and access.ShownAs).
func (s *Server) withActions(ctx context.Context, tok string, k *ray.Kind, items []ray.Summary) error {
	sums := make([]*ray.Summary, len(items))
	for i := range items {
		sums[i] = &items[i]
	}
	granted, err := s.rules.Granted(ctx, tok, k, sums)
	if err != nil {
		return err
	}
	for _, sum := range sums {
		var withheld bool
		if sum.Actions, withheld = access.ShownAs(k, sum, granted[sum.Namespace]); withheld {
			sum.Health = sum.Health.Withheld()
		}
	}
	return nil
}
