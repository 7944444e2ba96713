package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	"ray-service/internal/access"
	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/ray"
)

// Object streams one object of kind k, opened as the summary the handler read of it (sent while the
// watch cache does not hold the object yet). The request's Last-Event-ID, the time of the newest event
// the client was sent, has it send only events from then on.
func (e *Engine) Object(rq Request, k *ray.Kind, ns, name string, opened ray.Summary) error {
	o := &objectStream{e: e, k: k, ns: ns, name: name, token: rq.Token, opened: opened, seen: map[string]bool{}}
	if id, err := strconv.ParseInt(rq.R.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		o.cursor = id
	}
	return e.serve(rq, o, 0)
}

// objectStream is the state of one object stream: what it last sent.
type objectStream struct {
	e        *Engine
	k        *ray.Kind
	ns, name string
	token    string
	w        *writer
	synced   bool
	// opened is the summary read at the stream's start, sent when the cache does not hold the object yet.
	opened  ray.Summary
	item    *cache.Item
	present bool
	last    ray.Summary
	// pods are the pods last sent, while the caller may list pods (podsAllowed).
	pods        []byte
	podsAllowed bool
	// events holds the namespace's events while the caller may list them; seen are those sent, cursor
	// the time of the newest sent.
	events NamespaceEvents
	primed bool
	seen   map[string]bool
	cursor int64
}

func (o *objectStream) id() string { return strconv.FormatInt(o.cursor, 10) }

// start asks what the caller may be shown besides the object: its pods, its events.
func (o *objectStream) start(ctx context.Context, w *writer) {
	o.w = w
	o.checkPods(ctx)
	o.followEvents(ctx)
}

// send sends what changed of the object, its pods and its events; the first time, the whole state and
// SYNCED.
func (o *objectStream) send() bool {
	o.update(!o.synced)
	if !o.synced {
		o.w.event(EventSynced, o.id(), SyncedData{Total: 1})
		o.synced = true
	}
	return false
}

// woken is closed at the next event of the namespace, while the caller may be shown them.
func (o *objectStream) changed() <-chan struct{} { return o.e.Store.Changed() }

func (o *objectStream) woken() <-chan struct{} {
	if o.events == nil {
		return nil
	}
	return o.events.Changed()
}

// recheck ends the stream of a caller who may no longer get the object, and asks again whether it
// may be shown the pods and the events.
func (o *objectStream) recheck(ctx context.Context) error {
	allowed, err := o.e.Authz.Allowed(ctx, o.token, auth.Attributes{Verb: "get", Group: ray.RayGroupVersion.Group, Resource: o.k.Resource, Namespace: o.ns, Name: o.name})
	switch {
	case err == nil && !allowed:
		return access.Forbidden(o.k, "get", o.ns)
	case revoked(err):
		return err
	}
	o.checkPods(ctx)
	o.followEvents(ctx)
	return err
}

func (o *objectStream) stop() { o.stopEvents() }

// followEvents holds the namespace's events while the caller may list them, and lets them go when it
// may no longer. Asked again when the rights cannot be checked, it keeps what it has.
func (o *objectStream) followEvents(ctx context.Context) {
	if o.e.Events == nil {
		return
	}
	allowed, err := o.e.Authz.Allowed(ctx, o.token, auth.Attributes{Verb: "list", Resource: "events", Namespace: o.ns})
	switch {
	case err != nil && !revoked(err):
		return
	case !allowed || err != nil:
		o.stopEvents()
		return
	case o.events != nil:
		return
	}
	o.events = o.e.Events(o.ns)
	// The first state shows the recent events: wait briefly for their first read.
	wait, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	toolscache.WaitForCacheSync(wait.Done(), o.events.Synced)
}

// shown is sum as the caller may see it: a health reason read from pods or events it may not list in
// the namespace is withheld, as in the detail.
func (o *objectStream) shown(sum *ray.Summary) *ray.Summary {
	on := sum.Health.SeenOn()
	if on == "" || (on == ray.SeenOnPods && o.podsAllowed) || (on == ray.SeenOnEvents && o.events != nil) {
		return atAnswer(o.k, sum, sum)
	}
	c := *sum
	c.Health = c.Health.Withheld()
	return atAnswer(o.k, &c, sum)
}

// checkPods asks whether the caller may list pods in the namespace, as the pods route does: PODS are
// sent only while it may. When the rights cannot be checked, it keeps what it had (none at first).
func (o *objectStream) checkPods(ctx context.Context) {
	allowed, err := o.e.Authz.Allowed(ctx, o.token, auth.Attributes{Verb: "list", Resource: "pods", Namespace: o.ns})
	switch {
	case err != nil && !revoked(err):
	case !allowed || err != nil:
		o.podsAllowed, o.pods = false, nil
	default:
		o.podsAllowed = true
	}
}

func (o *objectStream) stopEvents() {
	if o.events != nil {
		o.events.Release()
		o.events = nil
	}
}

// update sends what changed of the object since the last update.
func (o *objectStream) update(first bool) {
	it := o.e.Store.Published(o.k, o.ns, o.name)
	var sum *ray.Summary
	switch {
	case it != nil:
		sum = &it.Summary
	case first:
		sum = &o.opened
	}
	switch {
	case sum == nil && o.present:
		o.w.event(EventDeleted, o.id(), o.shown(&o.last))
		o.present, o.item = false, nil
		return
	case sum == nil:
		return
	case !o.present:
		o.w.event(EventAdded, o.id(), o.shown(sum))
	case it != o.item:
		o.w.event(EventModified, o.id(), o.shown(sum))
	}
	o.present, o.item, o.last = true, it, *sum

	pods := []ray.PodInfo{}
	if sum.Type == ray.TypeInstance {
		pods = o.e.Store.CachedPods(o.k, sum)
	}
	if data, err := json.Marshal(pods); err == nil && o.podsAllowed && !bytes.Equal(data, o.pods) {
		o.w.raw(EventPods, o.id(), data)
		o.pods = data
	}
	if o.events != nil && o.events.Synced() && sum.Type == ray.TypeInstance {
		names := make([]string, len(pods))
		for i, p := range pods {
			names[i] = p.Name
		}
		o.sendEvents(o.events.Of(o.k, sum, names))
	}
}

// sendEvents sends the events not sent yet, oldest first; the first time only the recent ones (and only
// those from the cursor on, when the client resumes).
func (o *objectStream) sendEvents(events []ray.EventInfo) {
	var fresh []ray.EventInfo
	current := make(map[string]bool, len(events))
	for _, e := range events {
		key := eventKey(&e)
		current[key] = true
		if !o.seen[key] && (o.primed || e.LastTime.UnixNano() >= o.cursor) {
			fresh = append(fresh, e)
		}
	}
	if !o.primed && len(fresh) > o.e.RecentEvents {
		fresh = fresh[:o.e.RecentEvents]
	}
	o.primed, o.seen = true, current
	slices.Reverse(fresh)
	for i := range fresh {
		o.cursor = max(o.cursor, fresh[i].LastTime.UnixNano())
		o.w.event(EventEvent, o.id(), &fresh[i])
	}
}

// eventKey tells one state of one event from another: a repeated event counts again.
func eventKey(e *ray.EventInfo) string {
	return fmt.Sprintf("%s/%s\x00%s\x00%s\x00%d\x00%d", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message, e.Count, e.LastTime.UnixNano())
}
