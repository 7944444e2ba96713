package stream

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// SyncedData is the data of a SYNCED event: how many items the snapshot sent.
type SyncedData struct {
	Total int `json:"total" example:"3"`
}

// ResyncData is the data of a RESYNC event: why the stream starts again from a snapshot.
type ResyncData struct {
	Reason string `json:"reason" example:"the stream fell behind the changes the service keeps"`
}

// List streams the items of kind k that q matches, in ns ("": across namespaces), in the scopes the
// caller may see now (Rules.Visible, asked by the handler, whose refusal is answered before the stream
// begins); with templates, its templates too. It resumes after the request's Last-Event-ID where it can.
func (e *Engine) List(rq Request, k *ray.Kind, q *cache.Query, ns string, templates bool, scopes cache.Scopes) error {
	l := &listStream{e: e, k: k, q: q, ns: ns, templates: templates, token: rq.Token, scopes: scopes,
		epoch: e.Store.Epoch(), last: rq.R.Header.Get("Last-Event-ID")}
	return e.serve(rq, l, 0)
}

// listStream is the state of one list stream: where it is in the kind's change feed, with which rights.
type listStream struct {
	e         *Engine
	k         *ray.Kind
	q         *cache.Query
	ns        string
	templates bool
	token     string
	w         *writer
	scopes    cache.Scopes
	epoch     string
	seq       uint64
	// last is the Last-Event-ID the client resumes after, until the stream's first read of the feed.
	last string
	// rights remembers, until the next check of the rights, whether the caller may list what a health
	// reason was read from in a namespace (see access.Asked.Shown).
	rights *access.Asked
}

// start sends a snapshot, unless the stream resumes where the client's last event id says.
func (l *listStream) start(ctx context.Context, w *writer) {
	l.w, l.rights = w, l.e.Rules.Ask(ctx, l.token, l.k)
	if l.last == "" {
		l.snapshot("")
	} else if reason := l.resume(l.last); reason != "" {
		l.last = ""
		l.snapshot(reason)
	}
}

func (l *listStream) send() bool             { return l.catchUp() }
func (l *listStream) woken() <-chan struct{} { return nil }

// changed is the kind's: a list stream shows nothing else, and a pod or an event that changes no
// summary (most of them) would wake every list stream for nothing.
func (l *listStream) changed() <-chan struct{} { return l.e.Store.KindChanged(l.k) }
func (l *listStream) stop()                    {}

// recheck moves the stream to the caller's rights now; a caller who may list the kind nowhere any more
// is told the items it saw are DELETED before the stream ends.
func (l *listStream) recheck(ctx context.Context) error {
	defer l.rights.Forget() // asked again at the next reason to show
	next, err := l.e.Rules.Visible(ctx, l.token, l.k, l.ns, l.templates)
	if err == nil && l.ns == "" && next.Instances.IsEmpty() && !l.scopes.Instances.IsEmpty() {
		err = access.Forbidden(l.k, "list", "")
	}
	switch {
	case revoked(err):
		l.rescope(cache.Scopes{})
	case err == nil:
		l.rescope(next)
	}
	return err
}

// id is the id of the event of change seq: the store's run, the position and the rights.
func (l *listStream) id(seq uint64) string {
	return l.epoch + "." + strconv.FormatUint(seq, 10) + "." + scopeHash(l.scopes)
}

// resume takes up the stream after the event id last, and says why it cannot ("" when it can). Whether
// the feed still holds the changes since is known at the first catchUp, which reads them.
func (l *listStream) resume(last string) string {
	parts := strings.Split(last, ".")
	seq, err := strconv.ParseUint(parts[min(1, len(parts)-1)], 10, 64)
	switch {
	case len(parts) != 3 || err != nil:
		return fmt.Sprintf("Last-Event-ID %q is no id this service gave", last)
	case parts[0] != l.epoch:
		return fmt.Sprintf("Last-Event-ID %q is from another run of the service", last)
	case parts[2] != scopeHash(l.scopes):
		return fmt.Sprintf("Last-Event-ID %q was given for other rights of the caller", last)
	}
	l.seq = seq
	return ""
}

// snapshot sends every item visible and matching, then SYNCED. With a reason, RESYNC comes first.
func (l *listStream) snapshot(reason string) {
	if reason != "" {
		l.w.event(EventResync, resetID, ResyncData{Reason: reason})
	}
	matched, seq := l.e.Store.Matching(l.k, l.scopes, l.q)
	for _, it := range matched {
		l.item(EventAdded, noID, it)
	}
	l.w.event(EventSynced, l.id(seq), SyncedData{Total: len(matched)})
	l.seq = seq
}

// catchUp sends what changed since the stream's position, and tells whether it sent anything. A
// stream that resumes and whose position the feed no longer holds starts again from a snapshot.
func (l *listStream) catchUp() bool {
	changes, seq, err := l.e.Store.Since(l.k, l.seq, l.scopes, l.scopes)
	resumed := l.last
	l.last = ""
	switch {
	case resumed != "" && err != nil:
		l.snapshot(fmt.Sprintf("Last-Event-ID %q: %v", resumed, err))
		return true
	case errors.Is(err, cache.ErrFeedGone):
		l.snapshot("the stream fell behind the changes the service keeps")
		return true
	}
	l.seq = seq
	return l.sendChanges(changes, true) > 0
}

// rescope moves the stream to new rights: what they show differently is sent without ids but the last
// (a client that reconnects in between starts again from a snapshot).
func (l *listStream) rescope(next cache.Scopes) {
	if next.Instances.Equal(l.scopes.Instances) && next.Templates.Equal(l.scopes.Templates) {
		return
	}
	changes, seq, err := l.e.Store.Since(l.k, l.seq, l.scopes, next)
	l.scopes = next
	if err != nil {
		l.snapshot("the caller's rights changed")
		return
	}
	l.seq = seq
	l.sendChanges(changes, false)
}

// sendChanges sends the events of changes, and how many it sent. Without ids, only the last event has
// one.
func (l *listStream) sendChanges(changes []cache.Change, ids bool) int {
	type out struct {
		name string
		seq  uint64
		it   *cache.Item
	}
	var events []out
	for _, c := range changes {
		before := c.Before != nil && l.q.Matches(c.Before)
		after := c.After != nil && l.q.Matches(c.After)
		switch {
		case before && after && c.Before != c.After:
			events = append(events, out{EventModified, c.Seq, c.After})
		case before && !after:
			events = append(events, out{EventDeleted, c.Seq, c.Before})
		case after && !before:
			events = append(events, out{EventAdded, c.Seq, c.After})
		}
	}
	for i, e := range events {
		id := noID
		if ids {
			id = l.id(e.seq)
		} else if i == len(events)-1 {
			id = l.id(l.seq)
		}
		l.item(e.name, id, e.it)
	}
	return len(events)
}

// item sends an event of an item: its summary as the cache encoded it once for every page and stream
// (see cache.Item.JSON), unless the caller is not shown its health reason or the kind completes its
// summaries at answer time (Kind.AtAnswer: a RayCronJob's next runs, from the time of the event).
func (l *listStream) item(name, id string, it *cache.Item) {
	if shown := atAnswer(l.k, l.rights.Shown(&it.Summary), &it.Summary); shown != &it.Summary {
		l.w.event(name, id, shown)
		return
	}
	data, err := it.JSON()
	if err != nil {
		l.w.event(name, id, &it.Summary)
		return
	}
	l.w.raw(name, id, data)
}

// atAnswer is shown, completed by the kind at the time of the answer (Kind.AtAnswer), on a copy where
// shown is the cached summary cached.
func atAnswer(k *ray.Kind, shown, cached *ray.Summary) *ray.Summary {
	if k.AtAnswer == nil {
		return shown
	}
	if shown == cached {
		c := *cached
		shown = &c
	}
	k.AtAnswer(shown, time.Now())
	return shown
}

// scopeHash names scopes in event ids, so that a stream resumed by a caller whose rights changed in
// between starts again from a snapshot.
func scopeHash(sc cache.Scopes) string {
	h := fnv.New32a()
	for _, s := range []auth.Scope{sc.Instances, sc.Templates} {
		switch {
		case s.IsAll():
			h.Write([]byte("*"))
		default:
			h.Write([]byte(strings.Join(s.List(), ",")))
		}
		h.Write([]byte{0})
	}
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}
