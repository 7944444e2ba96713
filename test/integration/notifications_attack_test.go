//go:build integration

package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/notify"
)

// succeededJob makes a RayJob in ns and has it succeed: a job.succeeded notice.
func succeededJob(t *testing.T, ns, name string) {
	t.Helper()
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), env.tokens["admin"], "application/json", rayJob(t, name, true)).Status)
	waitStatus(t, ns, "rayjobs", name, "Running")
	finishJobs(t, ns, currentRayCluster(t, ns, name), "SUCCEEDED")
	waitStatus(t, ns, "rayjobs", name, "Succeeded")
}

// deliveriesOf reads a subscription's delivery log as token.
func deliveriesOf(t *testing.T, base, ns, id, token string) *response {
	t.Helper()
	r, err := sendTo(base, "GET", "/rest/ray/v1/namespaces/"+ns+"/subscriptions/"+id+"/deliveries", token, "", nil)
	require.NoError(t, err)
	return r
}

// oneDelivery waits until the delivery log of the subscription id holds one try (what says which), as
// the holder of token reads it, and returns the log.
func oneDelivery(t *testing.T, base, ns, id, token, what string) []notify.Delivery {
	t.Helper()
	var ds []notify.Delivery
	eventually(t, time.Minute, what, func() bool {
		r := deliveriesOf(t, base, ns, id, token)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		ds = decode[struct{ Items []notify.Delivery }](t, r).Items
		return len(ds) == 1
	})
	return ds
}

// Attack: a tenant who may create events subscribes a webhook at an address inside the cluster (a Ray
// dashboard's Service, the cloud's metadata service in 100.64.0.0/10, a pod, a ULA), and has the
// service call it with each notice. By default every address that is not public is refused at create,
// and a name that resolves to one is refused when dialed: a subscription made while loopback was allowed
// is not delivered by an instance that does not allow it.
func TestWebhookAttackPrivateAddresses(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "notify-private")
	admin := env.tokens["admin"]
	svc := startInstance(t, "ray-service-notify-private.log")
	sub := newSubscriber(t)
	port := sub.srv.Listener.Addr().(*net.TCPAddr).Port
	for _, url := range []string{
		"http://10.96.0.10:8265/api/jobs/raysubmit_x/stop", // a Ray dashboard's Service
		"http://100.100.100.200/latest/meta-data",          // a cloud's metadata service (CGNAT)
		"http://172.16.0.1/", "http://192.168.1.1/", "http://[fd00::1]/", "http://198.18.0.1/", "http://192.0.2.1/",
		"http://127.0.0.1:" + strconv.Itoa(port) + "/", "http://localhost:" + strconv.Itoa(port) + "/",
		"http://[::ffff:10.0.0.1]/", "http://[64:ff9b::a00:1]/", "http://0.0.0.0/",
	} {
		r := subscribe(t, svc.url, ns, admin, map[string]any{"url": url})
		assert.Equal(t, 422, r.Status, "%s: %s", url, r.Raw)
	}
	require.True(t, svc.stop(), "the service stops")

	// A name that resolves to loopback, subscribed while loopback was allowed, then dialed by default.
	allowing := startInstance(t, "ray-service-notify-dns.log", "--notify-allow-cidrs=127.0.0.0/8")
	r := subscribe(t, allowing.url, ns, admin, map[string]any{"url": "http://localhost:" + strconv.Itoa(port) + "/hook", "kinds": []string{"RayJob"}})
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	id := decode[subscriptionData](t, r).ID
	require.True(t, allowing.stop(), "the service stops")
	svc = startInstance(t, "ray-service-notify-dns.log", "--notify-max-backoff=1s")
	succeededJob(t, ns, "dialed")
	ds := oneDelivery(t, svc.url, ns, id, admin, "the notice's try in the delivery log")
	assert.Equal(t, notify.Failed, ds[0].Status, "refused when dialed, not retried: %+v", ds[0])
	assert.Contains(t, ds[0].LastError, "refused")
	assert.Empty(t, sub.received(), "nothing reached the address the name resolved to")
}

// Attack: a hostile subscriber uses the delivery log as a port scanner: what a receiver answered (its
// body) and how a try failed (refused, timed out, TLS) came back in lastError. Now the log holds the
// answer's status alone, and one same message for every try that got no answer.
func TestWebhookAttackDeliveryLogShowsNoAnswer(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "notify-scan")
	admin := env.tokens["admin"]
	svc := startInstance(t, "ray-service-notify-scan.log", "--notify-allow-cidrs=127.0.0.0/8", "--notify-max-backoff=1s", "--notify-timeout=2s")
	talker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "internal-secret-0c1f: the server's own error page")
	}))
	t.Cleanup(talker.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + closed.Addr().String() + "/"
	require.NoError(t, closed.Close())
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = silent.Close() })
	var held atomic.Int32
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held.Add(1)
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }() // holds it until the service gives up
		}
	}()
	ids := map[string]string{}
	for name, url := range map[string]string{"talker": talker.URL + "/", "closed": closedURL, "silent": "http://" + silent.Addr().String() + "/"} {
		r := subscribe(t, svc.url, ns, admin, map[string]any{"url": url, "kinds": []string{"RayJob"}})
		require.Equal(t, 201, r.Status, "%s", r.Raw)
		ids[name] = decode[subscriptionData](t, r).ID
	}
	succeededJob(t, ns, "scanned")
	last := map[string]notify.Delivery{}
	eventually(t, time.Minute, "a try of each", func() bool {
		for name, id := range ids {
			r := deliveriesOf(t, svc.url, ns, id, admin)
			require.Equal(t, 200, r.Status, "%s", r.Raw)
			ds := decode[struct{ Items []notify.Delivery }](t, r).Items
			if len(ds) == 0 || ds[0].LastError == "" {
				return false
			}
			last[name] = ds[0]
		}
		return true
	})
	assert.Positive(t, held.Load(), "the silent receiver was reached")
	assert.Contains(t, last["talker"].LastError, "500")
	assert.NotContains(t, last["talker"].LastError, "internal-secret-0c1f", "the answer's body is never shown")
	// The same words but for the address, each subscription's own.
	closedSaid := strings.Replace(last["closed"].LastError, strings.TrimPrefix(strings.TrimSuffix(closedURL, "/"), "http://"), "HOST", 1)
	silentSaid := strings.Replace(last["silent"].LastError, silent.Addr().String(), "HOST", 1)
	assert.Contains(t, closedSaid, "HOST")
	assert.Equal(t, closedSaid, silentSaid, "a refused connection and a silent one look the same")
	for _, name := range []string{"closed", "silent"} {
		for _, word := range []string{"connection refused", "timeout", "deadline", "dial", "tls"} {
			assert.NotContains(t, strings.ToLower(last[name].LastError), word, "%s", name)
		}
	}
}

// Attack: a tenant who may create events in a namespace but not read its Ray objects subscribes and is
// told of them; a subscriber whose rights are revoked keeps being told; any event creator reads every
// subscription's full URL (a hook's token in its path or query). Now the create needs the rights to list
// what the subscription carries, they are checked again at each delivery (as the subscription's creator),
// and get and list show the URL's scheme and host alone.
func TestSubscriptionAttackRights(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "notify-rights")
	admin := env.tokens["admin"]
	svc := startInstance(t, "ray-service-notify-rights.log", "--notify-allow-cidrs=127.0.0.0/8", "--auth-cache-ttl=1s")
	events := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}
	jobs := rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs"}, Verbs: []string{"get", "list"}}
	writer, writerToken := tenant(t, ns, "events-only")
	grantRole(t, ns, writer, "events-writer", events)
	reader, readerToken := tenant(t, ns, "job-reader")
	grantRole(t, ns, reader, "events-writer-2", events)
	grantRole(t, ns, reader, "job-reader", jobs)

	// Only events: told of nothing.
	spy := newSubscriber(t)
	for _, kinds := range [][]string{nil, {"RayJob"}} {
		r := subscribe(t, svc.url, ns, writerToken, map[string]any{"url": spy.srv.URL, "kinds": kinds})
		assert.Equal(t, 403, r.Status, "kinds %v: %s", kinds, r.Raw)
	}
	// Who may read the jobs subscribes to them, but not to the kinds it may not read.
	r := subscribe(t, svc.url, ns, readerToken, map[string]any{"url": spy.srv.URL, "kinds": []string{"RayCluster"}})
	assert.Equal(t, 403, r.Status, "%s", r.Raw)
	revoked := newSubscriber(t)
	r = subscribe(t, svc.url, ns, readerToken, map[string]any{"url": revoked.srv.URL + "/hook-t0ken?key=k3y", "kinds": []string{"RayJob"}})
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Raw), "hook-t0ken", "the create's answer shows the URL as given")
	id := decode[subscriptionData](t, r).ID
	witness := newSubscriber(t)
	r = subscribe(t, svc.url, ns, admin, map[string]any{"url": witness.srv.URL, "kinds": []string{"RayJob"}})
	require.Equal(t, 201, r.Status, "%s", r.Raw)

	// Any event creator lists and reads the subscriptions: the URLs' paths and queries are not shown.
	for _, path := range []string{"/subscriptions", "/subscriptions/" + id} {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+path, writerToken, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		assert.NotContains(t, string(r.Raw), "hook-t0ken", path)
		assert.NotContains(t, string(r.Raw), "k3y", path)
		assert.Contains(t, string(r.Raw), strings.TrimPrefix(revoked.srv.URL, "http://"), "the host is shown")
	}
	// The delivery log names the objects: only for who may read them.
	assert.Equal(t, 403, deliveriesOf(t, svc.url, ns, id, writerToken).Status)

	// The reader's right to the jobs revoked: nothing more is delivered to its subscription.
	require.NoError(t, env.admin.RbacV1().RoleBindings(ns).Delete(context.Background(), reader+"-job-reader", metav1.DeleteOptions{}))
	eventually(t, 10*time.Second, "the reader's right revoked", func() bool {
		return !allowedTo(t, reader, ns, "list", "ray.io", "rayjobs")
	})
	succeededJob(t, ns, "after-revoke")
	eventually(t, time.Minute, "the witness told", func() bool { return len(witness.received()) == 1 })
	ds := oneDelivery(t, svc.url, ns, id, admin, "the revoked subscription's try in its log")
	assert.Equal(t, notify.Failed, ds[0].Status, "%+v", ds[0])
	assert.Empty(t, revoked.received(), "a subscriber whose rights are gone is told nothing")
	assert.Empty(t, spy.received())
}
