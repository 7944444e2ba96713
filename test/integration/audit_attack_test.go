//go:build integration

package integration

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ray-service/internal/audit/audittest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// auditVerification is what GET /audit/verify answers.
type auditVerification struct {
	Intact   bool   `json:"intact"`
	Entries  int64  `json:"entries"`
	Head     int64  `json:"head"`
	BrokenAt int64  `json:"brokenAt"`
	Problem  string `json:"problem"`
}

// auditOf reads the whole trail of ns through the service at base, as the admin.
func auditOf(t *testing.T, base, ns string) auditData {
	t.Helper()
	r, err := sendTo(base, "GET", "/rest/ray/v1/audit?pageSize=500&namespace="+ns, env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	return decode[auditData](t, r)
}

// verifyAudit asks the service at base to check its trail's chain, as the holder of token.
func verifyAudit(t *testing.T, base, token string) (int, auditVerification) {
	t.Helper()
	r, err := sendTo(base, "GET", "/rest/ray/v1/audit/verify", token, "", nil)
	require.NoError(t, err)
	if r.Status != 200 {
		return r.Status, auditVerification{}
	}
	return 200, decode[auditVerification](t, r)
}

// auditEntriesOf waits until the trail of ns holds n entries and returns them.
func auditEntriesOf(t *testing.T, base, ns string, n int) auditData {
	t.Helper()
	var got auditData
	ok := waitFor(15*time.Second, func() bool {
		got = auditOf(t, base, ns)
		return got.Total >= n
	})
	require.True(t, ok, "%d entries in the trail of %s, got %+v", n, ns, got.Items)
	return got
}

// auditPast makes a write the trail records after what the test did so far (marker, a RayCluster not
// started, created in ns through the service at base as the admin) and waits until the trail shows
// it. The trail is appended in the order of the writes, each before its answer: once the marker's
// entry shows, an entry that anything before it was to make would show too. It returns the trail then.
func auditPast(t *testing.T, base, ns, marker string) auditData {
	t.Helper()
	r, err := sendTo(base, "POST", nsPath(ns, "rayclusters")+"?start=false", env.tokens["admin"], "application/yaml",
		[]byte(strings.Replace(minimalCluster, "NAME", marker, 1)))
	require.NoError(t, err)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	id := r.Header.Get("X-Request-ID")
	require.NotEmpty(t, id)
	var got auditData
	ok := waitFor(30*time.Second, func() bool {
		got = auditOf(t, base, ns)
		return slices.ContainsFunc(got.Items, func(e auditEntry) bool { return e.RequestID == id })
	})
	require.True(t, ok, "the entry of the marker %s in the trail of %s, got %+v", marker, ns, got.Items)
	return got
}

// Attack: a tenant who may delete events in its namespace erased the trail, which was only events.
// The trail is the service's own store now; its events are only a mirror.
func TestAttackAuditSurvivesDeletedEvents(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "audit-erase")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "erased", "?start=false").Status)
	require.Equal(t, 200, call(t, "POST", itemPath(ns, "rayclusters", "erased")+"/start", admin, "", nil).Status)
	before := auditEntriesOf(t, env.serviceURL, ns, 2)

	grantRole(t, ns, "bob", "events-admin", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"},
		Verbs: []string{"delete", "list", "deletecollection"}})
	bob := clientAs(t, "bob")
	ctx := context.Background()
	var mirrored int
	eventually(t, 10*time.Second, "the mirror events written", func() bool {
		list, err := bob.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"})
		require.NoError(t, err)
		mirrored = len(list.Items)
		return mirrored == 2
	})
	require.NoError(t, bob.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"}))
	list, err := bob.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"})
	require.NoError(t, err)
	require.Empty(t, list.Items, "bob deleted the mirror")

	// A write after the deletion: once its entry is there, an entry the deletion removed would be gone.
	after := auditPast(t, env.serviceURL, ns, "marker")
	require.NotEmpty(t, after.Items)
	assert.Equal(t, "marker", after.Items[0].Name, "newest first")
	assert.Equal(t, before.Total+1, after.Total, "the trail keeps its entries: %+v", after.Items)
	assert.Equal(t, before.Items, after.Items[1:])
}

// Attack: a signed event copied under another name by a tenant who may create events was a second
// entry of the trail (the signature covered neither the event's name nor the object's UID).
func TestAttackAuditCopiedEventIsNoDuplicate(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "audit-copy")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createClusterAt(t, admin, ns, "copied", "?start=false").Status)
	before := auditEntriesOf(t, env.serviceURL, ns, 1)
	require.Equal(t, 1, before.Total)

	grantRole(t, ns, "bob", "events-writer", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"},
		Verbs: []string{"create", "list", "get"}})
	bob := clientAs(t, "bob")
	ctx := context.Background()
	var events int
	eventually(t, 10*time.Second, "the mirror event written", func() bool {
		list, err := bob.CoreV1().Events(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"})
		require.NoError(t, err)
		events = len(list.Items)
		if events != 1 {
			return false
		}
		for i := range 3 {
			cp := list.Items[0].DeepCopy()
			cp.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("%s-copy%d", list.Items[0].Name, i), Namespace: ns,
				Labels: cp.Labels, Annotations: cp.Annotations}
			_, err := bob.CoreV1().Events(ns).Create(ctx, cp, metav1.CreateOptions{})
			require.NoError(t, err, "bob may create events")
		}
		return true
	})
	// A write after the copies: once its entry is there, so would be one made of a copy.
	after := auditPast(t, env.serviceURL, ns, "marker")
	var names []string
	for _, e := range after.Items {
		names = append(names, e.Action+" "+e.Name)
	}
	assert.Equal(t, []string{"Create marker", "Create copied"}, names, "copies of a signed event are no entries: %+v", after.Items)
}

// Attack: someone who reaches the history database changes or removes an entry of the trail; the
// service's check of the chain says where it breaks.
func TestAttackAuditTamperedRowIsReported(t *testing.T) {
	ns := namespace(t, "audit-tamper")
	admin := env.tokens["admin"]
	// A history of its own for each run of the test: a run after it (-test.count) starts from a whole chain.
	file := filepath.Join(env.state, "history", "ray-service-"+ns+".db")
	svc := startInstance(t, "ray-service-"+ns+".log", "--history-dsn", "sqlite:"+file) // the file it then changes, whatever the suite's database
	for i := range 4 {
		r, err := sendTo(svc.url, "POST", nsPath(ns, "rayclusters")+"?start=false", admin, "application/yaml",
			[]byte(strings.Replace(minimalCluster, "NAME", fmt.Sprint("tamper-", i), 1)))
		require.NoError(t, err)
		require.Equal(t, 201, r.Status, "%s", r.Raw)
	}
	auditEntriesOf(t, svc.url, ns, 4)
	status, v := verifyAudit(t, svc.url, admin)
	require.Equal(t, 200, status, "the admin may check the trail")
	require.True(t, v.Intact, "%+v", v)
	require.GreaterOrEqual(t, v.Entries, int64(4))
	status, _ = verifyAudit(t, svc.url, env.tokens["viewer"])
	assert.Equal(t, 403, status, "only who may list events cluster-wide checks the trail")

	db, err := sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	var seq int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT seq FROM audit_entries WHERE namespace = $1 AND name = 'tamper-1'`, ns).Scan(&seq))
	_, err = db.ExecContext(ctx, `UPDATE audit_entries SET user_name = 'mallory' WHERE seq = $1`, seq)
	require.NoError(t, err)
	_, v = verifyAudit(t, svc.url, admin)
	assert.False(t, v.Intact, "an edited entry is reported: %+v", v)
	assert.Equal(t, seq, v.BrokenAt, "%+v", v)
	t.Logf("after the UPDATE: %+v", v)
	_, err = db.ExecContext(ctx, `UPDATE audit_entries SET user_name = 'admin' WHERE seq = $1`, seq)
	require.NoError(t, err)
	_, v = verifyAudit(t, svc.url, admin)
	require.True(t, v.Intact, "undone, the chain holds again: %+v", v)

	_, err = db.ExecContext(ctx, `DELETE FROM audit_entries WHERE seq = $1`, seq+1)
	require.NoError(t, err)
	_, v = verifyAudit(t, svc.url, admin)
	assert.False(t, v.Intact, "a removed entry is reported: %+v", v)
	assert.Equal(t, seq+1, v.BrokenAt, "%+v", v)
	t.Logf("after the DELETE: %+v", v)

	// The last entry removed: the head the store keeps still names it.
	var last int64
	require.NoError(t, db.QueryRowContext(ctx, `SELECT MAX(seq) FROM audit_entries`).Scan(&last))
	_, err = db.ExecContext(ctx, `DELETE FROM audit_entries WHERE seq = $1`, last)
	require.NoError(t, err)
	_, v = verifyAudit(t, svc.url, admin)
	assert.False(t, v.Intact, "%+v", v)
	assert.Equal(t, seq+1, v.BrokenAt, "the first break is reported: %+v", v)
}

// sendWithRequestID sends a create through the shared service with an X-Request-ID header of its own.
func sendWithRequestID(t *testing.T, ns, name, id string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", env.serviceURL+nsPath(ns, "rayclusters")+"?start=false",
		bytes.NewReader([]byte(strings.Replace(minimalCluster, "NAME", name, 1))))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+env.tokens["admin"])
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("X-Request-ID", id)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, 201, res.StatusCode)
	return res
}

// Attack: whatever a caller sent as X-Request-ID was signed into the trail as the request's id (spaces,
// quotes, 128 bytes). Only [A-Za-z0-9-]{1,64} is kept; anything else is replaced by an id of the
// service's.
func TestAttackRequestIDIsChecked(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "audit-reqid")
	valid := regexp.MustCompile(`^[A-Za-z0-9-]{1,64}$`)
	sent := map[string]string{
		"spaces":  "by admin (request forged) and more",
		"tab":     "a\tb",
		"quotes":  `"x";y=1`,
		"unicode": "ünïcode",
		"long":    strings.Repeat("a", 100),
		"kept":    "client-Id-42",
	}
	answered := map[string]string{}
	for name, id := range sent {
		res := sendWithRequestID(t, ns, "reqid-"+name, id)
		answered["reqid-"+name] = res.Header.Get("X-Request-ID")
		got := res.Header.Get("X-Request-ID")
		assert.Regexp(t, valid, got, "%s: the answer's id is a valid one", name)
		if name == "kept" {
			assert.Equal(t, id, got, "a valid id is kept")
		} else {
			assert.NotEqual(t, id, got, "%s: not used as is", name)
		}
	}
	trail := auditEntriesOf(t, env.serviceURL, ns, len(sent))
	for _, e := range trail.Items {
		assert.Regexp(t, valid, e.RequestID, "%s", e.Name)
		assert.Equal(t, answered[e.Name], e.RequestID, "%s: the trail names the id the answer gave", e.Name)
		assert.NotContains(t, e.Message, "forged")
	}
}

// Attack: the audit event of an object with a long name (Kubernetes allows 253 characters; the service
// creates none past KubeRay's limits, but writes those made otherwise) was named <name>.<time>, past
// the 253 characters of a name: where the apiserver holds event names to it, the event and with it the
// entry were lost. The entries are in the store now, and the mirror's names fit.
// Such a name is no label value either: the pods' list and the history's record asked the apiserver
// for pods with it as their ray.io/cluster, and were refused; the record's ending was tried again every
// second, forever, and every other record waited a second behind it.
func TestAttackAuditLongNames(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "audit-long")
	admin := env.tokens["admin"]
	name := strings.Repeat("long-", 50) + "abc"
	require.Len(t, name, 253)
	obj := clusterManifest(t, name)
	_, err := env.adminDyn.Resource(rayClusters).Namespace(ns).Create(context.Background(), obj, metav1.CreateOptions{})
	require.NoError(t, err, "the apiserver takes a 253-character name")
	eventually(t, 15*time.Second, "the service sees it", func() bool {
		return call(t, "GET", itemPath(ns, "rayclusters", name), admin, "", nil).Status == 200
	})
	// No pod can carry the name as its ray.io/cluster label (63 characters at most): its pods are none,
	// where the service once asked the apiserver for them with a selector it refuses.
	pods := call(t, "GET", itemPath(ns, "rayclusters", name)+"/pods", admin, "", nil)
	require.Equal(t, 200, pods.Status, "%s", pods.Raw)
	assert.Empty(t, decode[[]podInfo](t, pods))
	r := scaleAs(t, admin, ns, "rayclusters", name, `{"group":"workers","replicas":1}`)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	require.Equal(t, 200, call(t, "DELETE", itemPath(ns, "rayclusters", name)+"?force=true", admin, "", nil).Status)
	// Its history records the deletion and how it ended: the ending's pods were read with that selector
	// too, the ending was never written, and the writer tried again every second, delaying every record
	// behind it.
	eventually(t, 15*time.Second, "the history records the deletion and its ending", func() bool {
		return historyShows(env.serviceURL, "rayclusters", ns, name, func(h historyRecord) bool {
			return h.DeletedAt != nil && h.Ending != nil
		})
	})
	trail := auditEntriesOf(t, env.serviceURL, ns, 2)
	var actions []string
	for _, e := range trail.Items {
		assert.Equal(t, name, e.Name)
		actions = append(actions, e.Action)
	}
	assert.Equal(t, []string{"Delete", "Scale"}, actions)
	// The mirror has them too, under names that fit.
	eventually(t, 10*time.Second, "both mirrored", func() bool {
		list, err := env.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"})
		require.NoError(t, err)
		for _, e := range list.Items {
			assert.LessOrEqual(t, len(e.Name), 253)
		}
		return len(list.Items) == 2
	})
}

// apiserverEventLists sums the LIST requests of events the apiserver served, in every scope.
func apiserverEventLists(t *testing.T) float64 {
	t.Helper()
	body, err := env.admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	var sum float64
	for line := range strings.SplitSeq(string(body), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="events"`) ||
			!strings.Contains(line, `verb="LIST"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

// Attack: GET /audit listed every audit event of the cluster, as the service, before it looked at
// the caller: a flood by a caller with no rights cost a cluster-wide list each. The caller's rights
// come first now; one who may list events nowhere gets nothing, without the trail being read.
func TestAttackAuditListAuthorizesFirst(t *testing.T) {
	ns := namespace(t, "audit-flood")
	require.Equal(t, 201, createClusterAt(t, env.tokens["admin"], ns, "flooded", "?start=false").Status)
	auditEntriesOf(t, env.serviceURL, ns, 1)
	nobody := env.tokens["nobody"]
	// The service's count of reads, -1 where it has none (a service that does not count them).
	auditReads := func() float64 {
		m := regexp.MustCompile(`(?m)^ray_service_audit_reads_total ([0-9.e+]+)$`).FindStringSubmatch(metricsBody(t))
		if m == nil {
			return -1
		}
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		return v
	}
	lists, reads := apiserverEventLists(t), auditReads()
	for range 20 {
		r := call(t, "GET", "/rest/ray/v1/audit?namespace="+ns, nobody, "", nil)
		assert.Equal(t, 403, r.Status, "%s", r.Raw)
		r = call(t, "GET", "/rest/ray/v1/audit", nobody, "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		assert.Zero(t, decode[auditData](t, r).Total)
	}
	dl, after := apiserverEventLists(t)-lists, auditReads()
	t.Logf("40 audit lists as nobody: %.0f event lists at the apiserver, reads of the trail counted %.0f before, %.0f after", dl, reads, after)
	assert.Less(t, dl, 3.0, "no list of events for a caller without rights")
	require.GreaterOrEqual(t, reads, 0.0, "the service counts the reads of its trail")
	assert.InDelta(t, reads, after, 0.1, "nor any read of the trail")
	before := metricOf(t, env.serviceURL, "ray_service_audit_reads_total")
	require.Equal(t, 1, auditOf(t, env.serviceURL, ns).Total)
	assert.InDelta(t, before+1, metricOf(t, env.serviceURL, "ray_service_audit_reads_total"), 0.1, "the admin's list reads it once")
}

// Two replicas on one PostgreSQL append to one linear chain: writes through both at once get
// consecutive sequence numbers, and the check finds the chain whole until a row is changed.
func TestAuditChainTwoReplicasOnPostgres(t *testing.T) {
	ns := namespace(t, "audit-ha")
	admin := env.tokens["admin"]
	dsn := postgresDatabase(t)
	args := []string{"--history-dsn", dsn, "--lease", "history-audit-ha"}
	a := startInstance(t, "ray-service-audit-ha-a.log", args...)
	b := startInstance(t, "ray-service-audit-ha-b.log", args...)
	const each = 12
	var wg sync.WaitGroup
	for i, svc := range []*serviceProc{a, b} {
		wg.Go(func() {
			for j := range each {
				r, err := sendTo(svc.url, "POST", nsPath(ns, "rayclusters")+"?start=false", admin, "application/yaml",
					[]byte(strings.Replace(minimalCluster, "NAME", fmt.Sprintf("ha-%d-%d", i, j), 1)))
				if assert.NoError(t, err) {
					assert.Equal(t, 201, r.Status, "%s", r.Raw)
				}
			}
		})
	}
	wg.Wait()
	trail := auditEntriesOf(t, a.url, ns, 2*each)
	require.Equal(t, 2*each, trail.Total)
	assert.Equal(t, trail, auditOf(t, b.url, ns), "both replicas read the same trail")
	seqs := map[int64]bool{}
	for _, e := range trail.Items {
		seqs[e.Seq] = true
	}
	for s := int64(1); s <= 2*each; s++ {
		assert.True(t, seqs[s], "sequence %d in the trail", s)
	}
	for _, svc := range []*serviceProc{a, b} {
		status, v := verifyAudit(t, svc.url, admin)
		require.Equal(t, 200, status)
		assert.True(t, v.Intact, "%+v", v)
		assert.Equal(t, int64(2*each), v.Entries)
		assert.Equal(t, int64(2*each), v.Head)
	}
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer func() { _ = db.Close() }()
	_, err = db.ExecContext(context.Background(), `UPDATE audit_entries SET action = 'Delete' WHERE seq = 7`)
	require.NoError(t, err)
	_, v := verifyAudit(t, b.url, admin)
	assert.False(t, v.Intact)
	assert.Equal(t, int64(7), v.BrokenAt, "%+v", v)
}

// The audit trail's store behaves on PostgreSQL as on SQLite: one linear chain from several handles at
// once, pages, and tampering found.
func TestAuditStoreOnPostgres(t *testing.T) {
	t.Parallel()
	audittest.Run(t, postgresDatabase)
}
