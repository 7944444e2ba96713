//go:build integration

package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// rawRecord reads a history record as a caller, as the JSON object it is.
func rawRecord(t *testing.T, base, kind, uid, token string) map[string]any {
	t.Helper()
	r, err := sendTo(base, "GET", "/rest/ray/v1/history/"+kind+"/"+uid, token, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var out map[string]any
	require.NoError(t, json.Unmarshal(r.Data, &out))
	return out
}

// Attack: a caller who may list RayClusters, but neither events nor pods, read through a record's ending
// the events of the namespace's objects and its pods' states, termination messages included. Each part of
// an ending is shown only to who may read it live: events to who may list events there, the pods' states
// to who may list pods there.
func TestAttackHistoryEndingNeedsEventAndPodRights(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "hist-rights")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "oom", func(obj map[string]any) {
		failWith(group(obj, "spec", "headGroupSpec", "template"), "oom")
	}).Status)
	waitHealth(t, ns, "oom", "Failed", "CrashLoopBackOff")
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", "oom")+"?force=true", admin, "", nil).Status)
	rec := recordOf(t, env.serviceURL, "rayclusters", ns, "oom", "deleted, with its events and pods", func(r historyRecord) bool {
		return r.DeletedAt != nil && r.Ending != nil && len(r.Ending.Pods) > 0 && len(r.Ending.Events) > 0
	})

	ending := func(token string) map[string]any {
		e, ok := rawRecord(t, env.serviceURL, "rayclusters", rec.UID, token)["ending"].(map[string]any)
		require.True(t, ok, "the ending is shown")
		return e
	}
	// The viewer may list Ray objects everywhere, and nothing else.
	seen := ending(env.tokens["viewer"])
	assert.NotContains(t, seen, "events", "no events without list events")
	assert.NotContains(t, seen, "pods", "no pods' states without list pods")

	grantRole(t, ns, "bob", "events", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}})
	seen = ending(env.tokens["bob"])
	assert.Contains(t, seen, "events", "bob may list events there")
	assert.NotContains(t, seen, "pods", "but not pods")

	grantRole(t, ns, "carol", "pods", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	seen = ending(env.tokens["carol"])
	assert.Contains(t, seen, "pods", "carol may list pods there")
	assert.NotContains(t, seen, "events", "but not events")
	assert.NotContains(t, seen, "log", "nor get pods/log")
}

// historyBytes is the size of a SQLite history on disk, its write-ahead log checkpointed into it first
// (the log keeps its size once grown, whatever it holds).
func historyBytes(t *testing.T, file string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	var busy, pages, moved int
	require.NoError(t, db.QueryRow(`PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &pages, &moved))
	var n int64
	for _, f := range []string{file, file + "-wal"} {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// historyPast waits until the history of the service at base has written every change it had seen
// before the call. Its writer takes what is queued in batches, one after the other: a marker created
// now (a RayCluster named <prefix>-1, not started, in ns) is written in a batch with what was queued
// before it or after; a second marker, created once the first is recorded, is written in a later batch,
// so that once it is recorded the batch of the first, and all before, are written.
func historyPast(t *testing.T, base, ns, prefix string) {
	t.Helper()
	for i := 1; i <= 2; i++ {
		name := fmt.Sprint(prefix, "-", i)
		require.Equal(t, 201, createClusterAt(t, env.tokens["admin"], ns, name, "?start=false").Status)
		recordOf(t, base, "rayclusters", ns, name, "recorded", func(r historyRecord) bool { return r.Status != "" })
	}
}

// Attack: a tenant creates and deletes RayJobs of ~1 MB manifests in a loop. Each record kept the whole
// manifest, forever: the history's volume filled at the rate of the loop. A record now keeps a manifest
// over 64 KiB only in part (with its size and sha256), and a rerun of it says why it cannot be made.
func TestAttackHistoryFloodIsBounded(t *testing.T) {
	const jobs = 120
	ns := namespace(t, "hist-flood")
	bind(t, ns, "alice", "ray-editor")
	file := filepath.Join(env.state, "history", "ray-service-history-flood.db")
	svc := startInstance(t, "ray-service-history-flood.log", "--history-dsn", "sqlite:"+file) // the file it measures, whatever the suite's database
	// What the service found on the stack is recorded first: what grows after is the tenant's.
	historyPast(t, svc.url, ns, "before")
	before := historyBytes(t, file)

	alice := dynamicAs(t, "alice").Resource(rayJobs).Namespace(ns)
	ctx := context.Background()
	entrypoint := "python -c 'print(1)' # " + strings.Repeat("x", 700<<10)
	annotation := strings.Repeat("a", 200<<10)
	manifestBytes, started := 0, time.Now()
	for i := range jobs {
		obj := &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal(rayJob(t, fmt.Sprintf("big-%03d", i), true), &obj.Object))
		obj.SetAnnotations(map[string]string{"team.example/notes": annotation})
		spec := obj.Object["spec"].(map[string]any)
		spec["entrypoint"], spec["suspend"] = entrypoint, true
		b, _ := json.Marshal(obj.Object)
		manifestBytes += len(b)
		_, err := alice.Create(ctx, obj, metav1.CreateOptions{})
		require.NoError(t, err, "job %d", i)
		if i < jobs-1 {
			require.NoError(t, alice.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}))
		}
	}
	t.Logf("the loop took %s", time.Since(started).Round(time.Millisecond))
	eventually(t, 180*time.Second, "every job of the loop recorded", func() bool {
		r, err := sendTo(svc.url, "GET", "/rest/ray/v1/history/rayjobs?namespace="+ns+"&pageSize=1", env.tokens["admin"], "", nil)
		return err == nil && r.Status == 200 && decode[historyPage](t, r).Total == jobs
	})
	eventually(t, 60*time.Second, "the deletions recorded", func() bool {
		return len(historyOf(t, svc.url, "rayjobs", ns, fmt.Sprintf("big-%03d", jobs-2))) == 1 &&
			historyOf(t, svc.url, "rayjobs", ns, fmt.Sprintf("big-%03d", jobs-2))[0].DeletedAt != nil
	})
	t.Logf("recorded %s after the loop began", time.Since(started).Round(time.Millisecond))
	// Every change of the loop written (the other deletions too), before the history is measured.
	historyPast(t, svc.url, ns, "after-loop")
	after := historyBytes(t, file)
	grown := after - before
	t.Logf("%d RayJobs of %d KiB manifests each (%d MiB in all) created and deleted: the history grew by %d KiB (%d KiB before, %d KiB after)",
		jobs, manifestBytes/jobs>>10, manifestBytes>>20, grown>>10, before>>10, after>>10)
	// A record of a manifest past the bound keeps a few KiB of it; the records and their indexes are
	// small. 16 KiB a record (the jobs', and the two markers') is far above what one takes, and far below
	// the manifests.
	assert.Less(t, grown, int64((jobs+2)*16<<10), "the history grows by its bound per record, not by the manifests")

	// Later writes still succeed.
	require.Equal(t, 201, createCluster(t, env.tokens["alice"], ns, "after", nil).Status)
	recordOf(t, svc.url, "rayclusters", ns, "after", "recorded after the flood", func(r historyRecord) bool { return r.Status != "" })

	// A record whose manifest was kept in part says so, and is not rerun from it.
	gone := historyOf(t, svc.url, "rayjobs", ns, "big-000")
	require.Len(t, gone, 1)
	rec := rawRecord(t, svc.url, "rayjobs", gone[0].UID, env.tokens["admin"])
	cut, ok := rec["manifestTruncated"].(map[string]any)
	require.True(t, ok, "the record says its manifest was cut: %v", rec["manifestTruncated"])
	assert.Greater(t, cut["size"], float64(900<<10), "the size of the whole manifest")
	assert.Regexp(t, "^[0-9a-f]{64}$", cut["sha256"])
	r, err := sendTo(svc.url, "POST", "/rest/ray/v1/history/rayjobs/"+gone[0].UID+"/rerun", env.tokens["alice"], "", nil)
	require.NoError(t, err)
	assert.Equal(t, 409, r.Status, string(r.Raw))
	assert.Contains(t, r.Msg, "in part", "the answer names why")
	_, err = getRay(t, rayJobs, ns, "big-000")
	assert.Error(t, err, "nothing made of a part of a manifest")
}

// Attack: a tenant flips a RayCluster between suspended and not, again and again. Each change of status
// was a transition kept for as long as the object lives: the timeline of a live object grew without
// bound. The first 10 and the last 10 transitions are kept now, and how many were dropped between.
func TestAttackHistoryFlappingIsBounded(t *testing.T) {
	// Serial: each flip waits for the operator and the recorder, which parallel tests slow past its bound.
	const flips = 30
	ns := namespace(t, "hist-flap")
	bind(t, ns, "alice", "ray-editor")
	require.Equal(t, 201, createCluster(t, env.tokens["alice"], ns, "flap", nil).Status)
	waitStatus(t, ns, "rayclusters", "flap", "Running")
	alice := dynamicAs(t, "alice").Resource(rayClusters).Namespace(ns)
	ctx := context.Background()
	want := ""
	for i := range flips {
		suspend := i%2 == 0
		_, err := alice.Patch(ctx, "flap", types.MergePatchType, fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend), metav1.PatchOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, fmt.Sprintf("flip %d seen", i), func() bool {
			s, code := statusOf(t, ns, "rayclusters", "flap")
			want = s.Status
			return code == 200 && (s.Status == "Stopping" || s.Status == "Stopped") == suspend
		})
	}
	uid := ""
	eventually(t, 30*time.Second, "the last status recorded", func() bool {
		// The status seen at the last flip moves on (a resumed cluster goes Pending, then Running): the
		// history's last is compared with the status now.
		if s, code := statusOf(t, ns, "rayclusters", "flap"); code == 200 {
			want = s.Status
		}
		return historyShows(env.serviceURL, "rayclusters", ns, "flap", func(r historyRecord) bool {
			uid = r.UID
			st := r.statuses()
			return len(st) > 0 && st[len(st)-1] == want
		})
	})
	rec := rawRecord(t, env.serviceURL, "rayclusters", uid, env.tokens["admin"])
	timeline, _ := rec["timeline"].([]any)
	t.Logf("%d flips: %d transitions kept, %v dropped", flips, len(timeline), rec["transitionsDropped"])
	assert.LessOrEqual(t, len(timeline), 20, "the first and the last 10")
	assert.Greater(t, rec["transitionsDropped"], float64(0), "what was dropped is counted")
	first, _ := timeline[0].(map[string]any)
	assert.Contains(t, []any{"Pending", "Running"}, first["status"], "the first transitions are kept")
}
