// Package audit is the trail of the writes made through ray-service. Each write is an entry of an
// append-only store of the service's own (the history database), chained to the entry before it by a
// keyed hash, so that an entry changed, removed or slipped in afterwards is found by Verify. Each entry
// is mirrored as a Kubernetes Event on the object (a deleted one's stays in its namespace), signed and
// written with the service's identity, so that `kubectl get events` shows it too; the mirror is only a
// view: deleting its events, or copying them, changes nothing of the trail.
package audit

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Labels and annotations of a mirror event.
const (
	// Label marks the events of the trail, so they are listed by a label selector.
	Label = "ray.openfuyao.com/audit"
	// UserKey, RequestKey and ActionKey annotate an event with the caller, the request id and the action.
	UserKey    = "ray.openfuyao.com/user"
	RequestKey = "ray.openfuyao.com/request-id"
	ActionKey  = "ray.openfuyao.com/action"
	// KindKey and NameKey name the object written; TimeKey is when, to the nanosecond (an event's own
	// times are to the second).
	KindKey = "ray.openfuyao.com/kind"
	NameKey = "ray.openfuyao.com/name"
	TimeKey = "ray.openfuyao.com/time"
	// SeqKey is the entry's sequence number in the trail.
	SeqKey = "ray.openfuyao.com/audit-seq"
	// SignatureKey holds the service's signature of the event: anyone allowed to create events can
	// make one that looks like the trail's, but only the service can sign it. It covers the event's
	// name and the object's UID too, so that a copy under another name is no signed event.
	SignatureKey = "ray.openfuyao.com/audit-signature"
	// ReasonPrefix starts every audit event's reason: RayServiceCreate, RayServiceStop, ...
	ReasonPrefix = "RayService"
	// Component is the event's source.
	Component = "ray-service"
)

// Actions recorded.
const (
	Create  = "Create"
	Replace = "Replace"
	Delete  = "Delete"
	Start   = "Start"
	Stop    = "Stop"
	Scale   = "Scale"
	// Run is a run made now by an object that makes runs (a RayCronJob's RayJob).
	Run = "Run"
)

// MinKeyBytes is the shortest audit key taken.
const MinKeyBytes = 32

// Write is one write made through the service.
type Write struct {
	Action string
	// Kind, Namespace, Name and UID name the object written ("" UID when unknown).
	Kind, Namespace, Name string
	UID                   types.UID
	User, RequestID       string
	// Detail is added to the message (e.g. the scale asked for).
	Detail string
}

// Entry is one write of the trail, as the store keeps it and the audit route shows it.
type Entry struct {
	// Seq is the entry's place in the trail, from 1, without gaps.
	Seq       int64     `json:"seq" example:"42"`
	Time      time.Time `json:"time"`
	Action    string    `json:"action" example:"Stop"`
	Kind      string    `json:"kind" example:"RayCluster"`
	Namespace string    `json:"namespace" example:"default"`
	Name      string    `json:"name" example:"raycluster-demo"`
	UID       string    `json:"uid,omitempty"`
	User      string    `json:"user" example:"admin"`
	RequestID string    `json:"requestID"`
	Message   string    `json:"message"`
}

// Link is an entry with the hashes that chain it: the hash of the entry before (Prev, "" for the
// first) and its own.
type Link struct {
	Entry
	Prev, Hash string
}

// Query selects a page of the trail, newest first.
type Query struct {
	// Namespaces limits the entries to these namespaces (nil: every namespace).
	Namespaces     []string
	Page, PageSize int
}

// Store is where the trail is kept (history.Store).
type Store interface {
	// Append gives e the sequence number after the last entry's and stores it with the hash seal
	// computes of it and the last entry's hash, in one transaction that no other append of any
	// replica interleaves with. It returns e as stored.
	Append(ctx context.Context, e Entry, seal func(prev string, e Entry) string) (Entry, error)
	// Entries returns the page q asks for and how many entries match in all.
	Entries(ctx context.Context, q Query) ([]Entry, int, error)
	// Namespaces returns the namespaces the trail has entries of.
	Namespaces(ctx context.Context) ([]string, error)
	// Walk calls fn with each entry in sequence order, as stored, then returns the head: the last
	// sequence number and hash recorded by the appends (0 and "" before the first).
	Walk(ctx context.Context, fn func(Link) error) (seq int64, hash string, err error)
}

// Key signs the mirror events and chains the entries. It is the service's audit key, of its own
// (not the templates' key): every replica has the same.
type Key []byte

// NewKey checks a key's length.
func NewKey(b []byte) (Key, error) {
	if len(b) < MinKeyBytes {
		return nil, fmt.Errorf("the audit key has %d bytes: want at least %d", len(b), MinKeyBytes)
	}
	return Key(b), nil
}

func (k Key) mac(domain string, parts ...string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(domain))
	for _, p := range parts {
		m.Write([]byte(strconv.Itoa(len(p)) + ":" + p))
	}
	return m.Sum(nil)
}

// Seal is an entry's hash in the chain: a MAC with the audit key of the previous entry's hash and
// every field of the entry. Without the key, nobody can make a chain that verifies.
func (k Key) Seal(prev string, e Entry) string {
	return hex.EncodeToString(k.mac("ray-audit-chain/v1", prev, strconv.FormatInt(e.Seq, 10),
		strconv.FormatInt(e.Time.UnixNano(), 10), e.Action, e.Kind, e.Namespace, e.Name, e.UID, e.User, e.RequestID, e.Message))
}

func (k Key) signature(e *corev1.Event) string {
	return base64.RawStdEncoding.EncodeToString(k.mac("ray-audit/v2", e.Name, e.Namespace, e.Reason, string(e.InvolvedObject.UID),
		e.Annotations[ActionKey], e.Annotations[KindKey], e.Annotations[NameKey], e.Annotations[UserKey],
		e.Annotations[RequestKey], e.Annotations[TimeKey], e.Annotations[SeqKey], e.Message))
}

// Trusted tells whether a mirror event is as the service wrote it, under its name.
func (k Key) Trusted(e *corev1.Event) bool {
	return len(k) > 0 && hmac.Equal([]byte(e.Annotations[SignatureKey]), []byte(k.signature(e)))
}

// mirrorsInFlight bounds the mirror events being written at once; past it a mirror event is not
// written (the entry is in the store all the same), so that a slow apiserver never holds the
// service's memory.
const mirrorsInFlight = 64

// Trail appends the writes to the store and mirrors them as events, with the service's own identity.
type Trail struct {
	Key Key
	// Store keeps the trail; nil: the trail is off (writes are mirrored only, nothing is listed).
	Store    Store
	Events   corev1client.EventsGetter
	Log      *zap.Logger
	Instance string // this replica, for the event's reportingInstance
	Timeout  time.Duration

	once     sync.Once
	mirrors  chan struct{}
	reads    atomic.Int64
	failures atomic.Int64
	wg       sync.WaitGroup
}

// ErrNoHead says the store's head, which every append moves, is gone: the trail was changed outside
// the service, and no append starts a new chain.
var ErrNoHead = errors.New("the audit trail's head row is missing: the trail was changed outside the service")

// ErrOff says the trail has no store.
var ErrOff = errors.New("the audit trail is off: it is kept in the history database, and the service runs without one (history-dsn)")

// Reads is how many pages of the trail were read from the store.
func (r *Trail) Reads() int64 { return r.reads.Load() }

// Failures is how many writes could not be appended to the store (each is logged in full).
func (r *Trail) Failures() int64 { return r.failures.Load() }

// Record appends w to the store, waiting for it, then mirrors it as an event in the background. It
// never fails the write it records: a failure is logged with the whole entry and counted.
func (r *Trail) Record(ctx context.Context, w Write) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.Timeout, 5*time.Second))
	defer cancel()
	msg := fmt.Sprintf("%s %s %s/%s by %s (request %s)", strings.ToLower(w.Action), w.Kind, w.Namespace, w.Name, w.User, w.RequestID)
	if w.Detail != "" {
		msg += ": " + w.Detail
	}
	e := Entry{Time: time.Now().UTC(), Action: w.Action, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: string(w.UID),
		User: w.User, RequestID: w.RequestID, Message: msg}
	if r.Store != nil {
		stored, err := r.Store.Append(ctx, e, r.Key.Seal)
		if err != nil {
			r.failures.Add(1)
			r.Log.Error("appending a write to the audit trail: it is recorded in this log only", zap.String("action", e.Action),
				zap.String("kind", e.Kind), zap.String("object", e.Namespace+"/"+e.Name), zap.String("uid", e.UID),
				zap.String("user", e.User), zap.String("requestID", e.RequestID), zap.Time("time", e.Time),
				zap.String("message", e.Message), zap.Error(err))
		} else {
			e = stored
		}
	}
	r.mirror(ctx, e)
}

// mirror writes e's event in the background, bounded.
func (r *Trail) mirror(ctx context.Context, e Entry) {
	r.once.Do(func() { r.mirrors = make(chan struct{}, mirrorsInFlight) })
	select {
	case r.mirrors <- struct{}{}:
	default:
		r.Log.Warn("too many audit events being written: this entry is not mirrored as an event", zap.Int64("seq", e.Seq),
			zap.String("object", e.Namespace+"/"+e.Name))
		return
	}
	r.wg.Go(func() {
		defer func() { <-r.mirrors }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.Timeout, 5*time.Second))
		defer cancel()
		ev := r.event(e)
		if _, err := r.Events.Events(e.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			r.Log.Warn("mirroring an audit entry as an event", zap.Int64("seq", e.Seq), zap.String("action", e.Action),
				zap.String("object", e.Kind+" "+e.Namespace+"/"+e.Name), zap.Error(err))
		}
	})
}

// Wait waits for the mirror events being written.
func (r *Trail) Wait() { r.wg.Wait() }

// event is e's mirror event, signed.
func (r *Trail) event(e Entry) *corev1.Event {
	now := metav1.NewTime(e.Time)
	seq := ""
	if e.Seq > 0 {
		seq = strconv.FormatInt(e.Seq, 10)
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name: EventName(e.Name, e.Time), Namespace: e.Namespace,
			Labels: map[string]string{Label: "true"},
			Annotations: map[string]string{UserKey: e.User, RequestKey: e.RequestID, ActionKey: e.Action, KindKey: e.Kind, NameKey: e.Name,
				TimeKey: e.Time.UTC().Format(time.RFC3339Nano), SeqKey: seq},
		},
		// A deleted object's event is in its namespace still, naming the object gone.
		InvolvedObject: corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, UID: types.UID(e.UID)},
		Reason:         ReasonPrefix + e.Action, Message: e.Message, Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: Component}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: Component, ReportingInstance: r.Instance,
	}
	ev.Annotations[SignatureKey] = r.Key.signature(ev)
	return ev
}

// maxNameLength is the longest name of an object, an event's included.
const maxNameLength = 253

// EventName names an object's event as client-go's recorder does, <name>.<time in hex>, within the
// 253 characters a name may have: a longer object name is cut and ends in a hash of the whole name,
// so that two long names that share their start still have events of their own.
func EventName(name string, at time.Time) string {
	suffix := fmt.Sprintf(".%x", at.UnixNano())
	if len(name)+len(suffix) <= maxNameLength {
		return name + suffix
	}
	sum := sha256.Sum256([]byte(name))
	tag := "-" + hex.EncodeToString(sum[:4])
	// What is kept of the name ends in a letter or digit, as each part of a name must.
	head := strings.TrimRight(name[:maxNameLength-len(suffix)-len(tag)], ".-")
	return head + tag + suffix
}

// List returns the page q asks for of the trail, and how many entries match in all.
func (r *Trail) List(ctx context.Context, q Query) ([]Entry, int, error) {
	if r.Store == nil {
		return nil, 0, ErrOff
	}
	r.reads.Add(1)
	return r.Store.Entries(ctx, q)
}

// Namespaces returns the namespaces the trail has entries of.
func (r *Trail) Namespaces(ctx context.Context) ([]string, error) {
	if r.Store == nil {
		return nil, ErrOff
	}
	return r.Store.Namespaces(ctx)
}

// Verification is what a check of the chain found.
type Verification struct {
	// Intact is true when every entry is as appended, none is missing and none was added.
	Intact bool `json:"intact"`
	// Entries is how many entries were checked; Head is the last sequence number the appends recorded.
	Entries int64 `json:"entries" example:"1200"`
	Head    int64 `json:"head" example:"1200"`
	// BrokenAt is the first sequence number where the chain breaks (0 when intact, or when the head
	// itself is gone); Problem says how.
	BrokenAt int64  `json:"brokenAt,omitempty" example:"42"`
	Problem  string `json:"problem,omitempty" example:"entry 42 is not as it was appended"`
}

// Verify walks the whole chain and reports the first place it breaks: an entry changed (its hash is
// not the one its content and the previous hash give), an entry missing (a gap in the sequence, or a
// link to a hash that is not the previous entry's), the last ones missing (the head names a later
// entry).
func (r *Trail) Verify(ctx context.Context) (Verification, error) {
	if r.Store == nil {
		return Verification{}, ErrOff
	}
	return Check(ctx, r.Store, r.Key)
}

// Check is Verify of a store with a key.
func Check(ctx context.Context, s Store, k Key) (Verification, error) {
	var v Verification
	var last int64
	var lastHash string
	broken := func(at int64, format string, args ...any) {
		if v.BrokenAt == 0 {
			v.BrokenAt, v.Problem = at, fmt.Sprintf(format, args...)
		}
	}
	head, headHash, err := s.Walk(ctx, func(l Link) error {
		v.Entries++
		switch {
		case l.Seq != last+1:
			broken(last+1, "entry %d is missing: the next stored is %d", last+1, l.Seq)
		case l.Prev != lastHash:
			broken(l.Seq, "entry %d does not follow entry %d: an entry was removed or replaced", l.Seq, last)
		case !hmac.Equal([]byte(l.Hash), []byte(k.Seal(l.Prev, l.Entry))):
			broken(l.Seq, "entry %d is not as it was appended", l.Seq)
		}
		last, lastHash = l.Seq, l.Hash
		return nil
	})
	switch {
	case errors.Is(err, ErrNoHead):
		return Verification{Problem: err.Error()}, nil
	case err != nil:
		return Verification{}, err
	}
	v.Head = head
	switch {
	case head > last:
		broken(last+1, "entries %d to %d are missing: the last appended is %d", last+1, head, head)
	case head < last:
		broken(head+1, "entries after %d were added outside the service", head)
	case headHash != lastHash:
		broken(last, "entry %d is not the one last appended", last)
	}
	v.Intact = v.BrokenAt == 0
	return v, nil
}
