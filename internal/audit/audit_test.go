package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const testKey = "0123456789abcdef0123456789abcdef"

// memStore is a Store in memory, appending as the history's store does.
type memStore struct {
	mu    sync.Mutex
	links []Link
	head  int64
	hash  string
	err   error
}

func (m *memStore) Append(_ context.Context, e Entry, seal func(string, Entry) string) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return e, m.err
	}
	e.Seq = m.head + 1
	l := Link{Entry: e, Prev: m.hash}
	l.Hash = seal(l.Prev, e)
	m.links = append(m.links, l)
	m.head, m.hash = e.Seq, l.Hash
	return e, nil
}

func (m *memStore) Entries(context.Context, Query) ([]Entry, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Entry
	for _, l := range slices.Backward(m.links) {
		out = append(out, l.Entry)
	}
	return out, len(out), nil
}

func (m *memStore) Namespaces(context.Context) ([]string, error) { return nil, nil }

func (m *memStore) Walk(_ context.Context, fn func(Link) error) (int64, string, error) {
	if m.err != nil {
		return 0, "", m.err
	}
	for _, l := range m.links {
		if err := fn(l); err != nil {
			return 0, "", err
		}
	}
	return m.head, m.hash, nil
}

func trail(store Store) (*Trail, *fake.Clientset) {
	c := fake.NewSimpleClientset()
	return &Trail{Key: Key(testKey), Store: store, Events: c.CoreV1(), Log: zap.NewNop(), Instance: "replica-1"}, c
}

func mirrorEvents(t *testing.T, c *fake.Clientset, ns string) []corev1.Event {
	t.Helper()
	events, err := c.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	return events.Items
}

// A write is an entry of the store, numbered, and a signed event on its object naming the caller and
// the request.
func TestRecord(t *testing.T) {
	store := &memStore{}
	tr, c := trail(store)
	tr.Record(t.Context(), Write{Action: Stop, Kind: "RayCluster", Namespace: "team", Name: "demo", UID: "u-1", User: "alice", RequestID: "r-1"})
	tr.Record(t.Context(), Write{Action: Delete, Kind: "RayJob", Namespace: "team", Name: "job", User: "bob", RequestID: "r-2", Detail: "forced"})
	tr.Wait()
	entries, total, err := tr.List(t.Context(), Query{})
	require.NoError(t, err)
	require.Equal(t, 2, total)
	assert.Equal(t, Entry{Seq: 2, Time: entries[0].Time, Action: Delete, Kind: "RayJob", Namespace: "team", Name: "job", User: "bob",
		RequestID: "r-2", Message: "delete RayJob team/job by bob (request r-2): forced"}, entries[0])
	assert.Equal(t, "u-1", entries[1].UID)
	assert.Equal(t, int64(1), tr.Reads())

	events := mirrorEvents(t, c, "team")
	require.Len(t, events, 2)
	byReason := map[string]corev1.Event{}
	for _, e := range events {
		byReason[e.Reason] = e
		assert.True(t, tr.Key.Trusted(&e), "signed")
	}
	stop := byReason["RayServiceStop"]
	assert.Equal(t, corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayCluster", Namespace: "team", Name: "demo", UID: "u-1"}, stop.InvolvedObject)
	assert.Equal(t, "stop RayCluster team/demo by alice (request r-1)", stop.Message)
	assert.Equal(t, "1", stop.Annotations[SeqKey])
	assert.Equal(t, "true", stop.Labels[Label])
	assert.Equal(t, corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: "RayJob", Namespace: "team", Name: "job"},
		byReason["RayServiceDelete"].InvolvedObject, "a deleted object's event names it")

	v, err := tr.Verify(t.Context())
	require.NoError(t, err)
	assert.Equal(t, Verification{Intact: true, Entries: 2, Head: 2}, v)
}

// A mirror event copied under another name, or changed, or made up, or signed with another key, is no
// signed event.
func TestMirrorSignature(t *testing.T) {
	tr, c := trail(&memStore{})
	tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: "real", UID: "u-1", User: "alice", RequestID: "r-1"})
	tr.Wait()
	written := mirrorEvents(t, c, "team")[0]
	require.True(t, tr.Key.Trusted(&written))

	copied := written.DeepCopy()
	copied.Name += "-copy"
	assert.False(t, tr.Key.Trusted(copied), "the name is signed")
	otherUID := written.DeepCopy()
	otherUID.InvolvedObject.UID = "u-2"
	assert.False(t, tr.Key.Trusted(otherUID), "the object's UID is signed")
	otherSeq := written.DeepCopy()
	otherSeq.Annotations[SeqKey] = "7"
	assert.False(t, tr.Key.Trusted(otherSeq), "the sequence number is signed")
	changed := written.DeepCopy()
	changed.Annotations[UserKey] = "mallory"
	assert.False(t, tr.Key.Trusted(changed))
	forged := written.DeepCopy()
	forged.Annotations = map[string]string{UserKey: "mallory"}
	assert.False(t, tr.Key.Trusted(forged))
	assert.False(t, Key("another key of at least thirty-two bytes").Trusted(&written))
	assert.False(t, Key(nil).Trusted(&written))
}

// A write the store cannot take is logged and counted, and still mirrored; the write it records is not
// failed.
func TestRecordWhenTheStoreFails(t *testing.T) {
	tr, c := trail(&memStore{err: errors.New("disk full")})
	tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: "x", User: "alice", RequestID: "r-1"})
	tr.Wait()
	assert.Equal(t, int64(1), tr.Failures())
	events := mirrorEvents(t, c, "team")
	require.Len(t, events, 1)
	assert.Empty(t, events[0].Annotations[SeqKey], "no sequence number without an entry")
}

// Without a store the trail lists nothing and says why.
func TestTrailOff(t *testing.T) {
	tr, _ := trail(nil)
	_, _, err := tr.List(t.Context(), Query{})
	require.ErrorIs(t, err, ErrOff)
	_, err = tr.Verify(t.Context())
	require.ErrorIs(t, err, ErrOff)
	_, err = tr.Namespaces(t.Context())
	assert.ErrorIs(t, err, ErrOff)
}

// Every event name fits the 253 characters of a name and is a valid one; long object names that share
// their start get events of their own.
func TestEventName(t *testing.T) {
	at := time.Unix(0, 1_750_000_000_123_456_789)
	assert.Equal(t, "demo.18493fba6c4acd15", EventName("demo", at))
	long := strings.Repeat("long-", 50) + "abc"
	dotted := strings.Repeat("a.", 126) + "b"
	for _, name := range []string{long, dotted, strings.Repeat("x", 253), strings.Repeat("x", 236)} {
		ev := EventName(name, at)
		assert.LessOrEqual(t, len(ev), 253, name)
		assert.Empty(t, validation.IsDNS1123Subdomain(ev), ev)
		assert.True(t, strings.HasSuffix(ev, ".18493fba6c4acd15"), ev)
	}
	assert.NotEqual(t, EventName(long, at), EventName(strings.Repeat("long-", 50)+"abd", at))
	assert.Equal(t, strings.Repeat("x", 236)+".18493fba6c4acd15", EventName(strings.Repeat("x", 236), at), "a name that fits is kept")
}

// Check finds where a chain breaks: an entry changed, removed, added, the last ones removed, or a
// chain made with another key.
func TestCheck(t *testing.T) {
	build := func(n int) *memStore {
		s := &memStore{}
		for i := range n {
			_, err := s.Append(t.Context(), Entry{Time: time.Unix(int64(i), 0).UTC(), Action: Create, Namespace: "ns", Name: "o", User: "u"}, Key(testKey).Seal)
			require.NoError(t, err)
		}
		return s
	}
	check := func(s *memStore) Verification {
		v, err := Check(t.Context(), s, Key(testKey))
		require.NoError(t, err)
		return v
	}
	assert.Equal(t, Verification{Intact: true, Entries: 5, Head: 5}, check(build(5)))
	assert.Equal(t, Verification{Intact: true}, check(build(0)))

	s := build(5)
	s.links[2].User = "mallory"
	v := check(s)
	assert.False(t, v.Intact)
	assert.Equal(t, int64(3), v.BrokenAt)
	assert.Contains(t, v.Problem, "not as it was appended")

	s = build(5)
	s.links = append(s.links[:1], s.links[2:]...)
	v = check(s)
	assert.Equal(t, int64(2), v.BrokenAt, "%+v", v)
	assert.Contains(t, v.Problem, "entry 2 is missing")

	// Removed and the rest renumbered: the links no longer follow.
	s = build(5)
	s.links = append(s.links[:1], s.links[2:]...)
	for i := range s.links {
		s.links[i].Seq = int64(i + 1)
	}
	s.head = 4
	assert.Equal(t, int64(2), check(s).BrokenAt)

	s = build(5)
	s.links = s.links[:3]
	v = check(s)
	assert.Equal(t, int64(4), v.BrokenAt)
	assert.Contains(t, v.Problem, "entries 4 to 5 are missing")

	s = build(5)
	extra := s.links[4]
	extra.Seq, extra.Prev = 6, extra.Hash
	s.links = append(s.links, extra)
	assert.Equal(t, int64(6), check(s).BrokenAt, "an entry past the head was not appended by the service")

	s = &memStore{}
	for range 3 {
		_, err := s.Append(t.Context(), Entry{Action: Create}, Key("another key of at least thirty-two bytes").Seal)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), check(s).BrokenAt, "a chain made without the key does not verify")
}

func TestNewKey(t *testing.T) {
	_, err := NewKey([]byte("short"))
	require.ErrorContains(t, err, "at least 32")
	k, err := NewKey([]byte(testKey))
	require.NoError(t, err)
	assert.Len(t, k, 32)
}

// While the apiserver is slow, every write is still an entry of the store: only the mirror events past
// the bound are not written.
func TestRecordBeyondTheMirrorBound(t *testing.T) {
	store := &memStore{}
	tr, c := trail(store)
	release := make(chan struct{})
	c.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	const writes = mirrorsInFlight + 36
	for i := range writes {
		tr.Record(t.Context(), Write{Action: Create, Kind: "RayCluster", Namespace: "team", Name: fmt.Sprint("o-", i), User: "alice", RequestID: "r"})
	}
	_, total, err := tr.List(t.Context(), Query{})
	require.NoError(t, err)
	assert.Equal(t, writes, total, "no entry lost")
	close(release)
	tr.Wait()
	assert.Len(t, mirrorEvents(t, c, "team"), mirrorsInFlight, "the mirror past its bound is left out")
	v, err := tr.Verify(t.Context())
	require.NoError(t, err)
	assert.True(t, v.Intact)
}
