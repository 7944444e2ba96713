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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"ray-service/internal/k8s"
)

// Recorder writes the history from what the watch cache receives (it is the cache's k8s.Observer).
// Only the leader of a Lease writes; the other replicas drop what they see. A new leader first reads
// what is recorded of the objects not gone, then lists every object once and writes only what differs:
// a handover or a restart duplicates nothing, and loses nothing that is still there to be read.
type Recorder struct {
	Store *Store
	Kinds *k8s.Kinds
	// Dynamic and Core are the service's own clients: the leader lists the Ray objects with them, and
	// reads how an object ended (events, pods, log tail).
	Dynamic dynamic.Interface
	Core    kubernetes.Interface
	Log     *zap.Logger
	Limits  k8s.EndingLimits
	// Retention bounds the records of ended objects: by age (0: none) and per namespace (0: none).
	MaxAge          time.Duration
	MaxPerNamespace int

	leading atomic.Bool
	mu      sync.Mutex
	known   map[string]*known
	pending map[string]*change
	wake    chan struct{}
	once    sync.Once
	// writes counts the records written, for the service's metrics.
	writes atomic.Int64
}

// known is what the leader knows it recorded of an object.
type known struct {
	kind            *k8s.Kind
	status, reason  string
	generation      int64
	finished, ended bool
	clusters        []string
	// fromStore: known from the database only, not seen since this replica leads.
	fromStore bool
}

// change is what is still to be written of one object.
type change struct {
	kind        *k8s.Kind
	record      Record
	transitions []Transition
	readEnding  bool
	clusters    []string
	// pods are the pods of its Ray clusters as the cache held them when it went (nil: list them).
	pods []corev1.Pod
	// goneOnly: the object went while no replica wrote; only the time it was found gone is new.
	goneOnly bool
}

func (r *Recorder) init() {
	r.once.Do(func() {
		r.known, r.pending, r.wake = map[string]*known{}, map[string]*change{}, make(chan struct{}, 1)
	})
}

// Leading tells whether this replica writes the history now.
func (r *Recorder) Leading() bool { return r.leading.Load() }

// Writes is how many record writes this replica made.
func (r *Recorder) Writes() int64 { return r.writes.Load() }

// Observe records a version of an object (k8s.Observer); only what changed is queued.
func (r *Recorder) Observe(k *k8s.Kind, o *unstructured.Unstructured, s *k8s.Summary) {
	if !r.leading.Load() {
		return
	}
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeLocked(k, o, s, time.Now().UTC())
}

func (r *Recorder) observeLocked(k *k8s.Kind, o *unstructured.Unstructured, s *k8s.Summary, now time.Time) {
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
		rec.Spec, rec.Generation = manifest(k, o), o.GetGeneration()
		kn.generation, changed = o.GetGeneration(), true
	}
	if s.Status != kn.status && s.Status != "" {
		c.transitions = append(c.transitions, Transition{Status: s.Status, At: now})
		changed = true
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
		}
	}
	if !changed {
		return
	}
	c.record, c.clusters = rec, kn.clusters
	r.queueLocked(c)
}

// Gone records that an object left the cache: deleted (k8s.Observer). What explains how it ended is
// read now, unless it was read when it finished.
func (r *Recorder) Gone(k *k8s.Kind, e *k8s.Entry, pods []corev1.Pod) {
	if !r.leading.Load() {
		return
	}
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.goneLocked(k, e, pods, time.Now().UTC())
}

func (r *Recorder) goneLocked(k *k8s.Kind, e *k8s.Entry, pods []corev1.Pod, now time.Time) {
	uid := string(e.UID)
	s := e.Summary()
	if uid == "" || s == nil {
		return
	}
	kn := r.known[uid]
	if kn == nil {
		kn = &known{kind: k, status: s.Status, clusters: k.Clusters(s)}
	}
	delete(r.known, uid)
	rec := Record{UID: uid, Kind: k.Kind, Namespace: e.Namespace, Name: e.Name, Creator: s.Creator, Status: kn.status,
		Reason: kn.reason, CreatedAt: e.CreationTimestamp.UTC(), DeletedAt: &now}
	if rec.Status == "" {
		rec.Status = s.Status
	}
	if pods == nil {
		pods = []corev1.Pod{}
	}
	r.queueLocked(&change{kind: k, record: rec, readEnding: !kn.ended, clusters: kn.clusters, pods: pods})
}

// queueLocked merges c into what is still to be written of its object.
func (r *Recorder) queueLocked(c *change) {
	uid := c.record.UID
	if p := r.pending[uid]; p != nil {
		if c.record.Spec == "" {
			c.record.Spec, c.record.Generation = p.record.Spec, p.record.Generation
		}
		if c.record.FinishedAt == nil {
			c.record.FinishedAt = p.record.FinishedAt
		}
		if c.record.Message == "" && c.record.Reason == p.record.Reason {
			c.record.Message = p.record.Message
		}
		c.transitions = append(p.transitions, c.transitions...)
		c.readEnding = c.readEnding || p.readEnding
		if c.pods == nil {
			c.pods = p.pods
		}
		c.goneOnly = c.goneOnly && p.goneOnly
	}
	r.pending[uid] = c
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// endReason is why the object is in its state: its status's own reason and message (a RayJob's), else
// what its health says.
func endReason(o *unstructured.Unstructured, s *k8s.Summary) (string, string) {
	reason, _, _ := unstructured.NestedString(o.Object, "status", "reason")
	message, _, _ := unstructured.NestedString(o.Object, "status", "message")
	if reason == "" && message == "" {
		return s.Health.Reason, s.Health.Message
	}
	return reason, message
}

// manifest is what would create the object again: its kind, name, namespace, labels, annotations
// (without kubectl's copy of the last applied one) and spec; no status and no managedFields.
func manifest(k *k8s.Kind, o *unstructured.Unstructured) string {
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

// Election is the Lease the replicas compete for: its holder writes the history.
type Election struct {
	Lock                                      resourcelock.Interface
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Run writes the history until ctx ends, while this replica holds the Lease.
func (r *Recorder) Run(ctx context.Context, el Election) {
	r.init()
	go r.write(ctx)
	go r.prune(ctx)
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: el.Lock, LeaseDuration: el.LeaseDuration, RenewDeadline: el.RenewDeadline, RetryPeriod: el.RetryPeriod,
			ReleaseOnCancel: true, Name: "history",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: r.lead,
				OnStoppedLeading: r.follow,
			},
		})
		if err != nil {
			r.Log.Error("history: leader election", zap.Error(err))
			return
		}
		le.Run(ctx)
	}
}

// lead takes over: what is recorded of the objects not gone is compared with every object there now.
func (r *Recorder) lead(ctx context.Context) {
	r.Log.Info("history: this replica writes the history")
	var live map[string]Known
	for {
		var err error
		if live, err = r.Store.Live(ctx); err == nil {
			break
		}
		r.Log.Warn("history: reading what is recorded", zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	r.mu.Lock()
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
	for _, k := range r.Kinds.All() {
		if err := r.catchUp(ctx, k); err != nil {
			if ctx.Err() == nil {
				r.Log.Error("history: listing to catch up", zap.String("kind", k.Kind), zap.Error(err))
			}
			return
		}
	}
	// What was recorded and is there no more went while no replica wrote.
	now := time.Now().UTC()
	r.mu.Lock()
	for uid, kn := range r.known {
		if kn.fromStore {
			delete(r.known, uid)
			k := live[uid]
			r.queueLocked(&change{kind: kn.kind, record: Record{UID: uid, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name,
				Status: k.Status, DeletedAt: &now}, goneOnly: true})
		}
	}
	r.mu.Unlock()
}

// catchUp lists every object of a kind and observes each.
func (r *Recorder) catchUp(ctx context.Context, k *k8s.Kind) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := r.Dynamic.Resource(k.GVR()).List(ctx, opts)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		for i := range list.Items {
			s := k.Summarize(&list.Items[i])
			r.mu.Lock()
			r.observeLocked(k, &list.Items[i], &s, now)
			r.mu.Unlock()
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// follow stops writing: another replica leads now, or this one stops.
func (r *Recorder) follow() {
	r.leading.Store(false)
	r.mu.Lock()
	r.known, r.pending = map[string]*known{}, map[string]*change{}
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
		r.pending = map[string]*change{}
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
				r.Log.Warn("history: writing a record", zap.String("uid", uid), zap.Error(err))
				r.mu.Lock()
				if r.leading.Load() {
					if later := r.pending[uid]; later != nil {
						r.pending[uid] = c
						r.queueLocked(later)
					} else {
						r.pending[uid] = c
					}
				}
				r.mu.Unlock()
				failed = true
			}
		}
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

func (r *Recorder) writeOne(ctx context.Context, c *change) error {
	if c.goneOnly {
		return r.Store.MarkDeleted(ctx, c.record.UID, *c.record.DeletedAt)
	}
	if err := r.Store.Put(ctx, c.record); err != nil {
		return err
	}
	r.writes.Add(1)
	for _, t := range c.transitions {
		if err := r.Store.AddTransition(ctx, c.record.UID, t); err != nil {
			return err
		}
	}
	if c.readEnding {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		e, err := c.kind.ReadEnding(rctx, r.Core, c.record.Namespace, c.record.Name, c.clusters, c.pods, r.Limits)
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
