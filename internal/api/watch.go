package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// NamespaceEvents is one stream's hold on the Kubernetes events of a namespace (cache.NamespaceEvents).
type NamespaceEvents interface {
	// Changed returns a channel closed at the next event added or updated.
	Changed() <-chan struct{}
	// Synced tells whether the namespace's events have been read once.
	Synced() bool
	// Of returns the events of an object, its clusters, the named pods and its submitter, newest first.
	Of(k *ray.Kind, s *ray.Summary, pods []string) []ray.EventInfo
	Release()
}

// SyncedData is the data of a SYNCED event: how many items the snapshot sent.
type SyncedData struct {
	Total int `json:"total" example:"3"`
}

// ResyncData is the data of a RESYNC event: why the stream starts again from a snapshot.
type ResyncData struct {
	Reason string `json:"reason" example:"the stream fell behind the changes the service keeps"`
}

// WatchEvent documents the events of a list stream (one line of data each, as JSON). It is not sent as
// such: its fields are the events' names and their data.
type WatchEvent struct {
	// ADDED, MODIFIED and DELETED carry a list item (DELETED: as it was last shown).
	Item ray.Summary `json:"item"`
	// SYNCED ends a snapshot.
	Synced SyncedData `json:"synced"`
	// RESYNC says the client is to drop what it holds: a snapshot follows.
	Resync ResyncData `json:"resync"`
	// ERROR ends the stream: an envelope as an error answer has.
	Error Envelope `json:"error"`
}

// ObjectWatchEvent documents the events of an object stream.
type ObjectWatchEvent struct {
	// ADDED, MODIFIED and DELETED carry the object's summary.
	Item ray.Summary `json:"item"`
	// PODS carries the Ray pods of the object's clusters, whenever one changes; only to a caller who may
	// list pods in the namespace.
	Pods []ray.PodInfo `json:"pods"`
	// EVENT carries one Kubernetes event of the object, its clusters or their pods.
	Event ray.EventInfo `json:"event"`
	// SYNCED ends the first state sent.
	Synced SyncedData `json:"synced"`
	// ERROR ends the stream.
	Error Envelope `json:"error"`
}

// OverviewLive is the data of an OVERVIEW event.
type OverviewLive struct {
	Counts    *Counts          `json:"counts"`
	Allocated cache.Allocation `json:"allocated"`
	// Pending is what the Ray objects a queue manager has not admitted request (see OverviewData).
	Pending ray.Resources `json:"pending"`
}

// watchAll streams the items of a kind across namespaces.
//
//	@Summary		Watch a list across namespaces
//	@ID				watchObjects
//	@Description	Server-Sent Events (text/event-stream) of the items a list with the same filters shows (sortBy
//	@Description	orders the first snapshot; page and pageSize do not apply). First every matching item as an
//	@Description	ADDED event (without id), then SYNCED ({"total": n}); then ADDED, MODIFIED and DELETED as items
//	@Description	change, start or stop matching the filters, or come into or leave the caller's view (DELETED
//	@Description	carries the item as last shown). Data is one line of JSON: a list item. Every event after the
//	@Description	snapshot has an id; reconnecting with the header Last-Event-ID resumes after it when the service
//	@Description	still holds the changes since (the last 4096 of the kind and at most 8 MiB of them, on the same replica,
//	@Description	for the same rights),
//	@Description	else RESYNC ({"reason"}) comes first, with an empty id, and a fresh snapshot follows: the client
//	@Description	drops what it holds. A client that falls that far behind gets the same. Fed from the watch cache.
//	@Description	The caller's rights are checked again at the verdict cache's TTL (auth-cache-ttl): items of a
//	@Description	namespace no longer allowed are DELETED; a caller allowed nowhere any more gets ERROR (an error
//	@Description	envelope) and the stream ends. A comment line is sent every 15 s when nothing happens. The stream
//	@Description	ends when the client leaves, at the service's shutdown and after max-watch-duration (30 min; an
//	@Description	EventSource reconnects and resumes). At most max-watches-per-caller (16) streams per user (counted by
//	@Description	the user name the apiserver authenticates, whatever the token) and max-watches (2000) in all are open
//	@Description	at once: 429 beyond.
//	@Tags			streams
//	@Produce		text/event-stream
//	@Produce		json
//	@Security		Bearer
//	@Param			kind				path		string		true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			Last-Event-ID		header		string		false	"the id of the last event received, to resume"
//	@Param			search				query		string		false	"case-insensitive substring of the name"
//	@Param			status				query		string		false	"normalized status, comma-separated"
//	@Param			rayVersion			query		string		false	"Ray version, comma-separated"
//	@Param			creator				query		string		false	"creator user name, comma-separated"
//	@Param			health				query		string		false	"health state, comma-separated"
//	@Param			lastOutcome			query		string		false	"kinds that make runs (raycronjobs): status of the newest run that ended, comma-separated (Succeeded, Failed, none)"
//	@Param			idle				query		bool		false	"true: only objects whose Ray cluster is idle (see idle in the summary); false: only those whose cluster is not"
//	@Param			type				query		string		false	"instance or template"	Enums(instance, template)
//	@Param			sortBy				query		string		false	"order of the snapshot"	Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order				query		string		false	"order of the snapshot"	Enums(asc, desc)							default(desc)
//	@Param			labelSelector		query		string		false	"Kubernetes label selector"
//	@Success		200					{object}	WatchEvent	"a stream of events; the schema shows each event's data under the event's name"
//	@Failure		400,401,404,429,503	{object}	Envelope
//	@Router			/rest/ray/v1/{kind}/watch [get]
func (s *Server) watchAll(c *gin.Context) (*response, error) { return s.watchList(c) }

// watchList streams the items of a kind in one namespace.
//
//	@Summary		Watch a list in a namespace
//	@ID				watchNamespacedObjects
//	@Description	As the stream across namespaces, for one namespace: 403 when the caller may not list the kind
//	@Description	there; a caller whose right is revoked while the stream lives gets ERROR and the stream ends. An
//	@Description	object named "watch" is read with the list of its namespace, not with this path.
//	@Tags			streams
//	@Produce		text/event-stream
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace				path		string		true	"namespace"
//	@Param			kind					path		string		true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			Last-Event-ID			header		string		false	"the id of the last event received, to resume"
//	@Param			search					query		string		false	"case-insensitive substring of the name"
//	@Param			status					query		string		false	"normalized status, comma-separated"
//	@Param			rayVersion				query		string		false	"Ray version, comma-separated"
//	@Param			creator					query		string		false	"creator user name, comma-separated"
//	@Param			health					query		string		false	"health state, comma-separated"
//	@Param			lastOutcome				query		string		false	"kinds that make runs (raycronjobs): status of the newest run that ended, comma-separated (Succeeded, Failed, none)"
//	@Param			idle					query		bool		false	"true: only objects whose Ray cluster is idle (see idle in the summary); false: only those whose cluster is not"
//	@Param			type					query		string		false	"instance or template"	Enums(instance, template)
//	@Param			sortBy					query		string		false	"order of the snapshot"	Enums(name, createdAt, status, rayVersion)	default(createdAt)
//	@Param			order					query		string		false	"order of the snapshot"	Enums(asc, desc)							default(desc)
//	@Param			labelSelector			query		string		false	"Kubernetes label selector"
//	@Success		200						{object}	WatchEvent	"a stream of events; the schema shows each event's data under the event's name"
//	@Failure		400,401,403,404,429,503	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/watch [get]
func (s *Server) watchList(c *gin.Context) (*response, error) {
	k := req(c).kind
	q, err := parseListQuery(c)
	if err != nil {
		return nil, err
	}
	ns := c.Param("namespace")
	templates := q.Type != ray.TypeInstance
	scopes, err := s.visibleScopes(c.Request.Context(), token(c), k, ns, templates)
	if err != nil {
		return nil, err
	}
	l := &listStream{s: s, k: k, q: q, ns: ns, templates: templates, token: token(c), scopes: scopes,
		epoch: s.Store.Epoch(), last: c.GetHeader("Last-Event-ID")}
	return nil, s.serveStream(c, l, 0)
}

// listStream is the state of one list stream: where it is in the kind's change feed, with which rights.
type listStream struct {
	s         *Server
	k         *ray.Kind
	q         *cache.Query
	ns        string
	templates bool
	token     string
	w         *sseWriter
	scopes    cache.Scopes
	epoch     string
	seq       uint64
	// last is the Last-Event-ID the client resumes after, until the stream's first read of the feed.
	last string
	// rights remembers, until the next check of the rights, whether the caller may list what a health
	// reason was read from in a namespace (see rightsAsked.shown).
	rights *rightsAsked
}

// start sends a snapshot, unless the stream resumes where the client's last event id says.
func (l *listStream) start(ctx context.Context, w *sseWriter) {
	l.w, l.rights = w, &rightsAsked{s: l.s, k: l.k, ctx: ctx, token: l.token}
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
func (l *listStream) changed() <-chan struct{} { return l.s.Store.KindChanged(l.k) }
func (l *listStream) stop()                    {}

// recheck moves the stream to the caller's rights now; a caller who may list the kind nowhere any more
// is told the items it saw are DELETED before the stream ends.
func (l *listStream) recheck(ctx context.Context) error {
	defer func() { l.rights.known = nil }() // asked again at the next reason to show
	next, err := l.s.visibleScopes(ctx, l.token, l.k, l.ns, l.templates)
	if err == nil && l.ns == "" && next.Instances.IsEmpty() && !l.scopes.Instances.IsEmpty() {
		err = forbidden(l.k, "list", "")
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
	matched, seq := l.s.Store.Matching(l.k, l.scopes, l.q)
	for _, it := range matched {
		l.item(EventAdded, noID, it)
	}
	l.w.event(EventSynced, l.id(seq), SyncedData{Total: len(matched)})
	l.seq = seq
}

// catchUp sends what changed since the stream's position, and tells whether it sent anything. A
// stream that resumes and whose position the feed no longer holds starts again from a snapshot.
func (l *listStream) catchUp() bool {
	changes, seq, err := l.s.Store.Since(l.k, l.seq, l.scopes, l.scopes)
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
	changes, seq, err := l.s.Store.Since(l.k, l.seq, l.scopes, next)
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
	if shown := atAnswer(l.k, l.rights.shown(&it.Summary), &it.Summary); shown != &it.Summary {
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
