package usage

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"ray-service/internal/ray"
)

// listedBy is a fake apiserver of the Ray kinds holding objs, for a new holder's listing.
func listedBy(kinds *ray.Kinds, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	listKinds := map[schema.GroupVersionResource]string{}
	for _, k := range kinds.All() {
		listKinds[k.GVR()] = k.Kind + "List"
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objs...)
}

// heldSeconds is what the report of the day of t0 and the next, as at now, counts each cluster held,
// by UID, with whom it was counted to (kind/name/creator).
func heldSeconds(t *testing.T, store *Store, t0, now time.Time) (map[string]float64, map[string]string) {
	t.Helper()
	groups, _, err := utilization(t.Context(), store, twoDays(t0, ByCluster, now, "RayCluster", "RayJob"))
	require.NoError(t, err)
	held, to := map[string]float64{}, map[string]string{}
	for _, g := range groups {
		held[g.Key.UID] += g.Total.HeldSeconds
		to[g.Key.UID] = strings.Join([]string{g.Key.Kind, g.Key.Name, g.Key.Creator}, "/")
	}
	return held, to
}

// A new holder of the Lease catches up by listing every object while the watch goes on. A cluster
// deleted once the apiserver answered the page that holds it, whose deletion the watch delivers before
// the page is read, stays deleted: the page does not bring it back to be credited, as if it held its
// resources still, with no deletion left to end its credit (until some later holder's listing); one
// stopped so is not credited as running (until it changes again: the service's informers do not
// resync by default). The
// listing takes a cluster's maker listed after it (RayClusters are listed first), and ends, at their
// last credit, the clusters the last holder left that went while no replica accounted.
func TestAccountantCatchUpBringsNoDeletedClusterBack(t *testing.T) {
	ctx := t.Context()
	store := sqliteStore(t)
	kinds := ray.NewKinds()
	signer := testSigner(t)
	k, job := kinds.Cluster(), kinds.ByKind("RayJob")
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	signed := func(kind *ray.Kind, o *unstructured.Unstructured) *unstructured.Unstructured {
		signer.SignCreator(kind, o)
		return o
	}
	doomed := signed(k, rayCluster("doomed", "u-doomed", "bob", nil, 1))
	lost := signed(k, rayCluster("lost", "u-lost", "bob", nil, 1))
	halted := signed(k, rayCluster("halted", "u-halted", "bob", nil, 1))

	// The last holder credited the three up to minute 10.
	last := leadingAccountant(&Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer})
	observe(last, k, doomed, t0)
	observe(last, k, lost, t0)
	observe(last, k, halted, t0)
	last.creditAll(t0.Add(10 * time.Minute))
	require.True(t, last.writeAccounting(ctx))

	// The new holder's apiserver: doomed and halted, running (lost went while no replica accounted),
	// and a cluster alice's RayJob made, listed before the RayJob. Once the page of the clusters is
	// answered, doomed is deleted and halted stopped, and the watch says so before the page is read.
	made := madeBy(rayCluster("train-x1", "u-made", "", nil, 1), "RayJob", "train", "u-job")
	dyn := listedBy(kinds, doomed.DeepCopy(), halted.DeepCopy(), made, trainJob(signer, job))
	next := &Accountant{Store: store, Kinds: kinds, Log: zap.NewNop(), Signer: signer, Dynamic: dyn}
	stopped := halted.DeepCopy()
	require.NoError(t, unstructured.SetNestedField(stopped.Object, true, "spec", "suspend"))
	require.NoError(t, unstructured.SetNestedField(stopped.Object, "suspended", "status", "state"))
	require.False(t, Holding(k.Summarize(stopped).Status))
	var deletedAt time.Time
	dyn.PrependReactor("list", "rayclusters", func(k8stesting.Action) (bool, runtime.Object, error) {
		deletedAt = time.Now().UTC()
		next.mu.Lock()
		next.endLocked(k, "u-doomed", "team", "doomed", deletedAt) // as the watch's Gone
		next.mu.Unlock()
		s := k.Summarize(stopped)
		s.CreatorSigned = signer.CreatorSigned(k, stopped)
		next.Observe(k, stopped, &s) // as the watch's new version
		return false, nil, nil       // the page, as answered before
	})
	next.init()
	next.lead(ctx)
	require.True(t, next.Leading())
	next.mu.Lock()
	_, credited := next.acct.marks["u-doomed"]
	next.mu.Unlock()
	assert.False(t, credited, "a cluster deleted while the listing ran is credited no more")
	next.mu.Lock()
	holding := next.acct.marks["u-halted"].Holding
	next.mu.Unlock()
	assert.False(t, holding, "a cluster stopped while the listing ran is held no more: the watch's version is newer than the page's")

	later := time.Now().UTC().Add(30 * time.Minute)
	next.creditAll(later)
	require.True(t, next.writeAccounting(ctx))
	held, to := heldSeconds(t, store, t0, later)
	assert.InDelta(t, deletedAt.Sub(t0).Seconds(), held["u-doomed"], 1, "doomed is held until it was deleted, not after")
	assert.InDelta(t, 10*60.0, held["u-lost"], 1e-6, "lost is credited up to its last credit")
	assert.InDelta(t, deletedAt.Sub(t0).Seconds(), held["u-halted"], 1, "halted is held until it was stopped, not after")
	assert.Equal(t, "RayJob/train/alice", to["u-made"], "a cluster listed before its maker is counted to it")
}
