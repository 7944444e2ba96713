package notify

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"ray-service/internal/auth"
)

// Types are the notifications a subscription may ask for.
var Types = []string{
	"job.succeeded", "job.failed", "job.stopped",
	"cluster.failed", "cluster.idle", "cluster.idle-stop-planned", "cluster.stopped-by-policy",
	"service.unhealthy", "service.upgrade-finished",
}

// Subscription asks for a namespace's notifications at a webhook.
type Subscription struct {
	ID        string `json:"id" example:"9b2f3c1e-7d4a-4e0b-9c55-0f1e2d3c4b5a"`
	Namespace string `json:"namespace" example:"team-a"`
	// URL is the webhook's, whole in the create's answer alone; read back, its scheme and host.
	URL string `json:"url" example:"https://hooks.example.com/…"`
	// Events are the notification types wanted (all when empty).
	Events []string `json:"events" example:"job.succeeded,job.failed"`
	// Kinds are the kinds wanted (all when empty).
	Kinds []string `json:"kinds" example:"RayJob"`
	// Selector is a label selector of the objects wanted ("" for all).
	Selector string `json:"selector" example:"team=a"`
	Creator  string `json:"creator" example:"alice"`
	// CreatorGroups are the creator's groups when it subscribed: with Creator, who the deliveries are
	// authorized as (see Rights). Not its token, which is never kept.
	CreatorGroups []string  `json:"-"`
	CreatedAt     time.Time `json:"createdAt"`
	// Secret signs the deliveries (SignatureHeader); it is shown once, in the answer of the create.
	Secret string `json:"secret,omitempty"`
	// Next is the number of the first notice not yet delivered.
	Next int64 `json:"-"`
}

// Check tells what is wrong with the subscription's events, kinds and selector; known are the kinds
// served.
func (s *Subscription) Check(known []string) error {
	for _, e := range s.Events {
		if !slices.Contains(Types, e) {
			return fmt.Errorf("events: %q is not a notification; use %s", e, strings.Join(Types, ", "))
		}
	}
	for _, k := range s.Kinds {
		if !slices.Contains(known, k) {
			return fmt.Errorf("kinds: %q is not a kind; use %s", k, strings.Join(known, ", "))
		}
	}
	if _, err := labels.Parse(s.Selector); err != nil {
		return fmt.Errorf("selector: %w", err)
	}
	return nil
}

// Wants tells whether the subscription asks for n.
func (s *Subscription) Wants(n *Notice) bool {
	if n.Namespace != s.Namespace || len(s.Events) > 0 && !slices.Contains(s.Events, n.Type) ||
		len(s.Kinds) > 0 && !slices.Contains(s.Kinds, n.Kind) {
		return false
	}
	if s.Selector == "" {
		return true
	}
	sel, err := labels.Parse(s.Selector)
	return err == nil && sel.Matches(labels.Set(n.Labels))
}

// The states of a delivery.
const (
	Delivering = "retrying"
	Delivered  = "delivered"
	Failed     = "failed"
)

// Delivery is what became of one notice at one subscription.
type Delivery struct {
	Seq  int64  `json:"seq" example:"42"`
	Type string `json:"type" example:"job.succeeded"`
	Kind string `json:"kind" example:"RayJob"`
	Name string `json:"name" example:"train"`
	// Status is retrying (not delivered yet, tried again), delivered or failed (given up).
	Status    string    `json:"status" enums:"retrying,delivered,failed"`
	Attempts  int       `json:"attempts" example:"1"`
	LastError string    `json:"lastError,omitempty"`
	FirstAt   time.Time `json:"firstAttemptAt"`
	LastAt    time.Time `json:"lastAttemptAt"`
}

// Rights are what reading a namespace's notices of the given kinds needs (each kind's group and
// resource): to create events there (who may tell of the namespace decides what it is told of) and to
// list each kind's objects, whose names, statuses, messages and creators the notices carry.
func Rights(ns string, kinds []auth.Attributes) []auth.Attributes {
	out := make([]auth.Attributes, 0, len(kinds)+1)
	out = append(out, auth.Attributes{Verb: "create", Resource: "events", Namespace: ns})
	for _, k := range kinds {
		out = append(out, auth.Attributes{Verb: "list", Group: k.Group, Resource: k.Resource, Namespace: ns})
	}
	return out
}

// Access tells what an identity may do, asked as the service (auth.Subjects): a delivery is authorized
// as the subscription's creator, whose token is not kept.
type Access interface {
	AllowedAs(ctx context.Context, id auth.Identity, a auth.Attributes) (bool, error)
}
