//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sendTo is send against another instance of the service.
func sendTo(base, method, path, token, contentType string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	r := &response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	record(method, path, r)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, fmt.Errorf("body %s: %w", raw, err)
		}
	}
	return r, nil
}

// statusCounts formats how many answers had each status.
func statusCounts(m map[int]int) string {
	var codes []int
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, m[c]))
	}
	return strings.Join(parts, ", ")
}

// Told to stop under load, the service says not ready at once and goes on serving for the delay, so
// that a load balancer stops sending first; then it stops accepting, lets what is in flight finish and
// ends a log follow cleanly. No request it accepted gets a 5xx, and it exits within the delay and the
// shutdown timeout.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	ns := namespace(t, "drain")
	admin := env.tokens["admin"]
	runningCluster(t, ns, "dr")
	const delay, timeout = 3 * time.Second, 10 * time.Second
	svc, err := launchService(env.root, env.state, env.vars, "ray-service-drain.log", 60*time.Second,
		"--shutdown-delay", delay.String(), "--shutdown-timeout", timeout.String())
	require.NoError(t, err)

	// A log follow, open across the shutdown.
	for _, p := range clusterPods(t, ns, "dr") {
		if p.Labels["ray.io/node-type"] == "head" {
			podLog(t, ns, p.Name, "ray-head", "before shutdown")
		}
	}
	var follow *http.Response
	eventually(t, 20*time.Second, "a follow stream open", func() bool {
		req, err := http.NewRequest("GET", svc.url+itemPath(ns, "rayclusters", "dr")+"/logs?follow=true", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+admin)
		follow, err = http.DefaultClient.Do(req)
		require.NoError(t, err)
		if follow.StatusCode != 200 {
			follow.Body.Close()
			return false
		}
		return true
	})
	followEnded := make(chan error, 1)
	go func() {
		defer follow.Body.Close()
		sc := bufio.NewScanner(follow.Body)
		for sc.Scan() {
		}
		followEnded <- sc.Err()
	}()

	// The load: lists and details through keep-alive connections, until the service stops accepting.
	var sent, answered, refused atomic.Int64
	var mu sync.Mutex
	codes := map[int]int{}
	var afterTerm []int // statuses of requests sent after SIGTERM, in the delay
	var termAt atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	paths := []string{nsPath(ns, "rayclusters"), "/rest/ray/v1/rayclusters?search=dr", itemPath(ns, "rayclusters", "dr")}
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sentAt := time.Now().UnixNano()
				sent.Add(1)
				r, err := sendTo(svc.url, "GET", paths[(w+i)%len(paths)], admin, "", nil)
				if err != nil { // refused once the listener is closed: never accepted
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				answered.Add(1)
				mu.Lock()
				codes[r.Status]++
				if term := termAt.Load(); term != 0 && sentAt > term {
					afterTerm = append(afterTerm, r.Status)
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(2 * time.Second)

	termAt.Store(time.Now().UnixNano())
	start := time.Now()
	require.NoError(t, svc.cmd.Process.Signal(syscall.SIGTERM))
	var notReadyAfter time.Duration
	for time.Since(start) < delay {
		status, _, err := httpGet(context.Background(), svc.url+"/readyz")
		if err == nil && status == 503 {
			notReadyAfter = time.Since(start)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-svc.done:
	case <-time.After(delay + timeout + 5*time.Second):
		t.Fatal("the service did not exit within the delay and the shutdown timeout")
	}
	exited := time.Since(start)
	close(stop)
	wg.Wait()

	t.Logf("sent %d, answered %d (%s), refused after the listener closed %d; not ready %s after SIGTERM; exited after %s",
		sent.Load(), answered.Load(), statusCounts(codes), refused.Load(), notReadyAfter, exited.Round(time.Millisecond))
	assert.NotZero(t, notReadyAfter, "/readyz said not ready during the delay")
	assert.Less(t, notReadyAfter, time.Second, "/readyz said not ready at once")
	assert.GreaterOrEqual(t, exited, delay, "the service served out the delay")
	for code := range codes {
		assert.Less(t, code, 500, "no accepted request gets a 5xx")
	}
	assert.NotEmpty(t, afterTerm, "requests sent after SIGTERM were still served during the delay")
	for _, code := range afterTerm {
		assert.Equal(t, 200, code)
	}
	select {
	case err := <-followEnded:
		assert.NoError(t, err, "the log follow ended cleanly")
	case <-time.After(5 * time.Second):
		t.Fatal("the log follow did not end")
	}
}

// listEntries returns the entries named name in a replica's list of kind in ns.
func listEntries(t *testing.T, base, ns, kind, name string) []summary {
	t.Helper()
	r, err := sendTo(base, "GET", nsPath(ns, kind)+"?pageSize=500", env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var out []summary
	for _, s := range decode[listData](t, r).Items {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Two replicas of the service against one cluster: a write through one shows in the other's list
// within a second; start and stop sent through both at once end in one consistent state, each action
// answered 200 or 409 (never a 5xx), the object listed once, its spec whole.
func TestTwoReplicas(t *testing.T) {
	ns := namespace(t, "replicas")
	admin := env.tokens["admin"]
	other, err := launchService(env.root, env.state, env.vars, "ray-service-replica.log", 60*time.Second)
	require.NoError(t, err)
	defer other.stop()
	a, b := env.serviceURL, other.url

	// Visible through the other replica within a second, either way round.
	for i, pair := range [][2]string{{a, b}, {b, a}} {
		name := fmt.Sprintf("seen-%d", i)
		r, err := sendTo(pair[0], "POST", nsPath(ns, "rayclusters"), admin, "application/yaml",
			[]byte(strings.Replace(minimalCluster, "NAME", name, 1)))
		require.NoError(t, err)
		require.Equal(t, 201, r.Status, string(r.Raw))
		start := time.Now()
		for len(listEntries(t, pair[1], ns, "rayclusters", name)) == 0 {
			require.Less(t, time.Since(start), 5*time.Second, "the other replica does not list %s", name)
			time.Sleep(20 * time.Millisecond)
		}
		seen := time.Since(start)
		t.Logf("created through one replica, listed by the other after %s", seen.Round(time.Millisecond))
		assert.Less(t, seen, time.Second)
	}

	// A RayService stops by parking its spec as a template and starts by creating it again: the
	// action with the most steps. Both replicas act on it at once, several rounds.
	r, err := sendTo(a, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "both"))
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, string(r.Raw))
	want := specOf(t, a, ns, "both")
	codes := map[int]int{}
	for round := range 6 {
		action := []string{"stop", "start"}[round%2]
		var wg sync.WaitGroup
		results := make([]*response, 2)
		for i, base := range []string{a, b} {
			wg.Go(func() {
				r, err := sendTo(base, "POST", itemPath(ns, "rayservices", "both")+"/"+action, admin, "", nil)
				if assert.NoError(t, err) {
					results[i] = r
				}
			})
		}
		wg.Wait()
		ok := 0
		for _, r := range results {
			require.NotNil(t, r)
			codes[r.Status]++
			assert.Contains(t, []int{200, 409}, r.Status, "%s through both: %s", action, r.Raw)
			if r.Status == 200 {
				ok++
			}
		}
		assert.GreaterOrEqual(t, ok, 1, "%s through both: one of them succeeds", action)
		wantType := map[string]string{"stop": "template", "start": "instance"}[action]
		for _, base := range []string{a, b} {
			eventually(t, 5*time.Second, fmt.Sprintf("after %s, one %s entry in each replica's list", action, wantType), func() bool {
				entries := listEntries(t, base, ns, "rayservices", "both")
				return len(entries) == 1 && entries[0].Type == wantType
			})
		}
		assert.Equal(t, want, specOf(t, a, ns, "both"), "after %s through both, the spec is whole", action)
	}
	t.Logf("start and stop through both replicas at once, 6 rounds: %s", statusCounts(codes))
}

// specOf returns the spec of the object a detail shows (instance or template), less what the
// operator defaults.
func specOf(t *testing.T, base, ns, name string) map[string]any {
	t.Helper()
	r, err := sendTo(base, "GET", itemPath(ns, "rayservices", name), env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	spec, _ := decode[summary](t, r).Object["spec"].(map[string]any)
	return map[string]any{"serveConfigV2": spec["serveConfigV2"], "rayVersion": nested(spec, "rayClusterConfig", "rayVersion"),
		"workers": nested(spec, "rayClusterConfig", "workerGroupSpecs")}
}

func nested(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}
