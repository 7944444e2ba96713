package writes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"ray-service/internal/audit"
	"ray-service/internal/k8s"
	"ray-service/internal/ray"
)

// steps is what a test saw happen, in order, across the fakes and the hooks.
type steps struct {
	mu   sync.Mutex
	seen []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen = append(s.seen, step)
}

// objects writes as a fake apiserver: each write is seen, and answers cur (or err).
type objects struct {
	*steps
	cur      *k8s.Current
	err      error
	pending  bool
	warnings []string
	created  *unstructured.Unstructured
}

func (o *objects) answer(step string) (*k8s.Current, error) {
	o.add(step)
	return o.cur, o.err
}

func (o *objects) Create(_ context.Context, obj *unstructured.Unstructured, _, dryRun bool) (*k8s.Current, error) {
	o.created = obj
	if dryRun {
		return o.answer("create (dry run)")
	}
	return o.answer("create")
}

func (o *objects) Replace(_ context.Context, _ *unstructured.Unstructured, _ bool) (*k8s.Current, error) {
	return o.answer("replace")
}

func (o *objects) Start(context.Context, string, string) (*k8s.Current, error) {
	return o.answer("start")
}

func (o *objects) Stop(context.Context, string, string) (*k8s.Current, error) {
	return o.answer("stop")
}

func (o *objects) Scale(context.Context, string, string, ray.ScaleRequest) (*k8s.Current, []string, error) {
	cur, err := o.answer("scale")
	return cur, o.warnings, err
}

func (o *objects) Delete(context.Context, string, string, bool) (bool, error) {
	o.add("delete")
	return o.pending, o.err
}

// trail keeps what is recorded.
type trail struct {
	*steps
	mu      sync.Mutex
	written []audit.Write
}

func (t *trail) Record(_ context.Context, w audit.Write) {
	t.add("record " + w.Action)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written = append(t.written, w)
}

// fixture is a path of RayClusters over fakes, whose caller is alice unless asking fails with nameErr;
// asked counts how often the caller was asked.
type fixture struct {
	*steps
	path  *Path[string]
	objs  *objects
	trail *trail
	asked *atomic.Int32
}

func newFixture(t *testing.T, nameErr error) *fixture {
	t.Helper()
	s := &steps{}
	f := &fixture{steps: s, objs: &objects{steps: s, cur: &k8s.Current{Instance: instance("demo")}},
		trail: &trail{steps: s}, asked: &atomic.Int32{}}
	caller := NewCaller(func(context.Context) (string, error) {
		f.asked.Add(1)
		s.add("ask the caller")
		return "alice@example", nameErr
	})
	f.path = &Path[string]{Kind: ray.NewKinds().Cluster(), Objects: f.objs,
		Audit: Audit{Trail: f.trail, Caller: caller, RequestID: "req-1"},
		Decorate: func(action string, cur *k8s.Current) string {
			s.add("decorate " + action)
			if cur.Instance != nil {
				return "detail of " + cur.Instance.GetName()
			}
			return "detail of template " + cur.Template.Manifest.GetName()
		}}
	return f
}

func instance(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("ray.io/v1")
	u.SetKind("RayCluster")
	u.SetNamespace("team")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	return u
}

func manifest(name string) *unstructured.Unstructured {
	u := instance(name)
	u.SetUID("")
	u.SetResourceVersion("7")
	u.Object["status"] = map[string]any{"state": "ready"}
	return u
}

func TestCreateRunsTheHooksInOrderAndAsksTheCallerOnce(t *testing.T) {
	f := newFixture(t, nil)
	d, err := f.path.Create(context.Background(), manifest("demo"), "team", true, false, "")
	require.NoError(t, err)
	assert.Equal(t, "detail of demo", d)
	assert.Equal(t, []string{"ask the caller", "create", "record Create", "decorate Create"}, f.seen,
		"prepare (the creator stamped), write, record, decorate")
	assert.Equal(t, int32(1), f.asked.Load(), "the creator and the audit's user are one answer")

	// Prepared: the server's fields cleared, the creator stamped, exactly and label-safe.
	created := f.objs.created
	assert.NotContains(t, created.Object, "status")
	assert.Empty(t, created.GetResourceVersion())
	assert.Equal(t, "alice@example", created.GetAnnotations()[ray.CreatorKey])
	assert.Equal(t, "alice_example", created.GetLabels()[ray.CreatorKey])

	require.Len(t, f.trail.written, 1)
	assert.Equal(t, audit.Write{Action: audit.Create, Kind: "RayCluster", Namespace: "team", Name: "demo", UID: "uid-demo",
		User: "alice@example", RequestID: "req-1"}, f.trail.written[0])
}

func TestCreateRefusedBeforeItIsWritten(t *testing.T) {
	// A manifest for another namespace fails the kind's checks: nothing is asked, written or recorded.
	f := newFixture(t, nil)
	_, err := f.path.Create(context.Background(), manifest("demo"), "elsewhere", true, false, "")
	require.Error(t, err)
	assert.Empty(t, f.seen)

	// A caller who cannot be named creates nothing: the creator is part of what is made.
	f = newFixture(t, errors.New("token review failed"))
	_, err = f.path.Create(context.Background(), manifest("demo"), "team", true, false, "")
	require.EqualError(t, err, "token review failed")
	assert.Equal(t, []string{"ask the caller"}, f.seen)
}

func TestWriteFailureIsNeitherRecordedNorDecorated(t *testing.T) {
	f := newFixture(t, nil)
	f.objs.err = errors.New("conflict")
	_, err := f.path.Start(context.Background(), "team", "demo")
	require.EqualError(t, err, "conflict")
	_, err = f.path.Delete(context.Background(), "team", "demo", false)
	require.EqualError(t, err, "conflict")
	_, errs := f.path.DeleteEach(context.Background(), []Item{{"team", "a"}, {"team", "b"}}, false, 2)
	assert.Equal(t, []error{f.objs.err, f.objs.err}, errs)
	assert.Equal(t, []string{"start", "delete", "delete", "delete"}, f.seen)
}

func TestDryRunIsDecoratedNotRecorded(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.path.Create(context.Background(), manifest("demo"), "team", true, true, "")
	require.NoError(t, err)
	_, err = f.path.Replace(context.Background(), manifest("demo"), "team", "demo", true)
	require.NoError(t, err)
	assert.Equal(t, []string{"ask the caller", "create (dry run)", "decorate Create", "replace", "decorate Replace"}, f.seen)
	assert.Empty(t, f.trail.written)
}

func TestNothingToDoIsNotRecorded(t *testing.T) {
	// A start or stop that found nothing to do wrote nothing: it is answered, not recorded, and who the
	// caller is need not be asked.
	f := newFixture(t, nil)
	f.objs.cur.Unchanged = true
	_, err := f.path.Start(context.Background(), "team", "demo")
	require.NoError(t, err)
	_, err = f.path.Stop(context.Background(), "team", "demo")
	require.NoError(t, err)
	assert.Equal(t, []string{"start", "decorate Start", "stop", "decorate Stop"}, f.seen)
	assert.Zero(t, f.asked.Load())
}

func TestReplaceKeepsTheNameOfThePath(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.path.Replace(context.Background(), manifest("other"), "team", "demo", false)
	require.Error(t, err, "a replace cannot rename")
	assert.Empty(t, f.seen)

	_, err = f.path.Replace(context.Background(), manifest("demo"), "team", "demo", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"replace", "ask the caller", "record Replace", "decorate Replace"}, f.seen)
}

func TestTemplateIsRecordedByItsManifestsName(t *testing.T) {
	f := newFixture(t, nil)
	f.objs.cur = &k8s.Current{Template: &ray.Template{
		ConfigMap: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "raycluster-demo"}},
		Manifest:  instance("demo")}}
	d, err := f.path.Stop(context.Background(), "team", "demo")
	require.NoError(t, err)
	assert.Equal(t, "detail of template demo", d)
	require.Len(t, f.trail.written, 1)
	w := f.trail.written[0]
	assert.Equal(t, []string{"team", "demo", ""}, []string{w.Namespace, w.Name, string(w.UID)})
}

func TestScaleAndDeleteSayWhatTheyDid(t *testing.T) {
	f := newFixture(t, nil)
	f.objs.warnings = []string{"the autoscaler owns the group"}
	three, one := int64(3), int64(1)
	d, warnings, err := f.path.Scale(context.Background(), "team", "demo", ray.ScaleRequest{Group: "gpu", Replicas: &three, MinReplicas: &one})
	require.NoError(t, err)
	assert.Equal(t, "detail of demo", d)
	assert.Equal(t, []string{"the autoscaler owns the group"}, warnings)

	pending, err := f.path.Delete(context.Background(), "team", "a", false)
	require.NoError(t, err)
	assert.False(t, pending)
	f.objs.pending = true // finalizers hold it: said, and recorded as a delete all the same
	pending, err = f.path.Delete(context.Background(), "team", "b", true)
	require.NoError(t, err)
	assert.True(t, pending)
	f.objs.pending = false
	pendings, errs := f.path.DeleteEach(context.Background(), []Item{{"team", "c"}}, false, 1)
	assert.Equal(t, []error{nil}, errs)
	assert.Equal(t, []bool{false}, pendings)
	f.objs.pending = true
	pendings, errs = f.path.DeleteEach(context.Background(), []Item{{"team", "d"}}, true, 1)
	assert.Equal(t, []error{nil}, errs)
	assert.Equal(t, []bool{true}, pendings)
	var details []string
	for _, w := range f.trail.written {
		details = append(details, w.Action+" "+w.Name+": "+w.Detail)
	}
	assert.Equal(t, []string{"Scale demo: group gpu, replicas 3, minReplicas 1", "Delete a: ", "Delete b: forced",
		"Delete c: in a batch", "Delete d: in a batch, forced"}, details)
	assert.Equal(t, int32(1), f.asked.Load())
}

func TestRunIsStampedButNotCheckedAsAManifest(t *testing.T) {
	// A run is made by the service from a stored object: it keeps what a manifest sent may not (its
	// owner), and carries its creator.
	f := newFixture(t, nil)
	run := manifest("demo-run")
	run.SetOwnerReferences([]metav1.OwnerReference{{Kind: "RayCronJob", Name: "demo"}})
	_, err := f.path.Run(context.Background(), run, "RayCronJob demo")
	require.NoError(t, err)
	assert.Equal(t, []string{"ask the caller", "create", "record Run", "decorate Run"}, f.seen)
	assert.Equal(t, "alice@example", f.objs.created.GetAnnotations()[ray.CreatorKey])
	assert.Equal(t, "7", f.objs.created.GetResourceVersion(), "not prepared as a manifest sent")
	assert.Equal(t, "run of RayCronJob demo", f.trail.written[0].Detail)
}

func TestCallerUnknownIsRecordedNotRefused(t *testing.T) {
	// The write happened: the trail holds it, with why its caller could not be named.
	f := newFixture(t, errors.New("token review failed"))
	_, err := f.path.Start(context.Background(), "team", "demo")
	require.NoError(t, err)
	require.Len(t, f.trail.written, 1)
	assert.Equal(t, "unknown (token review failed)", f.trail.written[0].User)
}

func TestNoTrailRecordsNothingAndAsksNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.path.Audit.Trail = nil
	_, err := f.path.Start(context.Background(), "team", "demo")
	require.NoError(t, err)
	_, err = f.path.Delete(context.Background(), "team", "demo", false)
	require.NoError(t, err)
	assert.Equal(t, []string{"start", "decorate Start", "delete"}, f.seen)
}

func TestBatchDeletesAtOnceThenRecordsInOrder(t *testing.T) {
	// The deletes run at once; those that succeeded are recorded after all, in the items' order, the
	// caller asked once for all.
	f := newFixture(t, nil)
	gone := errors.New("not found")
	objs := &failing{objects: f.objs, of: map[string]error{"b": gone}, started: make(chan struct{}, 3), release: make(chan struct{})}
	f.path.Objects = objs
	done := make(chan []error)
	go func() {
		_, errs := f.path.DeleteEach(context.Background(), []Item{{"team", "a"}, {"team", "b"}, {"team", "c"}}, false, 3)
		done <- errs
	}()
	for range 3 {
		<-objs.started // all three under way before any ends: at once
	}
	close(objs.release)
	assert.Equal(t, []error{nil, gone, nil}, <-done)
	var names []string
	for _, w := range f.trail.written {
		names = append(names, w.Name)
	}
	assert.Equal(t, []string{"a", "c"}, names)
	assert.Equal(t, int32(1), f.asked.Load())
}

// failing deletes once released, failing those named in of.
type failing struct {
	*objects
	of      map[string]error
	started chan struct{}
	release chan struct{}
}

func (f *failing) Delete(_ context.Context, _, name string, _ bool) (bool, error) {
	f.started <- struct{}{}
	<-f.release
	return false, f.of[name]
}
