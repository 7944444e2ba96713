package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	"ray-service/internal/auth"
	"ray-service/internal/ray"
	"ray-service/internal/ray/raytest"
	"ray-service/internal/signing"
)

// lifecycleEnv is a kind's objects on client-go's fake clients, with failures that can be injected
// into single steps.
type lifecycleEnv struct {
	t    *testing.T
	kind *ray.Kind
	dyn  *dynamicfake.FakeDynamicClient
	core *fake.Clientset
	objs *Objects
	// failures maps "verb resource" (e.g. "delete configmaps") to how many more times it fails. Set it
	// between calls; mu guards it against the reads of calls made in parallel (a detail's).
	failures map[string]int
	mu       sync.Mutex
}

var errInjected = apierrors.NewServiceUnavailable("injected failure")

func newLifecycleEnv(t *testing.T, resource string) *lifecycleEnv {
	t.Helper()
	k, ok := ray.NewKinds().Lookup(resource)
	require.True(t, ok)
	listKinds := map[schema.GroupVersionResource]string{}
	for _, kk := range ray.NewKinds().All() {
		listKinds[kk.GVR()] = kk.Kind + "List"
	}
	e := &lifecycleEnv{t: t, kind: k, dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds),
		core: fake.NewSimpleClientset(), failures: map[string]int{}}
	for _, f := range []*k8stesting.Fake{&e.dyn.Fake, &e.core.Fake} {
		f.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			key := a.GetVerb() + " " + a.GetResource().Resource
			e.mu.Lock()
			fail := e.failures[key] > 0
			if fail {
				e.failures[key]--
			}
			e.mu.Unlock()
			if fail {
				return true, nil, errInjected
			}
			// The fake tracker would store a dry run: answer it without storing, as the apiserver does.
			if c, ok := a.(k8stesting.CreateActionImpl); ok && len(c.CreateOptions.DryRun) > 0 {
				return true, c.GetObject(), nil
			}
			return false, nil, nil
		})
	}
	e.objs = &Objects{Kind: k, Clients: &Clients{Dynamic: e.dyn, Core: e.core.CoreV1()}, m: &Manager{Templates: testSigner(t), Authz: &fakeAuthorizer{allowed: true}}}
	return e
}

// A start or stop with nothing to do asks for the right the action needs, and answers Forbidden without it.
func TestNothingToDoNeedsTheRight(t *testing.T) {
	e := newLifecycleEnv(t, "rayclusters")
	ctx := context.Background()
	e.seed("asleep", nil)
	_, err := e.objs.Stop(ctx, "team", "asleep")
	require.NoError(t, err)
	_, err = e.objs.Stop(ctx, "team", "asleep")
	require.NoError(t, err)
	authz := &fakeAuthorizer{allowed: false}
	e.objs.m.Authz = authz
	_, err = e.objs.Stop(ctx, "team", "asleep")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, []string{"patch rayclusters team/asleep"}, authz.asked)
	authz.allowed = true
	cur, err := e.objs.Stop(ctx, "team", "asleep")
	require.NoError(t, err)
	assert.True(t, cur.Unchanged, "nothing was written")
}

func testSigner(t *testing.T) *signing.Signer {
	t.Helper()
	s, err := signing.New(raytest.Key)
	require.NoError(t, err)
	return s
}

func (e *lifecycleEnv) manifest(name string) *unstructured.Unstructured {
	e.t.Helper()
	return raytest.Manifest(e.t, e.kind.Kind, e.kind.ClusterSpecPath, name, nil)
}

// seed stores an instance with the given status, as the operator would have left it.
func (e *lifecycleEnv) seed(name string, status map[string]any) {
	e.t.Helper()
	u := e.manifest(name)
	u.Object["status"] = status
	_, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(e.t, err)
}

// state says what exists of team/name now: "instance", "template", both or neither.
func (e *lifecycleEnv) state(name string) (instance, template bool) {
	e.t.Helper()
	ctx := context.Background()
	_, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		require.True(e.t, apierrors.IsNotFound(err), "%v", err)
	}
	instance = err == nil
	_, err = e.core.CoreV1().ConfigMaps("team").Get(ctx, e.kind.TemplateName(name), metav1.GetOptions{})
	if err != nil {
		require.True(e.t, apierrors.IsNotFound(err), "%v", err)
	}
	return instance, err == nil
}

// spec returns the spec of team/name, instance or template, as JSON without spec.suspend (which start
// and stop set by design).
func (e *lifecycleEnv) spec(name string) string {
	e.t.Helper()
	ctx := context.Background()
	var spec map[string]any
	if u, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Get(ctx, name, metav1.GetOptions{}); err == nil {
		spec = u.Object["spec"].(map[string]any)
	} else {
		tpl, err := e.objs.GetTemplate(ctx, "team", name)
		require.NoError(e.t, err)
		spec = tpl.Manifest.Object["spec"].(map[string]any)
	}
	spec = runtime.DeepCopyJSON(spec)
	delete(spec, "suspend")
	data, err := json.Marshal(spec)
	require.NoError(e.t, err)
	return string(data)
}

var (
	rayServiceReady = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	rayJobSucceeded = map[string]any{"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}
	rayClusterReady = map[string]any{"state": "ready"}
)

// Each step of start and stop can fail; repeating the action then completes it, and neither the spec
// nor the object is lost on the way: after every attempt an instance or a template exists.
func TestLifecycleStepsCanBeRepeated(t *testing.T) {
	cases := []struct {
		name     string
		resource string
		status   map[string]any
		action   string // start or stop
		fail     string // the step that fails once
		// what exists once the action has completed
		wantInstance, wantTemplate bool
	}{
		{"RayService stop: deleting the instance fails after the template is stored", "rayservices", rayServiceReady, "stop", "delete rayservices", false, true},
		{"RayService stop: storing the template fails", "rayservices", rayServiceReady, "stop", "create configmaps", false, true},
		{"RayJob re-run: deleting the finished job fails", "rayjobs", rayJobSucceeded, "start", "delete rayjobs", true, false},
		{"RayJob re-run: creating it again fails after the delete", "rayjobs", rayJobSucceeded, "start", "create rayjobs", true, false},
		{"RayJob re-run: removing the template fails after the create", "rayjobs", rayJobSucceeded, "start", "delete configmaps", true, false},
		{"RayCluster stop: the suspend patch fails", "rayclusters", rayClusterReady, "stop", "patch rayclusters", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLifecycleEnv(t, tc.resource)
			e.seed("demo", tc.status)
			want := e.spec("demo")
			act := e.objs.Stop
			if tc.action == "start" {
				act = e.objs.Start
			}
			e.failures[tc.fail] = 1
			_, err := act(context.Background(), "team", "demo")
			require.ErrorIs(t, err, errInjected, "the injected failure is reported")
			inst, tpl := e.state("demo")
			assert.True(t, inst || tpl, "after the failed step an instance or a template remains")
			assert.Equal(t, want, e.spec("demo"), "the spec is kept through the failure")

			_, err = act(context.Background(), "team", "demo")
			require.NoError(t, err, "repeating the action completes it")
			inst, tpl = e.state("demo")
			assert.Equal(t, tc.wantInstance, inst, "instance")
			assert.Equal(t, tc.wantTemplate, tpl, "template")
			assert.Equal(t, want, e.spec("demo"))

			_, err = act(context.Background(), "team", "demo")
			require.NoError(t, err, "and once more changes nothing")
			inst2, tpl2 := e.state("demo")
			assert.Equal(t, []bool{inst, tpl}, []bool{inst2, tpl2})
		})
	}
}

// A stopped RayService starts from its template; an interrupted start (the template not yet removed)
// completes when repeated, and a template never shadows a running instance.
func TestStartFromTemplate(t *testing.T) {
	e := newLifecycleEnv(t, "rayservices")
	ctx := context.Background()
	cur, err := e.objs.Create(ctx, e.manifest("svc"), false, false)
	require.NoError(t, err)
	require.NotNil(t, cur.Template, "a RayService created stopped is a template")
	assert.Equal(t, ray.StatusStopped, e.objs.Summarize(cur).Status)
	inst, tpl := e.state("svc")
	require.Equal(t, []bool{false, true}, []bool{inst, tpl})

	e.failures["delete configmaps"] = 1
	_, err = e.objs.Start(ctx, "team", "svc")
	require.ErrorIs(t, err, errInjected)
	inst, tpl = e.state("svc")
	assert.Equal(t, []bool{true, true}, []bool{inst, tpl}, "created, template not yet removed")
	cur, err = e.objs.Resolve(ctx, "team", "svc")
	require.NoError(t, err)
	assert.NotNil(t, cur.Instance, "the instance is what resolves while both exist")

	cur, err = e.objs.Start(ctx, "team", "svc")
	require.NoError(t, err)
	assert.NotNil(t, cur.Instance)
	inst, tpl = e.state("svc")
	assert.Equal(t, []bool{true, false}, []bool{inst, tpl})
}

// Creating stopped: a RayCluster is created suspended; a RayJob that KubeRay cannot suspend becomes a
// template, validated by a dry run of the real object; a dry run stores nothing.
func TestCreateStopped(t *testing.T) {
	e := newLifecycleEnv(t, "rayclusters")
	cur, err := e.objs.Create(context.Background(), e.manifest("rc"), false, false)
	require.NoError(t, err)
	suspended, _, _ := unstructured.NestedBool(cur.Instance.Object, "spec", "suspend")
	assert.True(t, suspended)

	e = newLifecycleEnv(t, "rayjobs")
	cur, err = e.objs.Create(context.Background(), e.manifest("job"), false, true)
	require.NoError(t, err)
	assert.NotNil(t, cur.Template)
	inst, tpl := e.state("job")
	assert.Equal(t, []bool{false, false}, []bool{inst, tpl}, "a dry run stores nothing")

	e.failures["create rayjobs"] = 1 // the dry run of the real object refuses it
	_, err = e.objs.Create(context.Background(), e.manifest("job"), false, false)
	require.ErrorIs(t, err, errInjected)
	inst, tpl = e.state("job")
	assert.Equal(t, []bool{false, false}, []bool{inst, tpl}, "nothing stored when validation fails")

	_, err = e.objs.Create(context.Background(), e.manifest("job"), false, false)
	require.NoError(t, err)
	_, err = e.objs.Create(context.Background(), e.manifest("job"), false, false)
	assert.True(t, apierrors.IsAlreadyExists(err), "a second template of the name: %v", err)
}

// Delete refuses a Running object unless forced, deletes a template, and answers NotFound for neither.
func TestDelete(t *testing.T) {
	e := newLifecycleEnv(t, "rayclusters")
	ctx := context.Background()
	e.seed("busy", rayClusterReady)
	authz := &fakeAuthorizer{allowed: false}
	e.objs.m.Authz = authz
	_, err := e.objs.Delete(ctx, "team", "busy", false)
	assert.True(t, apierrors.IsForbidden(err), "one who may not delete it is not told it runs: %v", err)
	assert.Equal(t, []string{"delete rayclusters team/busy"}, authz.asked)
	authz.allowed = true
	_, err = e.objs.Delete(ctx, "team", "busy", false)
	assert.True(t, apierrors.IsConflict(err), "Running without force: %v", err)
	inst, _ := e.state("busy")
	assert.True(t, inst, "nothing deleted")
	pending, err := e.objs.Delete(ctx, "team", "busy", true)
	require.NoError(t, err)
	assert.False(t, pending, "no finalizer: gone at once")
	inst, _ = e.state("busy")
	assert.False(t, inst)

	_, err = e.objs.Create(ctx, e.manifest("idle"), false, false)
	require.NoError(t, err)
	_, err = e.objs.Delete(ctx, "team", "idle", false)
	require.NoError(t, err, "a suspended cluster is not Running")

	e = newLifecycleEnv(t, "rayservices")
	_, err = e.objs.Create(ctx, e.manifest("tpl"), false, false)
	require.NoError(t, err)
	_, err = e.objs.Delete(ctx, "team", "tpl", false)
	require.NoError(t, err)
	inst, tpl := e.state("tpl")
	assert.Equal(t, []bool{false, false}, []bool{inst, tpl})
	_, err = e.objs.Delete(ctx, "team", "tpl", false)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
}

// A finished RayJob cannot be stopped; a RayJob that cannot be suspended is stopped through its
// dashboard only when the caller may update it, asked through the shared reviewer.
func TestStopRayJob(t *testing.T) {
	e := newLifecycleEnv(t, "rayjobs")
	ctx := context.Background()
	e.seed("done", rayJobSucceeded)
	_, err := e.objs.Stop(ctx, "team", "done")
	assert.True(t, apierrors.IsConflict(err), "%v", err)

	e.seed("running", map[string]any{"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"})
	authz := &fakeAuthorizer{allowed: false}
	e.objs.m.Authz = authz
	_, err = e.objs.Stop(ctx, "team", "running")
	assert.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Len(t, authz.asked, 1)
	assert.Equal(t, "update rayjobs team/running", authz.asked[0])

	authz.allowed = true
	_, err = e.objs.Stop(ctx, "team", "running")
	assert.True(t, apierrors.IsConflict(err), "no job submitted yet, so nothing to stop: %v", err)
}

type fakeAuthorizer struct {
	allowed bool
	asked   []string
}

func (f *fakeAuthorizer) Allowed(_ context.Context, _ string, a auth.Attributes) (bool, error) {
	f.asked = append(f.asked, fmt.Sprintf("%s %s %s/%s", a.Verb, a.Resource, a.Namespace, a.Name))
	return f.allowed, nil
}

// Only a ConfigMap the service signed, unchanged since, is a template: changing any signed part, or
// signing with another key, makes it a Conflict; a ConfigMap not labelled as one is not there.
func TestTemplatesAreTrustedOnlyAsSigned(t *testing.T) {
	ctx := context.Background()
	tamper := map[string]func(cm *corev1.ConfigMap){
		"manifest": func(cm *corev1.ConfigMap) {
			cm.Data[ray.TemplateDataKey] = strings.ReplaceAll(cm.Data[ray.TemplateDataKey], "rayproject/ray", "attacker/ray")
		},
		"creator":    func(cm *corev1.ConfigMap) { cm.Annotations[ray.CreatorKey] = "mallory" },
		"parked UID": func(cm *corev1.ConfigMap) { cm.Annotations[ray.TemplateParkedUIDKey] = "another" },
		"kind": func(cm *corev1.ConfigMap) {
			cm.Labels[ray.TemplateKindLabel] = "RayJob"
			cm.Name = "ray-template.rayjob.svc"
		},
		"other key": func(cm *corev1.ConfigMap) {
			other, err := signing.New([]byte("another key, also of 32 bytes or more"))
			require.NoError(t, err)
			other.Sign(cm)
		},
	}
	for what, change := range tamper {
		t.Run(what, func(t *testing.T) {
			e := newLifecycleEnv(t, "rayservices")
			_, err := e.objs.Create(ctx, e.manifest("svc"), false, false)
			require.NoError(t, err)
			cm, err := e.core.CoreV1().ConfigMaps("team").Get(ctx, e.kind.TemplateName("svc"), metav1.GetOptions{})
			require.NoError(t, err)
			_, err = e.objs.m.Templates.Read(e.kind, cm)
			require.NoError(t, err, "as written, it is trusted")
			change(cm)
			k := e.kind
			if cm.Labels[ray.TemplateKindLabel] == "RayJob" {
				k, _ = ray.NewKinds().Lookup("rayjobs")
			}
			_, err = e.objs.m.Templates.Read(k, cm)
			assert.True(t, apierrors.IsConflict(err), "changed %s: %v", what, err)
		})
	}

	e := newLifecycleEnv(t, "rayservices")
	cm, err := e.objs.m.Templates.ConfigMap(e.kind, e.manifest("svc"), "", true)
	require.NoError(t, err)
	delete(cm.Labels, ray.TemplateLabel)
	_, err = e.core.CoreV1().ConfigMaps("team").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.objs.Resolve(ctx, "team", "svc")
	assert.True(t, apierrors.IsNotFound(err), "an unlabelled ConfigMap is no template: %v", err)

	other := e.manifest("elsewhere")
	other.SetNamespace("prod")
	cm, err = e.objs.m.Templates.ConfigMap(e.kind, other, "", true)
	require.NoError(t, err)
	cm.Namespace, cm.Name = "team", e.kind.TemplateName("svc2")
	e.objs.m.Templates.Sign(cm) // even signed, a manifest of another object is refused
	_, err = e.objs.m.Templates.Read(e.kind, cm)
	assert.True(t, apierrors.IsConflict(err), "%v", err)
}

// A stop stores the instance's spec: it adopts a template only where the service stored it for this
// very instance, replaces an older one of its own, and refuses a ConfigMap it did not write.
func TestStopAdoptsOnlyItsOwnTemplate(t *testing.T) {
	ctx := context.Background()
	seedRunning := func(e *lifecycleEnv, uid string) {
		u := e.manifest("svc")
		u.SetUID(types.UID(uid))
		u.Object["status"] = rayServiceReady
		_, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	put := func(e *lifecycleEnv, image, parkedUID string, signed bool) {
		m := e.manifest("svc")
		data, err := yaml.Marshal(m.Object)
		require.NoError(t, err)
		m2 := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(strings.ReplaceAll(string(data), "rayproject/ray", image)), &m2.Object))
		cm, err := e.objs.m.Templates.ConfigMap(e.kind, m2, parkedUID, true)
		require.NoError(t, err)
		if !signed {
			delete(cm.Annotations, signing.TemplateSignatureKey)
		}
		_, err = e.core.CoreV1().ConfigMaps("team").Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	image := func(e *lifecycleEnv) string {
		tpl, err := e.objs.GetTemplate(ctx, "team", "svc")
		require.NoError(t, err)
		return tpl.Manifest.Object["spec"].(map[string]any)["rayClusterConfig"].(map[string]any)["headGroupSpec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"].(string)
	}

	e := newLifecycleEnv(t, "rayservices")
	seedRunning(e, "uid-1")
	put(e, "attacker/ray", "uid-1", false)
	_, err := e.objs.Stop(ctx, "team", "svc")
	assert.True(t, apierrors.IsConflict(err), "a ConfigMap the service did not write is in the way: %v", err)
	inst, _ := e.state("svc")
	assert.True(t, inst, "the instance stays")

	e = newLifecycleEnv(t, "rayservices")
	seedRunning(e, "uid-2")
	put(e, "old/ray", "uid-1", true) // left by an earlier life of the same name
	_, err = e.objs.Stop(ctx, "team", "svc")
	require.NoError(t, err)
	assert.Contains(t, image(e), "rayproject/ray", "the instance's spec replaced the older template")

	e = newLifecycleEnv(t, "rayservices")
	seedRunning(e, "uid-3")
	put(e, "rayproject/ray", "uid-3", true) // this very stop, cut short before the delete
	_, err = e.objs.Stop(ctx, "team", "svc")
	require.NoError(t, err)
	inst, tpl := e.state("svc")
	assert.Equal(t, []bool{false, true}, []bool{inst, tpl})
}

// A stop right after a start finds the status still Stopped while the spec says run: it suspends
// again, rather than answering that it is stopped already.
func TestStopRightAfterStart(t *testing.T) {
	e := newLifecycleEnv(t, "rayclusters")
	e.seed("demo", map[string]any{"state": "suspended"}) // spec.suspend is false: a start is under way
	_, err := e.objs.Stop(t.Context(), "team", "demo")
	require.NoError(t, err)
	got, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Get(t.Context(), "demo", metav1.GetOptions{})
	require.NoError(t, err)
	suspend, _, _ := unstructured.NestedBool(got.Object, "spec", "suspend")
	assert.True(t, suspend, "suspended again")

	// Asked to stop already: nothing more is written.
	writes := len(e.dyn.Actions())
	_, err = e.objs.Stop(t.Context(), "team", "demo")
	require.NoError(t, err)
	for _, a := range e.dyn.Actions()[writes:] {
		assert.Equal(t, "get", a.GetVerb(), "a second stop only reads")
	}
}

// Another replica starts a stopped RayService between the two reads of Resolve: the instance is read
// before it is created, the template after it is removed. Start and stop keep one of the two at every
// moment, so the object exists all along and must resolve, never as NotFound.
func TestResolveWhileAnotherReplicaStarts(t *testing.T) {
	e := newLifecycleEnv(t, "rayservices")
	ctx := context.Background()
	_, err := e.objs.Create(ctx, e.manifest("svc"), false, false)
	require.NoError(t, err)
	tplName := e.kind.TemplateName("svc")
	var once sync.Once
	e.core.PrependReactor("get", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != tplName {
			return false, nil, nil
		}
		once.Do(func() {
			// The other replica's start: the instance is created, then the template removed.
			_, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Create(ctx, e.manifest("svc"), metav1.CreateOptions{})
			require.NoError(t, err)
			require.NoError(t, e.core.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("configmaps"), "team", tplName))
		})
		return false, nil, nil
	})

	cur, err := e.objs.Start(ctx, "team", "svc")
	require.NoError(t, err, "a start racing another replica's start")
	assert.NotNil(t, cur.Instance)
	inst, tpl := e.state("svc")
	assert.Equal(t, []bool{true, false}, []bool{inst, tpl})
}

// What is being deleted (finalizers hold it) stays deleted: a stop is refused rather than storing it as a
// template that would bring it back once it is gone, and a delete again removes such a template left beside
// it by a stop or re-run cut short.
func TestBeingDeletedStaysDeleted(t *testing.T) {
	e := newLifecycleEnv(t, "rayservices")
	ctx := context.Background()
	u := e.manifest("going")
	u.Object["status"] = rayServiceReady
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	u.SetFinalizers([]string{"ray.io/rayservice-finalizer"})
	created, err := e.dyn.Resource(e.kind.GVR()).Namespace("team").Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)

	authz := &fakeAuthorizer{allowed: false}
	e.objs.m.Authz = authz
	_, err = e.objs.Stop(ctx, "team", "going")
	assert.True(t, apierrors.IsForbidden(err), "one who may not stop it is told that: %v", err)
	authz.allowed = true
	_, err = e.objs.Stop(ctx, "team", "going")
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	inst, tpl := e.state("going")
	assert.Equal(t, []bool{true, false}, []bool{inst, tpl}, "no template stored")

	_, err = e.objs.saveTemplate(ctx, created) // a stop cut short before this change, or racing the delete
	require.NoError(t, err)
	pending, err := e.objs.Delete(ctx, "team", "going", false)
	require.NoError(t, err)
	assert.True(t, pending)
	inst, tpl = e.state("going")
	assert.Equal(t, []bool{true, false}, []bool{inst, tpl}, "the template went with the delete")
}
