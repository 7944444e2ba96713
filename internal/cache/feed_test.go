package cache

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
)

// feedEnv publishes into a store directly, as its informers' handlers do.
type feedEnv struct {
	t     *testing.T
	store *Store
	kind  *ray.Kind
	rv    int
	// created is every object's creation time: one taken per put would make a repeat a change
	// whenever a second ends between two puts.
	created metav1.Time
}

func newFeedEnv(t *testing.T) *feedEnv {
	kinds := ray.NewKinds()
	store, err := NewStore(nil, fake.NewSimpleClientset(), kinds, signer(t), 0)
	require.NoError(t, err)
	return &feedEnv{t: t, store: store, kind: kinds.Cluster(), created: metav1.Now()}
}

// put publishes a RayCluster ns/name with the given state and suspension.
func (e *feedEnv) put(ns, name, state string, suspend bool) {
	e.rv++
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": string(rune('0' + e.rv%10))},
		"spec":     map[string]any{"suspend": suspend, "headGroupSpec": map[string]any{}},
		"status":   map[string]any{"state": state},
	}}
	u.SetCreationTimestamp(e.created)
	entry, err := (&Store{}).entryTransform(e.kind)(u)
	require.NoError(e.t, err)
	e.store.publishInstance(e.kind, entry)
}

func (e *feedEnv) remove(ns, name string) {
	e.store.unpublishInstance(e.kind, &Entry{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
}

var everywhere = Scopes{Instances: auth.AllNamespaces(), Templates: auth.AllNamespaces()}

// name returns the name of what a change is about.
func changed(c Change) string {
	if c.After != nil {
		return c.After.Summary.Name
	}
	return c.Before.Summary.Name
}

// What changed since a position is each name once, with what was shown then and now, in the order of
// their last changes; a change published again unchanged is none.
func TestFeedSince(t *testing.T) {
	e := newFeedEnv(t)
	e.put("a", "kept", "ready", false)
	e.put("a", "gone", "ready", false)
	e.put("a", "changed", "ready", false)
	items, seq := e.store.Snapshot(e.kind, everywhere)
	require.Len(t, items, 3)
	require.Equal(t, uint64(3), seq)

	changedBefore := e.store.Published(e.kind, "a", "changed")
	e.put("a", "changed", "suspended", true)
	e.remove("a", "gone")
	e.put("a", "new", "ready", false)
	e.put("a", "changed", "suspended", true) // the same again: no change
	changes, now, err := e.store.Since(e.kind, seq, everywhere, everywhere)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), now, "three changes recorded, the repeat not")
	require.Len(t, changes, 3)
	assert.Equal(t, []string{"changed", "gone", "new"}, []string{changed(changes[0]), changed(changes[1]), changed(changes[2])})
	assert.Same(t, changedBefore, changes[0].Before)
	assert.Equal(t, ray.StatusStopped, changes[0].After.Summary.Status)
	assert.NotNil(t, changes[1].Before)
	assert.Nil(t, changes[1].After, "deleted")
	assert.Nil(t, changes[2].Before, "added")
	assert.Equal(t, []uint64{4, 5, 6}, []uint64{changes[0].Seq, changes[1].Seq, changes[2].Seq})

	none, same, err := e.store.Since(e.kind, now, everywhere, everywhere)
	require.NoError(t, err)
	assert.Empty(t, none)
	assert.Equal(t, now, same)
	_, _, err = e.store.Since(e.kind, now+1, everywhere, everywhere)
	require.ErrorIs(t, err, ErrFeedGone, "a position not given yet")
}

// Names the scopes show or hide differently come out with the namespaces whose rights changed; names
// outside the scopes never do.
func TestFeedScopes(t *testing.T) {
	e := newFeedEnv(t)
	e.put("a", "x", "ready", false)
	e.put("b", "y", "ready", false)
	e.put("c", "z", "ready", false)
	onlyA := Scopes{Instances: auth.Namespaces("a")}
	ab := Scopes{Instances: auth.Namespaces("a", "b")}
	_, seq := e.store.Snapshot(e.kind, ab)
	e.put("c", "z", "suspended", true)
	changes, _, err := e.store.Since(e.kind, seq, ab, ab)
	require.NoError(t, err)
	assert.Empty(t, changes, "a change outside the scopes is not shown")

	changes, _, err = e.store.Since(e.kind, seq, ab, onlyA)
	require.NoError(t, err)
	require.Len(t, changes, 1, "b left the scopes")
	assert.Equal(t, "y", changes[0].Before.Summary.Name)
	assert.Nil(t, changes[0].After)

	changes, _, err = e.store.Since(e.kind, seq, onlyA, ab)
	require.NoError(t, err)
	require.Len(t, changes, 1, "b came into the scopes")
	assert.Nil(t, changes[0].Before)
	assert.Equal(t, "y", changes[0].After.Summary.Name)
}

// The feed keeps a bounded window: a reader further behind must start from a snapshot.
func TestFeedWindow(t *testing.T) {
	e := newFeedEnv(t)
	e.store.feeds[e.kind] = newFeed(4, FeedBytes)
	e.put("a", "x", "ready", false)
	_, seq := e.store.Snapshot(e.kind, everywhere)
	for _, state := range []string{"suspended", "ready", "suspended"} {
		e.put("a", "x", state, state == "suspended")
	}
	_, _, err := e.store.Since(e.kind, seq, everywhere, everywhere)
	require.NoError(t, err, "three changes fit a window of four")
	e.put("a", "y", "ready", false)
	e.put("a", "z", "ready", false)
	_, _, err = e.store.Since(e.kind, seq, everywhere, everywhere)
	require.ErrorIs(t, err, ErrFeedGone, "five do not")
	_, _, err = e.store.Since(e.kind, seq+2, everywhere, everywhere)
	require.NoError(t, err, "the last three still do")
}

// Each change wakes every waiter once.
func TestFeedNotifies(t *testing.T) {
	e := newFeedEnv(t)
	w1, w2 := e.store.Changed(), e.store.Changed()
	select {
	case <-w1:
		t.Fatal("woken before any change")
	default:
	}
	e.put("a", "x", "ready", false)
	<-w1
	<-w2
	w3 := e.store.Changed()
	e.put("a", "x", "ready", false) // no change
	select {
	case <-w3:
		t.Fatal("woken by a change that changed nothing")
	default:
	}
}

// A kind's list streams wake at a change of what that kind publishes only: not at another kind's, and
// not at a pod change that changes no summary (which wakes what follows every change).
func TestKindChangedOnlyAtTheKindsChanges(t *testing.T) {
	e := newFeedEnv(t)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	var job *ray.Kind
	for _, k := range e.store.kinds.All() {
		if k != e.kind {
			job = k
			break
		}
	}
	clusters, jobs, every := e.store.KindChanged(e.kind), e.store.KindChanged(job), e.store.Changed()
	e.put("a", "x", "ready", false)
	assert.True(t, closed(clusters), "a RayCluster change wakes the RayClusters' streams")
	assert.False(t, closed(jobs), "and not another kind's")
	assert.True(t, closed(every))

	clusters, every = e.store.KindChanged(e.kind), e.store.Changed()
	e.store.podChanged(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p",
		Labels: map[string]string{ray.RayClusterLabel: "elsewhere"}}})
	assert.True(t, closed(every), "a pod change wakes what follows every change")
	assert.False(t, closed(clusters), "not the list streams when no summary changed")
}

// The feed is bounded in bytes too: changes that hold large items push the oldest out, a reader behind
// them starts again from a snapshot, and what stays is within the bound however many changes came.
func TestFeedBytes(t *testing.T) {
	e := newFeedEnv(t)
	e.put("a", "x", "ready", false)
	e.put("a", "x", "ready", true)
	e.put("a", "x", "ready", false)
	one := 0
	for _, c := range e.store.feeds[e.kind].ring[:3] {
		one = max(one, c.bytes)
	}
	require.Positive(t, one)
	e.store.feeds[e.kind] = newFeed(FeedWindow, 10*one)
	_, seq := e.store.Snapshot(e.kind, everywhere)
	for i := range 9 {
		e.put("a", "x", "ready", i%2 == 0)
	}
	_, _, err := e.store.Since(e.kind, seq, everywhere, everywhere)
	require.NoError(t, err, "nine changes fit ten times the bytes of the largest")
	for i := range 1000 {
		e.put("a", "x", "ready", i%2 == 0)
	}
	f := e.store.feeds[e.kind]
	assert.LessOrEqual(t, f.bytes, 10*one, "what is kept stays within the bound")
	assert.GreaterOrEqual(t, f.size, 9, "as many changes as fit")
	_, _, err = e.store.Since(e.kind, seq, everywhere, everywhere)
	require.ErrorIs(t, err, ErrFeedGone, "a reader behind what is kept starts again")
	_, _, err = e.store.Since(e.kind, f.seq-uint64(f.size)-1, everywhere, everywhere)
	require.ErrorIs(t, err, ErrFeedGone, "even one change behind")
	changes, _, err := e.store.Since(e.kind, f.seq-uint64(f.size), everywhere, everywhere)
	require.NoError(t, err, "what is kept is read")
	require.Len(t, changes, 1)
	kept, sum := 0, 0
	for _, c := range f.ring {
		if c.instance != nil {
			kept++
			sum += c.bytes
		}
	}
	assert.Equal(t, f.size, kept, "the slots of the changes let go hold nothing")
	assert.Equal(t, f.bytes, sum, "the count is what the kept changes hold")
}

// A flood of changes of one object whose creator annotation is as large as the apiserver allows holds
// no more than the feed's bound: each summary holds a bounded creator.
func TestFeedFloodOfLargeObject(t *testing.T) {
	e := newFeedEnv(t)
	huge := strings.Repeat("x", 250<<10)
	for i := range 3000 {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "ray.io/v1", "kind": "RayCluster",
			"metadata": map[string]any{"name": "flood", "namespace": "a", "annotations": map[string]any{ray.CreatorKey: huge},
				"labels": map[string]any{"n": strconv.Itoa(i)}},
			"spec": map[string]any{"headGroupSpec": map[string]any{}},
		}}
		entry, err := (&Store{}).entryTransform(e.kind)(u)
		require.NoError(t, err)
		e.store.publishInstance(e.kind, entry)
	}
	f := e.store.feeds[e.kind]
	assert.Equal(t, uint64(3000), f.seq)
	assert.LessOrEqual(t, f.bytes, FeedBytes)
	held := 0
	for _, c := range f.ring[:f.size] {
		if c.instance != nil {
			held += len(c.instance.Summary.Creator)
		}
	}
	assert.LessOrEqual(t, held, f.size*ray.MaxCreatorBytes, "no kept version holds the whole annotation")
}
