package history

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/lease"
	"ray-service/internal/ray"
	"ray-service/internal/signing"
)

// Recorder writes the history from what the watch cache receives (it is the cache's cache.Observer).
// Only the leader of a Lease writes; the other replicas drop what they see. A new leader first reads
// what is recorded of the objects not gone, then lists every object once and writes only what differs:
// a handover or a restart duplicates nothing, and loses nothing that is still there to be read.
type Recorder struct {
	Store *Store
	Kinds *ray.Kinds
	// Serves tells the kinds the cluster serves now (the watch cache's): an optional kind without its
	// CRD is not listed. Nil: all.
	Serves func(*ray.Kind) bool
	// Dynamic and Core are the service's own clients: the leader lists the Ray objects with them, and
	// reads how an object ended (events, pods, log tail).
	Dynamic dynamic.Interface
	Core    kubernetes.Interface
	Log     *zap.Logger
	// Signer tells the creators the service signed (the watch cache's summaries say it too) from those
	// anyone could have written: only those are billed (nil: none is).
	Signer *signing.Signer
	Limits ray.EndingLimits
	// Retention bounds the records of ended objects: by age (0: none) and per namespace (0: none).
	MaxAge          time.Duration
	MaxPerNamespace int
	// NamespaceMaxBytes and MaxBytes bound what the records of one namespace and of all take (0: no
	// bound): past them the records of ended objects are removed, oldest end first. Records of objects
	// still there are kept.
	NamespaceMaxBytes, MaxBytes int64
	// MaxPending and MaxPendingBytes bound what waits to be written (0: defaults): past the bytes the
	// changes queued keep only their newest state, without the pods of a deleted object; past the
	// count, the changes of deleted objects queued first are dropped.
	MaxPending      int
	MaxPendingBytes int64
	// Changes, when set, is handed the changes of status each object's next write records, before that
	// write (at least once, as the leader alone writes): the notifications' outbox.
	Changes func(ctx context.Context, changes []StatusChange) error

	leading atomic.Bool
	mu      sync.Mutex
	known   map[string]*known
	pending map[string]*change
	wake    chan struct{}
	once    sync.Once
	// writes counts the records written, for the service's metrics.
	writes atomic.Int64
	// early are the endings read as soon as their objects were seen finished, by UID (mu): a deletion
	// rule with ttlSeconds 0 (KubeRay v1.6) deletes the cluster, or the RayJob, right after it ends, and
	// the writer may come to the change later. leadCtx is the context of this replica's lead (mu).
	early   map[string]*earlyEnding
	leadCtx context.Context
	// pendingBytes is about what pending takes; seq orders the changes queued.
	pendingBytes int64
	seq          uint64
	// dropped counts the changes dropped from a full queue; failures the writes that failed.
	dropped  atomic.Int64
	failures atomic.Int64
	// grown is what was written per namespace since its quota was last enforced (mu).
	grown map[string]int64
	// watched are the objects the watch told of (a version, or their deletion) while this replica lists
	// every object to take the lead (mu; nil otherwise): a page answered before is older than that.
	watched map[string]bool
}

// The defaults of the queue's bounds.
const (
	defaultMaxPending      = 10000
	defaultMaxPendingBytes = 64 << 20
	// quotaEvery is how many bytes written into a namespace make its quota enforced again.
	quotaEvery = 1 << 20
)

// known is what the leader knows it recorded of an object.
type known struct {
	kind            *ray.Kind
	status, reason  string
	generation      int64
	finished, ended bool
	clusters        []string
	// fromStore: known from the database only, not seen since this replica leads.
	fromStore bool
}

// change is what is still to be written of one object.
type change struct {
	kind        *ray.Kind
	record      Record
	transitions []Transition
	// notices are the changes of status that make notifications, handed on before the rest is written
	// (at least once).
	notices    []StatusChange
	readEnding bool
	clusters   []string
	// pods are the pods of its Ray clusters as the cache held them when it went (nil: list them).
	pods []corev1.Pod
	// goneOnly: the object went while no replica wrote; only the time it was found gone is new.
	goneOnly bool
	// dropped counts the transitions dropped before they were written (the first and the last
	// KeptTransitions are kept).
	dropped int64
	seq     uint64
	bytes   int64
}

// earlyEnding is an ending read when its object was seen finished, before its change is written.
type earlyEnding struct {
	done   chan struct{}
	ending *ray.Ending
	err    error
}

// maxEarlyEndings bounds the endings read ahead of the writer at once; past it the writer reads them.
const maxEarlyEndings = 8

// StatusChange is a change of an object's status that makes a notification: its type (Kind.Notice),
// the object, when, its labels and what the notification carries.
type StatusChange struct {
	Type                       string
	Kind, Namespace, Name, UID string
	Time                       time.Time
	Labels                     map[string]string
	Data                       map[string]any
}

// noticeOf is the notification of k's change of status from prev to next ("" for none).
func noticeOf(k *ray.Kind, prev, next string) string {
	if k.Notice == nil {
		return ""
	}
	return k.Notice(prev, next)
}

// size is about what a change takes in memory.
func (c *change) size() int64 {
	n := int64(512 + len(c.record.Spec) + len(c.record.Message) + transitionBytes*len(c.transitions))
	for i := range c.pods {
		n += int64(c.pods[i].Size())
	}
	return n
}

// slimPod keeps of a pod what its ending is read from: its name, labels, containers' names and status.
func slimPod(p *corev1.Pod) corev1.Pod {
	out := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels,
		CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp}, Status: p.Status}
	for _, c := range p.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name})
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name})
	}
	out.Status.ContainerStatuses = slimStatuses(out.Status.ContainerStatuses)
	out.Status.InitContainerStatuses = slimStatuses(out.Status.InitContainerStatuses)
	return out
}

func slimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		for _, st := range []*corev1.ContainerState{&cs.State, &cs.LastTerminationState} {
			if st.Terminated != nil {
				t := *st.Terminated
				t.Message = clip(t.Message, MaxMessageBytes)
				st.Terminated = &t
			}
			if st.Waiting != nil {
				w := *st.Waiting
				w.Message = clip(w.Message, MaxMessageBytes)
				st.Waiting = &w
			}
		}
		out[i] = cs
	}
	return out
}

func (r *Recorder) init() {
	r.once.Do(func() {
		r.known, r.pending, r.wake, r.grown = map[string]*known{}, map[string]*change{}, make(chan struct{}, 1), map[string]int64{}
		r.early = map[string]*earlyEnding{}
	})
}

// Leading tells whether this replica writes the history now.
func (r *Recorder) Leading() bool { return r.leading.Load() }

// Writes is how many record writes this replica made.
func (r *Recorder) Writes() int64 { return r.writes.Load() }

// Dropped is how many changes a full queue dropped.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// Failures is how many writes of an object's changes failed (each is tried again a second later).
func (r *Recorder) Failures() int64 { return r.failures.Load() }

// Pending is how many objects have changes queued to be written, besides those being written now.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// Observe records a version of an object (cache.Observer); only what changed is queued.
func (r *Recorder) Observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary) {
	if !r.leading.Load() {
		return
	}
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.watchedLocked(string(o.GetUID()))
	r.observeLocked(k, o, s, time.Now().UTC())
}

// watchedLocked notes that the watch told of uid while this replica lists every object.
func (r *Recorder) watchedLocked(uid string) {
	if r.watched != nil && uid != "" {
		r.watched[uid] = true
	}
}

func (r *Recorder) observeLocked(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	uid := string(o.GetUID())
	if uid == "" {
		return
	}
	kn := r.known[uid]
	fresh := kn == nil
	if fresh {
		kn = &known{kind: k}
		r.known[uid] = kn
	}
	kn.fromStore = false
	reason, message := endReason(o, s)
	rec := Record{UID: uid, Kind: k.Kind, Namespace: o.GetNamespace(), Name: o.GetName(), Creator: s.Creator,
		Status: s.Status, Reason: reason, Message: message, CreatedAt: o.GetCreationTimestamp().UTC()}
	c := &change{kind: k}
	changed := fresh || reason != kn.reason
	if fresh || o.GetGeneration() != kn.generation {
		rec.Spec, rec.Cut = boundManifest(manifest(k, o))
		rec.Generation = o.GetGeneration()
		kn.generation, changed = o.GetGeneration(), true
	}
	if s.Status != kn.status && s.Status != "" {
		c.transitions = append(c.transitions, Transition{Status: s.Status, At: now})
		changed = true
		if typ := noticeOf(k, kn.status, s.Status); typ != "" {
			c.notices = append(c.notices, StatusChange{Type: typ, Kind: k.Kind, Namespace: rec.Namespace, Name: rec.Name, UID: uid,
				Time: now, Labels: o.GetLabels(), Data: map[string]any{"status": s.Status, "previousStatus": kn.status,
					"reason": reason, "message": message, "creator": s.Creator}})
		}
	}
	kn.status, kn.reason, kn.clusters = s.Status, reason, k.Clusters(s)
	if k.Finished(s.Status) && !kn.finished {
		end := now
		if s.EndTime != nil {
			end = s.EndTime.UTC()
		}
		rec.FinishedAt, kn.finished, changed = &end, true, true
		if !kn.ended {
			c.readEnding, kn.ended = true, true
			r.readEarlyLocked(k, uid, o.GetNamespace(), o.GetName(), kn.clusters)
		}
	}
	if !changed {
		return
	}
	c.record, c.clusters = rec, kn.clusters
	r.queueLocked(c)
}

// readEarlyLocked starts reading the ending of an object seen finished, for the writer to take (see
// takeEnding); at most maxEarlyEndings at once, the others are read by the writer.
func (r *Recorder) readEarlyLocked(k *ray.Kind, uid, ns, name string, clusters []string) {
	if r.leadCtx == nil || r.Core == nil || len(r.early) >= maxEarlyEndings || r.early[uid] != nil {
		return
	}
	e := &earlyEnding{done: make(chan struct{})}
	r.early[uid] = e
	ctx := r.leadCtx
	go func() {
		defer close(e.done)
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		e.ending, e.err = k8s.ReadEnding(rctx, r.Core, k, ns, name, clusters, nil, r.Limits)
	}()
}

// readEnding is the ending of c's object: the one read when it was seen finished, when that read
// succeeded, else read now.
func (r *Recorder) readEnding(ctx context.Context, c *change) (*ray.Ending, error) {
	r.mu.Lock()
	early := r.early[c.record.UID]
	delete(r.early, c.record.UID)
	r.mu.Unlock()
	if early != nil {
		select {
		case <-early.done:
			if early.err == nil {
				return early.ending, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return k8s.ReadEnding(rctx, r.Core, c.kind, c.record.Namespace, c.record.Name, c.clusters, c.pods, r.Limits)
}

// Gone records that an object left the cache: deleted (cache.Observer). What explains how it ended is
// read now, unless it was read when it finished.
func (r *Recorder) Gone(k *ray.Kind, e *cache.Entry, pods []corev1.Pod) {
	if !r.leading.Load() {
		return
	}
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.goneLocked(k, e, pods, time.Now().UTC())
}

func (r *Recorder) goneLocked(k *ray.Kind, e *cache.Entry, pods []corev1.Pod, now time.Time) {
	uid := string(e.UID)
	s := e.Summary()
	if uid == "" || s == nil {
		return
	}
	r.endLocked(k, uid, e.Namespace, e.Name, e.CreationTimestamp.UTC(), s, pods, now)
}

// endLocked records that the object uid, ns/name of k, made at created and last summarized as s, was
// deleted at now, with the pods of its Ray clusters.
func (r *Recorder) endLocked(k *ray.Kind, uid, ns, name string, created time.Time, s *ray.Summary, pods []corev1.Pod, now time.Time) {
	r.watchedLocked(uid)
	kn := r.known[uid]
	if kn == nil {
		kn = &known{kind: k, status: s.Status, clusters: k.Clusters(s)}
	}
	delete(r.known, uid)
	rec := Record{UID: uid, Kind: k.Kind, Namespace: ns, Name: name, Creator: s.Creator, Status: kn.status,
		Reason: kn.reason, CreatedAt: created, DeletedAt: &now}
	if rec.Status == "" {
		rec.Status = s.Status
	}
	slim := make([]corev1.Pod, len(pods))
	for i := range pods {
		slim[i] = slimPod(&pods[i])
	}
	r.queueLocked(&change{kind: k, record: rec, readEnding: !kn.ended, clusters: kn.clusters, pods: slim})
}

// queueLocked merges c into what is still to be written of its object.
func (r *Recorder) queueLocked(c *change) {
	uid := c.record.UID
	if p := r.pending[uid]; p != nil {
		if c.record.Spec == "" {
			c.record.Spec, c.record.Generation, c.record.Cut = p.record.Spec, p.record.Generation, p.record.Cut
		}
		if c.record.FinishedAt == nil {
			c.record.FinishedAt = p.record.FinishedAt
		}
		if c.record.Message == "" && c.record.Reason == p.record.Reason {
			c.record.Message = p.record.Message
		}
		c.transitions = append(p.transitions, c.transitions...)
		c.notices = append(p.notices, c.notices...)
		c.dropped += p.dropped
		c.readEnding = c.readEnding || p.readEnding
		if c.pods == nil {
			c.pods = p.pods
		}
		c.goneOnly = c.goneOnly && p.goneOnly
		r.pendingBytes -= p.bytes
	}
	if over := len(c.transitions) - 2*KeptTransitions; over > 0 {
		c.transitions = append(c.transitions[:KeptTransitions:KeptTransitions], c.transitions[KeptTransitions+over:]...)
		c.dropped += int64(over)
	}
	r.seq++
	c.seq, c.bytes = r.seq, c.size()
	r.pending[uid] = c
	r.pendingBytes += c.bytes
	r.boundQueueLocked(c)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// boundQueueLocked keeps what waits to be written within its bounds (c is the change just queued).
// Past the bytes, the changes keep their newest state only: no pods of a deleted object (its ending
// lists them, if any are left) and, of a manifest, what a record keeps of one past MaxManifestBytes.
// Past the count, the changes of deleted objects queued first are dropped; the newest state of an
// object still there is never dropped (a new leader would read it again, not this one).
func (r *Recorder) boundQueueLocked(c *change) {
	maxBytes, maxCount := r.MaxPendingBytes, r.MaxPending
	if maxBytes <= 0 {
		maxBytes = defaultMaxPendingBytes
	}
	if maxCount <= 0 {
		maxCount = defaultMaxPending
	}
	slim := func(p *change) {
		p.pods = nil
		if len(p.record.Spec) > 4<<10 && p.record.Cut == nil {
			p.record.Spec, p.record.Cut = cutManifest(p.record.Spec, "the history's write queue was full")
		}
		r.pendingBytes -= p.bytes
		p.bytes = p.size()
		r.pendingBytes += p.bytes
	}
	if r.pendingBytes > maxBytes {
		slim(c)
	}
	if r.pendingBytes > maxBytes {
		for _, p := range r.pending {
			slim(p)
		}
		r.Log.Warn("history: the write queue is full: the changes queued keep their newest state only",
			zap.Int("changes", len(r.pending)), zap.Int64("bytes", r.pendingBytes))
	}
	for len(r.pending) > maxCount {
		var oldest *change
		for _, p := range r.pending {
			if p.record.DeletedAt != nil && (oldest == nil || p.seq < oldest.seq) {
				oldest = p
			}
		}
		if oldest == nil {
			return
		}
		delete(r.pending, oldest.record.UID)
		delete(r.early, oldest.record.UID)
		r.pendingBytes -= oldest.bytes
		if r.dropped.Add(1)%1000 == 1 {
			r.Log.Warn("history: the write queue is full: changes of deleted objects dropped", zap.Int64("dropped", r.dropped.Load()))
		}
	}
}

// endReason is why the object is in its state: its status's own reason and message (a RayJob's), else
// what its health says.
func endReason(o *unstructured.Unstructured, s *ray.Summary) (string, string) {
	reason, _, _ := unstructured.NestedString(o.Object, "status", "reason")
	message, _, _ := unstructured.NestedString(o.Object, "status", "message")
	if reason == "" && message == "" {
		return s.Health.Reason, s.Health.Message
	}
	return reason, message
}

// manifest is what would create the object again: its kind, name, namespace, labels, annotations
// (without kubectl's copy of the last applied one) and spec; no status and no managedFields.
func manifest(k *ray.Kind, o *unstructured.Unstructured) string {
	meta := map[string]any{"name": o.GetName(), "namespace": o.GetNamespace()}
	if l := o.GetLabels(); len(l) > 0 {
		meta["labels"] = l
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		kept := map[string]string{}
		for key, v := range a {
			if key != "kubectl.kubernetes.io/last-applied-configuration" {
				kept[key] = v
			}
		}
		if len(kept) > 0 {
			meta["annotations"] = kept
		}
	}
	m := map[string]any{"apiVersion": k.APIVersion(), "kind": k.Kind, "metadata": meta}
	if spec, ok := o.Object["spec"]; ok {
		m["spec"] = spec
	}
	b, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}

// Start starts the recorder's loops, which write while this replica leads (Lead, Follow) until ctx
// ends.
func (r *Recorder) Start(ctx context.Context) {
	r.init()
	go r.write(ctx)
	go r.prune(ctx)
}

// Hooks are the recorder's part in the service's Lease: it writes the history while this replica
// holds it.
func (r *Recorder) Hooks() lease.Hooks {
	return lease.Hooks{Name: "history", Lead: r.lead, Follow: r.follow}
}

// lead takes over: what is recorded of the objects not gone is compared with every object there now.
func (r *Recorder) lead(ctx context.Context) {
	r.Log.Info("history: this replica writes the history")
	var live map[string]Known
	if wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if live, err = r.Store.Live(ctx); err != nil {
			r.Log.Warn("history: reading what is recorded", zap.Error(err))
		}
		return err == nil, nil
	}) != nil {
		return // the lead ended first
	}
	r.mu.Lock()
	r.leadCtx = ctx
	r.watched = map[string]bool{}
	for uid, k := range live {
		kind := r.Kinds.ByKind(k.Kind)
		if kind == nil {
			continue
		}
		r.known[uid] = &known{kind: kind, status: k.Status, generation: k.Generation, finished: k.Finished,
			ended: k.HasEnding, fromStore: true}
	}
	r.mu.Unlock()
	r.leading.Store(true)
	defer func() {
		r.mu.Lock()
		r.watched = nil
		r.mu.Unlock()
	}()
	if err := cache.CatchUp(ctx, r.Dynamic, r.Kinds, r.Serves, r.Signer, r.observe); err != nil {
		if ctx.Err() == nil {
			r.Log.Error("history: listing to catch up", zap.Error(err))
		}
		return
	}
	// What was recorded and is there no more went while no replica wrote.
	now := time.Now().UTC()
	r.mu.Lock()
	for uid, kn := range r.known {
		// Of a kind not served, nothing was listed: what is recorded of it is left as it is.
		if kn.fromStore && (r.Serves == nil || r.Serves(kn.kind)) {
			delete(r.known, uid)
			k := live[uid]
			r.queueLocked(&change{kind: kn.kind, record: Record{UID: uid, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
				Status: k.Status, DeletedAt: &now}, goneOnly: true})
		}
	}
	r.mu.Unlock()
}

// observe observes an object listed to catch up, unless the watch told of it (a change or its
// deletion) since the listing began: its state is newer than the page's.
func (r *Recorder) observe(k *ray.Kind, o *unstructured.Unstructured, s *ray.Summary, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.watched[string(o.GetUID())] {
		r.observeLocked(k, o, s, now)
	}
}

// follow stops writing: another replica leads now, or this one stops.
func (r *Recorder) follow() {
	r.leading.Store(false)
	r.mu.Lock()
	r.known, r.pending, r.early, r.leadCtx = map[string]*known{}, map[string]*change{}, map[string]*earlyEnding{}, nil
	r.mu.Unlock()
	r.Log.Info("history: this replica no longer writes the history")
}

// write writes what is queued, one object at a time; what fails is tried again a second later.
func (r *Recorder) write(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		r.mu.Lock()
		batch := r.pending
		r.pending, r.pendingBytes = map[string]*change{}, 0
		r.mu.Unlock()
		failed := false
		for uid, c := range batch {
			if !r.leading.Load() {
				// Another replica writes now: what is left is its to write, from what it reads.
				break
			}
			if err := r.writeOne(ctx, c); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.failures.Add(1)
				r.Log.Warn("history: writing a record", zap.String("uid", uid), zap.Error(err))
				r.mu.Lock()
				if r.leading.Load() {
					later := r.pending[uid]
					if later != nil {
						r.pendingBytes -= later.bytes
					}
					r.pending[uid] = c
					r.pendingBytes += c.bytes
					if later != nil {
						r.queueLocked(later)
					} else {
						r.boundQueueLocked(c)
					}
				}
				r.mu.Unlock()
				failed = true
			}
		}
		r.enforceQuotas(ctx, batch)
		if failed {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// enforceQuotas removes the oldest records of ended objects of each namespace the batch wrote into, once
// more than quotaEvery was written there since, past NamespaceMaxBytes; and of all past MaxBytes.
func (r *Recorder) enforceQuotas(ctx context.Context, batch map[string]*change) {
	r.mu.Lock()
	var due []string
	for _, c := range batch {
		r.grown[c.record.Namespace] += c.bytes
		r.grown[""] += c.bytes
	}
	for ns, n := range r.grown {
		if n >= quotaEvery {
			due = append(due, ns)
			delete(r.grown, ns)
		}
	}
	r.mu.Unlock()
	for _, ns := range due {
		limit := r.NamespaceMaxBytes
		if ns == "" {
			limit = r.MaxBytes
		}
		if limit <= 0 {
			continue
		}
		if n, err := r.Store.Shrink(ctx, ns, limit); err != nil {
			r.Log.Warn("history: enforcing its bound in bytes", zap.String("namespace", ns), zap.Error(err))
		} else if n > 0 {
			r.Log.Info("history: records of ended objects removed past the bound in bytes", zap.String("namespace", ns),
				zap.Int64("records", n), zap.Int64("bound", limit))
		}
	}
}

func (r *Recorder) writeOne(ctx context.Context, c *change) error {
	if c.goneOnly {
		return r.Store.MarkDeleted(ctx, c.record.UID, *c.record.DeletedAt)
	}
	if len(c.notices) > 0 && r.Changes != nil {
		if err := r.Changes(ctx, c.notices); err != nil {
			return err
		}
		c.notices = nil
	}
	if err := r.Store.Put(ctx, c.record); err != nil {
		return err
	}
	r.writes.Add(1)
	if len(c.transitions) > 0 || c.dropped > 0 {
		if err := r.Store.AddTransitions(ctx, c.record.UID, c.transitions, c.dropped); err != nil {
			return err
		}
		// Written: a retry of what follows adds them no more (the count of dropped ones would grow).
		c.transitions, c.dropped = nil, 0
	}
	if c.readEnding {
		e, err := r.readEnding(ctx, c)
		if err != nil {
			return err
		}
		if err := r.Store.PutEnding(ctx, c.record.UID, e, time.Now().UTC()); err != nil {
			return err
		}
		c.readEnding = false
	}
	return nil
}

// shrinkAll enforces the bounds in bytes of every namespace, then of all.
func (r *Recorder) shrinkAll(ctx context.Context) {
	var over []string
	if r.NamespaceMaxBytes > 0 {
		var err error
		if over, err = r.Store.OverQuota(ctx, r.NamespaceMaxBytes); err != nil {
			r.Log.Warn("history: reading what each namespace takes", zap.Error(err))
		}
	}
	for _, ns := range over {
		if _, err := r.Store.Shrink(ctx, ns, r.NamespaceMaxBytes); err != nil {
			r.Log.Warn("history: enforcing its bound in bytes", zap.String("namespace", ns), zap.Error(err))
		}
	}
	if r.MaxBytes > 0 {
		if _, err := r.Store.Shrink(ctx, "", r.MaxBytes); err != nil {
			r.Log.Warn("history: enforcing its bound in bytes", zap.Error(err))
		}
	}
}

// prune enforces the retention while this replica leads, at start and every hour, and refreshes the
// statistics the database plans pages by.
func (r *Recorder) prune(ctx context.Context) {
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		if r.leading.Load() {
			before := time.Unix(0, 0)
			if r.MaxAge > 0 {
				before = time.Now().Add(-r.MaxAge)
			}
			if n, err := r.Store.Prune(ctx, before, r.MaxPerNamespace); err != nil {
				r.Log.Warn("history: enforcing the retention", zap.Error(err))
			} else if n > 0 {
				r.Log.Info("history: records past the retention removed", zap.Int64("records", n))
			}
			r.shrinkAll(ctx)
			if err := r.Store.Optimize(ctx); err != nil {
				r.Log.Warn("history: refreshing the query planner's statistics", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
