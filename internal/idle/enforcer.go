package idle

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"ray-service/internal/audit"
	"ray-service/internal/cache"
	"ray-service/internal/notify"
	"ray-service/internal/ray"
)

// The reasons of the events an idle policy writes on a RayCluster.
const (
	ReasonStopPlanned = "IdleStopPlanned"
	ReasonStopped     = "IdleStopped"
)

// The notifications of idle clusters (notify.Notice.Type).
const (
	NoticeIdle        = "cluster.idle"
	NoticeStopPlanned = "cluster.idle-stop-planned"
	NoticeStopped     = "cluster.stopped-by-policy"
)

// Enforcer carries out the policy: a Warning event and a notification ahead of a stop, then the stop
// through the service's normal stop, made as a dedicated identity of the service, recorded in the audit
// trail as the policy's, with an event and a notification.
type Enforcer struct {
	// Identity is the user the stops are made as (the chart's ServiceAccount for them).
	Identity string
	// Stop stops a RayCluster as Identity and returns its UID.
	StopCluster func(ctx context.Context, ns, name string) (types.UID, error)
	Audit       func(ctx context.Context, w audit.Write)
	Events      corev1client.EventsGetter
	// Notify records a notification for the subscribers (nil: none).
	Notify func(ctx context.Context, n notify.Notice) error
	// Instance names this replica in the events.
	Instance string
	Log      *zap.Logger
}

var _ Enforcement = (*Enforcer)(nil)

// Warn writes the announcement: a Warning event on the cluster and a notification.
func (e *Enforcer) Warn(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error {
	msg := fmt.Sprintf("%s: it will be stopped at %s by the idle policy (%s) unless Ray work runs on it before",
		ray.IdleMessage(i), i.StopAt.UTC().Format(time.RFC3339), i.Policy)
	if err := e.event(ctx, c, "", corev1.EventTypeWarning, ReasonStopPlanned, msg); err != nil {
		return err
	}
	return e.notify(ctx, NoticeStopPlanned, c, "", i)
}

// Stop stops the cluster, then records it: the audit entry, the notification and an event. Once the
// stop is made it is done: what fails to be recorded after is logged (a retry would find it stopped).
func (e *Enforcer) Stop(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error {
	uid, err := e.StopCluster(ctx, c.Namespace, c.Name)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("by the idle policy (%s): %s", i.Policy, ray.IdleMessage(i))
	e.Audit(ctx, audit.Write{Action: audit.Stop, Kind: c.Summary.Kind, Namespace: c.Namespace, Name: c.Name, UID: uid,
		User: e.Identity, RequestID: "idle-policy-" + uuid.NewString(), Detail: detail})
	log := e.Log.With(zap.String("cluster", c.Namespace+"/"+c.Name))
	if err := e.notify(ctx, NoticeStopped, c, uid, i); err != nil {
		log.Error("idle policy: recording the notification of a stop made", zap.Error(err))
	}
	if err := e.event(ctx, c, uid, corev1.EventTypeWarning, ReasonStopped, "stopped "+detail); err != nil {
		log.Warn("idle policy: writing the event of a stop made", zap.Error(err))
	}
	return nil
}

// Idle notifies that a cluster became idle.
func (e *Enforcer) Idle(ctx context.Context, c *cache.IdleCandidate, i *ray.Idle) error {
	return e.notify(ctx, NoticeIdle, c, "", i)
}

func (e *Enforcer) notify(ctx context.Context, typ string, c *cache.IdleCandidate, uid types.UID, i *ray.Idle) error {
	if e.Notify == nil {
		return nil
	}
	data := map[string]any{"idleSince": i.Since, "holding": i.Holding, "message": ray.IdleMessage(i)}
	if i.StopAt != nil {
		data["stopAt"], data["policy"] = *i.StopAt, i.Policy
	}
	labels := make(map[string]string, len(c.Labels))
	for _, l := range c.Labels {
		labels[l.Key] = l.Value
	}
	return e.Notify(ctx, notify.Notice{Type: typ, Kind: c.Summary.Kind, Namespace: c.Namespace, Name: c.Name, UID: string(uid),
		Time: time.Now().UTC(), Labels: labels, Data: data})
}

func (e *Enforcer) event(ctx context.Context, c *cache.IdleCandidate, uid types.UID, typ, reason, msg string) error {
	now := metav1.NewTime(time.Now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: c.Name + ".", Namespace: c.Namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: ray.RayGroupVersion.String(), Kind: c.Summary.Kind, Namespace: c.Namespace,
			Name: c.Name, UID: uid},
		Type: typ, Reason: reason, Message: ray.Clip(msg, 1024),
		Source:         corev1.EventSource{Component: audit.Component},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: audit.Component, ReportingInstance: e.Instance,
	}
	_, err := e.Events.Events(c.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
