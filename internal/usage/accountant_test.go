package usage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// fakeUse answers every reading of use with the same per-second figures for one cluster, and records
// the spans asked.
type fakeUse struct {
	ref   ray.ClusterRef
	cores float64
	spans [][2]time.Time
}

func (f *fakeUse) ClusterUse(_ context.Context, from, to time.Time, step time.Duration) (map[ray.ClusterRef]Used, error) {
	if to.Sub(from) < step { // as Prometheus is asked (promql.Querier.ClusterUse)
		return nil, fmt.Errorf("use between %s and %s: shorter than a step (%s)", from, to, step)
	}
	f.spans = append(f.spans, [2]time.Time{from, to})
	return map[ray.ClusterRef]Used{f.ref: {CPUSeconds: f.cores * to.Sub(from).Seconds()}}, nil
}

func rayCluster(name, uid, creator string, labels map[string]string, replicas int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": name, "namespace": "team", "uid": uid, "generation": int64(1),
			"creationTimestamp": "2026-01-01T00:00:00Z", "annotations": map[string]any{ray.CreatorKey: creator}},
		"spec": map[string]any{"headGroupSpec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "ray-head", "resources": map[string]any{"requests": map[string]any{"cpu": "1"}}}}}}},
			"workerGroupSpecs": []any{map[string]any{"groupName": "w", "replicas": replicas, "template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "w", "resources": map[string]any{"requests": map[string]any{"cpu": "2", "nvidia.com/gpu": "1"}}}}}}}}},
		"status": map[string]any{"state": "ready"},
	}}
	if labels != nil {
		u.SetLabels(labels)
	}
	return u
}

// leadingAccountant is r made ready and leading, as a replica that holds the Lease.
func leadingAccountant(r *Accountant) *Accountant {
	r.init()
	r.leading.Store(true)
	return r
}

// observe has r observe o of kind at, its creator signed where r's signer signed it.
func observe(r *Accountant, kind *ray.Kind, o *unstructured.Unstructured, at time.Time) {
	s := kind.Summarize(o)
	s.CreatorSigned = r.Signer.CreatorSigned(kind, o)
	r.mu.Lock()
	r.observeLocked(kind, o, &s, at)
	r.mu.Unlock()
}

// ownAndMade has r observe at t0 alice's RayJob train (trainJob), bob's RayCluster own (UID u-own, two
// workers of a GPU, its creator signed) and train's cluster train-x1 (UID u-made, one worker), and returns
// the two clusters.
func ownAndMade(r *Accountant, kinds *ray.Kinds, t0 time.Time) (own, made *unstructured.Unstructured) {
	k, job := kinds.Cluster(), kinds.ByKind("RayJob")
	observe(r, job, trainJob(r.Signer, job), t0)
	own = rayCluster("own", "u-own", "bob", nil, 2)
	r.Signer.SignCreator(k, own)
	made = madeBy(rayCluster("train-x1", "u-made", "", nil, 1), "RayJob", "train", "u-job")
	observe(r, k, own, t0)
	observe(r, k, made, t0)
	return own, made
}

// trainJob is alice's RayJob train (UID u-job), its creator signed, whose status names its cluster train-x1.
func trainJob(signer *signing.Signer, job *ray.Kind) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "train", "namespace": "team", "uid": "u-job", "annotations": map[string]any{ray.CreatorKey: "alice"}},
		"status":   map[string]any{"rayClusterName": "train-x1"}}}
	signer.SignCreator(job, o)
	return o
}

// twoDays asks for the report, grouped by groupBy as at now, of the day of t0 and the next, of the kinds.
func twoDays(t0 time.Time, groupBy string, now time.Time, kinds ...string) Query {
	scopes := map[string][]string{}
	for _, k := range kinds {
		scopes[k] = nil
	}
	return Query{From: time.Unix(DayOf(t0), 0).UTC(), To: time.Unix(DayOf(t0)+2*86400, 0).UTC(), GroupBy: groupBy,
		Now: now, Scopes: scopes}
}

// The recorder credits a cluster's requests while it holds them (at its changes and each credit), counts
// a cluster a RayJob made to that RayJob and its creator, counts idle time while it holds a GPU, reads
// its use, and a new writer takes the credit up from the marks without counting anything twice.
func TestAccountantAccounting(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	use := &fakeUse{ref: ray.ClusterRef{Namespace: "team", Name: "own"}, cores: 0.5}
	signer := testSigner(t)
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer,
		Settings: Settings{Use: use, MeasureEvery: time.Minute, MeasureStep: 15 * time.Second}})
	k := kinds.Cluster()
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	own, _ := ownAndMade(r, kinds, t0)
	require.Equal(t, ray.StatusRunning, k.Summarize(own).Status)
	r.creditAll(t0.Add(10 * time.Minute))
	// own idles from minute 10 to 20; made is deleted at minute 15.
	r.mu.Lock()
	r.setIdleLocked(map[ray.ClusterRef]bool{{Namespace: "team", Name: "own"}: true}, t0.Add(10*time.Minute))
	r.goneAccountLocked("u-made", t0.Add(15*time.Minute))
	r.mu.Unlock()
	r.writeAccounting(ctx)

	q := twoDays(t0, ByCluster, t0.Add(10*time.Minute), "RayCluster", "RayJob")
	groups, _, err := utilization(ctx, store, q)
	require.NoError(t, err)
	byUID := map[string]Group{}
	for _, g := range groups {
		byUID[g.Key.UID] = g
	}
	require.Contains(t, byUID, "u-made")
	assert.Equal(t, "RayJob", byUID["u-made"].Key.Kind, "counted to the RayJob that made it")
	assert.Equal(t, "train", byUID["u-made"].Key.Name)
	assert.Equal(t, "alice", byUID["u-made"].Key.Creator, "the maker's creator")
	assert.InDelta(t, 3*15*60.0, byUID["u-made"].Total.CPUSeconds, 1e-6, "1 + 2 cores for 15 minutes")
	assert.InDelta(t, 15*60.0, byUID["u-made"].Total.GPUSeconds, 1e-6)
	assert.Equal(t, int64(1), byUID["u-made"].Total.Starts)
	assert.InDelta(t, 5*10*60.0, byUID["u-own"].Total.CPUSeconds, 1e-6, "1 + 2×2 cores for 10 minutes")

	// A new writer: own's mark is taken up where it was left, idle; made is gone.
	r2 := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop()})
	marks, err := store.UsageMarks(ctx)
	require.NoError(t, err)
	require.Len(t, marks, 1)
	r2.mu.Lock()
	r2.leadAccounting(marks)
	s := k.Summarize(own)
	s.CreatorSigned = signer.CreatorSigned(k, own)
	r2.seen["u-own"] = true
	r2.accountLocked(k, own, &s, t0.Add(20*time.Minute))
	r2.mu.Unlock()
	r2.creditAll(t0.Add(20 * time.Minute))
	r2.writeAccounting(ctx)
	q.Now = t0.Add(20 * time.Minute)
	groups, _, err = utilization(ctx, store, q)
	require.NoError(t, err)
	for _, g := range groups {
		byUID[g.Key.UID] = g
	}
	assert.InDelta(t, 5*20*60.0, byUID["u-own"].Total.CPUSeconds, 1e-6, "20 minutes, none twice")
	assert.InDelta(t, 10*60.0, byUID["u-own"].Total.IdleSeconds, 1e-6, "idle for 10 minutes holding GPUs")
	assert.InDelta(t, 2*10*60.0, byUID["u-own"].Total.IdleGPUSeconds, 1e-6)
	assert.Equal(t, int64(1), byUID["u-own"].Total.Starts, "taken up, not started again")

	// Its use, read up to now, is credited to it.
	r.measure(ctx, time.Now().UTC())
	require.Len(t, use.spans, 1)
	groups, measured, err := utilization(ctx, store, q)
	require.NoError(t, err)
	for _, g := range groups {
		byUID[g.Key.UID] = g
	}
	span := use.spans[0][1].Sub(use.spans[0][0]).Seconds()
	assert.InDelta(t, 0.5*span, byUID["u-own"].Total.UsedCPUSeconds, 1e-6)
	var total float64
	for _, s := range measured {
		total += s
	}
	assert.InDelta(t, span, total, 1e-6)
	to, err := store.MeasuredTo(ctx)
	require.NoError(t, err)
	assert.Equal(t, use.spans[0][1], to)
}

// Between the minute's credits a change is written pending, and reports count it; the next credit,
// even with no cluster holding, moves it into the days: reports count it the same, once.
func TestAccountantWritesChangesPending(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop()})
	k := kinds.Cluster()
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	observe(r, k, rayCluster("own", "u-own", "bob", nil, 2), t0)
	r.creditAll(t0.Add(time.Minute))
	r.writeAccounting(ctx)
	pending := func() int {
		var n int
		require.NoError(t, store.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_pending`).Scan(&n))
		return n
	}
	require.Zero(t, pending(), "the minute's credit goes into the days")

	cpu := func() float64 {
		groups, _, err := utilization(ctx, store, twoDays(t0, ByNamespace, t0.Add(10*time.Minute), "RayCluster"))
		require.NoError(t, err)
		require.Len(t, groups, 1)
		return groups[0].Total.CPUSeconds
	}
	r.mu.Lock()
	r.goneAccountLocked("u-own", t0.Add(5*time.Minute))
	r.mu.Unlock()
	r.writeAccounting(ctx)
	assert.Positive(t, pending(), "a change between credits is written pending")
	assert.InDelta(t, 5*5*60.0, cpu(), 1e-6, "1 + 2×2 cores for 5 minutes")

	r.creditAll(t0.Add(6 * time.Minute))
	r.writeAccounting(ctx)
	assert.Zero(t, pending(), "the next credit moves it, with no cluster holding")
	assert.InDelta(t, 5*5*60.0, cpu(), 1e-6, "counted once")
}

func testSigner(t *testing.T) *signing.Signer {
	t.Helper()
	s, err := signing.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	return s
}

// madeBy marks a cluster as KubeRay marks one a RayJob or RayService made: its labels, and its
// controller owner reference to that object's UID ("" for none).
func madeBy(u *unstructured.Unstructured, kind, name, uid string) *unstructured.Unstructured {
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ray.OriginatedFromCRDLabel], labels[ray.OriginatedFromCRNameLabel] = kind, name
	u.SetLabels(labels)
	if uid != "" {
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}})
	}
	return u
}

// Only what the service signed, and what KubeRay's owner reference and its maker's status back, decides
// whom a cluster is counted to: an unsigned creator annotation bills no one, labels that name a maker
// without its owner reference (or with a reference to another UID, or to the maker's UID where its status
// does not name the cluster) leave the cluster counted as itself, and a cluster seen before its maker is
// counted to it once the maker is seen.
func TestAccountantAccountingTrustsSignedAndOwned(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	signer := testSigner(t)
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer})
	k, job := kinds.Cluster(), kinds.ByKind("RayJob")
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	// A forged creator, and a forged maker: labels alone, and labels with a reference to another UID.
	observe(r, k, rayCluster("forged", "u-forged", "victim", nil, 1), t0)
	observe(r, k, madeBy(rayCluster("labelled", "u-labelled", "", nil, 1), "RayJob", "victims-job", ""), t0)
	observe(r, k, madeBy(rayCluster("wrong-uid", "u-wrong", "", nil, 1), "RayJob", "train", "u-not-the-job"), t0)
	// A cluster seen before the RayJob that made it; another with the same owner reference, which the
	// RayJob's status does not name.
	observe(r, k, madeBy(rayCluster("train-x1", "u-made", "", nil, 1), "RayJob", "train", "u-job"), t0)
	observe(r, k, madeBy(rayCluster("train-forged", "u-unnamed", "", nil, 1), "RayJob", "train", "u-job"), t0)
	observe(r, job, trainJob(signer, job), t0.Add(time.Minute))
	r.creditAll(t0.Add(10 * time.Minute))
	r.writeAccounting(ctx)

	q := twoDays(t0, ByCluster, t0.Add(10*time.Minute), "RayCluster", "RayJob")
	groups, _, err := utilization(ctx, store, q)
	require.NoError(t, err)
	byUID := map[string]GroupKey{}
	for _, g := range groups {
		byUID[g.Key.UID] = g.Key
	}
	for _, uid := range []string{"u-forged", "u-labelled", "u-wrong", "u-unnamed"} {
		assert.Equal(t, "RayCluster", byUID[uid].Kind, "%s: counted as itself", uid)
		assert.Empty(t, byUID[uid].Creator, "%s: billed to no one (unverified)", uid)
	}
	assert.Equal(t, "RayJob", byUID["u-made"].Kind, "counted to its maker once seen")
	assert.Equal(t, "train", byUID["u-made"].Name)
	assert.Equal(t, "alice", byUID["u-made"].Creator)
}

// A maker's status decides from when its clusters are its own: a cluster KubeRay made before the
// RayJob's status names it is counted as itself until the status does, then (all its figures, as every
// cluster's go to whom it is counted to) to the RayJob; a RayService's cluster an upgrade replaced stays
// the RayService's. The RayJobs a RayCronJob's schedule made (unsigned) are billed to the RayCronJob's
// signed creator once its status.lastScheduleTime reaches their tick; a RayJob made before its tick, long
// after it, on no tick, or one of two that say they are the same tick's run, is billed to no one. One
// run deleted spends its tick; the RayCronJob gone (its runs go with it), they stay as billed.
func TestAccountantAccountingStatusAndCronRuns(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	signer := testSigner(t)
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer})
	k, job, svc, cronKind := kinds.Cluster(), kinds.ByKind("RayJob"), kinds.ByKind("RayService"), kinds.ByKind("RayCronJob")
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	stamp := func(t time.Time) string { return t.Format(time.RFC3339) }
	object := func(kind *ray.Kind, name, uid, creator string, created time.Time, status map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": kind.Kind,
			"metadata": map[string]any{"name": name, "namespace": "team", "uid": uid, "creationTimestamp": stamp(created)},
			"status":   status}}
		if creator != "" {
			o.SetAnnotations(map[string]string{ray.CreatorKey: creator})
			signer.SignCreator(kind, o)
		}
		return o
	}

	// A RayJob whose status names its cluster only after the cluster is seen.
	observe(r, job, object(job, "train", "u-job", "alice", t0, map[string]any{}), t0)
	observe(r, k, madeBy(rayCluster("train-x1", "u-train", "", nil, 1), "RayJob", "train", "u-job"), t0)
	state := func(uid string) string {
		r.mu.Lock()
		defer r.mu.Unlock()
		m := r.acct.marks[uid]
		return m.Kind + "/" + m.Name + "/" + m.Creator
	}
	assert.Equal(t, "RayCluster/train-x1/", state("u-train"), "not named yet")
	observe(r, job, object(job, "train", "u-job", "alice", t0, map[string]any{"rayClusterName": "train-x1"}), t0.Add(time.Minute))
	assert.Equal(t, "RayJob/train/alice", state("u-train"), "named")

	// A RayService upgraded from svc-a to svc-b.
	active := func(a, p string) map[string]any {
		return map[string]any{"activeServiceStatus": map[string]any{"rayClusterName": a}, "pendingServiceStatus": map[string]any{"rayClusterName": p}}
	}
	observe(r, svc, object(svc, "serve", "u-svc", "bob", t0, active("svc-a", "")), t0)
	observe(r, k, madeBy(rayCluster("svc-a", "u-svc-a", "", nil, 1), "RayService", "serve", "u-svc"), t0)
	observe(r, k, madeBy(rayCluster("svc-b", "u-svc-b", "", nil, 1), "RayService", "serve", "u-svc"), t0.Add(2*time.Minute))
	observe(r, svc, object(svc, "serve", "u-svc", "bob", t0, active("svc-a", "svc-b")), t0.Add(2*time.Minute))
	observe(r, svc, object(svc, "serve", "u-svc", "bob", t0, active("svc-b", "")), t0.Add(4*time.Minute))

	// A RayCronJob every minute, and RayJobs that say they are its runs, each with its cluster.
	tick := t0.Add(time.Minute)
	cron := func(last time.Time) *unstructured.Unstructured {
		o := object(cronKind, "nightly", "u-cron", "carol", t0.Add(-10*time.Minute), map[string]any{"lastScheduleTime": stamp(last)})
		o.Object["spec"] = map[string]any{"schedule": "* * * * *"}
		return o
	}
	yes := true
	run := func(name string, at, created time.Time) {
		o := object(job, name, "u-"+name, "", created, map[string]any{"rayClusterName": name + "-c"})
		o.SetLabels(map[string]string{ray.RunOfLabel: "nightly"})
		o.SetAnnotations(map[string]string{ray.ScheduledAtAnnotation: stamp(at)})
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCronJob", Name: "nightly", UID: "u-cron", Controller: &yes}})
		observe(r, job, o, created)
		observe(r, k, madeBy(rayCluster(name+"-c", "u-"+name+"-c", "", nil, 1), "RayJob", name, "u-"+name), created)
	}
	observe(r, cronKind, cron(t0.Add(-5*time.Minute)), t0)
	run("nightly-early", tick.Add(2*time.Minute), tick.Add(-30*time.Second)) // made before its tick
	run("nightly-run", tick, tick.Add(time.Second))
	run("nightly-late", tick.Add(-5*time.Minute), tick)                          // made long after its tick
	run("nightly-offtick", tick.Add(-90*time.Second), tick.Add(-80*time.Second)) // on no tick
	run("nightly-twin-a", tick.Add(time.Minute), tick.Add(time.Minute+time.Second))
	run("nightly-twin-b", tick.Add(time.Minute), tick.Add(time.Minute+2*time.Second))
	assert.Equal(t, "RayJob/nightly-run/", state("u-nightly-run-c"), "before the status reaches its tick")
	// The status reaches the runs' ticks after they are made.
	observe(r, cronKind, cron(tick.Add(3*time.Minute)), tick.Add(3*time.Minute))
	r.creditAll(t0.Add(10 * time.Minute))
	r.writeAccounting(ctx)

	q := twoDays(t0, ByCluster, t0.Add(10*time.Minute), "RayCluster", "RayJob", "RayService")
	groups, _, err := utilization(ctx, store, q)
	require.NoError(t, err)
	// rows are, by cluster UID, whom its figures were counted to, with the seconds held of each.
	rows := map[string]map[[3]string]float64{}
	for _, g := range groups {
		if rows[g.Key.UID] == nil {
			rows[g.Key.UID] = map[[3]string]float64{}
		}
		rows[g.Key.UID][[3]string{g.Key.Kind, g.Key.Name, g.Key.Creator}] += g.Total.HeldSeconds
	}
	keys := func(uid string) []string {
		var out []string
		for key := range rows[uid] {
			out = append(out, strings.Join(key[:], "/"))
		}
		slices.Sort(out)
		return out
	}
	assert.Equal(t, []string{"RayJob/train/alice"}, keys("u-train"), "the RayJob's once its status names it")
	assert.InDelta(t, 600, rows["u-train"][[3]string{"RayJob", "train", "alice"}], 1e-6, "all its figures")
	assert.Equal(t, []string{"RayService/serve/bob"}, keys("u-svc-a"), "the replaced cluster stays the RayService's")
	assert.Equal(t, []string{"RayService/serve/bob"}, keys("u-svc-b"), "the pending cluster, then the active one")
	for _, name := range []string{"nightly-early", "nightly-late", "nightly-offtick", "nightly-twin-a", "nightly-twin-b"} {
		assert.Equal(t, []string{"RayJob/" + name + "/"}, keys("u-"+name+"-c"), "%s is billed to no one", name)
	}
	assert.Equal(t, []string{"RayJob/nightly-run/carol"}, keys("u-nightly-run-c"),
		"the scheduled run is the RayCronJob creator's once its status reaches the tick")

	// A run deleted spends its tick: one made again within the grace that says the same is billed to no
	// one, nor is the twin of one deleted.
	gone := func(key [3]string, at time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.goneMakerLocked(key, at)
	}
	gone([3]string{"RayJob", "team", "nightly-run"}, tick.Add(time.Minute))
	run("nightly-replay", tick, tick.Add(90*time.Second))
	assert.Equal(t, "RayJob/nightly-replay/", state("u-nightly-replay-c"), "a RayJob made again for a spent tick")
	gone([3]string{"RayJob", "team", "nightly-twin-b"}, t0.Add(11*time.Minute))
	assert.Equal(t, "RayJob/nightly-twin-a/", state("u-nightly-twin-a-c"), "the twin left")

	// The runs of a RayCronJob deleted (which go with it) stay as billed.
	run("nightly-next", tick.Add(2*time.Minute), tick.Add(2*time.Minute))
	assert.Equal(t, "RayJob/nightly-next/carol", state("u-nightly-next-c"))

	// Resumed after a suspension, KubeRay makes the run of the first tick it missed late, and goes on from
	// then: it ran none of the ticks in between, though its status is past them. A RayJob that says it is
	// the run of one is billed to no one, also once that late run is deleted; the next run is billed.
	run("nightly-resumed", tick.Add(4*time.Minute), tick.Add(7*time.Minute+10*time.Second))
	run("nightly-gap", tick.Add(6*time.Minute), tick.Add(6*time.Minute+5*time.Second))
	run("nightly-after", tick.Add(8*time.Minute), tick.Add(8*time.Minute+time.Second))
	observe(r, cronKind, cron(tick.Add(8*time.Minute+time.Second)), tick.Add(8*time.Minute+time.Second))
	assert.Equal(t, "RayJob/nightly-resumed/", state("u-nightly-resumed-c"), "made long after its tick")
	assert.Equal(t, "RayJob/nightly-gap/", state("u-nightly-gap-c"), "a tick KubeRay passed over")
	assert.Equal(t, "RayJob/nightly-after/carol", state("u-nightly-after-c"), "the run after the late one")
	gone([3]string{"RayJob", "team", "nightly-resumed"}, tick.Add(9*time.Minute))
	assert.Equal(t, "RayJob/nightly-gap/", state("u-nightly-gap-c"), "the late run deleted")
	assert.Equal(t, "RayJob/nightly-after/carol", state("u-nightly-after-c"))
	gone([3]string{"RayCronJob", "team", "nightly"}, t0.Add(12*time.Minute))
	assert.Equal(t, "RayJob/nightly-next/carol", state("u-nightly-next-c"), "as billed, the RayCronJob gone")
}

// utilization is s's report for q: its groups and the seconds measured.
func utilization(ctx context.Context, s *Store, q Query) ([]Group, map[int64]float64, error) {
	res, err := s.Utilization(ctx, q)
	return res.Groups, res.Measured, err
}

// A reading of use across a UTC midnight is split there into whole steps, each day credited its part
// of the use and of the seconds measured; the next reading goes on from where it ended. (A step that
// does not divide a day, which left a span shorter than a step at midnight and stopped the readings, is
// refused by the configuration.)
func TestMeasureAcrossMidnight(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	use := &fakeUse{ref: ray.ClusterRef{Namespace: "team", Name: "own"}, cores: 0.5}
	const step = 15 * time.Second
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Settings: Settings{Use: use, MeasureEvery: time.Minute, MeasureStep: step}})
	midnight := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -1)
	observe(r, kinds.Cluster(), rayCluster("own", "u-own", "bob", nil, 2), midnight.Add(-time.Hour))

	// The first reading, 20 s past midnight: the minute up to the step before it, 45 s before midnight
	// and 15 s after.
	r.measure(ctx, midnight.Add(20*time.Second))
	require.Equal(t, [][2]time.Time{{midnight.Add(-45 * time.Second), midnight}, {midnight, midnight.Add(15 * time.Second)}}, use.spans)
	// The next, a minute on, from there.
	r.measure(ctx, midnight.Add(80*time.Second))
	require.Equal(t, [2]time.Time{midnight.Add(15 * time.Second), midnight.Add(75 * time.Second)}, use.spans[2])

	q := Query{From: midnight.AddDate(0, 0, -1), To: midnight.AddDate(0, 0, 1), GroupBy: ByCluster, Now: midnight.Add(80 * time.Second),
		Scopes: map[string][]string{"RayCluster": nil}}
	groups, measured, err := utilization(ctx, store, q)
	require.NoError(t, err)
	require.Len(t, groups, 1)
	before, after := DayOf(midnight.Add(-time.Second)), DayOf(midnight)
	assert.Equal(t, map[int64]float64{before: 45, after: 75}, measured, "the seconds measured, by day")
	require.Contains(t, groups[0].Days, before)
	require.Contains(t, groups[0].Days, after)
	assert.InDelta(t, 0.5*45, groups[0].Days[before].UsedCPUSeconds, 1e-9, "half a core for the 45 s before midnight")
	assert.InDelta(t, 0.5*75, groups[0].Days[after].UsedCPUSeconds, 1e-9, "and for the 75 s after")
}

// sqliteStore is the utilization in a new SQLite file, closed when the test ends.
func sqliteStore(t *testing.T) *Store {
	t.Helper()
	store, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "usage.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	return store
}

// The cells a report's figures are read into take what the drivers give: numbers, and numbers as text
// (a NUMERIC); anything else is an error naming it.
func TestCells(t *testing.T) {
	var f Figures
	c := cells(&f)
	require.Len(t, c, len(Columns))
	for i, v := range []any{1.5, int64(2), "3.25", []byte("4"), 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, "13"} {
		require.NoError(t, c[i].(sql.Scanner).Scan(v), "column %d", i)
	}
	assert.Equal(t, Figures{HeldSeconds: 1.5, CPUSeconds: 2, MemoryByteSeconds: 3.25, GPUSeconds: 4, NPUSeconds: 5,
		IdleSeconds: 6, IdleGPUSeconds: 7, IdleNPUSeconds: 8, UsedCPUSeconds: 9, UsedMemoryByteSeconds: 10,
		UsedGPUSeconds: 11, UsedNPUSeconds: 12, Starts: 13}, f)
	require.NoError(t, c[len(c)-1].(sql.Scanner).Scan(14.0))
	assert.Equal(t, int64(14), f.Starts)
	require.ErrorContains(t, c[0].(sql.Scanner).Scan(nil), "a figure")
	require.ErrorContains(t, c[len(c)-1].(sql.Scanner).Scan("x"), "a count")
	require.ErrorContains(t, c[len(c)-1].(sql.Scanner).Scan(14.5), "a count of 14.5")
}

// On SQLite a batch's credit commits without waiting for the disk, and leaves the connection's safety
// level as it was, after a write that fails or is cancelled too: the records' commits wait for it.
func TestBatchCreditCommitsWithoutWaitingOnSQLite(t *testing.T) {
	ctx := t.Context()
	s := sqliteStore(t)
	level := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) string {
		var v string
		require.NoError(t, q.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&v))
		return v
	}
	opened := level(s.db)
	require.Equal(t, "2", opened, "the connection opens at FULL")
	require.NoError(t, s.writeUnsynced(ctx, func(tx *sql.Tx) error {
		assert.Equal(t, "1", level(tx), "NORMAL within the batch's write")
		return nil
	}))
	assert.Equal(t, opened, level(s.db))

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Mark{UID: "u", Since: t0, State: State{Kind: "RayCluster", Namespace: "team", Name: "c", Cluster: "c",
		Holding: true, Requests: ray.Resources{CPU: 2}}}
	l := NewLedger()
	l.Credit(m, t0.Add(time.Minute))
	require.NoError(t, s.PutPending(ctx, l))
	assert.Equal(t, opened, level(s.db), "after a batch's credit")
	require.NoError(t, s.PutUsage(ctx, NewLedger()))
	var held float64
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT held_seconds FROM usage_days WHERE uid = 'u'`).Scan(&held))
	assert.InDelta(t, 60, held, 1e-9, "the credit written")

	failed := errors.New("failed")
	require.ErrorIs(t, s.writeUnsynced(ctx, func(*sql.Tx) error { return failed }), failed)
	assert.Equal(t, opened, level(s.db), "after a write that failed")
	cctx, cancel := context.WithCancel(ctx)
	require.ErrorIs(t, s.writeUnsynced(cctx, func(*sql.Tx) error { cancel(); return cctx.Err() }), context.Canceled)
	assert.Equal(t, opened, level(s.db), "after a write cancelled")
}

// A cluster's requests valued anew after its version was observed (its claims allocated, a claim
// template made) are credited from then on, to the maker of a cluster made too.
func TestAccountantRequestsValuedAnew(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	signer := testSigner(t)
	r := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer})
	k := kinds.Cluster()
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	own, made := ownAndMade(r, kinds, t0)

	// At minute 10 each holds 8 GPUs more through its claims; a cluster never observed is ignored.
	r.mu.Lock()
	for uid, s := range map[string]*unstructured.Unstructured{"u-own": own, "u-made": made} {
		req := k.Summarize(s).Requested
		req.GPU += 8
		r.requestedLocked(types.UID(uid), req, t0.Add(10*time.Minute))
	}
	r.requestedLocked("u-unknown", ray.Resources{GPU: 99}, t0.Add(10*time.Minute))
	r.mu.Unlock()
	r.creditAll(t0.Add(20 * time.Minute))
	r.writeAccounting(ctx)

	groups, _, err := utilization(ctx, store, twoDays(t0, ByCluster, t0.Add(20*time.Minute), "RayCluster", "RayJob"))
	require.NoError(t, err)
	byUID := map[string]Group{}
	for _, g := range groups {
		byUID[g.Key.UID] = g
	}
	require.Len(t, byUID, 2)
	assert.InDelta(t, (2*10+10*10)*60.0, byUID["u-own"].Total.GPUSeconds, 1e-6, "2 GPUs for 10 minutes, then 10")
	assert.InDelta(t, (1*10+9*10)*60.0, byUID["u-made"].Total.GPUSeconds, 1e-6, "1 GPU for 10 minutes, then 9")
	assert.Equal(t, "RayJob", byUID["u-made"].Key.Kind, "still counted to the RayJob that made it")
	assert.Equal(t, "alice", byUID["u-made"].Key.Creator)
	assert.InDelta(t, 5*20*60.0, byUID["u-own"].Total.CPUSeconds, 1e-6, "its cores unchanged")
}
