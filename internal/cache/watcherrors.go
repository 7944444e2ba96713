package cache

import (
	"context"
	"errors"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
)

// WatchErrors is how many times a list or watch of the Ray objects, their pods, their templates or
// what Dynamic Resource Allocation gives them (claims, claim templates, slices) failed since the service started: while they fail, the cache serves what it had and falls behind.
// A watch that ends normally, or whose resource version has expired (the informer lists again at
// once), is not counted; the Warning events' reflector, which client-go gives no handler, is not either.
func (s *Store) WatchErrors() int64 { return s.watchErrors.Load() }

// countWatchErrors has the informers count their failed lists and watches, then log them as
// client-go does by default. Called before they start.
func (s *Store) countWatchErrors() error {
	infs := []cache.SharedIndexInformer{s.pods, s.templates, s.dra.claims, s.dra.templates, s.dra.slices}
	for _, inf := range s.informers {
		infs = append(infs, inf)
	}
	for _, inf := range infs {
		if err := inf.SetWatchErrorHandlerWithContext(s.watchFailed); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) watchFailed(ctx context.Context, r *cache.Reflector, err error) {
	if watchFailure(err) {
		s.watchErrors.Add(1)
	}
	cache.DefaultWatchErrorHandler(ctx, r, err)
}

// watchFailure tells a failed list or watch from a watch that ended as watches do.
func watchFailure(err error) bool {
	return !errors.Is(err, io.EOF) && !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err)
}
