// Package writes is the one path a write of a Ray object made through the service takes. Like the
// apiserver's generic registry (its store's create: the strategy's BeforeCreate, the storage, AfterCreate,
// the Decorator), every create, replace, start, stop, scale, delete and run goes through the same steps in
// the same order:
//
//  1. prepare: the kind's checks of a manifest, and the caller stamped as the creator of what is created;
//  2. write: the apiserver call, as the caller (internal/k8s);
//  3. record: the write appended to the audit trail, unless nothing was stored (a dry run, a start or a
//     stop that found nothing to do);
//  4. decorate: the answer made of what the write left.
//
// A handler parses a request, calls a Path and encodes what it returns; it neither stamps, nor records,
// nor decorates. The package speaks no HTTP: the answer's shape is the decorator its caller gives.
package writes

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"ray-service/internal/audit"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// Objects are the writes of one kind as one caller makes them (k8s.Objects).
type Objects interface {
	// Create creates obj, and signs the creator it carries; start: a kind that can be made stopped is
	// made running; dryRun: the apiserver validates and nothing is stored.
	Create(ctx context.Context, obj *unstructured.Unstructured, start, dryRun bool) (*k8s.Current, error)
	Replace(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) (*k8s.Current, error)
	Start(ctx context.Context, ns, name string) (*k8s.Current, error)
	Stop(ctx context.Context, ns, name string) (*k8s.Current, error)
	Scale(ctx context.Context, ns, name string, r ray.ScaleRequest) (*k8s.Current, []string, error)
	Delete(ctx context.Context, ns, name string, force bool) (pending bool, err error)
}

// Path is the write path of one request: the kind it writes, its objects as the caller writes them, and
// the hooks around each write.
type Path[D any] struct {
	Kind    *ray.Kind
	Objects Objects
	// Audit records each write that stored something.
	Audit Audit
	// Decorate makes the answer of a write from what it left (the object, or its template), after the
	// write is recorded; action is the audit trail's (audit.Start and so on). Required for every write
	// but a delete.
	Decorate func(action string, cur *k8s.Current) D
}

// step is one write as the path runs it.
type step struct {
	action string
	// prepare checks and stamps what is about to be written; nil: nothing to prepare.
	prepare func(ctx context.Context) error
	write   func(ctx context.Context) (*k8s.Current, error)
	// dryRun: the apiserver validated the write and stored nothing, so nothing is recorded.
	dryRun bool
	// detail is what the audit trail says of the write besides its action.
	detail string
}

// run runs s through the hooks in their order: prepare, write, record, decorate.
func (p *Path[D]) run(ctx context.Context, s step) (D, error) {
	var none D
	if s.prepare != nil {
		if err := s.prepare(ctx); err != nil {
			return none, err
		}
	}
	cur, err := s.write(ctx)
	if err != nil {
		return none, err
	}
	if !s.dryRun && !cur.Unchanged {
		p.Audit.recordCurrent(ctx, s.action, p.Kind, cur, s.detail)
	}
	return p.Decorate(s.action, cur), nil
}

// Create creates obj in ns as the caller, who is stamped as its creator: the kind's checks of a manifest
// sent for creation, then the creator. start: a kind that can be made stopped is made running; dryRun:
// validated, neither stored nor recorded. why is what the audit trail says of the create ("" for one from
// a manifest; a rerun says what of).
func (p *Path[D]) Create(ctx context.Context, obj *unstructured.Unstructured, ns string, start, dryRun bool, why string) (D, error) {
	return p.run(ctx, step{action: audit.Create, dryRun: dryRun, detail: why,
		prepare: func(ctx context.Context) error {
			if err := p.Kind.PrepareCreate(obj, ns); err != nil {
				return err
			}
			return p.stampCreator(ctx, obj)
		},
		write: func(ctx context.Context) (*k8s.Current, error) { return p.Objects.Create(ctx, obj, start, dryRun) }})
}

// Run creates run, a run the service made of an object of its own (a RayCronJob's RayJob), as the
// caller, who is stamped as its creator. of names what it is a run of, for the audit trail.
func (p *Path[D]) Run(ctx context.Context, run *unstructured.Unstructured, of string) (D, error) {
	return p.run(ctx, step{action: audit.Run, detail: "run of " + of,
		prepare: func(ctx context.Context) error { return p.stampCreator(ctx, run) },
		write:   func(ctx context.Context) (*k8s.Current, error) { return p.Objects.Create(ctx, run, true, false) }})
}

// stampCreator records the caller as the creator of obj, about to be created; the write signs it. Who
// the caller is must be known: an object is not made without its creator.
func (p *Path[D]) stampCreator(ctx context.Context, obj *unstructured.Unstructured) error {
	user, err := p.Audit.Caller.Name(ctx)
	if err != nil {
		return err
	}
	ray.SetCreator(obj, user)
	return nil
}

// Replace replaces ns/name with obj, a full manifest, as the caller; dryRun: validated, neither stored
// nor recorded.
func (p *Path[D]) Replace(ctx context.Context, obj *unstructured.Unstructured, ns, name string, dryRun bool) (D, error) {
	return p.run(ctx, step{action: audit.Replace, dryRun: dryRun,
		prepare: func(context.Context) error { return p.Kind.PrepareUpdate(obj, ns, name) },
		write:   func(ctx context.Context) (*k8s.Current, error) { return p.Objects.Replace(ctx, obj, dryRun) }})
}

// Start starts ns/name as the caller; a start that finds it running is not recorded.
func (p *Path[D]) Start(ctx context.Context, ns, name string) (D, error) {
	return p.run(ctx, step{action: audit.Start,
		write: func(ctx context.Context) (*k8s.Current, error) { return p.Objects.Start(ctx, ns, name) }})
}

// Stop stops ns/name as the caller; a stop that finds it stopped is not recorded.
func (p *Path[D]) Stop(ctx context.Context, ns, name string) (D, error) {
	return p.run(ctx, step{action: audit.Stop,
		write: func(ctx context.Context) (*k8s.Current, error) { return p.Objects.Stop(ctx, ns, name) }})
}

// Scale sets a worker group's figures of ns/name as the caller. The warnings are what the caller should
// know about the change.
func (p *Path[D]) Scale(ctx context.Context, ns, name string, r ray.ScaleRequest) (D, []string, error) {
	var warnings []string
	d, err := p.run(ctx, step{action: audit.Scale, detail: scaleDetail(r),
		write: func(ctx context.Context) (cur *k8s.Current, err error) {
			cur, warnings, err = p.Objects.Scale(ctx, ns, name, r)
			return cur, err
		}})
	return d, warnings, err
}

// Delete deletes ns/name as the caller; force: even while it runs. pending: it is being deleted, its
// finalizers not yet done.
func (p *Path[D]) Delete(ctx context.Context, ns, name string, force bool) (pending bool, err error) {
	if pending, err = p.Objects.Delete(ctx, ns, name, force); err != nil {
		return false, err
	}
	p.Audit.Record(ctx, audit.Delete, p.Kind.Kind, ns, name, "", forcedDetail(force))
	return pending, nil
}

// Item names one object of a batch.
type Item struct {
	Namespace, Name string
}

// DeleteEach deletes each of items as the caller, each as Delete would and at most parallel at once.
// Every item answers for itself: errs[i] is what deleting items[i] failed with, nil where it was
// deleted; pending[i] that it is still being deleted (as Delete says). Once all are done, those deleted
// are recorded, in the order of items.
func (p *Path[D]) DeleteEach(ctx context.Context, items []Item, force bool, parallel int) (pending []bool, errs []error) {
	errs = make([]error, len(items))
	pending = make([]bool, len(items))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, it := range items {
		g.Go(func() error {
			pending[i], errs[i] = p.Objects.Delete(ctx, it.Namespace, it.Name, force)
			return nil
		})
	}
	_ = g.Wait() // every item answers for itself
	detail := strings.TrimSuffix("in a batch, "+forcedDetail(force), ", ")
	for i, it := range items {
		if errs[i] == nil {
			p.Audit.Record(ctx, audit.Delete, p.Kind.Kind, it.Namespace, it.Name, "", detail)
		}
	}
	return pending, errs
}

func forcedDetail(force bool) string {
	if force {
		return "forced"
	}
	return ""
}

func scaleDetail(r ray.ScaleRequest) string {
	var d strings.Builder
	d.WriteString("group " + r.Group)
	for _, f := range []struct {
		name string
		v    *int64
	}{{"replicas", r.Replicas}, {"minReplicas", r.MinReplicas}, {"maxReplicas", r.MaxReplicas}} {
		if f.v != nil {
			fmt.Fprintf(&d, ", %s %d", f.name, *f.v)
		}
	}
	return d.String()
}

// recordCurrent records a write of what cur is after it: the instance, else the template.
func (a Audit) recordCurrent(ctx context.Context, action string, k *ray.Kind, cur *k8s.Current, detail string) {
	switch {
	case cur.Instance != nil:
		a.Record(ctx, action, k.Kind, cur.Instance.GetNamespace(), cur.Instance.GetName(), cur.Instance.GetUID(), detail)
	case cur.Template != nil:
		a.Record(ctx, action, k.Kind, cur.Template.ConfigMap.Namespace, cur.Template.Manifest.GetName(), "", detail)
	}
}
