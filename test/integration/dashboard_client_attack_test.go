//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

// rawAnswer writes raw bytes as the whole answer on the request's connection, as a hostile head may
// (a status line of its own, or no HTTP at all), and closes it.
func rawAnswer(w http.ResponseWriter, raw string) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "stand-in: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_, _ = buf.WriteString(raw)
	_ = buf.Flush()
}

// A hostile Ray head answering the service's stop of a RayJob's Ray job: a redirect to another host is
// not followed (neither the cluster's token nor the other host's answer travels), and nothing the head
// says (its status line's text, its body, bytes that are not HTTP) reaches the caller, who is told the
// status only.
func TestHostileHeadAnswersAJobStop(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "hostilestop")
	admin := env.tokens["admin"]
	var job map[string]any
	require.NoError(t, json.Unmarshal(rayJob(t, "tj", false), &job))
	spec := job["spec"].(map[string]any)["rayClusterSpec"].(map[string]any)
	spec["authOptions"] = map[string]any{"mode": "token"}
	spec["rayVersion"] = "2.52.0"
	b, err := json.Marshal(job)
	require.NoError(t, err)
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", b).Status)
	waitStatus(t, ns, "rayjobs", "tj", "Running")
	cluster := currentRayCluster(t, ns, "tj")
	eventually(t, 60*time.Second, "the Ray job submitted", func() bool {
		return decode[struct {
			JobStatus string `json:"jobStatus"`
		}](t, call(t, "GET", itemPath(ns, "rayjobs", "tj"), admin, "", nil)).JobStatus == "RUNNING"
	})

	// Another host, where the head sends the service: it keeps what it was sent.
	away := "collector." + ns + "-away.svc.cluster.local"
	var mu sync.Mutex
	var collected []string
	env.dashboards.answer(t, away, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		collected = append(collected, r.Method+" "+r.URL.Path+" ["+r.Header.Get("X-Ray-Authorization")+"]")
		mu.Unlock()
		http.Error(w, "COLLECTOR-BODY: the other host's answer", http.StatusInternalServerError)
		return true
	})
	mode := ""
	env.dashboards.answer(t, cluster+"-head-svc."+ns, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		m := mode
		mu.Unlock()
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/stop") {
			return false
		}
		switch m {
		case "redirect":
			http.Redirect(w, r, "http://"+away+":8265/collect", http.StatusTemporaryRedirect)
		case "refusal":
			body := "<script>BODY-MARKER</script>" + strings.Repeat("x", 100<<10)
			rawAnswer(w, fmt.Sprintf("HTTP/1.1 500 REASON-MARKER <b>look</b>\r\nContent-Type: text/html\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body))
		case "garbage":
			rawAnswer(w, "<script>GARBAGE-MARKER</script>\r\n\r\n")
		default:
			return false
		}
		return true
	})
	stop := func(m string) *response {
		mu.Lock()
		mode = m
		mu.Unlock()
		return call(t, "POST", itemPath(ns, "rayjobs", "tj")+"/stop", admin, "", nil)
	}

	r := stop("redirect")
	mu.Lock()
	assert.Empty(t, collected, "the service followed the head's redirect to another host")
	mu.Unlock()
	assert.Equal(t, 503, r.Status, "%s", r.Raw)
	assert.NotContains(t, string(r.Raw), "COLLECTOR-BODY", "the other host's answer reached the caller")
	assert.Contains(t, string(r.Raw), "307", "the caller is told the head redirected")

	r = stop("refusal")
	assert.Equal(t, 503, r.Status, "%s", r.Raw)
	for _, marker := range []string{"BODY-MARKER", "REASON-MARKER", "<b>"} {
		assert.NotContains(t, string(r.Raw), marker, "what the head said reached the caller")
	}
	assert.Less(t, len(r.Raw), 2048, "the head's answer's size reached the caller")
	assert.Contains(t, string(r.Raw), "500", "the caller is told the head's status")

	r = stop("garbage")
	assert.Equal(t, 503, r.Status, "%s", r.Raw)
	assert.NotContains(t, string(r.Raw), "GARBAGE-MARKER", "what the head said reached the caller")

	// An honest answer stops it.
	r = stop("")
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	waitStatus(t, ns, "rayjobs", "tj", "Stopped")
}

// A hostile Ray head answering the health tab's read of gcs_server.out: what it says in a refusal does
// not reach the panel, figures no number can hold do not break the answer, and an endless answer is not
// read to its end.
func TestHostileHeadAnswersTheHealthTab(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "hostilegcs")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "seed")
	headPodIP(t, ns, "seed") // its head pod runs
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-10 * time.Minute)
	promURL, _ := startPrometheus(t, rayMetricsFixture(ns, map[string]rayLoad{}, start, end))
	svc := startInstance(t, "ray-service-hostilegcs.log", "--prometheus-url", promURL)
	// get answers the status, the panel and the answer, and whether the answer is JSON.
	get := func() (int, healthPanel, []byte, bool) {
		r, err := sendTo(svc.url, "GET", healthPath(ns, "seed", start, end), admin, "", nil)
		if err != nil { // an answer that is no JSON envelope
			return 0, healthPanel{}, []byte(err.Error()), false
		}
		var d clusterHealthData
		err = json.Unmarshal(r.Raw, &struct {
			Data *clusterHealthData `json:"data"`
		}{&d})
		return r.Status, panelOf(d, "gcsEventPressure"), r.Raw, err == nil
	}

	// A print a minute, the last one with a queueing time no float holds once in milliseconds.
	var log strings.Builder
	for i := 9; i >= 0; i-- {
		at := end.Add(-time.Duration(i)*time.Minute - 30*time.Second)
		mean := "12.00ms"
		if i == 0 {
			mean = "1" + strings.Repeat("7", 307) + " s"
		}
		fmt.Fprintf(&log, "[%s I 41 41] (gcs_server) gcs_server.cc:302: Main service Event stats:\n\n\n", at.Format("2006-01-02 15:04:05,000"))
		fmt.Fprintf(&log, "Global stats: %d total (3 active)\nQueueing time: mean = %s, max = 99.00ms\n", 1000+600*(9-i), mean)
	}
	mode := ""
	var mu sync.Mutex
	written := make(chan int64, 1)
	env.dashboards.answer(t, "seed-head-svc."+ns, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		m := mode
		mu.Unlock()
		if r.URL.Path != "/api/v0/logs/file" {
			return false
		}
		switch m {
		case "refusal":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"msg": "<script>PANEL-MARKER</script>", "result": false}` + "\n"))
		case "overflow":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(log.String()))
		case "endless":
			w.Header().Set("Content-Type", "text/plain")
			line := []byte(strings.Repeat("Event stats: padding padding padding padding\n", 1<<14)) // 736 KiB
			var n int64
			for n < 256<<20 {
				k, err := w.Write(line)
				n += int64(k)
				if err != nil {
					break
				}
			}
			written <- n
		default:
			return false
		}
		return true
	})
	set := func(m string) {
		mu.Lock()
		mode = m
		mu.Unlock()
	}

	set("refusal")
	status, p, raw, isJSON := get()
	require.Equal(t, 200, status, "%s", raw)
	require.True(t, isJSON, "%s", raw)
	assert.NotContains(t, p.Reason, "PANEL-MARKER", "what the head said reached the panel")
	assert.NotContains(t, string(raw), "PANEL-MARKER", "what the head said reached the answer")
	assert.Contains(t, p.Reason, "500", "the panel says the head's status")

	set("overflow")
	status, p, raw, isJSON = get()
	assert.Equal(t, 200, status, "%.300s", raw)
	assert.True(t, isJSON, "a figure no number holds broke the answer: %.300q", raw)
	if p.Value != nil {
		assert.False(t, math.IsInf(*p.Value, 0) || *p.Value > 1e12, "%v", *p.Value)
	}

	set("endless")
	status, p, raw, _ = get()
	require.Equal(t, 200, status, "%s", raw)
	var n int64
	select {
	case n = <-written:
	case <-time.After(60 * time.Second):
		t.Fatal("the endless answer never ended")
	}
	assert.Less(t, n, int64(128<<20), "the service read an endless answer to its end")
	assert.Nil(t, p.Value)
}

// The token the service sends to a Ray cluster's dashboard, read with the caller's rights, is only the
// one KubeRay made for that cluster (a Secret the cluster owns): an author who may not read a Secret
// cannot have a viewer's request carry it to the author's head by naming the Secret (authOptions.secretName)
// or by naming the cluster after it.
func TestRayTokenOnlyFromTheClustersSecret(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "tokensecret")
	proxy := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services/proxy"}, Verbs: []string{"get", "create"}}
	for _, u := range []string{"alice", "bob"} {
		bind(t, ns, u, "ray-editor")
		grantRole(t, ns, u, u+"-proxy", proxy)
	}
	grantRole(t, ns, "bob", "bob-secrets", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	victim := "victim-" + utilrand.String(24)
	_, err := env.admin.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Data: map[string][]byte{"auth_token": []byte(victim)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	holdSecret("a Secret alice may not read", victim)

	for name, auth := range map[string]map[string]any{
		"victim": {"mode": "token"},                         // KubeRay takes the Secret named after the cluster
		"named":  {"mode": "token", "secretName": "victim"}, // or the one named
	} {
		require.Equal(t, 201, createCluster(t, env.tokens["alice"], ns, name, func(o map[string]any) {
			o["spec"].(map[string]any)["authOptions"] = auth
			o["spec"].(map[string]any)["rayVersion"] = "2.52.0"
		}).Status)
	}
	for _, name := range []string{"victim", "named"} {
		waitStatus(t, ns, "rayclusters", name, "Running")
		r := call(t, "GET", itemPath(ns, "rayclusters", name)+"/dashboard/api/version", env.tokens["bob"], "", nil)
		assert.Equal(t, 0, env.dashboards.seen("GET", name+"-head-svc."+ns, "/api/version"),
			"%s: bob's request carried a Secret alice chose to alice's head", name)
		assert.Equal(t, 401, r.Status, "%s: the dashboard's own login: %s", name, r.Raw)
	}
}
