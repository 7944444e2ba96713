// Package audit is the trail of the writes made through ray-service: each is recorded as a Kubernetes
// Event on the object (a deleted one's stays in its namespace), written with the service's own identity and
// naming the caller and the request, so that `kubectl get events` shows it too; and read back across the
// namespaces a caller may list events in.
package audit

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Labels and annotations of an audit event.
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
	// SignatureKey holds the service's signature of the event: anyone allowed to create events can
	// make one that looks like the trail's, but only the service can sign it.
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
)

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

// Signer signs and checks the trail's events with the service's key (the template key: each replica
// has the same).
type Signer struct{ Key []byte }

func (s Signer) signature(e *corev1.Event) string {
	mac := hmac.New(sha256.New, s.Key)
	for _, part := range []string{"ray-audit/v1", e.Namespace, e.Reason, e.Annotations[ActionKey], e.Annotations[KindKey],
		e.Annotations[NameKey], e.Annotations[UserKey], e.Annotations[RequestKey], e.Annotations[TimeKey], e.Message} {
		mac.Write([]byte(strconv.Itoa(len(part)) + ":" + part))
	}
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

func (s Signer) trusted(e *corev1.Event) bool {
	return len(s.Key) > 0 && hmac.Equal([]byte(e.Annotations[SignatureKey]), []byte(s.signature(e)))
}

// Trail writes the trail's events and reads them back, with the service's own identity.
type Trail struct {
	Signer   Signer
	Events   corev1client.EventsGetter
	Log      *zap.Logger
	Instance string // this replica, for the event's reportingInstance
	Timeout  time.Duration
}

// Record writes w's event. It never fails the write it records: a failure is logged.
func (r *Trail) Record(ctx context.Context, w Write) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.Timeout, 5*time.Second))
	defer cancel()
	now := metav1.NewTime(time.Now())
	what := fmt.Sprintf("%s %s/%s", w.Kind, w.Namespace, w.Name)
	// A deleted object's event is in its namespace still, naming the object gone.
	involved := corev1.ObjectReference{APIVersion: "ray.io/v1", Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID}
	msg := fmt.Sprintf("%s %s by %s (request %s)", strings.ToLower(w.Action), what, w.User, w.RequestID)
	if w.Detail != "" {
		msg += ": " + w.Detail
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// Named as client-go's event recorder names events: the object and the time.
			Name: fmt.Sprintf("%s.%x", w.Name, now.UnixNano()), Namespace: w.Namespace,
			Labels: map[string]string{Label: "true"},
			Annotations: map[string]string{UserKey: w.User, RequestKey: w.RequestID, ActionKey: w.Action, KindKey: w.Kind, NameKey: w.Name,
				TimeKey: now.UTC().Format(time.RFC3339Nano)},
		},
		InvolvedObject: involved, Reason: ReasonPrefix + w.Action, Message: msg, Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: Component}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: Component, ReportingInstance: r.Instance,
	}
	ev.Annotations[SignatureKey] = r.Signer.signature(ev)
	if _, err := r.Events.Events(w.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.Log.Warn("recording a write in the audit trail", zap.String("action", w.Action), zap.String("object", what),
			zap.String("user", w.User), zap.Error(err))
	}
}

// Entry is one write of the trail, as the audit route shows it.
type Entry struct {
	Time      time.Time `json:"time"`
	Action    string    `json:"action" example:"Stop"`
	Kind      string    `json:"kind" example:"RayCluster"`
	Namespace string    `json:"namespace" example:"default"`
	Name      string    `json:"name" example:"raycluster-demo"`
	User      string    `json:"user" example:"admin"`
	RequestID string    `json:"requestID"`
	Message   string    `json:"message"`
}

// List reads the trail's events in namespace ("" for every namespace), newest first. Events the
// service did not sign are left out, whatever they say.
func (r *Trail) List(ctx context.Context, namespace string) ([]Entry, error) {
	list, err := r.Events.Events(namespace).List(ctx, metav1.ListOptions{LabelSelector: Label + "=true", ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(list.Items))
	for _, e := range list.Items {
		if !strings.HasPrefix(e.Reason, ReasonPrefix) || !r.Signer.trusted(&e) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.Annotations[TimeKey])
		if err != nil {
			continue
		}
		out = append(out, Entry{Time: at, Action: e.Annotations[ActionKey], Namespace: e.Namespace,
			Kind: e.Annotations[KindKey], Name: e.Annotations[NameKey], User: e.Annotations[UserKey],
			RequestID: e.Annotations[RequestKey], Message: e.Message})
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		return cmp.Or(b.Time.Compare(a.Time), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}
