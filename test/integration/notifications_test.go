//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/k8s"
	"ray-service/internal/notify"
)

// delivery is one request a subscriber received.
type delivery struct {
	event       event.Event
	body        []byte
	signature   string
	contentType string
}

// subscriber is a webhook on loopback that records what it is sent, or answers 503 while down.
type subscriber struct {
	srv  *httptest.Server
	down atomic.Bool
	// refused counts the requests answered 503.
	refused atomic.Int32
	mu      sync.Mutex
	got     []delivery
}

func newSubscriber(t *testing.T) *subscriber {
	s := &subscriber{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if s.down.Load() {
			s.refused.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var e event.Event
		if err := json.Unmarshal(body, &e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, delivery{event: e, body: body, signature: r.Header.Get(notify.SignatureHeader), contentType: r.Header.Get("Content-Type")})
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *subscriber) received() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery{}, s.got...)
}

type subscriptionData struct {
	ID     string   `json:"id"`
	Secret string   `json:"secret"`
	Events []string `json:"events"`
}

func subscribe(t *testing.T, base, ns, token string, body map[string]any) *response {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	r, err := sendTo(base, "POST", "/rest/ray/v1/namespaces/"+ns+"/subscriptions", token, "application/json", b)
	require.NoError(t, err)
	return r
}

// Notifications of RayJobs, on an instance that allows webhooks on loopback: a subscriber receives
// signed CloudEvents for a job that succeeds and one that fails, in order; while it is down for a minute
// (and the service restarts meanwhile) the next is retried, and delivered once it is back; the delivery
// log says so. A webhook in a refused range is 422, and who may not create events is 403.
func TestJobNotifications(t *testing.T) {
	t.Parallel()
	flags := []string{"--notify-allow-cidrs=127.0.0.0/8", "--notify-max-backoff=5s", "--notify-deny-cidrs=10.96.0.0/12"}
	svc := startInstance(t, "ray-service-notify.log", flags...)
	ns := namespace(t, "notify")
	admin := env.tokens["admin"]
	sub := newSubscriber(t)

	for url, why := range map[string]string{"http://169.254.169.254/latest/meta-data": "link-local",
		"http://10.96.0.1/": "10.96.0.0/12", "ftp://127.0.0.1/": "scheme"} {
		r := subscribe(t, svc.url, ns, admin, map[string]any{"url": url})
		assert.Equal(t, 422, r.Status, "%s: %s", url, r.Raw)
		assert.Contains(t, r.Msg, why)
	}
	r := subscribe(t, svc.url, ns, admin, map[string]any{"url": sub.srv.URL, "events": []string{"job.finished"}})
	assert.Equal(t, 400, r.Status, "an unknown event: %s", r.Raw)
	assert.Contains(t, r.Msg, "job.finished")
	_, tenantToken := tenant(t, ns, "no-events")
	r = subscribe(t, svc.url, ns, tenantToken, map[string]any{"url": sub.srv.URL})
	assert.Equal(t, 403, r.Status, "%s", r.Raw)

	r = subscribe(t, svc.url, ns, admin, map[string]any{"url": sub.srv.URL + "/hook-s3cret", "events": []string{"job.succeeded", "job.failed"},
		"kinds": []string{"RayJob"}})
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	created := decode[subscriptionData](t, r)
	require.NotEmpty(t, created.Secret)
	listed, err := sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+"/subscriptions", admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, listed.Status)
	assert.NotContains(t, string(listed.Raw), created.Secret, "the secret is shown once")

	for _, name := range []string{"ok", "bad"} {
		require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", rayJob(t, name, true)).Status)
	}
	for _, end := range []struct{ name, job, status string }{{"ok", "SUCCEEDED", "Succeeded"}, {"bad", "FAILED", "Failed"}} {
		waitStatus(t, ns, "rayjobs", end.name, "Running")
		finishJobs(t, ns, currentRayCluster(t, ns, end.name), end.job)
		waitStatus(t, ns, "rayjobs", end.name, end.status)
	}
	eventually(t, time.Minute, "both jobs' notifications", func() bool { return len(sub.received()) == 2 })
	got := sub.received()
	var subjects, types []string
	for _, d := range got {
		subjects, types = append(subjects, d.event.Subject()), append(types, d.event.Type())
		assert.True(t, notify.Verify(created.Secret, d.body, d.signature), "signed with the subscription's secret")
		assert.Equal(t, "1.0", d.event.SpecVersion())
		assert.Equal(t, "application/cloudevents+json; charset=utf-8", d.contentType)
		var data map[string]any
		require.NoError(t, d.event.DataAs(&data))
		assert.Equal(t, ns, data["namespace"])
	}
	// In the order they happened: ok finished first.
	assert.Equal(t, []string{"RayJob/ok", "RayJob/bad"}, subjects)
	assert.Equal(t, []string{"com.openfuyao.ray.job.succeeded", "com.openfuyao.ray.job.failed"}, types)

	// Down for a minute, the service restarted meanwhile: the next is delivered once it is back.
	sub.down.Store(true)
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", rayJob(t, "late", true)).Status)
	waitStatus(t, ns, "rayjobs", "late", "Running")
	finishJobs(t, ns, currentRayCluster(t, ns, "late"), "SUCCEEDED")
	waitStatus(t, ns, "rayjobs", "late", "Succeeded")
	downAt := time.Now()
	eventually(t, 30*time.Second, "a refused try", func() bool { return sub.refused.Load() > 0 })
	deliveries := func(base string) []notify.Delivery {
		r, err := sendTo(base, "GET", "/rest/ray/v1/namespaces/"+ns+"/subscriptions/"+created.ID+"/deliveries", admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[struct{ Items []notify.Delivery }](t, r).Items
	}
	var ds []notify.Delivery
	eventually(t, 30*time.Second, "the refused try in the delivery log", func() bool {
		ds = deliveries(svc.url)
		return len(ds) == 3 && ds[0].Status == notify.Delivering
	})
	assert.Contains(t, ds[0].LastError, "503")
	assert.NotContains(t, ds[0].LastError, "s3cret", "the webhook's path is never shown")
	require.True(t, svc.stop(), "the service stops")
	svc = startInstance(t, "ray-service-notify.log", flags...)
	time.Sleep(time.Until(downAt.Add(time.Minute)))
	sub.down.Store(false)
	eventually(t, time.Minute, "the late job's notification once the subscriber is back", func() bool { return len(sub.received()) == 3 })
	late := sub.received()[2]
	assert.Equal(t, "RayJob/late", late.event.Subject())
	assert.True(t, notify.Verify(created.Secret, late.body, late.signature))
	ds = deliveries(svc.url)
	assert.Equal(t, notify.Delivered, ds[0].Status)
	assert.GreaterOrEqual(t, ds[0].Attempts, 2)
	t.Logf("delivered after %d attempts, %s after it was first tried", ds[0].Attempts, ds[0].LastAt.Sub(ds[0].FirstAt).Round(time.Second))

	r, err = sendTo(svc.url, "DELETE", "/rest/ray/v1/namespaces/"+ns+"/subscriptions/"+created.ID, admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 200, r.Status, "%s", r.Raw)
	r, err = sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+"/subscriptions/"+created.ID, admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 404, r.Status, "%s", r.Raw)
}

// The stop of idle clusters by policy, on an instance that judges over 30 s every 5 s and announces a
// stop 10 s ahead: a RayCluster annotated idle-stop-after and one under its namespace's policy are
// announced (a Warning event, a notification) and stopped, as the identity made for it, recorded in the
// audit trail as the policy's; one annotated never is idle and left running.
func TestIdleStopByPolicy(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "idle-stop")
	ctx := context.Background()
	// The identity the chart makes when the feature is on, bound here in the test's namespace alone.
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "idle-stop"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "idle-stop"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get", "patch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "idle-stop"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "idle-stop"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "idle-stop", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	letServiceAskTokenOf(t, ns, "idle-stop")
	identity := "system:serviceaccount:" + ns + ":idle-stop"
	svc := startInstance(t, "ray-service-idle-stop.log", "--idle-window=30s", "--idle-interval=5s", "--idle-stop-identity="+ns+"/idle-stop",
		"--idle-stop-warning=10s", "--notify-allow-cidrs=127.0.0.0/8")
	logFile := svc.log.Name()
	defer func() {
		if t.Failed() { // what the policy did, to see why
			b, _ := os.ReadFile(logFile)
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, "idle policy") {
					t.Log(strings.TrimSpace(line))
				}
			}
		}
	}()
	admin := env.tokens["admin"]
	sub := newSubscriber(t)
	r := subscribe(t, svc.url, ns, admin, map[string]any{"url": sub.srv.URL, "events": []string{"cluster.idle-stop-planned", "cluster.stopped-by-policy"}})
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	secret := decode[subscriptionData](t, r).Secret

	body, _ := json.Marshal(map[string]string{"stopAfter": "30s"})
	r, err = sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "application/json", body)
	require.NoError(t, err)
	assert.Equal(t, 400, r.Status, "shorter than a minute: %s", r.Raw)
	_, tenantToken := tenant(t, ns, "no-patch")
	body, _ = json.Marshal(map[string]string{"stopAfter": "1m"})
	r, err = sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", tenantToken, "application/json", body)
	require.NoError(t, err)
	assert.Equal(t, 403, r.Status, "%s", r.Raw)
	r, err = sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "application/json", body)
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	// Read back as it was set, and set again: replaced, 200.
	r, err = sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	pol := decode[k8s.IdlePolicy](t, r)
	assert.Equal(t, ns, pol.Namespace)
	assert.Equal(t, "1m", pol.StopAfter)
	assert.NotEmpty(t, pol.SetBy)
	r, err = sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "application/json", body)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)

	quiet := func(stopAfter string) func(map[string]any) {
		return func(obj map[string]any) {
			if stopAfter != "" {
				group(obj, "metadata")["annotations"] = map[string]any{"ray.openfuyao.com/idle-stop-after": stopAfter}
			}
			for _, tpl := range []map[string]any{group(obj, "spec", "headGroupSpec", "template"), group(obj, "spec", "workerGroupSpecs", 0, "template")} {
				group(tpl, "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": "0"}
			}
		}
	}
	require.Equal(t, 201, createCluster(t, admin, ns, "annotated", quiet("1m")).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "ruled", quiet("")).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "exempt", quiet("never")).Status)
	for _, name := range []string{"annotated", "ruled", "exempt"} {
		waitStatus(t, ns, "rayclusters", name, "Running")
	}
	type idleDetail struct {
		Status string `json:"status"`
		Idle   *struct {
			StopAt *time.Time `json:"stopAt"`
			Policy string     `json:"policy"`
		} `json:"idle"`
	}
	detail := func(name string) idleDetail {
		r, err := sendTo(svc.url, "GET", itemPath(ns, "rayclusters", name), admin, "", nil)
		require.NoError(t, err)
		return decode[idleDetail](t, r)
	}
	eventually(t, 2*time.Minute, "the annotated cluster idle, with its stop planned", func() bool {
		d := detail("annotated")
		return d.Idle != nil && d.Idle.StopAt != nil
	})
	assert.Equal(t, "annotation ray.openfuyao.com/idle-stop-after=1m", detail("annotated").Idle.Policy)
	eventually(t, time.Minute, "the exempt cluster idle", func() bool { return detail("exempt").Idle != nil })
	assert.Nil(t, detail("exempt").Idle.StopAt, "never stopped")

	// Idle a window (30 s) after it ran, stopped a minute after its spell began, then suspended by KubeRay.
	for _, name := range []string{"annotated", "ruled"} {
		eventually(t, 3*time.Minute, name+" stopped by the policy", func() bool { return detail(name).Status == "Stopped" })
	}
	events, err := env.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	planned := map[string]time.Time{}
	stopped := map[string]time.Time{}
	for _, e := range events.Items {
		switch e.Reason {
		case "IdleStopPlanned":
			assert.Equal(t, corev1.EventTypeWarning, e.Type)
			planned[e.InvolvedObject.Name] = e.FirstTimestamp.Time
		case "IdleStopped":
			stopped[e.InvolvedObject.Name] = e.FirstTimestamp.Time
			assert.Contains(t, e.Message, "by the idle policy")
		}
	}
	for _, name := range []string{"annotated", "ruled"} {
		require.Contains(t, planned, name)
		require.Contains(t, stopped, name)
		// How far ahead this service announced its stop, from its own log: the stack runs other instances
		// whose policies announce in every namespace (those that may stop only in their own), so the
		// namespace's events are not this service's alone.
		announced := loggedAt(t, svc, "idle policy: a stop announced", ns+"/"+name)
		stoppedAt := loggedAt(t, svc, "idle policy: an idle cluster stopped", ns+"/"+name)
		assert.GreaterOrEqual(t, stoppedAt.Sub(announced), 9*time.Second, "announced a warning's time ahead")
	}
	assert.NotContains(t, planned, "exempt")
	assert.Equal(t, "Running", detail("exempt").Status)

	r, err = sendTo(svc.url, "GET", "/rest/ray/v1/audit?namespace="+ns, admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	var byPolicy []string
	for _, e := range decode[struct{ Items []auditEntry }](t, r).Items {
		if e.Action == "Stop" && e.User == identity {
			byPolicy = append(byPolicy, e.Name)
			assert.Contains(t, e.Message, "by the idle policy (")
		}
	}
	assert.ElementsMatch(t, []string{"annotated", "ruled"}, byPolicy, "the audit trail names the policy's stops")

	eventually(t, 30*time.Second, "the announcements and the stops notified", func() bool { return len(sub.received()) == 4 })
	var seen []string
	for _, d := range sub.received() {
		assert.True(t, notify.Verify(secret, d.body, d.signature))
		seen = append(seen, strings.TrimPrefix(d.event.Type(), notify.TypePrefix)+" "+d.event.Subject())
	}
	assert.ElementsMatch(t, []string{"cluster.idle-stop-planned RayCluster/annotated", "cluster.idle-stop-planned RayCluster/ruled",
		"cluster.stopped-by-policy RayCluster/annotated", "cluster.stopped-by-policy RayCluster/ruled"}, seen)
	r, err = sendTo(svc.url, "DELETE", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 200, r.Status, "%s", r.Raw)
	r, err = sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+ns+"/idle-policy", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 404, r.Status, "removed: %s", r.Raw)
}

// loggedAt is when svc first logged msg of the Ray cluster (namespace/name); the test fails where it
// never did.
func loggedAt(t *testing.T, svc *serviceProc, msg, cluster string) time.Time {
	t.Helper()
	b, err := os.ReadFile(svc.log.Name())
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		var entry struct{ Time, Msg, Cluster string }
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == msg && entry.Cluster == cluster {
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", entry.Time) // zapcore.ISO8601TimeEncoder
			require.NoError(t, err)
			return at
		}
	}
	require.Failf(t, "not logged", "%s: %q of %s", svc.log.Name(), msg, cluster)
	return time.Time{}
}
