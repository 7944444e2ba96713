package notify

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"ray-service/internal/auth"
)

// memStore is a Store in memory.
type memStore struct {
	mu         sync.Mutex
	subs       []Subscription
	notices    []Notice
	deliveries map[int64]Delivery
}

func (m *memStore) AllSubscriptions(context.Context) ([]Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Subscription{}, m.subs...), nil
}

func (m *memStore) NoticesFrom(_ context.Context, ns string, from int64, limit int) ([]Notice, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Notice
	for _, n := range m.notices {
		if n.Namespace == ns && n.Seq >= from && len(out) < limit {
			out = append(out, n)
		}
	}
	return out, nil
}

func (m *memStore) Advance(_ context.Context, id string, next int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.subs {
		if m.subs[i].ID == id && m.subs[i].Next < next {
			m.subs[i].Next = next
		}
	}
	return nil
}

func (m *memStore) RecordDelivery(_ context.Context, _ string, d Delivery) (Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if before, ok := m.deliveries[d.Seq]; ok {
		d.Attempts, d.FirstAt = before.Attempts+1, before.FirstAt
	} else {
		d.Attempts = 1
	}
	m.deliveries[d.Seq] = d
	return d, nil
}

func (m *memStore) delivery(seq int64) (Delivery, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.deliveries[seq]
	return d, ok
}

// A subscriber that is down is retried until it is back, the notices then arrive in order, signed, and
// only those the subscription wants; one never answered is given up after RetryFor.
func TestDelivererRetriesInOrder(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if !Verify("secret", body, r.Header.Get(SignatureHeader)) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var e event.Event
		if err := e.UnmarshalJSON(body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, e.Subject())
		mu.Unlock()
	}))
	defer srv.Close()
	store := &memStore{deliveries: map[int64]Delivery{}, subs: []Subscription{{ID: "s1", Namespace: "a", URL: srv.URL, Secret: "secret",
		Events: []string{"job.succeeded", "job.failed"}, Next: 1}}}
	for i, n := range []Notice{{Type: "job.failed", Name: "first"}, {Type: "cluster.idle", Name: "unwanted"},
		{Type: "job.succeeded", Name: "second"}} {
		n.Seq, n.Kind, n.Namespace, n.Time = int64(i+1), "RayJob", "a", time.Now()
		store.notices = append(store.notices, n)
	}
	guard := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	d := &Deliverer{Store: store, Sender: &Sender{Client: guard.Client(5 * time.Second)}, RetryFor: time.Minute,
		MaxBackoff: 200 * time.Millisecond, Poll: 50 * time.Millisecond, Log: zap.NewNop()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	require.Eventually(t, func() bool { dl, ok := store.delivery(1); return ok && dl.Attempts >= 2 }, 5*time.Second, 20*time.Millisecond)
	dl, _ := store.delivery(1)
	assert.Equal(t, Delivering, dl.Status)
	assert.Contains(t, dl.LastError, "503")
	down.Store(false)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{"RayJob/first", "RayJob/second"}, got)
	assert.GreaterOrEqual(t, d.FailedTries(), int64(2), "the tries while it was down, for the service's metrics")
	assert.Equal(t, int64(2), d.Delivered())
	assert.Zero(t, d.GivenUp())
	dl, _ = store.delivery(1)
	assert.Equal(t, Delivered, dl.Status)
	_, ok := store.delivery(2)
	assert.False(t, ok, "a notice not wanted is passed over")
	require.Eventually(t, func() bool { s, _ := store.AllSubscriptions(ctx); return s[0].Next == 4 }, 5*time.Second, 20*time.Millisecond)

	// Given up after RetryFor.
	down.Store(true)
	d.RetryFor = 300 * time.Millisecond
	cancel()
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	store.mu.Lock()
	store.notices = append(store.notices, Notice{Seq: 4, Type: "job.failed", Kind: "RayJob", Namespace: "a", Name: "lost", Time: time.Now()})
	store.mu.Unlock()
	go d.Run(ctx)
	require.Eventually(t, func() bool { dl, ok := store.delivery(4); return ok && dl.Status == Failed }, 5*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return d.GivenUp() == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(2), d.Delivered())
}

// A replica that does not lead delivers nothing.
func TestDelivererOnlyWhileLeading(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	store := &memStore{deliveries: map[int64]Delivery{}, subs: []Subscription{{ID: "s1", Namespace: "a", URL: srv.URL, Secret: "x", Next: 1}},
		notices: []Notice{{Seq: 1, Type: "job.failed", Kind: "RayJob", Namespace: "a", Name: "n", Time: time.Now()}}}
	guard := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	var leading atomic.Bool
	d := &Deliverer{Store: store, Sender: &Sender{Client: guard.Client(time.Second)}, Leading: leading.Load, RetryFor: time.Minute,
		MaxBackoff: time.Second, Poll: 20 * time.Millisecond, Log: zap.NewNop()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.Run(ctx)
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, hits.Load())
	leading.Store(true)
	require.Eventually(t, func() bool { return hits.Load() == 1 }, 5*time.Second, 20*time.Millisecond)
}

// A webhook that cannot be reached is named by its scheme and host alone: its path may be its secret.
func TestUnreachableWebhookKeepsItsPath(t *testing.T) {
	guard := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	err := (&Sender{Client: guard.Client(time.Second)}).Send(context.Background(),
		Target{URL: "http://127.0.0.1:1/services/T0/B0/s3cret?token=x", Secret: "k"}, Notice{Seq: 1, Type: "job.failed", Kind: "RayJob"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, err.Error(), "token")
}

// access allows what its rights hold, for the identity it expects, and records what it was asked.
type access struct {
	mu     sync.Mutex
	want   auth.Identity
	rights map[string]bool // "verb resource"
	fail   bool
}

func (a *access) AllowedAs(_ context.Context, id auth.Identity, at auth.Attributes) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return false, errors.New("the apiserver is away")
	}
	return id.Name == a.want.Name && slices.Equal(id.Groups, a.want.Groups) && at.Namespace == "a" && a.rights[at.Verb+" "+at.Resource], nil
}

func (a *access) set(right string, allowed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rights[right] = allowed
}

// Each notice is delivered only while the subscription's creator (its name and groups, as stored) may
// read it: one whose right to list the kind is gone is not sent, and given up with the reason; a check
// that could not be made is retried.
func TestDelivererChecksTheCreatorsRights(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var e event.Event
		_ = e.UnmarshalJSON(body)
		mu.Lock()
		got = append(got, e.Subject())
		mu.Unlock()
	}))
	defer srv.Close()
	store := &memStore{deliveries: map[int64]Delivery{}, subs: []Subscription{{ID: "s1", Namespace: "a", URL: srv.URL, Secret: "x", Next: 1,
		Creator: "bob", CreatorGroups: []string{"team-a"}}}}
	add := func(seq int64, name string) {
		store.mu.Lock()
		defer store.mu.Unlock()
		store.notices = append(store.notices, Notice{Seq: seq, Type: "job.failed", Kind: "RayJob", Namespace: "a", Name: name, Time: time.Now()})
	}
	acc := &access{want: auth.Identity{Name: "bob", Groups: []string{"team-a"}}, rights: map[string]bool{"create events": true, "list rayjobs": true}}
	guard := &Guard{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	d := &Deliverer{Store: store, Sender: &Sender{Client: guard.Client(time.Second)}, RetryFor: time.Minute, MaxBackoff: 50 * time.Millisecond,
		Poll: 20 * time.Millisecond, Log: zap.NewNop(), Access: acc, Kinds: map[string]auth.Attributes{"RayJob": {Group: "ray.io", Resource: "rayjobs"}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	add(1, "allowed")
	go d.Run(ctx)
	require.Eventually(t, func() bool { dl, ok := store.delivery(1); return ok && dl.Status == Delivered }, 5*time.Second, 10*time.Millisecond)

	acc.set("list rayjobs", false)
	add(2, "revoked")
	require.Eventually(t, func() bool { dl, ok := store.delivery(2); return ok && dl.Status == Failed }, 5*time.Second, 10*time.Millisecond)
	dl, _ := store.delivery(2)
	assert.Contains(t, dl.LastError, `not sent: the subscription's creator bob may no longer list rayjobs in namespace "a"`)

	acc.mu.Lock()
	acc.fail = true
	acc.mu.Unlock()
	acc.set("list rayjobs", true)
	add(3, "unchecked")
	require.Eventually(t, func() bool { dl, ok := store.delivery(3); return ok && dl.Attempts >= 2 }, 5*time.Second, 10*time.Millisecond)
	dl, _ = store.delivery(3)
	assert.Equal(t, Delivering, dl.Status, "retried")
	assert.Contains(t, dl.LastError, "could not be checked")
	acc.mu.Lock()
	acc.fail = false
	acc.mu.Unlock()
	require.Eventually(t, func() bool { dl, ok := store.delivery(3); return ok && dl.Status == Delivered }, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"RayJob/allowed", "RayJob/unchecked"}, got, "the revoked notice was never sent")
}
