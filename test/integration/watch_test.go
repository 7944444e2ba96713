//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusesOf returns the statuses the events about name carried, each run of one status once, and
// DELETED for a deletion.
func statusesOf(t *testing.T, events []sseEvent, name string) []string {
	var out []string
	for _, ev := range events {
		if ev.Name != "ADDED" && ev.Name != "MODIFIED" && ev.Name != "DELETED" {
			continue
		}
		s := ev.summary(t)
		if s.Name != name {
			continue
		}
		st := s.Status
		if ev.Name == "DELETED" {
			st = "DELETED"
		}
		if len(out) == 0 || out[len(out)-1] != st {
			out = append(out, st)
		}
	}
	return out
}

// isEvent returns a stop condition: an event of that name about name, whose status is status ("": any).
func isEvent(t *testing.T, event, name, status string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		if ev.Name != event {
			return false
		}
		s := ev.summary(t)
		return s.Name == name && (status == "" || s.Status == status)
	}
}

// A RayCluster created, started, stopped and deleted through the API: the list stream, a filtered one,
// one across namespaces and the object's own stream each see every step, in order.
func TestWatchLifecycle(t *testing.T) {
	ns := namespace(t, "watch")
	admin := env.tokens["admin"]
	_, list := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters"), admin, "")
	_, running := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters")+"?status=Running", admin, "")
	_, across := openWatch(t, env.serviceURL, "/rest/ray/v1/rayclusters/watch?search=live-"+ns, admin, "")
	for _, s := range []*sseStream{list, running, across} {
		items, _ := s.snapshot(t)
		assert.Empty(t, items)
	}

	name := "live-" + ns
	require.Equal(t, 201, createCluster(t, admin, ns, name, nil).Status)
	status, object := openWatch(t, env.serviceURL, itemPath(ns, "rayclusters", name)+"/watch", admin, "")
	require.Equal(t, 200, status)
	first := object.until(t, 30*time.Second, "the object's first state", func(ev sseEvent) bool { return ev.Name == "SYNCED" })
	assert.Equal(t, "ADDED", first[0].Name)
	assert.Equal(t, name, first[0].summary(t).Name)
	assert.Equal(t, "PODS", first[1].Name)

	seen := list.until(t, 90*time.Second, "Running on the list stream", isEvent(t, "MODIFIED", name, "Running"))
	assert.Equal(t, "ADDED", seen[0].Name, "first ADDED: %v", seen)
	for _, ev := range seen {
		assert.True(t, ev.HasID, "every change has an id: %v", ev)
	}
	running.until(t, 30*time.Second, "ADDED once Running", isEvent(t, "ADDED", name, "Running"))
	across.until(t, 30*time.Second, "Running across namespaces", isEvent(t, "MODIFIED", name, "Running"))
	threeReady := func(ev sseEvent) bool {
		if ev.Name != "PODS" {
			return false
		}
		var pods []podInfo
		require.NoError(t, json.Unmarshal(ev.Data, &pods))
		ready := 0
		for _, p := range pods {
			if p.Ready {
				ready++
			}
		}
		return len(pods) == 3 && ready == 3
	}
	if !slices.ContainsFunc(first, threeReady) { // the pods may have been ready before the stream opened
		first = append(first, object.until(t, 30*time.Second, "three ready pods", threeReady)...)
	}

	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", name)+"/stop", admin, "", nil).Status)
	seen = append(seen, list.until(t, 60*time.Second, "Stopped", isEvent(t, "MODIFIED", name, "Stopped"))...)
	running.until(t, 30*time.Second, "DELETED once not Running", isEvent(t, "DELETED", name, ""))
	first = append(first, object.until(t, 30*time.Second, "Stopped on the object stream", isEvent(t, "MODIFIED", name, "Stopped"))...)

	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", name)+"/start", admin, "", nil).Status)
	seen = append(seen, list.until(t, 90*time.Second, "Running again", isEvent(t, "MODIFIED", name, "Running"))...)
	running.until(t, 30*time.Second, "ADDED when Running again", isEvent(t, "ADDED", name, "Running"))

	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", name)+"?force=true", admin, "", nil).Status)
	seen = append(seen, list.until(t, 60*time.Second, "DELETED", isEvent(t, "DELETED", name, ""))...)
	running.until(t, 30*time.Second, "DELETED", isEvent(t, "DELETED", name, ""))
	across.until(t, 30*time.Second, "DELETED across namespaces", isEvent(t, "DELETED", name, ""))
	object.until(t, 30*time.Second, "DELETED on the object stream", isEvent(t, "DELETED", name, ""))
	// The operator's events about the cluster and its pods came on the object stream.
	reasons := map[string]bool{}
	for _, ev := range first {
		if ev.Name == "EVENT" {
			var e struct{ Reason string }
			require.NoError(t, json.Unmarshal(ev.Data, &e))
			reasons[e.Reason] = true
		}
	}
	assert.True(t, reasons["CreatedHeadPod"], "the head pod's creation: %v", reasons)
	assert.True(t, reasons["Scheduled"], "a pod scheduled: %v", reasons)

	steps := statusesOf(t, seen, name)
	t.Logf("the list stream saw %v", steps)
	assert.Subset(t, steps, []string{"Running", "Stopped", "DELETED"})
	idx := func(s string, from int) int {
		for i := from; i < len(steps); i++ {
			if steps[i] == s {
				return i
			}
		}
		return -1
	}
	run1 := idx("Running", 0)
	stop := idx("Stopped", run1)
	run2 := idx("Running", stop)
	require.True(t, run1 >= 0 && stop > run1 && run2 > stop, "Running, Stopped, Running in order: %v", steps)
	assert.Equal(t, "DELETED", steps[len(steps)-1])
}

// A client that reconnects with the id of the last event it got receives what changed meanwhile, and
// only that; an id the service cannot resume from brings RESYNC and a fresh snapshot.
func TestWatchResume(t *testing.T) {
	ns := namespace(t, "resume")
	admin := env.tokens["admin"]
	for _, n := range []string{"gone", "started", "kept"} {
		require.Equal(t, 201, createClusterAt(t, admin, ns, n, "?start=false").Status)
	}
	for _, n := range []string{"gone", "started", "kept"} {
		waitStatus(t, ns, "rayclusters", n, "Stopped")
	}
	_, s := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters"), admin, "")
	items, synced := s.snapshot(t)
	require.Len(t, items, 3)
	s.close()

	// Changes while away.
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "gone"), admin, "", nil).Status)
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "started")+"/start", admin, "", nil).Status)
	require.Equal(t, 201, createClusterAt(t, admin, ns, "new", "?start=false").Status)
	eventually(t, 30*time.Second, "the changes listed", func() bool {
		names := listed(t, ns)
		return len(names) == 3 && !slices.Contains(names, "gone")
	})

	_, resumed := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters"), admin, synced.ID)
	got := map[string]string{}
	resumed.until(t, 30*time.Second, "the three changes", func(ev sseEvent) bool {
		require.NotEqual(t, "RESYNC", ev.Name, "the changes since are kept: no resync")
		require.NotEqual(t, "SYNCED", ev.Name)
		if name := ev.summary(t).Name; got[name] == "" { // the first event about each tells what it became
			got[name] = ev.Name
		}
		return len(got) >= 3 && got["gone"] != "" && got["started"] != "" && got["new"] != ""
	})
	assert.Equal(t, map[string]string{"gone": "DELETED", "started": "MODIFIED", "new": "ADDED"}, got, "kept did not change")

	for _, bad := range []string{"not-an-id", "0123456789ab.1.x", strings.Replace(synced.ID, ".", ".99999999.", 1)} {
		_, fresh := openWatch(t, env.serviceURL, watchPath(ns, "rayclusters"), admin, bad)
		ev := fresh.next(t, 10*time.Second)
		require.Equal(t, "RESYNC", ev.Name, "Last-Event-ID %q", bad)
		assert.True(t, ev.HasID, "RESYNC clears the client's last id")
		assert.Empty(t, ev.ID)
		var why struct{ Reason string }
		require.NoError(t, json.Unmarshal(ev.Data, &why))
		assert.Contains(t, why.Reason, "Last-Event-ID")
		items, _ := fresh.snapshot(t)
		assert.ElementsMatch(t, []string{"started", "kept", "new"}, keys(items))
		fresh.close()
	}
}

// listed returns the names of the RayClusters the service lists in ns.
func listed(t *testing.T, ns string) []string {
	r := call(t, "GET", nsPath(ns, "rayclusters")+"?pageSize=500", env.tokens["admin"], "", nil)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var names []string
	for _, s := range decode[listData](t, r).Items {
		names = append(names, s.Name)
	}
	return names
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// overviewPace is the least time between two OVERVIEW events of a stream, as the service documents it;
// overviewJitter is what the arrival stamps may add to or take from the gap between two events as sent
// (the service's write, the loopback, the reader's goroutine being scheduled), on a loaded machine.
const (
	overviewPace   = time.Second
	overviewJitter = 500 * time.Millisecond
)

// The overview stream sends the counts and allocated totals at once and when they change, at most
// once a second. A burst of changes (RayClusters created at once, and one that runs, its pods adding
// to the allocated totals) comes as few events: any two, as the reader took them off the connection,
// are apart by at least a second for each event between them, less the jitter once (the delays of
// the first and the last, not of those between, which cancel out). A service that sent each change
// as it came would send many within a second of each other.
func TestWatchOverview(t *testing.T) {
	ns := namespace(t, "ovwatch")
	admin := env.tokens["admin"]
	_, s := openWatch(t, env.serviceURL, "/rest/ray/v1/overview/watch?namespace="+ns, admin, "")
	type live struct {
		Counts struct {
			RayClusters struct{ Total, Active int } `json:"rayclusters"`
			Active      int                         `json:"activeRayClusters"`
		}
		Allocated struct{ CPU float64 }
	}
	decodeLive := func(ev sseEvent) live {
		require.Equal(t, "OVERVIEW", ev.Name)
		var l live
		require.NoError(t, json.Unmarshal(ev.Data, &l))
		return l
	}
	first := s.next(t, 10*time.Second)
	l := decodeLive(first)
	assert.Zero(t, l.Counts.RayClusters.Total)
	assert.Zero(t, l.Allocated.CPU)

	const burst = 24
	began := time.Now()
	var made sync.WaitGroup
	codes := make(chan int, burst)
	for i := range burst {
		made.Go(func() {
			r, err := send("POST", nsPath(ns, "rayclusters")+"?start=false", admin, "application/yaml",
				[]byte(strings.Replace(minimalCluster, "NAME", fmt.Sprint("burst-", i), 1)))
			if err != nil {
				codes <- 0
				return
			}
			codes <- r.Status
		})
	}
	made.Wait()
	close(codes)
	created := time.Since(began)
	for code := range codes {
		require.Equal(t, 201, code)
	}
	// Were the burst spread over more than a second a change, a service that does not coalesce could
	// pass the check below: the burst must be dense for the check to mean anything.
	require.Less(t, created, (burst-1)*overviewPace-overviewJitter,
		"%d creations took %s: too slow a burst to tell a coalescing stream from one that is not", burst, created)
	runningCluster(t, ns, "counted")
	events := append([]sseEvent{first}, s.until(t, 60*time.Second, "every Ray cluster counted, one active, its pods allocated", func(ev sseEvent) bool {
		l := decodeLive(ev)
		return l.Counts.RayClusters.Total == burst+1 && l.Counts.Active == 1 && l.Allocated.CPU >= 3
	})...)
	t.Logf("%d creations answered within %s; %d OVERVIEW events over %s", burst, created.Round(time.Millisecond), len(events),
		events[len(events)-1].At.Sub(first.At).Round(time.Millisecond))
	var arrivals []string
	tooClose := 0
	worst, worstI, worstJ := time.Duration(0), 0, 0
	for i := range events {
		arrivals = append(arrivals, events[i].At.Sub(first.At).Round(time.Millisecond).String())
		for j := i + 1; j < len(events); j++ {
			least := time.Duration(j-i)*overviewPace - overviewJitter
			if short := least - events[j].At.Sub(events[i].At); short > 0 {
				tooClose++
				if short > worst {
					worst, worstI, worstJ = short, i, j
				}
			}
		}
	}
	assert.Zero(t, tooClose, "more than one overview event a second: %d pairs too close, the worst events %d and %d, %s short "+
		"of %d paces less the jitter; arrivals after the first: %v", tooClose, worstI, worstJ, worst, worstJ-worstI, arrivals)
}

// A user's rights are checked again while the stream lives: a namespace revoked leaves the stream
// across namespaces, and ends the namespace's own stream with ERROR. Streams per caller are bounded,
// idle streams send heartbeats, closed streams leave nothing behind, and a shutdown ends them cleanly.
func TestWatchRightsAndBounds(t *testing.T) {
	own := startInstance(t, "ray-service-watch.log",
		"--auth-cache-ttl=2s", "--max-watches-per-caller=3", "--watch-heartbeat=1s", "--shutdown-delay=2s")
	nsA, nsB := namespace(t, "rightsa"), namespace(t, "rightsb")
	admin, carol := env.tokens["admin"], env.tokens["carol"]
	for _, ns := range []string{nsA, nsB} {
		grantRole(t, ns, "carol", "watch-read", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"list", "get"}})
		require.Equal(t, 201, createClusterAt(t, admin, ns, "seen", "?start=false").Status)
	}
	baseline := goroutinesOf(t, own.url)

	_, across := openWatch(t, own.url, "/rest/ray/v1/rayclusters/watch?search=seen", carol, "")
	items := map[string]bool{}
	across.until(t, 30*time.Second, "both namespaces' objects", func(ev sseEvent) bool {
		if ev.Name == "ADDED" {
			s := ev.summary(t)
			items[s.Namespace] = true
		}
		return items[nsA] && items[nsB]
	})
	_, inA := openWatch(t, own.url, watchPath(nsA, "rayclusters"), carol, "")
	inA.snapshot(t)
	status, third := openWatch(t, own.url, watchPath(nsB, "rayclusters"), carol, "")
	require.Equal(t, 200, status)
	third.snapshot(t)

	// The fourth of one caller is refused; another caller still has room.
	r, err := sendTo(own.url, "GET", "/rest/ray/v1/rayclusters/watch", carol, "", nil)
	require.NoError(t, err)
	require.Equal(t, 429, r.Status, string(r.Raw))
	assert.Equal(t, "TooManyRequests", r.Reason)
	assert.Contains(t, r.Msg, "watch streams")
	status, adminStream := openWatch(t, own.url, watchPath(nsA, "rayclusters"), admin, "")
	require.Equal(t, 200, status)
	adminStream.snapshot(t)

	// Heartbeats every second (--watch-heartbeat=1s): an idle stream sends one, however long the wait.
	eventually(t, 30*time.Second, "a heartbeat on an idle stream", func() bool { return third.heartbeatCount() >= 1 })
	third.close()

	// carol may get the object but not list events: its object stream shows no event.
	status, object := openWatch(t, own.url, itemPath(nsA, "rayclusters", "seen")+"/watch", carol, "")
	require.Equal(t, 200, status)
	for _, ev := range object.until(t, 30*time.Second, "the object's first state", func(ev sseEvent) bool { return ev.Name == "SYNCED" }) {
		assert.NotEqual(t, "EVENT", ev.Name, "carol may not list events")
	}

	// Revoke namespace A.
	revokedAt := time.Now()
	require.NoError(t, env.admin.RbacV1().RoleBindings(nsA).Delete(context.Background(), "carol-watch-read", metav1.DeleteOptions{}))
	across.until(t, time.Minute, "A's object DELETED", func(ev sseEvent) bool {
		return ev.Name == "DELETED" && ev.summary(t).Namespace == nsA
	})
	t.Logf("a revoked namespace left the stream after %s", time.Since(revokedAt).Round(100*time.Millisecond))
	ends := inA.until(t, time.Minute, "ERROR on A's own stream", func(ev sseEvent) bool { return ev.Name == "ERROR" })
	var envelope struct {
		Code   int
		Reason string
	}
	require.NoError(t, json.Unmarshal(ends[len(ends)-1].Data, &envelope))
	assert.Equal(t, 403, envelope.Code)
	assert.Equal(t, "Forbidden", envelope.Reason)
	assert.True(t, inA.ended(10*time.Second), "the stream ends after ERROR")
	object.until(t, time.Minute, "ERROR on the object stream", func(ev sseEvent) bool { return ev.Name == "ERROR" })
	assert.True(t, object.ended(10*time.Second), "the object stream ends after ERROR")
	require.NoError(t, inA.err)
	// B is still seen: its object changes on the stream across namespaces.
	require.Equal(t, 200, call(t, "POST", itemPath(nsB, "rayclusters", "seen")+"/start", admin, "", nil).Status)
	across.until(t, 60*time.Second, "B's object still followed", func(ev sseEvent) bool {
		return ev.Name == "MODIFIED" && ev.summary(t).Namespace == nsB
	})

	// Streams the clients close leave no goroutine behind.
	across.close()
	adminStream.close()
	eventually(t, 10*time.Second, "goroutines back to their number before the streams", func() bool {
		return goroutinesOf(t, own.url) <= baseline+2
	})

	// A shutdown ends an open stream cleanly, after the shutdown delay.
	_, last := openWatch(t, own.url, watchPath(nsB, "rayclusters"), admin, "")
	last.snapshot(t)
	stopAt := time.Now()
	go own.stop()
	require.True(t, last.ended(15*time.Second), "the stream ends at shutdown")
	require.NoError(t, last.err, "a clean end, not a broken connection")
	assert.GreaterOrEqual(t, time.Since(stopAt), 1500*time.Millisecond, "streams are served through the shutdown delay")
	<-own.done
}

// A browser's EventSource, behind a gateway that adds the caller's token as the openFuyao console
// does, follows a list stream: the page sees the snapshot, asks the test to start the RayCluster,
// and sees its status change to Running.
func TestWatchInBrowser(t *testing.T) {
	ns := namespace(t, "browser")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "shown", "?start=false").Status)
	waitStatus(t, ns, "rayclusters", "shown", "Stopped") // suspended by the operator: not Stopping any more
	target, err := url.Parse(env.serviceURL)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Header.Set("X-OpenFuyao-Authorization", "Bearer "+admin)
	}}
	reports := make(chan string, 1)
	started := make(chan int, 1)
	page := `<!doctype html><title>watch</title><div id="log"></div><script>
const log = [];
const es = new EventSource('/rest/ray/v1/namespaces/` + ns + `/rayclusters/watch');
for (const type of ['ADDED', 'MODIFIED', 'DELETED', 'SYNCED', 'RESYNC', 'ERROR']) {
  es.addEventListener(type, (e) => {
    const d = JSON.parse(e.data);
    log.push(type + ' ' + (d.name || '') + ' ' + (d.status || ''));
    document.getElementById('log').textContent = log.join('\n');
    if (type === 'SYNCED') fetch('/start', {method: 'POST'});
    if (type === 'MODIFIED' && d.status === 'Running') {
      es.close();
      fetch('/report', {method: 'POST', body: log.join('\n')});
    }
  });
}
</script>`
	mux := http.NewServeMux()
	mux.Handle("/rest/", proxy)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	mux.HandleFunc("POST /start", func(_ http.ResponseWriter, _ *http.Request) {
		r, err := send("POST", itemPath(ns, "rayclusters", "shown")+"/start", admin, "", nil)
		if err == nil {
			started <- r.Status
		}
	})
	mux.HandleFunc("POST /report", func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		reports <- string(b)
	})
	gateway := httptest.NewServer(mux)
	defer gateway.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := chromium(ctx, t, gateway.URL+"/")
	require.NoError(t, cmd.Start())
	defer func() { cancel(); _ = cmd.Wait() }()

	select {
	case code := <-started:
		require.Equal(t, 200, code, "the page asked for the start after SYNCED")
	case <-time.After(60 * time.Second):
		require.FailNow(t, "the page did not receive its snapshot")
	}
	select {
	case got := <-reports:
		t.Logf("the page saw:\n%s", got)
		lines := strings.Split(got, "\n")
		require.GreaterOrEqual(t, len(lines), 3)
		assert.Equal(t, "ADDED shown Stopped", lines[0])
		assert.Equal(t, "SYNCED  ", lines[1])
		assert.Equal(t, "MODIFIED shown Running", lines[len(lines)-1])
	case <-time.After(90 * time.Second):
		require.FailNow(t, "the page did not see the RayCluster Running")
	}
}
