package api

import (
	"container/list"
	"sync"
	"time"

	"ray-service/internal/ray"
)

// A console polls the list it shows every few seconds, from every open tab, and most of those polls
// find nothing changed. The pages kept here answer a caller who asks for the same page again with the
// bytes it was given, while the three things a page is made of are as they were: the published objects
// of its kind (the store's version of the kind), where the caller's rights come from (the RoleBindings'
// version, when the service watches them) and the caller's verdicts, which the reviewer keeps for its
// ttl and which a kept page reuses for at most Deps.PageReuse more (at most MaxPageReuse, at most the
// verdicts' ttl). A page is kept per caller (the token's hash), kind, namespace and query string, and the
// kept pages hold at most PageBytes.

// MaxPageReuse is the longest a page answers again while nothing it is made of changed.
const MaxPageReuse = time.Second

// PageBytes bounds what the kept pages hold.
const PageBytes = 8 << 20

type pageKey struct {
	caller    string
	kind      *ray.Kind
	namespace string
	query     string
}

// pageEntry is a kept page and what it was made of.
type pageEntry struct {
	key             pageKey
	objects, rights uint64
	made            time.Time
	body            []byte
}

// pages are the kept pages, the least recently used dropped first.
type pages struct {
	mu       sync.Mutex
	byKey    map[pageKey]*list.Element
	lru      list.List // of *pageEntry, the most recent first
	bytes    int
	maxBytes int
	reuse    time.Duration
}

func newPages(maxBytes int, reuse time.Duration) *pages {
	return &pages{byKey: map[pageKey]*list.Element{}, maxBytes: maxBytes, reuse: reuse}
}

// get returns the page kept for key when it was made from the same versions less than reuse before now.
func (p *pages) get(key pageKey, objects, rights uint64, now time.Time) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.byKey[key]
	if !ok {
		return nil, false
	}
	e := el.Value.(*pageEntry)
	if e.objects != objects || e.rights != rights || now.Sub(e.made) >= p.reuse || now.Before(e.made) {
		p.removeLocked(el)
		return nil, false
	}
	p.lru.MoveToFront(el)
	return e.body, true
}

// put keeps body as the page of key made from those versions at made. The versions must have been read
// before what the page shows was: a change in between then only makes the page miss.
func (p *pages) put(key pageKey, objects, rights uint64, made time.Time, body []byte) {
	if p.reuse <= 0 {
		return
	}
	e := &pageEntry{key: key, objects: objects, rights: rights, made: made, body: body}
	if e.size() > p.maxBytes/16 { // a page this large is rare and would push many out
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if el, ok := p.byKey[key]; ok {
		p.removeLocked(el)
	}
	p.byKey[key] = p.lru.PushFront(e)
	p.bytes += e.size()
	for p.bytes > p.maxBytes {
		p.removeLocked(p.lru.Back())
	}
}

func (p *pages) removeLocked(el *list.Element) {
	e := p.lru.Remove(el).(*pageEntry)
	delete(p.byKey, e.key)
	p.bytes -= e.size()
}

// size is what a kept page holds.
func (e *pageEntry) size() int {
	return len(e.body) + len(e.key.caller) + len(e.key.namespace) + len(e.key.query) + 128
}
