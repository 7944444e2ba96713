//go:build integration

package integration

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ray-service/internal/usage"
)

// heldSeconds is how long a history record's timeline says the object held its resources: the time
// in Pending or Running (and the other holding statuses), up to the next status or to its deletion.
func heldSeconds(t *testing.T, rec map[string]any) float64 {
	t.Helper()
	timeline, _ := rec["timeline"].([]any)
	require.NotEmpty(t, timeline, "a timeline: %v", rec)
	var held float64
	var since time.Time
	holding := false
	for _, tr := range timeline {
		m := tr.(map[string]any)
		at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
		require.NoError(t, err)
		if holding {
			held += at.Sub(since).Seconds()
		}
		holding, since = usage.Holding(m["status"].(string)), at
	}
	if holding {
		deleted, ok := rec["deletedAt"].(string)
		require.True(t, ok, "a holding object ends when it is deleted: %v", rec)
		at, err := time.Parse(time.RFC3339Nano, deleted)
		require.NoError(t, err)
		held += at.Sub(since).Seconds()
	}
	return held
}

type utilizationRow struct {
	usage.GroupKey
	HeldHours float64             `json:"heldHours"`
	Allocated usage.Hours         `json:"allocated"`
	Used      *usage.Hours        `json:"used"`
	Objects   int64               `json:"objects"`
	Runs      int64               `json:"runs"`
	Quota     []usage.QuotaFigure `json:"quota"`
	Share     usage.Shares        `json:"share"`
	Series    []usage.Day         `json:"series"`
}

type utilizationReport struct {
	Items    []utilizationRow `json:"items"`
	Total    int              `json:"total"`
	From, To time.Time
	Whole    utilizationRow `json:"whole"`
	Measured usage.Measured `json:"measured"`
	Warnings []string       `json:"warnings"`
}

// Utilization accounting, on an instance that credits every 2 s and reads use every 10 s: two Ray
// clusters of known requests and emulated use (stack/kwok-metrics.yaml: each container uses what its pod's
// annotation kwok.x-k8s.io/usage-cpu says), made by two users, run for known times; one is stopped, the
// other deleted. The report gives each namespace's and creator's allocated core-hours as the requests
// times the time the history's timelines say each held them (to the second), the used core-hours within
// the emulation's tolerance, the namespace's ResourceQuota beside them, the same as CSV; the figures
// survive the objects' deletion and a restart of the service, and a caller sees only where it may list.
func TestUtilization(t *testing.T) {
	t.Parallel()
	log := "ray-service-usage.log"
	args := []string{"--usage-credit-every=2s", "--usage-measure-every=10s", "--usage-measure-step=5s", "--idle-window=0"}
	svc := startInstance(t, log, args...)
	ns := namespace(t, "usage")
	other := namespace(t, "usage-other")
	admin := env.tokens["admin"]
	bind(t, ns, "alice", "ray-editor")
	ctx := context.Background()
	_, err := env.admin.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "compute"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.cpu": resource.MustParse("40"),
			"requests.nvidia.com/gpu": resource.MustParse("4"), "pods": resource.MustParse("100")}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	using := func(cpu string) func(map[string]any) {
		return func(obj map[string]any) {
			for _, tpl := range []map[string]any{group(obj, "spec", "headGroupSpec", "template"), group(obj, "spec", "workerGroupSpecs", 0, "template")} {
				group(tpl, "metadata")["annotations"] = map[string]any{"kwok.x-k8s.io/usage-cpu": cpu}
			}
		}
	}
	// The minimal cluster: a head of 1 CPU and two workers of 2: 5 cores held, three containers.
	require.Equal(t, 201, createCluster(t, admin, ns, "held", using("500m")).Status)
	require.Equal(t, 201, createCluster(t, env.tokens["alice"], ns, "gone", using("1")).Status)
	require.Equal(t, 201, createCluster(t, admin, other, "elsewhere", nil).Status)
	waitStatus(t, ns, "rayclusters", "held", "Running")
	waitStatus(t, ns, "rayclusters", "gone", "Running")
	time.Sleep(40 * time.Second)
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "held")+"/stop", admin, "", nil).Status)
	waitStatus(t, ns, "rayclusters", "held", "Stopped")
	time.Sleep(10 * time.Second)
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "gone")+"?force=true", admin, "", nil).Status, "a running cluster is deleted with force")

	// What the history's timelines say each held.
	records := map[string]map[string]any{}
	eventually(t, 60*time.Second, "both records ended", func() bool {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/history/rayclusters?namespace="+ns, admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		list := decode[struct {
			Items []struct {
				UID, Name, Status string
				DeletedAt         *time.Time
			}
		}](t, r)
		done := 0
		for _, it := range list.Items {
			if (it.Name == "held" && it.Status == "Stopped") || (it.Name == "gone" && it.DeletedAt != nil) {
				records[it.Name] = rawRecord(t, svc.url, "rayclusters", it.UID, admin)
				done++
			}
		}
		return done == 2
	})
	heldHeld, goneHeld := heldSeconds(t, records["held"]), heldSeconds(t, records["gone"])
	t.Logf("held %.1f s, gone %.1f s", heldHeld, goneHeld)
	require.Greater(t, heldHeld, 40.0)
	require.Greater(t, goneHeld, 50.0)

	report := func(base, query, token string) (int, utilizationReport, []byte) {
		r, err := sendTo(base, "GET", query, token, "", nil)
		require.NoError(t, err)
		var rep utilizationReport
		if r.Status == 200 {
			require.NoError(t, json.Unmarshal(r.Data, &rep), "%s", r.Raw)
		}
		return r.Status, rep, r.Raw
	}
	// The use of the last seconds is read within a reading's period (10 s): wait until the use no longer
	// grows over more than one.
	var rep utilizationReport
	var lastUsed float64
	eventually(t, 90*time.Second, "the use read up to the end", func() bool {
		time.Sleep(12 * time.Second)
		code, got, raw := report(svc.url, "/rest/ray/v1/namespaces/"+ns+"/utilization?groupBy=creator&sortBy=name&order=asc", admin)
		require.Equal(t, 200, code, "%s", raw)
		rep = got
		if len(rep.Items) != 2 || rep.Items[0].Used == nil || rep.Items[1].Used == nil {
			return false
		}
		u := rep.Items[0].Used.CPUCoreHours + rep.Items[1].Used.CPUCoreHours
		stable := u > 0 && u == lastUsed
		lastUsed = u
		return stable
	})
	require.Len(t, rep.Items, 2, "two creators")
	byCreator := map[string]utilizationRow{}
	for _, it := range rep.Items {
		byCreator[it.Creator] = it
	}
	adminRow, aliceRow := byCreator["admin"], byCreator["alice"]
	// Allocated: 5 cores for the time held, to the second.
	assert.InDelta(t, 5*heldHeld/3600, adminRow.Allocated.CPUCoreHours, 5*1.0/3600, "admin's cluster: 5 cores × %.1f s", heldHeld)
	assert.InDelta(t, 5*goneHeld/3600, aliceRow.Allocated.CPUCoreHours, 5*1.0/3600, "alice's cluster: 5 cores × %.1f s", goneHeld)
	assert.InDelta(t, 10*heldHeld/3600, adminRow.Allocated.MemoryGiBHours, 10*1.0/3600, "10 GiB held")
	assert.InDelta(t, heldHeld/3600, adminRow.HeldHours, 1.0/3600)
	assert.Equal(t, int64(1), adminRow.Objects)
	assert.Equal(t, int64(1), adminRow.Runs)
	// Used: 3 containers at 0.5 and at 1 core while their pods run. The first 20 s of a pod give no rate
	// yet (the rate's window of four 5 s steps, scraped every 5 s), and the pods start after the cluster
	// holds them: up to 25 s less, never more.
	t.Logf("used: admin %.1f core-seconds, alice %.1f", adminRow.Used.CPUCoreHours*3600, aliceRow.Used.CPUCoreHours*3600)
	for _, c := range []struct {
		who         string
		cores, held float64
		used        float64
	}{{"admin", 1.5, heldHeld, adminRow.Used.CPUCoreHours * 3600}, {"alice", 3, goneHeld, aliceRow.Used.CPUCoreHours * 3600}} {
		assert.GreaterOrEqual(t, c.used, c.cores*(c.held-25), "%s's use: %.1f cores for most of %.1f s", c.who, c.cores, c.held)
		assert.LessOrEqual(t, c.used, c.cores*c.held*1.05, "%s's use: %.1f cores for at most %.1f s", c.who, c.cores, c.held)
	}
	assert.Positive(t, rep.Measured.Seconds)
	assert.InDelta(t, adminRow.Allocated.CPUCoreHours/(adminRow.Allocated.CPUCoreHours+aliceRow.Allocated.CPUCoreHours), adminRow.Share.CPU, 1e-9)
	require.Len(t, adminRow.Series, 1, "one day")

	// By cluster, a page at a time: each cluster's figures as its creator's (one each), the days of those
	// on the page, and the whole's days those of every cluster.
	var clusterRows []utilizationRow
	for page := 1; page <= 2; page++ {
		code, got, raw := report(svc.url, fmt.Sprintf("/rest/ray/v1/namespaces/%s/utilization?groupBy=cluster&sortBy=name&order=asc&pageSize=1&page=%d",
			ns, page), admin)
		require.Equal(t, 200, code, "%s", raw)
		require.Equal(t, 2, got.Total, "%s", raw)
		require.Len(t, got.Items, 1, "%s", raw)
		it := got.Items[0]
		require.Len(t, it.Series, 1, "the cluster on the page has its day: %s", raw)
		assert.InDelta(t, it.Allocated.CPUCoreHours, it.Series[0].Allocated.CPUCoreHours, 1e-9)
		require.Len(t, got.Whole.Series, 1, "%s", raw)
		assert.InDelta(t, rep.Whole.Allocated.CPUCoreHours, got.Whole.Series[0].Allocated.CPUCoreHours, 10*1.0/3600,
			"the whole's day is every cluster's")
		clusterRows = append(clusterRows, it)
	}
	for _, it := range clusterRows {
		c := byCreator[it.Creator]
		assert.Equal(t, int64(1), it.Objects)
		assert.InDelta(t, c.Allocated.CPUCoreHours, it.Allocated.CPUCoreHours, 5*1.0/3600, "%s's cluster %s", it.Creator, it.Cluster)
	}
	assert.Equal(t, []string{"gone", "held"}, []string{clusterRows[0].Name, clusterRows[1].Name}, "sorted by name, a page each")

	// By namespace: the sum of both, with the quota beside it; the other namespace apart.
	code, byNS, raw := report(svc.url, "/rest/ray/v1/utilization?groupBy=namespace", admin)
	require.Equal(t, 200, code, "%s", raw)
	var row *utilizationRow
	for i := range byNS.Items {
		if byNS.Items[i].Namespace == ns {
			row = &byNS.Items[i]
		}
	}
	require.NotNil(t, row, "%s", raw)
	assert.InDelta(t, 5*(heldHeld+goneHeld)/3600, row.Allocated.CPUCoreHours, 10*1.0/3600)
	assert.Equal(t, int64(2), row.Objects)
	require.NotEmpty(t, row.Quota, "the namespace's ResourceQuota")
	quota := map[string]usage.QuotaFigure{}
	for _, q := range row.Quota {
		quota[q.Resource] = q
	}
	assert.InDelta(t, 40.0, quota["requests.cpu"].Hard, 0)
	assert.InDelta(t, 4.0, quota["requests.nvidia.com/gpu"].Hard, 0)
	assert.Equal(t, "compute", quota["requests.cpu"].Quota)
	assert.NotContains(t, quota, "pods", "only CPU, memory, GPUs and NPUs")

	// The same as CSV.
	req, err := http.NewRequestWithContext(ctx, "GET", svc.url+"/rest/ray/v1/namespaces/"+ns+"/utilization?groupBy=creator&sortBy=name&order=asc", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Accept", "text/csv")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 200, res.StatusCode, "%s", body)
	assert.Equal(t, "text/csv; charset=utf-8", res.Header.Get("Content-Type"))
	lines, err := csv.NewReader(strings.NewReader(string(body))).ReadAll()
	require.NoError(t, err)
	require.Len(t, lines, 3, "a header and two rows: %s", body)
	assert.Equal(t, []string{"creator", "heldHours", "cpuCoreHours"}, lines[0][:3])
	assert.Equal(t, "admin", lines[1][0])
	cpu, err := strconv.ParseFloat(lines[1][2], 64)
	require.NoError(t, err)
	assert.InDelta(t, adminRow.Allocated.CPUCoreHours, cpu, 1e-9)
	req.Header.Set("Accept", "image/png")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, 406, res.StatusCode, "neither JSON nor CSV")

	// Rights: alice may list in ns, not in other; a caller with none sees nothing, and 403 for the namespace.
	code, mine, raw := report(svc.url, "/rest/ray/v1/utilization?groupBy=namespace", env.tokens["alice"])
	require.Equal(t, 200, code, "%s", raw)
	// Other tests running on the stack give alice rights in their namespaces too: what this test knows is
	// that she sees ns and not other.
	seen := map[string]bool{}
	for _, it := range mine.Items {
		seen[it.Namespace] = true
	}
	assert.True(t, seen[ns], "alice sees where she may list: %s", raw)
	assert.False(t, seen[other], "alice sees nothing where she may not list: %s", raw)
	code, _, raw = report(svc.url, "/rest/ray/v1/namespaces/"+other+"/utilization", env.tokens["alice"])
	assert.Equal(t, 403, code, "%s", raw)
	code, _, raw = report(svc.url, "/rest/ray/v1/utilization?groupBy=planet", admin)
	assert.Equal(t, 400, code, "%s", raw)
	assert.Contains(t, string(raw), "groupBy")
	code, _, raw = report(svc.url, "/rest/ray/v1/utilization?from=2026-12-05T00:00:00Z&to=2026-12-01T00:00:00Z", admin)
	assert.Equal(t, 400, code, "%s", raw)
	assert.Contains(t, string(raw), "from")

	// A restart: the figures of the stopped and the deleted clusters are the same.
	require.True(t, svc.stop(), "stopped in time")
	svc = startInstance(t, log, args...)
	eventually(t, 60*time.Second, "the restarted instance answers", func() bool {
		code, again, _ := report(svc.url, "/rest/ray/v1/namespaces/"+ns+"/utilization?groupBy=creator&sortBy=name&order=asc", admin)
		if code != 200 || len(again.Items) != 2 {
			return false
		}
		for _, it := range again.Items {
			before := byCreator[it.Creator]
			assert.InDelta(t, before.Allocated.CPUCoreHours, it.Allocated.CPUCoreHours, 1e-9, it.Creator)
			assert.InDelta(t, before.Used.CPUCoreHours, it.Used.CPUCoreHours, 1e-9, it.Creator)
		}
		return true
	})
}
