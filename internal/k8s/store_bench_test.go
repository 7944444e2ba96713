package k8s

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

// benchCluster returns a RayCluster as the apiserver sends it: the manifest, managedFields, status.
func benchCluster(b *testing.B, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(clusterYAML), &u.Object); err != nil {
		b.Fatal(err)
	}
	u.SetName(fmt.Sprintf("cluster-%05d", i))
	u.SetNamespace(fmt.Sprintf("ns-%02d", i%50))
	u.SetUID(types.UID(fmt.Sprintf("0c4a6c2e-0000-4000-8000-%012d", i)))
	u.SetResourceVersion(fmt.Sprint(1000 + i))
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)))
	u.SetLabels(map[string]string{CreatorKey: "alice", "team": "ml"})
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "ray-service", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "ray.io/v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:headGroupSpec":{},"f:rayVersion":{},"f:workerGroupSpecs":{}}}`)},
		{Manager: "ray-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "ray.io/v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:state":{},"f:conditions":{},"f:head":{}}}`)},
	})
	return u
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCacheMemory reports the heap that 10,000 cached RayClusters take, as the watch cache keeps
// them (summary entries) and, for comparison, as whole objects.
func BenchmarkCacheMemory(b *testing.B) {
	const n = 10000
	kind := rayClusterKind()
	transform := entryTransform(kind)
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = benchCluster(b, i)
	}
	for _, mode := range []string{"entries", "whole-objects"} {
		b.Run(mode, func(b *testing.B) {
			var perObject float64
			for it := 0; it < b.N; it++ {
				before := heapInUse()
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
				for _, o := range objs {
					var v any = o.DeepCopy()
					if mode == "entries" {
						v, _ = transform(v)
					}
					if err := store.Add(v); err != nil {
						b.Fatal(err)
					}
				}
				after := heapInUse()
				perObject = float64(after-before) / n
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perObject, "bytes/object")
			b.ReportMetric(perObject*n/(1<<20), "MiB/10k")
		})
	}
}

// BenchmarkListQuery measures one filtered, sorted page over 10,000 cached RayClusters.
func BenchmarkListQuery(b *testing.B) {
	const n = 10000
	transform := entryTransform(rayClusterKind())
	items := make([]*Item, n)
	for i := range items {
		v, _ := transform(benchCluster(b, i))
		e := v.(*Entry)
		items[i] = &Item{Summary: e.Summary, Labels: e.Labels}
	}
	q := &Query{Search: "cluster-0", Statuses: []string{StatusRunning}, SortBy: SortByName, Desc: true, Page: 3, PageSize: 20}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		page, total := q.Apply(items)
		if len(page) != 20 || total != n {
			b.Fatalf("page %d total %d", len(page), total)
		}
	}
}
