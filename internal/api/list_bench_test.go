package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"ray-service/internal/auth"
	"ray-service/internal/benchtarget"
	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
	"ray-service/internal/signing"
	"ray-service/internal/stream"
)

// BenchmarkListFromCache is a list request served from the watch cache, with the caller's objects made
// as the service makes them (k8s.Manager): what one list costs the service apart from its access
// reviews.
func BenchmarkListFromCache(b *testing.B) {
	clients, err := k8s.NewClientFactory(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(b, err)
	m := &k8s.Manager{Clients: clients}
	e := &handlerEnv{authz: &fakeAuthz{allowed: true, scopes: map[string]auth.Scope{"rayclusters": auth.AllNamespaces()}},
		store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running"), item("b", "y", "Stopped")}}}}
	h := e.routerWith(func(d *Deps) {
		d.Objects = func(k *ray.Kind, token string) (Objects, error) { return m.For(k, token) }
	})
	req := httptest.NewRequest(http.MethodGet, BasePath+"/rayclusters", nil)
	req.Header.Set("Authorization", "Bearer t")
	serveEach(b, h, req)
}

// pageStore answers every list with the same page: the store's part is measured in internal/cache.
type pageStore struct {
	fakeStore
	page []*cache.Item
}

func (p *pageStore) List(*ray.Kind, cache.Scopes, *cache.Query) ([]*cache.Item, int) {
	return slices.Clone(p.page), 1000
}

// BenchmarkListPage is the stack benchmark's filtered page in process: twenty RayClusters summarized
// as the cache summarizes them, in twenty namespaces, each item's actions from verdicts the reviewer has
// cached, encoded and written through every middleware. What the service adds to the store's part.
func BenchmarkListPage(b *testing.B) {
	serveEach(b, listPageRouter(b, false), listPageRequest())
}

// BenchmarkListPageAgain is the same page asked again while nothing changed: the kept page.
func BenchmarkListPageAgain(b *testing.B) {
	serveEach(b, listPageRouter(b, true), listPageRequest())
}

// unchangedStore is a pageStore that never changes.
type unchangedStore struct{ pageStore }

func (u *unchangedStore) Version(*ray.Kind) uint64 { return 1 }

func listPageRequest() *http.Request {
	req := httptest.NewRequest(http.MethodGet, BasePath+"/rayclusters?search=perf-01&status=Stopped&sortBy=name&order=asc&page=2", nil)
	// A service account token is a signed JWT of about a kilobyte.
	req.Header.Set("Authorization", "Bearer "+benchToken)
	return req
}

// listPageRouter serves the page of BenchmarkListPage; unchanged, from a store that never changes.
func listPageRouter(b *testing.B, unchanged bool) http.Handler {
	kinds := ray.NewKinds()
	k := kinds.Cluster()
	page := make([]*cache.Item, 20)
	for i := range page {
		u := raytest.Cluster(b)
		u.SetNamespace(fmt.Sprintf("perf-ns-%02d", i))
		u.SetName(fmt.Sprintf("perf-01%03d", i))
		page[i] = &cache.Item{Summary: k.Summarize(u)}
	}
	core := fake.NewSimpleClientset()
	core.PrependReactor("create", "selfsubjectaccessreviews", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	reviewer := auth.NewReviewer(func(string) (auth.ReviewClients, error) { return core, nil }, time.Hour, 0)
	e := &handlerEnv{store: &fakeStore{}}
	return e.routerWith(func(d *Deps) {
		d.Kinds, d.Store, d.Authz = kinds, &pageStore{page: page}, reviewer
		if unchanged {
			d.Store, d.PageReuse = &unchangedStore{pageStore{page: page}}, time.Second
		}
	})
}

// serveEach serves req with h at every round of b, which fails unless it is answered 200.
func serveEach(b *testing.B, h http.Handler, req *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// streamBench is a watch cache of a thousand RayClusters in twenty namespaces on fake clients, served
// with rights from verdicts the reviewer has cached.
type streamBench struct {
	srv   *httptest.Server
	dyn   *dynamicfake.FakeDynamicClient
	kind  *ray.Kind
	token string
}

func newStreamBench(b *testing.B) *streamBench {
	c := newBenchCache(b, fake.NewSimpleClientset())
	e := &handlerEnv{store: &fakeStore{}}
	srv := httptest.NewServer(e.routerWith(func(d *Deps) {
		d.Kinds, d.Store, d.Authz = c.kinds, c.store, c.reviewer
		d.Streams = stream.Options{Heartbeat: time.Hour, Reauthorize: time.Hour}
	}))
	b.Cleanup(srv.Close)
	return &streamBench{srv: srv, dyn: c.dyn, kind: c.kinds.Cluster(), token: benchToken}
}

// benchToken is a service account token's size: a signed JWT of about a kilobyte.
var benchToken = strings.Repeat("eyJhbGciOiJSUzI1NiIsImtpZCI6IjEifQ.", 27)

// benchCache is a watch cache of a thousand RayClusters in twenty namespaces on fake clients (core
// holds the pods), and a reviewer whose verdicts are all yes and cached.
type benchCache struct {
	kinds    *ray.Kinds
	dyn      *dynamicfake.FakeDynamicClient
	store    *cache.Store
	reviewer *auth.Reviewer
}

func newBenchCache(b *testing.B, core *fake.Clientset) *benchCache {
	kinds := ray.NewKinds()
	k := kinds.Cluster()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), map[schema.GroupVersionResource]string{
		kinds.Cluster().GVR(): "RayClusterList", kinds.ByKind("RayJob").GVR(): "RayJobList", kinds.ByKind("RayService").GVR(): "RayServiceList"})
	for i := range 1000 {
		u := raytest.Cluster(b)
		u.SetNamespace(fmt.Sprintf("perf-ns-%02d", i%20))
		u.SetName(fmt.Sprintf("perf-%05d", i))
		u.SetResourceVersion(strconv.Itoa(i + 1)) // as the apiserver gives
		_, err := dyn.Resource(k.GVR()).Namespace(u.GetNamespace()).Create(b.Context(), u, metav1.CreateOptions{})
		require.NoError(b, err)
	}
	signer, err := signing.New(raytest.Key)
	require.NoError(b, err)
	store, err := cache.NewStore(dyn, core, kinds, signer, 0)
	require.NoError(b, err)
	store.Start(b.Context())
	require.True(b, store.WaitForSync(b.Context()))
	reviews := fake.NewSimpleClientset()
	reviews.PrependReactor("create", "selfsubjectaccessreviews", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		return true, &authorizationv1.SelfSubjectAccessReview{Status: authorizationv1.SubjectAccessReviewStatus{Allowed: true}}, nil
	})
	reviewer := auth.NewReviewer(func(string) (auth.ReviewClients, error) { return reviews, nil }, time.Hour, 0)
	return &benchCache{kinds: kinds, dyn: dyn, store: store, reviewer: reviewer}
}

// open opens a stream of every RayCluster and returns its lines after SYNCED.
func (s *streamBench) open(ctx context.Context, b *testing.B) (*bufio.Scanner, int) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+BasePath+"/rayclusters/watch", nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	res, err := s.srv.Client().Do(req)
	require.NoError(b, err)
	b.Cleanup(func() { res.Body.Close() })
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	items := 0
	for sc.Scan() && string(sc.Bytes()) != "event: "+stream.EventSynced {
		if string(sc.Bytes()) == "event: "+stream.EventAdded {
			items++
		}
	}
	return sc, items
}

// BenchmarkStreamFanOut is one change reaching 500 open list streams: from the change made to the
// watch cache's client until every stream has read its MODIFIED event.
func BenchmarkStreamFanOut(b *testing.B) {
	s := newStreamBench(b)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	const streams = 500
	got := make(chan struct{}, streams)
	for range streams {
		sc, _ := s.open(ctx, b)
		go func() {
			for sc.Scan() {
				if string(sc.Bytes()) == "event: "+stream.EventModified {
					got <- struct{}{}
				}
			}
		}()
	}
	clusters := s.dyn.Resource(s.kind.GVR()).Namespace("perf-ns-00")
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		u, err := clusters.Get(ctx, "perf-00000", metav1.GetOptions{})
		require.NoError(b, err)
		u.SetLabels(map[string]string{"round": strconv.Itoa(i)})
		_, err = clusters.Update(ctx, u, metav1.UpdateOptions{})
		require.NoError(b, err)
		for range streams {
			<-got
		}
	}
}

// BenchmarkListStreamSnapshot opens a list stream of every RayCluster, as the stack benchmark's
// clients do, over a loopback connection, and reads it until SYNCED: a thousand RayClusters in twenty
// namespaces in a watch cache on fake clients, rights from verdicts the reviewer has cached.
func BenchmarkListStreamSnapshot(b *testing.B) {
	s := newStreamBench(b)
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(b.Context())
		_, items := s.open(ctx, b)
		cancel()
		require.Equal(b, 1000, items)
	}
}

// BenchmarkIdleStreamHeap is what an open list stream holds while nothing changes: 200 streams of
// every RayCluster (the stack benchmark's), each opened on its own connection and read until SYNCED,
// then left idle; the live heap after a collection, less what it was before, per stream ("B/stream"),
// and the goroutine stacks in use likewise ("stack-B/stream"). The clients are bare connections whose
// buffers are dropped once SYNCED is read, so that what is counted is the service's, but for a
// connection's few hundred bytes on the client's side. A first stream, before, encodes the items once.
// Issue 33's target, as the stack benchmark holds it too: 8 KB of heap at most per idle stream.
func BenchmarkIdleStreamHeap(b *testing.B) {
	s := newStreamBench(b)
	const streams = 200
	addr := strings.TrimPrefix(s.srv.URL, "http://")
	open := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		require.NoError(b, err)
		_, err = fmt.Fprintf(conn, "GET %s/rayclusters/watch HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer %s\r\n\r\n", BasePath, s.token)
		require.NoError(b, err)
		br := bufio.NewReaderSize(conn, 64<<10)
		for {
			line, err := br.ReadSlice('\n')
			require.NoError(b, err)
			if string(line) == "event: "+stream.EventSynced+"\n" {
				return conn
			}
		}
	}
	open().Close()
	var heap, stack float64
	rounds := 0
	for b.Loop() {
		var before, after runtime.MemStats
		time.Sleep(200 * time.Millisecond) // the streams of the round before see their clients leave
		runtime.GC()
		runtime.GC() // the second empties what the first moved aside of the pools (net/http's buffers)
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, 0, streams)
		for range streams {
			conns = append(conns, open())
		}
		time.Sleep(100 * time.Millisecond) // every stream idle
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / streams
		stack += (float64(after.StackInuse) - float64(before.StackInuse)) / streams
		rounds++
		for _, c := range conns {
			c.Close()
		}
	}
	b.ReportMetric(heap/float64(rounds), "B/stream")
	b.ReportMetric(stack/float64(rounds), "stack-B/stream")
	benchtarget.Check(b, benchtarget.AtMost("B/stream", 8000, "bytes"), heap/float64(rounds))
}

// BenchmarkListPageOverLoopback is the kept page served over loopback HTTP/1.1 to 32 keep-alive clients
// (the stack benchmark's load, without the stack), beside the floor: a bare net/http handler writing
// the same bytes, and /healthz. The figures per request include the clients' share of the machine.
func BenchmarkListPageOverLoopback(b *testing.B) {
	router := listPageRouter(b, true)
	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, listPageRequest())
	page := rec.Body.Bytes()
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", jsonContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		_, _ = w.Write(page)
	})
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
	}{
		{"service", router, listPageRequest().URL.RequestURI()},
		{"bare-same-bytes", bare, "/"},
		{"service-healthz", router, "/healthz"},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.h)
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(16) // 32 clients on 2 cores
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
					req.Header.Set("Authorization", "Bearer "+benchToken)
					res, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK {
						b.Errorf("status %d", res.StatusCode)
						return
					}
				}
			})
		})
	}
}
