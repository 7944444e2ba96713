package api

import (
	"github.com/gin-gonic/gin"

	"ray-service/internal/cache"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// The watch streams are served by the stream engine (internal/stream); their handlers parse the
// request, check what the caller may see and hand it over.

// WatchEvent documents the events of a list stream (one line of data each, as JSON). It is not sent as
// such: its fields are the events' names and their data.
type WatchEvent struct {
	// ADDED, MODIFIED and DELETED carry a list item (DELETED: as it was last shown).
	Item ray.Summary `json:"item"`
	// SYNCED ends a snapshot.
	Synced stream.SyncedData `json:"synced"`
	// RESYNC says the client is to drop what it holds: a snapshot follows.
	Resync stream.ResyncData `json:"resync"`
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
	Synced stream.SyncedData `json:"synced"`
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
	scopes, err := s.rules.Visible(c.Request.Context(), token(c), k, ns, templates)
	if err != nil {
		return nil, err
	}
	return nil, s.streams.List(s.streamRequest(c), k, q, ns, templates, scopes)
}

// watchObject streams one object.
//
//	@Summary		Watch an object
//	@ID				watchObject
//	@Description	Server-Sent Events of one object: first ADDED with its summary, PODS with the Ray pods of its
//	@Description	clusters (when the caller may list pods in the namespace, as the pods route asks), its recent
//	@Description	Kubernetes events as EVENT each (oldest first; when the caller may list events in the namespace),
//	@Description	and SYNCED; then MODIFIED when the summary changes, PODS when a pod does, EVENT for each new or
//	@Description	repeated event, DELETED when the object is gone (ADDED if it comes back). Submitter pods are
//	@Description	listed by the pods route only. The event id is the time of the newest Kubernetes event sent (Unix
//	@Description	nanoseconds): reconnecting with Last-Event-ID sends the state again and only events from then on.
//	@Description	Rights are checked again at the verdict cache's TTL: a caller who may no longer get the object gets
//	@Description	ERROR and the stream ends; one who may no longer list pods or events gets no more PODS or EVENT
//	@Description	(and PODS again, whole, once it may). Heartbeats, bounds and ends as for list streams; the bound on
//	@Description	streams is checked before anything is read.
//	@Tags			streams
//	@Produce		text/event-stream
//	@Produce		json
//	@Security		Bearer
//	@Param			namespace					path		string				true	"namespace"
//	@Param			kind						path		string				true	"kind"	Enums(rayclusters, rayjobs, rayservices, raycronjobs)
//	@Param			name						path		string				true	"name"
//	@Param			Last-Event-ID				header		string				false	"the id of the last event received"
//	@Success		200							{object}	ObjectWatchEvent	"a stream of events; the schema shows each event's data under the event's name"
//	@Failure		400,401,403,404,429,503,504	{object}	Envelope
//	@Router			/rest/ray/v1/namespaces/{namespace}/{kind}/{name}/watch [get]
func (s *Server) watchObject(c *gin.Context) (*response, error) {
	r, cur, err := s.resolve(c)
	if err != nil {
		return nil, err
	}
	return nil, s.streams.Object(s.streamRequest(c), r.kind, c.Param("namespace"), c.Param("name"), r.objects.Summarize(cur))
}

// streamRequest is the request of c as the stream engine takes it.
func (s *Server) streamRequest(c *gin.Context) stream.Request {
	return stream.Request{W: c.Writer, R: c.Request, Token: token(c), Log: logger(c)}
}

// errorData is the data of a stream's ERROR event: the envelope an answer of err has.
func errorData(err error) any {
	env, _ := errorEnvelope(err)
	return env
}
