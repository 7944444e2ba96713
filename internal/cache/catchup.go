package cache

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// CatchUp lists every object of the kinds the cluster serves now (serves nil: all; an optional kind
// without its CRD is observed once the watch cache serves it), page by page, with the service's own
// client, and hands each to observe with its summary as the watch cache makes it, the creator's
// signature checked: what a replica taking the Lease compares with what the last holder left. It stops
// at the first error, which names the kind.
func CatchUp(ctx context.Context, dyn dynamic.Interface, kinds *ray.Kinds, serves func(*ray.Kind) bool, signer *signing.Signer,
	observe func(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time)) error {
	for _, k := range kinds.All() {
		if serves != nil && !serves(k) {
			continue
		}
		opts := metav1.ListOptions{Limit: 500}
		for {
			list, err := dyn.Resource(k.GVR()).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("listing the %s: %w", k.Kind, err)
			}
			now := time.Now().UTC()
			for i := range list.Items {
				s := k.Summarize(&list.Items[i])
				s.CreatorSigned = signer.CreatorSigned(k, &list.Items[i])
				observe(k, &list.Items[i], &s, now)
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return nil
}
