//go:build integration

package integration

import (
	"database/sql"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/history"
	"ray-service/internal/history/historytest"
	"ray-service/internal/notify/notifytest"
	"ray-service/internal/usage"
	"ray-service/internal/usage/usagetest"
)

// historyScenario: what ran, how it ended and why, kept after KubeRay and users deleted it, as the
// service at base records it.
func historyScenario(t *testing.T, base string) {
	ns := namespace(t, "hist")
	admin := env.tokens["admin"]

	okCluster := finishedJob(t, ns, "ok-job", "Succeeded", numbered("ok", 2100))
	failCluster := finishedJob(t, ns, "fail-job", "Failed", []string{"Traceback (most recent call last):", "ValueError: bad input"})

	// KubeRay deletes each job's cluster 2 s after the job ended; the history keeps them.
	for _, c := range []string{okCluster, failCluster} {
		rec := recordOf(t, base, "rayclusters", ns, c, "deleted by KubeRay", func(r historyRecord) bool { return r.DeletedAt != nil })
		assert.Contains(t, rec.statuses(), "Running")
	}
	ok := recordOf(t, base, "rayjobs", ns, "ok-job", "Succeeded with its ending", func(r historyRecord) bool {
		return r.Status == "Succeeded" && r.Ending != nil
	})
	require.NotNil(t, ok.FinishedAt)
	assert.Nil(t, ok.DeletedAt, "the RayJob itself is still there")
	assert.Equal(t, "admin", ok.Creator)
	st := ok.statuses()
	require.NotEmpty(t, st)
	assert.Equal(t, "Succeeded", st[len(st)-1])
	assert.Contains(t, st, "Running")
	for i := range st[1:] {
		assert.NotEqual(t, st[i], st[i+1], "a transition is a change: %v", st)
	}
	require.NotNil(t, ok.Ending.Log, "the log tail")
	assert.Equal(t, "ray-head", ok.Ending.Log.Container)
	logLines := strings.Split(strings.TrimSuffix(ok.Ending.Log.Text, "\n"), "\n")
	assert.Len(t, logLines, 2000, "the last 2,000 lines")
	assert.Equal(t, "ok line 2100", logLines[len(logLines)-1])
	assert.Equal(t, "ok line 101", logLines[0])
	assert.True(t, ok.Ending.Log.Truncated)
	require.NotEmpty(t, ok.Ending.Pods)
	assert.Equal(t, "head", ok.Ending.Pods[0].NodeType)
	assert.NotEmpty(t, ok.Ending.Events, "the operator's events")
	assert.Equal(t, "ok-job", ok.Manifest["metadata"].(map[string]any)["name"])
	assert.NotContains(t, ok.Manifest, "status")

	fail := recordOf(t, base, "rayjobs", ns, "fail-job", "Failed with its ending", func(r historyRecord) bool {
		return r.Status == "Failed" && r.Ending != nil
	})
	require.NotNil(t, fail.Ending.Log)
	assert.Contains(t, fail.Ending.Log.Text, "ValueError: bad input")
	assert.False(t, fail.Ending.Log.Truncated)

	// A RayCluster whose head is OOMKilled, deleted by a user: its pods' exit reasons are kept.
	require.Equal(t, 201, createCluster(t, admin, ns, "oom", func(obj map[string]any) {
		failWith(group(obj, "spec", "headGroupSpec", "template"), "oom")
	}).Status)
	waitHealth(t, ns, "oom", "Failed", "CrashLoopBackOff")
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "oom")+"?force=true", admin, "", nil).Status)
	oom := recordOf(t, base, "rayclusters", ns, "oom", "deleted, with its pods", func(r historyRecord) bool {
		return r.DeletedAt != nil && r.Ending != nil
	})
	require.NotEmpty(t, oom.Ending.Pods)
	head := oom.Ending.Pods[0]
	assert.Equal(t, "head", head.NodeType)
	require.NotEmpty(t, head.Containers)
	assert.Equal(t, "OOMKilled", head.Containers[0].Reason)
	require.NotNil(t, head.Containers[0].ExitCode)
	assert.Equal(t, int32(137), *head.Containers[0].ExitCode)

	// A RayService deleted is recorded too.
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayservices"), admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "svc")).Status)
	recordOf(t, base, "rayservices", ns, "svc", "recorded", func(r historyRecord) bool { return r.Status != "" })
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayservices", "svc")+"?force=true", admin, "", nil).Status)
	recordOf(t, base, "rayservices", ns, "svc", "deleted", func(r historyRecord) bool { return r.DeletedAt != nil })

	// Filters, sort and page.
	page := func(query string) historyPage {
		r, err := sendTo(base, "GET", "/rest/ray/v1/history/rayjobs?namespace="+ns+"&"+query, admin, "", nil)
		require.NoError(t, err)
		require.Equal(t, 200, r.Status, string(r.Raw))
		return decode[historyPage](t, r)
	}
	failed := page("status=Failed")
	require.Equal(t, 1, failed.Total)
	assert.Equal(t, "fail-job", failed.Items[0].Name)
	byName := page("sortBy=name&order=asc")
	require.Equal(t, 2, byName.Total)
	assert.Equal(t, []string{"fail-job", "ok-job"}, []string{byName.Items[0].Name, byName.Items[1].Name})
	assert.Equal(t, 0, page("finishedAfter="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))).Total)
	assert.Equal(t, 2, page("finishedAfter="+url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))).Total)
	assert.Equal(t, 1, page("pageSize=1&page=2").Total/2, "total counts every page")
	for query, problem := range map[string]string{"sortBy=age": "sortBy", "finishedAfter=yesterday": "finishedAfter", "pageSize=501": "pageSize"} {
		r, err := sendTo(base, "GET", "/rest/ray/v1/history/rayjobs?"+query, admin, "", nil)
		require.NoError(t, err)
		assert.Equal(t, 400, r.Status, query)
		assert.Contains(t, r.Msg, problem)
	}
	r, err := sendTo(base, "GET", "/rest/ray/v1/history/rayjobs/not-a-uid", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 400, r.Status)
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayclusters/"+ok.UID, admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 404, r.Status, "the uid of a RayJob is no RayCluster's")

	// Who sees what: the viewer lists Ray objects everywhere but may not read events, pods or pod logs;
	// nobody may do neither.
	viewer, nobody := env.tokens["viewer"], env.tokens["nobody"]
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayjobs/"+ok.UID, viewer, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status)
	seen := decode[historyRecord](t, r)
	require.NotNil(t, seen.Ending)
	assert.Nil(t, seen.Ending.Log, "no log tail without get pods/log")
	assert.Empty(t, seen.Ending.Pods, "no pods' states without list pods")
	assert.Empty(t, seen.Ending.Events, "no events without list events")
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayjobs/"+ok.UID, nobody, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 404, r.Status, "not even that it exists")
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayjobs?namespace="+ns, nobody, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 403, r.Status)
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayjobs?search=ok-job", nobody, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status)
	assert.Zero(t, decode[historyPage](t, r).Total)
	r, err = sendTo(base, "POST", "/rest/ray/v1/history/rayjobs/"+fail.UID+"/rerun", viewer, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 403, r.Status, "rerun is a create, as the caller")
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/rayjobs", "", "", nil)
	require.NoError(t, err)
	assert.Equal(t, 401, r.Status)

	// Rerun: refused while the object is there, then made again from the record, as the caller.
	r, err = sendTo(base, "POST", "/rest/ray/v1/history/rayjobs/"+fail.UID+"/rerun", admin, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 409, r.Status, string(r.Raw))
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayjobs", "fail-job"), admin, "", nil).Status)
	recordOf(t, base, "rayjobs", ns, "fail-job", "deleted", func(r historyRecord) bool { return r.DeletedAt != nil })
	eventually(t, 30*time.Second, "fail-job gone", func() bool {
		_, err := getRay(t, rayJobs, ns, "fail-job")
		return err != nil
	})
	r, err = sendTo(base, "POST", "/rest/ray/v1/history/rayjobs/"+fail.UID+"/rerun", admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, string(r.Raw))
	again := decode[summary](t, r)
	assert.Equal(t, "fail-job", again.Name)
	assert.NotEqual(t, fail.UID, mustUID(t, ns, "fail-job"), "a new object")
	waitStatus(t, ns, "rayjobs", "fail-job", "Running")
	eventually(t, 30*time.Second, "the rerun recorded apart from the first run", func() bool {
		return len(historyOf(t, base, "rayjobs", ns, "fail-job")) == 2
	})
}

func TestHistory(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { historyScenario(t, env.serviceURL) })
	t.Run("postgres", func(t *testing.T) {
		dsn := postgresDatabase(t)
		svc := startInstance(t, "ray-service-history-pg.log", "--history-dsn", dsn)
		historyScenario(t, svc.url)
	})
}

// The history's store, and the notifications' and the utilization's kept beside it, behave on
// PostgreSQL as on SQLite.
func TestHistoryStoreOnPostgres(t *testing.T) {
	t.Parallel()
	notifytest.Run(t, postgresDatabase)
	historytest.Run(t, func(t *testing.T) (*history.Store, string) {
		dsn := postgresDatabase(t)
		s, err := history.Open(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s, dsn
	})
	usagetest.Run(t, func(t *testing.T) (*usage.Store, string) {
		dsn := postgresDatabase(t)
		s, err := usage.Open(t.Context(), dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s, dsn
	})
}

// A restart loses nothing and records nothing twice: what changed while the service was down is
// found when it is back, by comparing every object with what is recorded.
func TestHistoryRestart(t *testing.T) {
	ns := namespace(t, "hist-restart")
	admin := env.tokens["admin"]
	args := []string{"--history-dsn", "sqlite:" + env.state + "/history/restart.db", "--lease", "history-restart"}
	svc := startInstance(t, "ray-service-restart-1.log", args...)
	require.Equal(t, 201, call(t, "POST", nsPath(ns, "rayjobs"), admin, "application/json", rayJob(t, "job", true)).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "doomed", nil).Status)
	waitStatus(t, ns, "rayjobs", "job", "Running")
	waitStatus(t, ns, "rayclusters", "doomed", "Running")
	recordOf(t, base(svc), "rayjobs", ns, "job", "Running", func(r historyRecord) bool { return r.Status == "Running" })
	recordOf(t, base(svc), "rayclusters", ns, "doomed", "Running", func(r historyRecord) bool { return r.Status == "Running" })
	require.True(t, svc.stop())

	// While it is down: the job ends and the cluster is deleted.
	cluster := currentRayCluster(t, ns, "job")
	finishJobs(t, ns, cluster, "SUCCEEDED")
	waitStatus(t, ns, "rayjobs", "job", "Succeeded")
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "doomed")+"?force=true", admin, "", nil).Status)
	eventually(t, 30*time.Second, "doomed gone", func() bool {
		_, err := getRay(t, rayClusters, ns, "doomed")
		return err != nil
	})

	svc = startInstance(t, "ray-service-restart-2.log", args...)
	job := recordOf(t, base(svc), "rayjobs", ns, "job", "Succeeded", func(r historyRecord) bool { return r.Status == "Succeeded" && r.Ending != nil })
	require.NotNil(t, job.FinishedAt)
	st := job.statuses()
	assert.Equal(t, "Succeeded", st[len(st)-1])
	assert.Equal(t, 1, strings.Count(strings.Join(st, " "), "Running"), "Running once: %v", st)
	recordOf(t, base(svc), "rayclusters", ns, "doomed", "found gone", func(r historyRecord) bool { return r.DeletedAt != nil })
	assert.Len(t, historyOf(t, base(svc), "rayjobs", ns, "job"), 1, "one record")
}

func base(s *serviceProc) string { return s.url }

// Two replicas on one PostgreSQL: one writes; when it goes, the other takes over and misses nothing.
func TestHistoryTwoReplicas(t *testing.T) {
	ns := namespace(t, "hist-ha")
	admin := env.tokens["admin"]
	dsn := postgresDatabase(t)
	args := []string{"--history-dsn", dsn, "--lease", "history-ha"}
	a := startInstance(t, "ray-service-ha-a.log", args...)
	b := startInstance(t, "ray-service-ha-b.log", args...)
	var leader, follower *serviceProc
	eventually(t, 30*time.Second, "one leader", func() bool {
		la, lb := metricOf(t, a.url, "ray_service_history_leader"), metricOf(t, b.url, "ray_service_history_leader")
		switch {
		case la == 1 && lb == 0:
			leader, follower = a, b
		case la == 0 && lb == 1:
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	require.Equal(t, 201, createCluster(t, admin, ns, "first", nil).Status)
	waitStatus(t, ns, "rayclusters", "first", "Running")
	recordOf(t, follower.url, "rayclusters", ns, "first", "Running, read through the follower", func(r historyRecord) bool { return r.Status == "Running" })
	assert.Zero(t, metricOf(t, follower.url, "ray_service_history_writes_total"), "the follower wrote nothing")
	assert.Positive(t, metricOf(t, leader.url, "ray_service_history_writes_total"))

	started := time.Now()
	require.True(t, leader.stop())
	eventually(t, 30*time.Second, "the other takes over", func() bool { return metricOf(t, follower.url, "ray_service_history_leader") == 1 })
	t.Logf("the follower took over %s after the leader stopped", time.Since(started).Round(100*time.Millisecond))
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "first")+"?force=true", admin, "", nil).Status)
	require.Equal(t, 201, createCluster(t, admin, ns, "second", nil).Status)
	recordOf(t, follower.url, "rayclusters", ns, "first", "deleted", func(r historyRecord) bool { return r.DeletedAt != nil })
	// A record's status and its transitions are written in two transactions: wait for both.
	second := recordOf(t, follower.url, "rayclusters", ns, "second", "Running, with its transition", func(r historyRecord) bool {
		return r.Status == "Running" && slices.Contains(r.statuses(), "Running")
	})
	assert.Equal(t, 1, strings.Count(strings.Join(second.statuses(), " "), "Running"))
	first := historyOf(t, follower.url, "rayclusters", ns, "first")
	require.Len(t, first, 1)
	r, err := sendTo(follower.url, "GET", "/rest/ray/v1/history/rayclusters/"+first[0].UID, admin, "", nil)
	require.NoError(t, err)
	st := decode[historyRecord](t, r).statuses()
	assert.Equal(t, 1, strings.Count(strings.Join(st, " "), "Running"), "the handover duplicated nothing: %v", st)
}

// On PostgreSQL a replica of a version before the running sums, the clusters' totals or the kinds'
// days, still running while a new one migrated, fails to write a cluster's day, figures pending or a
// group's day (its rows lack them) rather than write one whose sums are wrong or that the totals or
// the kinds' days do not count.
func TestUtilizationDaysWithoutRunningSumsRefused(t *testing.T) {
	t.Parallel()
	dsn := postgresDatabase(t)
	s, err := usage.Open(t.Context(), dsn)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	// The statement such a replica writes a day with.
	_, err = db.ExecContext(t.Context(), `INSERT INTO usage_days (uid, day, held_seconds, cpu_seconds) VALUES ('old', 0, 60, 60)
		ON CONFLICT (uid, day) DO UPDATE SET held_seconds = usage_days.held_seconds + excluded.held_seconds`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run_held_seconds")
	// And the one a replica with the running sums, before the totals, writes it with.
	_, err = db.ExecContext(t.Context(), `INSERT INTO usage_days (uid, day, held_seconds, run_held_seconds, cpu_seconds, run_cpu_seconds,
			memory_byte_seconds, run_memory_byte_seconds, gpu_seconds, run_gpu_seconds, npu_seconds, run_npu_seconds,
			idle_seconds, run_idle_seconds, idle_gpu_seconds, run_idle_gpu_seconds, idle_npu_seconds, run_idle_npu_seconds,
			used_cpu_seconds, run_used_cpu_seconds, used_memory_byte_seconds, run_used_memory_byte_seconds,
			used_gpu_seconds, run_used_gpu_seconds, used_npu_seconds, run_used_npu_seconds, starts, run_starts)
		VALUES ('old', 0, 60, 60, 60, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1)
		ON CONFLICT (uid, day) DO UPDATE SET held_seconds = usage_days.held_seconds + excluded.held_seconds`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"totalled"`)
	// Its figures pending between the minute's credits.
	_, err = db.ExecContext(t.Context(), `INSERT INTO usage_pending (uid, day, namespace, kind, creator, held_seconds, cpu_seconds)
		VALUES ('old', 0, 'ns', 'RayCluster', 'alice', 60, 60)`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"totalled"`)
	// And a group's day, as a replica of a version before the kinds' days writes it.
	_, err = db.ExecContext(t.Context(), `INSERT INTO usage_totals (day, namespace, kind, creator, held_seconds, cpu_seconds)
		VALUES (0, 'ns', 'RayCluster', 'alice', 60, 60)
		ON CONFLICT (day, namespace, kind, creator) DO UPDATE SET held_seconds = usage_totals.held_seconds + excluded.held_seconds`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"kind_summed"`)
}
