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

// utcDay is the UTC day that holds at, as the Unix seconds of its midnight.
func utcDay(at time.Time) int64 { return at.UTC().Truncate(24 * time.Hour).Unix() }

// dayName formats a day of utcDay.
func dayName(day int64) string { return time.Unix(day, 0).UTC().Format(time.DateOnly) }

// heldByDay is how long a history record's timeline says the object held its resources on each UTC
// day: the time in Pending or Running (and the other holding statuses), up to the next status or to its
// deletion, split at midnights.
func heldByDay(t *testing.T, rec map[string]any) map[int64]float64 {
	t.Helper()
	timeline, _ := rec["timeline"].([]any)
	require.NotEmpty(t, timeline, "a timeline: %v", rec)
	held := map[int64]float64{}
	add := func(from, to time.Time) {
		for from.Before(to) {
			end := time.Unix(utcDay(from), 0).Add(24 * time.Hour)
			if end.After(to) {
				end = to
			}
			held[utcDay(from)] += end.Sub(from).Seconds()
			from = end
		}
	}
	var since time.Time
	holding := false
	for _, tr := range timeline {
		m := tr.(map[string]any)
		at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
		require.NoError(t, err)
		if holding {
			add(since, at)
		}
		holding, since = usage.Holding(m["status"].(string)), at
	}
	if holding {
		deleted, ok := rec["deletedAt"].(string)
		require.True(t, ok, "a holding object ends when it is deleted: %v", rec)
		at, err := time.Parse(time.RFC3339Nano, deleted)
		require.NoError(t, err)
		add(since, at)
	}
	return held
}

// heldSeconds is how long a history record's timeline says the object held its resources, over every day.
func heldSeconds(t *testing.T, rec map[string]any) float64 {
	t.Helper()
	var held float64
	for _, s := range heldByDay(t, rec) {
		held += s
	}
	return held
}

// statusAt is when a history record's timeline first says status.
func statusAt(t *testing.T, rec map[string]any, status string) time.Time {
	t.Helper()
	timeline, _ := rec["timeline"].([]any)
	for _, tr := range timeline {
		m := tr.(map[string]any)
		if m["status"] == status {
			at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
			require.NoError(t, err)
			return at
		}
	}
	require.FailNow(t, "no "+status+" in the timeline", "%v", rec)
	return time.Time{}
}

// assertDays checks the days of a row's series: each a UTC day from first to last (the days of the clock's
// readings before the clusters were made and after their records ended: one, or two where a midnight fell
// between), each day's core-hours the cores times the seconds the records say were held that day (to the
// second a cluster), every day held in the series, and the days summing to the row's figures. held are
// the seconds of each day the row's clusters held (heldByDay, added), cores those each held.
func assertDays(t *testing.T, what string, series []usage.Day, total usage.Hours, cores float64, clusters int, held map[int64]float64,
	first, last int64) {
	t.Helper()
	assert.LessOrEqual(t, len(series), int((last-first)/86400)+1, "%s: no more days than the run covered", what)
	var sum float64
	inSeries := map[int64]bool{}
	for _, d := range series {
		day := d.Day.Unix()
		inSeries[day] = true
		sum += d.Allocated.CPUCoreHours
		assert.Equal(t, utcDay(d.Day), day, "%s: %s is a UTC midnight", what, d.Day)
		assert.True(t, day >= first && day <= last, "%s: %s is a day from %s to %s", what, d.Day, dayName(first), dayName(last))
		assert.InDelta(t, cores*held[day]/3600, d.Allocated.CPUCoreHours, cores*float64(clusters)/3600, "%s on %s: %.0f cores × %.1f s",
			what, dayName(day), cores, held[day])
	}
	for day, s := range held {
		if s >= 1 {
			assert.True(t, inSeries[day], "%s: %s, when it held for %.1f s, is in the series", what, dayName(day), s)
		}
	}
	assert.InDelta(t, total.CPUCoreHours, sum, 1e-9, "%s: the days sum to the window's figures", what)
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
	// The clock before the clusters are made: their days start on its day.
	before := time.Now()
	// The minimal cluster: a head of 1 CPU and two workers of 2: 5 cores held, three containers.
	require.Equal(t, 201, createCluster(t, admin, ns, "held", using("500m")).Status)
	require.Equal(t, 201, createCluster(t, env.tokens["alice"], ns, "gone", using("1")).Status)
	require.Equal(t, 201, createCluster(t, admin, other, "elsewhere", nil).Status)
	waitStatus(t, ns, "rayclusters", "held", "Running")
	waitStatus(t, ns, "rayclusters", "gone", "Running")
	// Both hold for a known time at least (a sleep makes a duration; nothing is awaited here): 40 s, and
	// 10 s more for the second.
	time.Sleep(40 * time.Second)
	stopAsked := time.Now()
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "held")+"/stop", admin, "", nil).Status)
	waitStatus(t, ns, "rayclusters", "held", "Stopped")
	time.Sleep(10 * time.Second)
	deleteAsked := time.Now()
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
	// The use of the last seconds is read at a later reading of Prometheus (every 10 s), whose rates lag the
	// pods by up to their window (20 s): the use is read up to the end once a reading found no more of it.
	// Each reading adds the seconds it covered to the report's measured seconds: a report whose measured
	// seconds grew since one with the same use had a reading between them, which found none. (A reading
	// while the pods ran would have found theirs; one that failed adds no seconds.)
	var rep utilizationReport
	var base struct{ measured, used float64 }
	defer func() {
		if t.Failed() { // what the readings last said (a timeout ends the test here)
			t.Logf("last report: %d items, measured %.0f s, use %.6f core-hours at %.0f s", len(rep.Items), rep.Measured.Seconds, base.used, base.measured)
		}
	}()
	eventually(t, 120*time.Second, "a reading of the use after the pods' end that found no more", func() bool {
		code, got, raw := report(svc.url, "/rest/ray/v1/namespaces/"+ns+"/utilization?groupBy=creator&sortBy=name&order=asc", admin)
		require.Equal(t, 200, code, "%s", raw)
		rep = got
		if len(rep.Items) != 2 || rep.Items[0].Used == nil || rep.Items[1].Used == nil {
			return false
		}
		u, m := rep.Items[0].Used.CPUCoreHours+rep.Items[1].Used.CPUCoreHours, rep.Measured.Seconds
		switch {
		case u <= 0 || u != base.used:
			base.measured, base.used = m, u
			return false
		case m <= base.measured:
			return false // no reading since
		}
		return true
	})
	// The clock after the records ended and the report was read: the clusters' days end on its day.
	after := time.Now()
	first, last := utcDay(before), utcDay(after)
	t.Logf("the run's days: %s to %s", dayName(first), dayName(last))
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
	// Used: 3 containers at 0.5 and at 1 core while their pods run: at least from when the cluster was
	// Running (its pods were, by then) to when its end was asked, less the first 20 s of a pod, which give
	// no rate yet (the rate's window of four 5 s steps), and a scrape (5 s); at most for the time it held them.
	t.Logf("used: admin %.1f core-seconds, alice %.1f", adminRow.Used.CPUCoreHours*3600, aliceRow.Used.CPUCoreHours*3600)
	for _, c := range []struct {
		who         string
		cores, held float64
		ran         time.Duration
		used        float64
	}{{"admin", 1.5, heldHeld, stopAsked.Sub(statusAt(t, records["held"], "Running")), adminRow.Used.CPUCoreHours * 3600},
		{"alice", 3, goneHeld, deleteAsked.Sub(statusAt(t, records["gone"], "Running")), aliceRow.Used.CPUCoreHours * 3600}} {
		assert.GreaterOrEqual(t, c.used, c.cores*(c.ran.Seconds()-25), "%s's use: %.1f cores for most of the %s its pods surely ran",
			c.who, c.cores, c.ran.Round(100*time.Millisecond))
		assert.LessOrEqual(t, c.used, c.cores*c.held*1.05, "%s's use: %.1f cores for at most %.1f s", c.who, c.cores, c.held)
	}
	assert.Positive(t, rep.Measured.Seconds)
	assert.InDelta(t, adminRow.Allocated.CPUCoreHours/(adminRow.Allocated.CPUCoreHours+aliceRow.Allocated.CPUCoreHours), adminRow.Share.CPU, 1e-9)
	// The days: one, or two where the run spanned a UTC midnight.
	heldDays, goneDays := heldByDay(t, records["held"]), heldByDay(t, records["gone"])
	t.Logf("series: admin %d days, alice %d", len(adminRow.Series), len(aliceRow.Series))
	assertDays(t, "admin's cluster", adminRow.Series, adminRow.Allocated, 5, 1, heldDays, first, last)
	assertDays(t, "alice's cluster", aliceRow.Series, aliceRow.Allocated, 5, 1, goneDays, first, last)
	bothDays := map[int64]float64{}
	for _, days := range []map[int64]float64{heldDays, goneDays} {
		for d, s := range days {
			bothDays[d] += s
		}
	}
	assertDays(t, "the whole", rep.Whole.Series, rep.Whole.Allocated, 5, 2, bothDays, first, last)

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
		require.Contains(t, records, it.Name, "%s", raw)
		assertDays(t, "the cluster "+it.Name+" on its page", it.Series, it.Allocated, 5, 1, heldByDay(t, records[it.Name]), first, last)
		assertDays(t, "the whole on the page of "+it.Name, got.Whole.Series, got.Whole.Allocated, 5, 2, bothDays, first, last)
		assert.InDelta(t, rep.Whole.Allocated.CPUCoreHours, got.Whole.Allocated.CPUCoreHours, 10*1.0/3600, "the whole's days are every cluster's")
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
