//go:build integration

package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

func textLines(b []byte) []string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func TestPodsAndLogs(t *testing.T) {
	// Serial: it counts the shared service's goroutines, which parallel tests' streams change.
	ns := namespace(t, "logs")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "lg", nil).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "other", nil).Status)
	waitStatus(t, ns, "rayclusters", "lg", "Running")
	waitStatus(t, ns, "rayclusters", "other", "Running")

	r := call(t, "GET", itemPath(ns, "rayclusters", "lg")+"/pods", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	pods := decode[[]podInfo](t, r)
	require.Len(t, pods, 3)
	assert.Equal(t, "head", pods[0].NodeType)
	assert.Equal(t, "headgroup", pods[0].Group)
	for _, p := range pods {
		assert.Equal(t, "Running", p.Phase)
		assert.True(t, p.Ready)
		assert.True(t, strings.HasPrefix(p.IP, "127.1."), "loopback pod IP %s", p.IP)
		assert.NotEmpty(t, p.Node)
		require.NotEmpty(t, p.Containers)
		assert.Equal(t, "running", p.Containers[0].State)
	}
	assert.Equal(t, "worker", pods[1].NodeType)
	assert.Equal(t, "workers", pods[1].Group)
	head, worker := pods[0].Name, pods[1].Name
	headFile := podLog(t, ns, head, "ray-head", numbered("head", 1000)...)
	podLog(t, ns, worker, "ray-worker", numbered("worker", 3)...)
	otherHead := clusterPods(t, ns, "other")[0].Name

	logs := func(query, token string) *response {
		return call(t, "GET", itemPath(ns, "rayclusters", "lg")+"/logs"+query, token, "", nil)
	}
	eventually(t, 20*time.Second, "KWOK serving the head's log", func() bool { return logs("", admin).Status == 200 })
	r = logs("", admin)
	assert.Equal(t, "text/plain; charset=utf-8", r.Header.Get("Content-Type"))
	lines := textLines(r.Raw)
	require.Len(t, lines, 500, "default tail")
	assert.Equal(t, "head line 1000", lines[499])
	assert.Equal(t, "head line 501", lines[0])
	assert.Len(t, textLines(logs("?tailLines=10", admin).Raw), 10)
	assert.LessOrEqual(t, len(logs("?tailLines=1000&limitBytes=100", admin).Raw), 100)
	assert.Equal(t, []string{"worker line 1", "worker line 2", "worker line 3"}, textLines(logs("?pod="+worker, admin).Raw))
	assert.Equal(t, []string{"worker line 3"}, textLines(logs("?pod="+worker+"&container=ray-worker&tailLines=1", admin).Raw))

	for _, c := range []struct {
		query  string
		code   int
		reason string
	}{
		{"?tailLines=10001", 400, "BadRequest"},
		{"?limitBytes=20000000", 400, "BadRequest"},
		{"?sinceSeconds=0", 400, "BadRequest"},
		{"?follow=often", 400, "BadRequest"},
		{"?pod=" + otherHead, 400, "BadRequest"},
		{"?pod=no-such-pod", 404, "NotFound"},
		{"?container=nope", 400, "BadRequest"},
	} {
		r := logs(c.query, admin)
		assert.Equal(t, c.code, r.Status, "%s: %s", c.query, r.Raw)
		assert.Equal(t, c.reason, r.Reason, c.query)
	}

	// A caller who may list pods but not read their logs.
	bind(t, ns, "bob", "ray-viewer")
	grantRole(t, ns, "bob", "pods", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "get"}})
	assert.Equal(t, 200, call(t, "GET", itemPath(ns, "rayclusters", "lg")+"/pods", env.tokens["bob"], "", nil).Status)
	r = logs("", env.tokens["bob"])
	assert.Equal(t, 403, r.Status, "%s", r.Raw)

	t.Run("follow streams appended lines until the client leaves", func(t *testing.T) {
		baseline := goroutines(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", env.serviceURL+itemPath(ns, "rayclusters", "lg")+"/logs?follow=true&tailLines=2", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode)
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		next := func() string {
			select {
			case l := <-lines:
				return l
			case <-time.After(10 * time.Second):
				t.Fatal("no line within 10s")
				return ""
			}
		}
		assert.Equal(t, "head line 999", next())
		assert.Equal(t, "head line 1000", next())
		assert.Greater(t, goroutines(t), baseline, "the stream is being served")
		for i := 1; i <= 3; i++ {
			appendLog(t, headFile, fmt.Sprintf("appended %d", i))
			assert.Equal(t, fmt.Sprintf("appended %d", i), next(), "an appended line arrives while the request runs")
		}
		cancel()
		res.Body.Close()
		eventually(t, 15*time.Second, "goroutines back to the baseline", func() bool { return goroutines(t) <= baseline })
	})
}

func TestRayJobPodsAndLogsDefaultToSubmitter(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "joblogs")
	admin := env.tokens["admin"]
	r := call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/yaml", testdata(t, "rayjob-minimal.yaml"))
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	var pods []podInfo
	eventually(t, 60*time.Second, "head and submitter pods", func() bool {
		r := call(t, "GET", itemPath(ns, "rayjobs", "minimal-job")+"/pods", admin, "", nil)
		pods = decode[[]podInfo](t, r)
		return len(pods) == 2 && pods[1].NodeType == "submitter" && pods[1].Phase == "Running"
	})
	assert.Equal(t, "head", pods[0].NodeType)
	assert.Equal(t, "ray-job-submitter", pods[1].Containers[0].Name)
	podLog(t, ns, pods[1].Name, "ray-job-submitter", "submitted", "job running")
	podLog(t, ns, pods[0].Name, "ray-head", "head says hi")
	eventually(t, 20*time.Second, "the submitter's log by default", func() bool {
		r := call(t, "GET", itemPath(ns, "rayjobs", "minimal-job")+"/logs", admin, "", nil)
		return r.Status == 200 && string(r.Raw) == "submitted\njob running\n"
	})
	r = call(t, "GET", itemPath(ns, "rayjobs", "minimal-job")+"/logs?pod="+pods[0].Name, admin, "", nil)
	assert.Equal(t, "head says hi\n", string(r.Raw))
}

func TestEventsOfUnschedulableCluster(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "events")
	admin := env.tokens["admin"]
	r := createCluster(t, admin, ns, "huge", func(o map[string]any) {
		head := o["spec"].(map[string]any)["headGroupSpec"].(map[string]any)
		c := head["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		c["resources"] = map[string]any{"requests": map[string]any{"cpu": "1000", "memory": "1Gi"}}
	})
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	type event struct {
		Type, Reason, Message string
		InvolvedObject        struct{ Kind, Name string } `json:"involvedObject"`
		LastTime              time.Time                   `json:"lastTime"`
	}
	var events []event
	eventually(t, 60*time.Second, "a FailedScheduling event of the head pod", func() bool {
		r := call(t, "GET", itemPath(ns, "rayclusters", "huge")+"/events", admin, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		events = decode[[]event](t, r)
		for _, e := range events {
			if e.Reason == "FailedScheduling" && e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, "huge-head") {
				return true
			}
		}
		return false
	})
	r = call(t, "GET", itemPath(ns, "rayclusters", "huge")+"/logs", admin, "", nil)
	assert.Equal(t, 409, r.Status, "the head has not started: %s", r.Raw)
	assert.Contains(t, r.Msg, "not started")
	for i := 1; i < len(events); i++ {
		assert.False(t, events[i].LastTime.After(events[i-1].LastTime), "newest first")
	}
	d := call(t, "GET", itemPath(ns, "rayclusters", "huge"), admin, "", nil)
	detail := decode[struct {
		DashboardURL string  `json:"dashboardURL"`
		Events       []event `json:"events"`
	}](t, d)
	assert.NotEmpty(t, detail.Events, "the detail shows recent events")
	assert.Equal(t, env.dashboardURL+itemPath(ns, "rayclusters", "huge")+"/dashboard/", detail.DashboardURL, "on the dashboards' own origin")
}

func TestDashboardProxy(t *testing.T) {
	t.Parallel()
	ns, base := runningDashboard(t, "dash", "dc")
	admin := env.tokens["admin"]

	r := call(t, "GET", base+"/", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Contains(t, string(r.Raw), "Ray Dashboard of dc-head-svc."+ns+".svc.cluster.local")
	assert.Contains(t, string(r.Raw), `src="./static/main.js"`, "relative paths are passed unchanged")
	r = call(t, "POST", base+"/api/echo?x=1", admin, "application/json", []byte(`{"hello":"ray"}`))
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.JSONEq(t, `{"echo":"{\"hello\":\"ray\"}","query":"x=1"}`, string(r.Raw))
	assert.False(t, env.dashboards.credentialsSeen("dc-head-svc."+ns), "the caller's token never reaches the dashboard")

	r = call(t, "GET", base+"/", env.tokens["viewer"], "", nil)
	assert.Equal(t, 403, r.Status, "no services/proxy")
	r = call(t, "GET", base+"/", "", "", nil)
	assert.Equal(t, 401, r.Status)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", env.serviceURL+base, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 307, res.StatusCode, "to the dashboards' own origin")
	assert.Equal(t, env.dashboardURL+base+"/", res.Header.Get("Location"))
	req, _ = http.NewRequest("GET", env.dashboardURL+base, nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err = noRedirect.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 301, res.StatusCode)
	assert.Equal(t, base+"/", res.Header.Get("Location"))
}

// A follow ends when the service shuts down, and the shutdown does not wait for the client.
func TestFollowEndsOnShutdown(t *testing.T) {
	ns := namespace(t, "follow-stop")
	runningCluster(t, ns, "fs")
	// A shutdown may take ten minutes: were the follow to hold it, the service would not end by itself
	// (stop waits a minute, then kills it).
	svc := startInstance(t, "ray-service-follow.log", "--shutdown-timeout", "10m")
	res, sc := followHeadLog(t, svc.url, ns, "fs", "before shutdown")
	defer res.Body.Close()
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	start := time.Now()
	assert.True(t, svc.stop(), "the service ends by itself after SIGTERM, the follow open")
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatal("the stream did not end with the service")
	}
	t.Logf("service and stream ended %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}
