package api

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
	"ray-service/internal/stream"
)

// BenchmarkDetailFromCache is the stack benchmark's detail of a running RayCluster in process: the
// second detail of perf-00000, served from the manifest the watch cache keeps, with its head and
// worker pods cached and its namespace's events watched. The namespace holds the events of 25 running
// Ray clusters (a scheduled and a started event of each pod, and KubeRay's of each cluster), as on the
// stack. Rights from verdicts the reviewer has cached; the caller's objects made as the service makes
// them (their clients are never called).
func BenchmarkDetailFromCache(b *testing.B) {
	const ns = "perf-ns-00"
	core := fake.NewSimpleClientset()
	for i := range 25 {
		cluster := fmt.Sprintf("perf-%05d", i*20)
		pods := []*corev1.Pod{raytest.Pod(cluster+"-head", cluster, "head", "headgroup", true),
			raytest.Pod(cluster+"-worker", cluster, "worker", "workers", true)}
		for _, p := range pods {
			p.Namespace = ns
			_, err := core.CoreV1().Pods(ns).Create(b.Context(), p, metav1.CreateOptions{})
			require.NoError(b, err)
			for _, reason := range []string{"Scheduled", "Started"} {
				addEvent(b, core, ns, "Pod", p.Name, reason)
			}
		}
		for _, reason := range []string{"CreatedService", "CreatedHeadPod", "CreatedWorkerPod"} {
			addEvent(b, core, ns, ray.ClusterKind, cluster, reason)
		}
	}
	c := newBenchCache(b, core)
	k := c.kinds.Cluster()
	clients, err := k8s.NewClientFactory(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(b, err)
	m := &k8s.Manager{Clients: clients, Cache: c.store, Authz: c.reviewer}
	events := cache.NewEventWatches(core)
	hold, _ := events.Lingering(ns)
	require.Eventually(b, hold.Synced, 10*time.Second, 10*time.Millisecond)
	obj, err := c.dyn.Resource(k.GVR()).Namespace(ns).Get(b.Context(), "perf-00000", metav1.GetOptions{})
	require.NoError(b, err)
	c.store.KeepManifest(k, obj, c.store.ManifestWrites())
	e := &handlerEnv{store: &fakeStore{}}
	h := e.routerWith(func(d *Deps) {
		d.Kinds, d.Store, d.Authz = c.kinds, c.store, c.reviewer
		d.Objects = func(k *ray.Kind, token string) (Objects, error) { return m.For(k, token) }
		d.DetailEvents = func(ns string) (stream.NamespaceEvents, bool) { return events.Lingering(ns) }
	})
	req := httptest.NewRequest(http.MethodGet, BasePath+"/namespaces/"+ns+"/rayclusters/perf-00000", nil)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(b, http.StatusOK, w.Code, w.Body.String())
	require.Contains(b, w.Body.String(), `"reason":"CreatedHeadPod"`, "the events come from the watch")
	serveEach(b, h, req)
}

func addEvent(b *testing.B, core *fake.Clientset, ns, kind, name, reason string) {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + "." + reason, Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, Namespace: ns}, Reason: reason, Type: corev1.EventTypeNormal,
		Message: reason + " " + name, Count: 1, LastTimestamp: metav1.Now()}
	_, err := core.CoreV1().Events(ns).Create(b.Context(), ev, metav1.CreateOptions{})
	require.NoError(b, err)
}
