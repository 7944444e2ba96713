package cache

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"ray-service/internal/auth"
	"ray-service/internal/benchtarget"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
	"ray-service/internal/signing"
)

// benchCluster returns a RayCluster as the apiserver sends it: the manifest, managedFields, status.
func benchCluster(b *testing.B, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(raytest.ClusterYAML), &u.Object); err != nil {
		b.Fatal(err)
	}
	u.SetName(fmt.Sprintf("cluster-%05d", i))
	u.SetNamespace(fmt.Sprintf("ns-%02d", i%50))
	u.SetUID(types.UID(fmt.Sprintf("0c4a6c2e-0000-4000-8000-%012d", i)))
	u.SetResourceVersion(fmt.Sprint(1000 + i))
	u.SetCreationTimestamp(metav1.NewTime(time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)))
	u.SetLabels(map[string]string{ray.CreatorKey: "alice", "team": "ml"})
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
	n := benchtarget.Size(10000, 1000)
	kind := ray.NewKinds().Cluster()
	transform := (&Store{}).entryTransform(kind)
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
				perObject = float64(after-before) / float64(n)
				runtime.KeepAlive(store)
			}
			b.ReportMetric(perObject, "bytes/object")
			b.ReportMetric(perObject*10000/(1<<20), "MiB/10k")
		})
	}
}

// benchStore returns a store with n RayClusters published in 20 namespaces, as its handlers publish
// them (the informers are not started).
func benchStore(b *testing.B, n int) (*Store, *ray.Kind) {
	b.Helper()
	kinds := ray.NewKinds()
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range kinds.All() {
		listKinds[k.GVR()] = k.Kind + "List"
	}
	signer, err := signing.New([]byte("a key of the benchmarks, 32 bytes at least"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := NewStore(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), listKinds),
		fake.NewSimpleClientset(), kinds, signer, 0)
	if err != nil {
		b.Fatal(err)
	}
	k := kinds.Cluster()
	transform := (&Store{}).entryTransform(k)
	for i := range n {
		u := benchCluster(b, i)
		u.SetNamespace(fmt.Sprintf("ns-%02d", i%20))
		v, _ := transform(u)
		s.publishInstance(k, v)
	}
	return s, k
}

// listPage is the store's part of one list request (before the kept orders, it was
// q.Apply(s.Items(k, Scopes{Instances: scope})): clone, filter and sort every item).
func listPage(s *Store, k *ray.Kind, scope auth.Scope, q *Query) ([]*Item, int) {
	return s.List(k, Scopes{Instances: scope}, q)
}

// BenchmarkListQuery measures the store's part of one list request over 1,000 to 100,000 cached
// RayClusters: a filtered page sorted by name, and the default page (sorted by creation). The time and
// the memory a page takes should not grow with the objects cached.
func BenchmarkListQuery(b *testing.B) {
	for _, n := range benchtarget.Sizes(1000, 10000, 100000) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, k := benchStore(b, n)
			for _, c := range []struct {
				name string
				q    *Query
			}{
				// 1,000 matching names at every size, Running ones, the second page by name.
				{"filtered", &Query{Search: "cluster-00", Statuses: []string{ray.StatusRunning}, SortBy: SortByName, Page: 2, PageSize: 20}},
				{"default", &Query{SortBy: SortByCreatedAt, Desc: true, Page: 1, PageSize: 20}},
			} {
				b.Run(c.name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						page, total := listPage(s, k, auth.AllNamespaces(), c.q)
						if len(page) != 20 || total == 0 {
							b.Fatalf("page %d total %d", len(page), total)
						}
					}
				})
			}
			// The filtered page right after a change (an object published again), which drops the
			// matches kept for the query: the cost of the first page of a query.
			b.Run("filtered-after-change", func(b *testing.B) {
				q := &Query{Search: "cluster-00", Statuses: []string{ray.StatusRunning}, SortBy: SortByName, Page: 2, PageSize: 20}
				e, _ := (&Store{}).entryTransform(k)(benchCluster(b, 7))
				b.ReportAllocs()
				for b.Loop() {
					s.publishInstance(k, e)
					if page, _ := listPage(s, k, auth.AllNamespaces(), q); len(page) != 20 {
						b.Fatal("no page")
					}
				}
			})
		})
	}
}

// BenchmarkInitialSync measures publishing n RayClusters in random order, as an informer's first list
// delivers them, and one list after it: the time to a first answer after start.
func BenchmarkInitialSync(b *testing.B) {
	for _, n := range benchtarget.Sizes(10000, 100000) {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, k := benchStore(b, 0)
			transform := (&Store{}).entryTransform(k)
			entries := make([]any, n)
			for i := range entries {
				u := benchCluster(b, (i*7919)%n) // a fixed shuffle
				u.SetNamespace(fmt.Sprintf("ns-%02d", i%20))
				entries[i], _ = transform(u)
			}
			q := &Query{SortBy: SortByCreatedAt, Desc: true, Page: 1, PageSize: 20}
			for b.Loop() {
				b.StopTimer()
				s.mu.Lock()
				s.instances[k], s.ordered[k] = namespaced[*Item]{}, newViews()
				s.mu.Unlock()
				b.StartTimer()
				for _, e := range entries {
					s.publishInstance(k, e)
				}
				if page, _ := s.List(k, Scopes{Instances: auth.AllNamespaces()}, q); len(page) != 20 {
					b.Fatal("no page")
				}
			}
		})
	}
}

// BenchmarkStoreMemory reports the heap the store takes per cached RayCluster once its informer entry
// and its published item are kept, with every index and kept order: what the service holds at rest.
func BenchmarkStoreMemory(b *testing.B) {
	n := benchtarget.Size(10000, 1000)
	var perObject float64
	for b.Loop() {
		before := heapInUse()
		s, k := benchStoreIndexed(b, n)
		after := heapInUse()
		perObject = float64(after-before) / float64(n)
		runtime.KeepAlive(s)
		runtime.KeepAlive(k)
	}
	b.ReportMetric(perObject, "bytes/object")
}

// benchStoreIndexed is benchStore with the entries also kept in the informer's indexer, as a running
// informer keeps them.
func benchStoreIndexed(b *testing.B, n int) (*Store, *ray.Kind) {
	b.Helper()
	s, k := benchStore(b, 0)
	transform := (&Store{}).entryTransform(k)
	indexer := s.informers[k].GetIndexer()
	for i := range n {
		u := benchCluster(b, i)
		u.SetNamespace(fmt.Sprintf("ns-%02d", i%20))
		v, _ := transform(u)
		if err := indexer.Add(v); err != nil {
			b.Fatal(err)
		}
		s.publishInstance(k, v)
	}
	return s, k
}

// BenchmarkWriteStorm publishes 60,000 changes (a minute of 1,000 a second, at once) to 10,000 cached
// RayClusters, each version with an annotation of its own size up to 256 KiB and a label that changes
// its summary, while a stream reads the feed as it goes and another never does; it reports how much the
// live heap grew: bounded by the change feed's window and bytes, whatever the objects' sizes.
func BenchmarkWriteStorm(b *testing.B) {
	n, changes := benchtarget.Size(10000, 1000), benchtarget.Size(60000, 6000)
	var grew float64
	for b.Loop() {
		s, k := benchStoreIndexed(b, n)
		transform := (&Store{}).entryTransform(k)
		versions := make([]any, 64) // made before, so that only what the store keeps counts
		for i := range versions {
			u := benchCluster(b, i)
			u.SetNamespace(fmt.Sprintf("ns-%02d", i%20))
			u.SetAnnotations(map[string]string{"blob": strings.Repeat("x", (i*4099)%(256<<10))})
			u.SetLabels(map[string]string{ray.CreatorKey: "alice", "version": fmt.Sprint(i)})
			versions[i], _ = transform(u)
		}
		before := heapInUse()
		var seq uint64
		all := Scopes{Instances: auth.AllNamespaces()}
		for i := range changes {
			v := versions[i%len(versions)].(*Entry)
			e := &Entry{TypeMeta: v.TypeMeta, ObjectMeta: v.ObjectMeta}
			e.Name = fmt.Sprintf("cluster-%05d", (i*7919)%n)
			e.Namespace = fmt.Sprintf("ns-%02d", ((i*7919)%n)%20)
			sum := v.item.Summary
			sum.Name, sum.Namespace = e.Name, e.Namespace
			e.item = newItem(sum, v.item.Labels)
			s.publishInstance(k, e)
			if i%100 == 0 { // a stream that keeps up
				_, seq, _ = s.Since(k, seq, all, all)
			}
		}
		grew = float64(heapInUse()) - float64(before)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(grew/(1<<20), "MiB-grown")
}

// BenchmarkAllocated is the overview's allocated figures over 500 running RayClusters, a head and a
// worker pod each (the stack benchmark's running clusters): kept while nothing changes, and summed
// again after each pod change.
func BenchmarkAllocated(b *testing.B) {
	s, _ := benchStoreIndexed(b, 500)
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
	for i := range 500 {
		for _, node := range []string{ray.NodeTypeHead, ray.NodeTypeWorker} {
			p := raytest.Pod(fmt.Sprintf("cluster-%05d-%s", i, node), fmt.Sprintf("cluster-%05d", i), node, "small", true)
			p.Namespace = fmt.Sprintf("ns-%02d", i%20)
			p.Spec.Containers = []corev1.Container{{Name: "ray", Image: "rayproject/ray:2.41.0", Resources: res}}
			if err := s.pods.GetIndexer().Add(p); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, changing := range []bool{false, true} {
		b.Run(map[bool]string{false: "kept", true: "after-each-pod-change"}[changing], func(b *testing.B) {
			var a Allocation
			b.ReportAllocs()
			for b.Loop() {
				if changing {
					s.podsSeq.Add(1)
				}
				a = s.Allocated(auth.AllNamespaces(), "")
			}
			if a.ActiveRayClusters != 500 || a.CPU != 1000 {
				b.Fatalf("allocated %+v", a)
			}
		})
	}
}

// BenchmarkFirstListObject is what one RayCluster costs the service at its informer's first list, apart
// from the apiserver: its JSON (as the apiserver sends it: manifest, managedFields, status) decoded as the
// dynamic client decodes it, then the informer's transform to the cache's entry. A hundred thousand of
// them are most of the time to ready.
func BenchmarkFirstListObject(b *testing.B) {
	u := benchCluster(b, 1)
	u.Object["status"] = map[string]any{"state": "suspended", "conditions": []any{map[string]any{"type": "HeadPodReady",
		"status": "False", "reason": "HeadPodNotFound", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}}
	data, err := u.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	_, k := benchStore(b, 0)
	transform := (&Store{}).entryTransform(k)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("transform", func(b *testing.B) {
		b.ReportAllocs()
		objs := make([]k8sruntime.Object, 0, 1024)
		for b.Loop() {
			if len(objs) == 0 {
				b.StopTimer()
				for range cap(objs) {
					o, _, _ := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
					objs = append(objs, o)
				}
				b.StartTimer()
			}
			if _, err := transform(objs[len(objs)-1]); err != nil {
				b.Fatal(err)
			}
			objs = objs[:len(objs)-1]
		}
	})
	b.ReportMetric(float64(len(data)), "bytes/object")
}
