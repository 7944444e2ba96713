package k8s

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/usage"
)

// Quotas reads the namespaces' ResourceQuotas with the service's own client (the utilization report
// shows them beside the namespaces the caller may see, and only those).
type Quotas struct {
	Core corev1client.CoreV1Interface
}

// maxQuotaNamespaces is past how many namespaces the quotas are listed once for all, not per namespace.
const maxQuotaNamespaces = 8

// Quotas returns the figures of the ResourceQuotas of each namespace named that has any.
func (q Quotas) Quotas(ctx context.Context, namespaces []string) (map[string][]usage.QuotaFigure, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := map[string][]usage.QuotaFigure{}
	if len(namespaces) > maxQuotaNamespaces {
		list, err := q.Core.ResourceQuotas("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return out, err
		}
		byNS := map[string][]int{}
		for i, rq := range list.Items {
			if slices.Contains(namespaces, rq.Namespace) {
				byNS[rq.Namespace] = append(byNS[rq.Namespace], i)
			}
		}
		for ns := range byNS {
			out[ns] = usage.QuotaFigures(pick(list.Items, byNS[ns]))
		}
		return out, nil
	}
	for _, ns := range namespaces {
		list, err := q.Core.ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return out, err
		}
		if len(list.Items) > 0 {
			out[ns] = usage.QuotaFigures(list.Items)
		}
	}
	return out, nil
}

func pick[T any](items []T, at []int) []T {
	out := make([]T, len(at))
	for i, j := range at {
		out[i] = items[j]
	}
	return out
}
