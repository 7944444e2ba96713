package cache

import (
	corev1 "k8s.io/api/core/v1"

	"ray-service/internal/ray"
)

// CachedPods describes the cached Ray pods of the clusters the object s sums up runs on (of kind k),
// ordered as Pods orders them: what an object stream shows. Submitter pods are not cached.
func (s *Store) CachedPods(k *ray.Kind, sum *ray.Summary) []ray.PodInfo {
	var pods []corev1.Pod
	for _, c := range k.Clusters(sum) {
		for _, p := range s.ClusterPods(sum.Namespace, c) {
			pods = append(pods, *p)
		}
	}
	ray.SortPods(pods)
	out := make([]ray.PodInfo, 0, len(pods))
	for i := range pods {
		out = append(out, ray.Info(&pods[i]))
	}
	return out
}
