package cache

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"sync"

	"ray-service/internal/ray"
)

// The store's change feed is what live streams read: every change it publishes of an object of a kind
// gets the next sequence number of that kind, and the last changes are kept with what was published for
// that name before: at most FeedWindow of them and at most FeedBytes of what they hold, whichever is
// less. A stream remembers the number of the last change it sent and asks for what changed since;
// nothing is queued per stream, so a slow stream holds no memory and blocks no one. A stream further
// behind than what is kept starts again from a snapshot. The bound in bytes is what keeps a tenant who
// patches an object of its own over and over from holding the service's memory: its changes push the
// oldest out, and streams that have not read them yet start again.

// FeedWindow is how many changes of each kind the store keeps for streams and resumptions.
const FeedWindow = 4096

// FeedBytes bounds what the kept changes of each kind hold (as itemBytes counts it).
const FeedBytes = 8 << 20

// ErrFeedGone says that the changes after a sequence number are no longer kept (or that the number is
// not one this store gave): the reader must start again from a snapshot.
var ErrFeedGone = errors.New("the changes since then are no longer kept")

// change is one published change of a name: what was published for it before.
type change struct {
	seq      uint64
	ns, name string
	instance *Item
	template *Item
	// bytes is what the change holds, as the feed counts it.
	bytes int
}

// changeOverhead is what a change holds besides its items.
const changeOverhead = 64

// feed is the ring of a kind's last changes. Guarded by the store's mu.
type feed struct {
	seq  uint64 // the last change's number
	ring []change
	next int // where the next change goes
	size int
	// bytes is what the kept changes hold; maxBytes its bound.
	bytes, maxBytes int
	// notify wakes the kind's list streams at each change recorded: they follow no other.
	notify *notifier
}

func newFeed(window, maxBytes int) *feed {
	return &feed{ring: make([]change, window), maxBytes: maxBytes, notify: newNotifier()}
}

// heldBytes is what an item holds, as the feed counts it.
func heldBytes(it *Item) int {
	switch {
	case it == nil:
		return 0
	case it.bytes == 0: // an item not made by newItem
		return itemBytes(it)
	}
	return it.bytes
}

// record keeps a change of ns/name whose state before was instance and template, and lets the oldest
// changes go while the kept ones hold more than the bound (the newest one is always kept).
func (f *feed) record(ns, name string, instance, template *Item) {
	// Recorded under the store's lock, before what changed is published: a stream woken now reads it
	// once the lock is let go.
	defer f.notify.Notify()
	f.seq++
	if f.size == len(f.ring) {
		f.bytes -= f.ring[f.next].bytes
	}
	c := change{seq: f.seq, ns: ns, name: name, instance: instance, template: template,
		bytes: changeOverhead + len(ns) + len(name) + heldBytes(instance) + heldBytes(template)}
	f.ring[f.next] = c
	f.bytes += c.bytes
	f.next = (f.next + 1) % len(f.ring)
	f.size = min(f.size+1, len(f.ring))
	for f.bytes > f.maxBytes && f.size > 1 {
		oldest := (f.next - f.size + len(f.ring)) % len(f.ring)
		f.bytes -= f.ring[oldest].bytes
		f.ring[oldest] = change{} // what it held is free now
		f.size--
	}
}

// since calls visit for each kept change after seq, oldest first; false when some are no longer kept.
func (f *feed) since(seq uint64, visit func(*change)) bool {
	if seq > f.seq {
		return false
	}
	if f.seq-seq > uint64(f.size) {
		return false
	}
	n := int(f.seq - seq)
	for i := len(f.ring) + f.next - n; i < len(f.ring)+f.next; i++ {
		visit(&f.ring[i%len(f.ring)])
	}
	return true
}

// notifier wakes every waiter at the next change: Wait returns a channel closed by the next Notify.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// Wait returns a channel closed at the next change; take it before reading what changed.
func (n *notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Notify wakes the waiters.
func (n *notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// newEpoch names one run of the store: sequence numbers of another run (another replica, or before a
// restart) are not this run's.
func newEpoch() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// sameItem tells whether two items publish the same: a pod change that changes nothing in a summary
// is not a change.
func sameItem(a, b *Item) bool {
	return a == b || (a != nil && b != nil && reflect.DeepEqual(a.Summary, b.Summary) && slices.Equal(a.Labels, b.Labels) &&
		reflect.DeepEqual(a.MadeBy, b.MadeBy) && slices.Equal(a.Makes, b.Makes))
}

// Epoch names this run of the store, for stream positions.
func (s *Store) Epoch() string { return s.epoch }

// Changed returns a channel closed at the next change the store publishes: of an object of any kind,
// a template or a Ray pod. Take it before reading, then wait on it.
func (s *Store) Changed() <-chan struct{} { return s.notify.Wait() }

// KindChanged returns a channel closed at the next change of what k publishes (a change its feed
// records): what a list stream of k follows. A pod or event that changes no summary does not close it.
// Take it before reading what changed.
func (s *Store) KindChanged(k *ray.Kind) <-chan struct{} { return s.feeds[k].notify.Wait() }

// Change is what a stream learns of one name: what its scopes showed of it before and what they show
// now (nil: nothing), and the number of the name's last change (the feed's position).
type Change struct {
	Before, After *Item
	Seq           uint64
}

// Version is the number of the last change published of k: whatever lists or counts of k show differs
// only when it differs.
func (s *Store) Version(k *ray.Kind) uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.feeds[k].seq
}

// Snapshot returns the items of k visible in scopes (see Items) and the number of the last change they
// include.
func (s *Store) Snapshot(k *ray.Kind, sc Scopes) ([]*Item, uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.itemsLocked(k, sc), s.feeds[k].seq
}

// Matching is q.Select of what Snapshot returns, with the number of the last change it includes: read
// in a kept order, unless templates are merged in.
func (s *Store) Matching(k *ray.Kind, sc Scopes, q *Query) ([]*Item, uint64) {
	s.sortViews(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if sc.Templates.IsEmpty() || len(s.templated[k]) == 0 {
		return s.ordered[k].matching(sc.Instances, q), s.feeds[k].seq
	}
	return q.Select(s.itemsLocked(k, sc)), s.feeds[k].seq
}

// Since returns, for every name of k whose visibility may differ between what the scopes before showed
// after change seq and what the scopes now show at present, what was shown then and what is shown now,
// ordered by the number of each name's last change; and the number of the last change. The names are
// those changed after seq, and, where the scopes differ, every name in a namespace they disagree on. It
// is ErrFeedGone when changes after seq are no longer kept: read a Snapshot instead.
func (s *Store) Since(k *ray.Kind, seq uint64, before, now Scopes) ([]Change, uint64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.feeds[k]
	type key struct{ ns, name string }
	type state struct {
		instance, template *Item
		seq                uint64
	}
	changed := map[key]*state{}
	if !f.since(seq, func(c *change) {
		if st, ok := changed[key{c.ns, c.name}]; ok {
			st.seq = c.seq
			return
		}
		changed[key{c.ns, c.name}] = &state{instance: c.instance, template: c.template, seq: c.seq}
	}) {
		return nil, f.seq, ErrFeedGone
	}
	differs := func(ns string) bool {
		return before.Instances.Contains(ns) != now.Instances.Contains(ns) || before.Templates.Contains(ns) != now.Templates.Contains(ns)
	}
	if !before.equal(now) {
		for _, m := range []namespaced[*Item]{s.instances[k], s.templated[k]} {
			for ns, byName := range m {
				if !differs(ns) {
					continue
				}
				for name := range byName {
					if _, ok := changed[key{ns, name}]; !ok {
						inst, _ := s.instances[k].get(ns, name)
						tpl, _ := s.templated[k].get(ns, name)
						changed[key{ns, name}] = &state{instance: inst, template: tpl, seq: f.seq}
					}
				}
			}
		}
	}
	out := make([]Change, 0, len(changed))
	for kk, st := range changed {
		inst, _ := s.instances[k].get(kk.ns, kk.name)
		tpl, _ := s.templated[k].get(kk.ns, kk.name)
		c := Change{Before: before.visible(kk.ns, st.instance, st.template), After: now.visible(kk.ns, inst, tpl), Seq: st.seq}
		if c.Before != nil || c.After != nil {
			out = append(out, c)
		}
	}
	byName := order(SortByName, false)
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), byName(cmpItem(a), cmpItem(b)))
	})
	return out, f.seq, nil
}

func cmpItem(c Change) *Item {
	if c.After != nil {
		return c.After
	}
	return c.Before
}

// Published returns what is published of ns/name of k: its instance, else its template; nil for none.
func (s *Store) Published(k *ray.Kind, ns, name string) *Item {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if it, ok := s.instances[k].get(ns, name); ok {
		return it
	}
	it, _ := s.templated[k].get(ns, name)
	return it
}
