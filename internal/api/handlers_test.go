package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"ray-service/internal/auth"
	"ray-service/internal/cache"
	"ray-service/internal/k8s"
	"ray-service/internal/metrics"
	"ray-service/internal/ray"
	"ray-service/internal/stream"
)

// fakeObjects answers as configured and records what the handlers asked: each call once, a dry run
// named as one.
type fakeObjects struct {
	mu      sync.Mutex
	calls   []string
	current *k8s.Current
	err     error // returned by every call
	// created is what the last create stored, and start how it asked for it; a dry run stores nothing.
	created  *unstructured.Unstructured
	start    bool
	deleteOf map[string]error
	// rayToken and rayTokenErr answer DashboardToken.
	rayToken    string
	rayTokenErr error
}

func (f *fakeObjects) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeObjects) Resolve(_ context.Context, ns, name string) (*k8s.Current, error) {
	f.record("resolve " + ns + "/" + name)
	return f.current, f.err
}

// ResolveWithEvents is one call: the object read with its namespace's events at once.
func (f *fakeObjects) ResolveWithEvents(_ context.Context, ns, name string) (*k8s.Current, []ray.EventInfo, error) {
	f.record("resolve with events " + ns + "/" + name)
	if f.err != nil {
		return nil, nil, f.err
	}
	return f.current, []ray.EventInfo{}, nil
}

// Create stores obj, as the apiserver would, unless it is a dry run: that answers what would be created
// and stores nothing.
func (f *fakeObjects) Create(_ context.Context, obj *unstructured.Unstructured, start, dryRun bool) (*k8s.Current, error) {
	call := "create " + obj.GetNamespace() + "/" + obj.GetName()
	if dryRun {
		call += " dry run"
	}
	f.record(call)
	if f.err != nil {
		return nil, f.err
	}
	if !dryRun {
		f.created, f.start = obj, start
	}
	return &k8s.Current{Instance: obj}, nil
}

func (f *fakeObjects) Replace(_ context.Context, obj *unstructured.Unstructured, _ bool) (*k8s.Current, error) {
	f.record("replace " + obj.GetNamespace() + "/" + obj.GetName())
	return &k8s.Current{Instance: obj}, f.err
}

func (f *fakeObjects) Start(_ context.Context, ns, name string) (*k8s.Current, error) {
	f.record("start " + ns + "/" + name)
	return f.current, f.err
}

func (f *fakeObjects) Stop(_ context.Context, ns, name string) (*k8s.Current, error) {
	f.record("stop " + ns + "/" + name)
	return f.current, f.err
}

func (f *fakeObjects) Scale(_ context.Context, ns, name string, r ray.ScaleRequest) (*k8s.Current, []string, error) {
	f.record("scale " + ns + "/" + name + " " + r.Group)
	return f.current, []string{}, f.err
}

func (f *fakeObjects) Delete(_ context.Context, ns, name string, force bool) (bool, error) {
	call := "delete " + ns + "/" + name
	if force {
		call += " force"
	}
	f.record(call)
	if err, ok := f.deleteOf[ns+"/"+name]; ok {
		return false, err
	}
	return false, f.err
}

func (f *fakeObjects) Summarize(cur *k8s.Current) ray.Summary {
	if cur.Template != nil {
		return ray.Summary{Name: cur.Template.Manifest.GetName(), Type: ray.TypeTemplate, Status: ray.StatusStopped}
	}
	return ray.Summary{Name: cur.Instance.GetName(), Namespace: cur.Instance.GetNamespace(), Type: ray.TypeInstance}
}

func (f *fakeObjects) Pods(context.Context, *k8s.Current) ([]corev1.Pod, error) {
	f.record("pods")
	return nil, f.err
}

func (f *fakeObjects) Events(context.Context, *k8s.Current) ([]ray.EventInfo, error) {
	f.record("events")
	return []ray.EventInfo{}, f.err
}

func (f *fakeObjects) OpenLogs(context.Context, *k8s.Current, string, string, *corev1.PodLogOptions) (*k8s.LogStream, error) {
	f.record("logs")
	return &k8s.LogStream{ReadCloser: io.NopCloser(strings.NewReader("line 1\n")), Pod: "p", Container: "c"}, f.err
}

func (f *fakeObjects) DashboardToken(context.Context, *unstructured.Unstructured) (string, error) {
	f.record("dashboard token")
	return f.rayToken, f.rayTokenErr
}

// fakeAuthz allows what its scopes say: per resource, where the caller may list it.
type fakeAuthz struct {
	scopes  map[string]auth.Scope // by resource
	allowed bool
}

func (f *fakeAuthz) Allowed(context.Context, string, auth.Attributes) (bool, error) {
	return f.allowed, nil
}

func (f *fakeAuthz) AllowedAll(ctx context.Context, tok string, asks []auth.Attributes) ([]bool, error) {
	return eachAllowed(ctx, f.Allowed, tok, asks)
}

// eachAllowed answers asks one by one, as a fake authorizer's AllowedAll.
func eachAllowed(ctx context.Context, allowed func(context.Context, string, auth.Attributes) (bool, error), tok string, asks []auth.Attributes) ([]bool, error) {
	out := make([]bool, len(asks))
	for i, a := range asks {
		var err error
		if out[i], err = allowed(ctx, tok, a); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (f *fakeAuthz) Scope(_ context.Context, _ string, a auth.Attributes, _ []string) (auth.Scope, error) {
	s, ok := f.scopes[a.Resource]
	if !ok {
		s = auth.AllNamespaces()
	}
	return s.Narrow(a.Namespace), nil
}

func (f *fakeAuthz) UserName(context.Context, string) (string, error) { return "alice@example", nil }

func (f *fakeAuthz) Identity(context.Context, string) (auth.Identity, error) {
	return auth.Identity{Name: "alice@example", Groups: []string{"team-a"}}, nil
}

// fakeStore holds items per kind and namespace. Tests change its items at will: its version is new at
// each ask, so that no kept page answers for it.
type fakeStore struct {
	items   map[string][]*cache.Item
	version atomic.Uint64
}

func (f *fakeStore) Version(*ray.Kind) uint64 { return f.version.Add(1) }

func (f *fakeStore) Items(k *ray.Kind, sc cache.Scopes) []*cache.Item {
	var out []*cache.Item
	for _, it := range f.items[k.Resource] {
		if sc.Instances.Contains(it.Summary.Namespace) {
			out = append(out, it)
		}
	}
	return out
}

func (f *fakeStore) Count(k *ray.Kind, sc cache.Scopes) ray.KindCount {
	c := ray.KindCount{}
	for _, it := range f.Items(k, sc) {
		c.Total++
		if k.Active(it.Summary.Status) {
			c.Active++
		}
	}
	return c
}

func (f *fakeStore) List(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, int) {
	return q.Apply(f.Items(k, sc))
}

func (f *fakeStore) Namespaces(*ray.Kind) []string { return []string{"a", "b"} }

// Serves: the fake has every kind's CRD but RayCronJob's.
func (f *fakeStore) Serves(k *ray.Kind) bool { return !k.Optional }

// The fake store never changes: its feed is empty.
func (f *fakeStore) Epoch() string                         { return "fake" }
func (f *fakeStore) Changed() <-chan struct{}              { return nil }
func (f *fakeStore) KindChanged(*ray.Kind) <-chan struct{} { return nil }
func (f *fakeStore) Matching(k *ray.Kind, sc cache.Scopes, q *cache.Query) ([]*cache.Item, uint64) {
	return q.Select(f.Items(k, sc)), 0
}
func (f *fakeStore) Since(*ray.Kind, uint64, cache.Scopes, cache.Scopes) ([]cache.Change, uint64, error) {
	return nil, 0, nil
}
func (f *fakeStore) Published(*ray.Kind, string, string) *cache.Item  { return nil }
func (f *fakeStore) CachedPods(*ray.Kind, *ray.Summary) []ray.PodInfo { return nil }
func (f *fakeStore) SummarizeManifest(k *ray.Kind, m *cache.Manifest) ray.Summary {
	return k.Summarize(m.Unstructured)
}
func (f *fakeStore) Manifest(*ray.Kind, string, string) (*cache.Manifest, bool) {
	return nil, false
}
func (f *fakeStore) ManifestWrites() uint64                                     { return 0 }
func (f *fakeStore) KeepManifest(*ray.Kind, *unstructured.Unstructured, uint64) {}
func (f *fakeStore) ForgetManifest(*ray.Kind, string, string)                   {}

func (f *fakeStore) Pending(map[*ray.Kind]cache.Scopes) ray.Resources { return ray.Resources{} }

func (f *fakeStore) IdleTotals(auth.Scope) (int64, ray.Resources) { return 0, ray.Resources{} }

func (f *fakeStore) Allocated(scope auth.Scope, _ string) cache.Allocation {
	a := cache.Allocation{Ray: map[string]float64{}}
	if scope.Contains("a") {
		a.CPU = 3
	}
	return a
}

func item(ns, name, status string) *cache.Item {
	return &cache.Item{Summary: ray.Summary{Namespace: ns, Name: name, Status: status, Type: ray.TypeInstance}}
}

type handlerEnv struct {
	objects    *fakeObjects
	objectsErr error
	authz      *fakeAuthz
	store      *fakeStore
}

func (e *handlerEnv) router() http.Handler { return e.routerWith(nil) }

// routerWith builds the router of the environment, with change applied to its dependencies.
func (e *handlerEnv) routerWith(change func(d *Deps)) http.Handler {
	reg, httpMetrics := metrics.NewRegistry()
	d := Deps{
		Kinds: ray.NewKinds(), Store: e.store, Authz: e.authz, Log: zap.NewNop(), Gatherer: reg, HTTP: httpMetrics,
		Detached: &stream.Detached{},
		Objects: func(*ray.Kind, string) (Objects, error) {
			if e.objectsErr != nil {
				return nil, e.objectsErr
			}
			return e.objects, nil
		},
	}
	if change != nil {
		change(&d)
	}
	return NewRouter(d)
}

// recordingAuthz allows nothing and records what it was asked.
type recordingAuthz struct {
	fakeAuthz
	asked []string
}

func (r *recordingAuthz) AllowedAll(ctx context.Context, tok string, asks []auth.Attributes) ([]bool, error) {
	return eachAllowed(ctx, r.Allowed, tok, asks)
}

func (r *recordingAuthz) Allowed(_ context.Context, _ string, a auth.Attributes) (bool, error) {
	r.asked = append(r.asked, a.Verb+" "+a.Resource+"/"+a.Subresource+" "+a.Namespace)
	return false, nil
}

func instance(ns, name string) *k8s.Current {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster"}}
	u.SetNamespace(ns)
	u.SetName(name)
	return &k8s.Current{Instance: u}
}

func template(name string) *k8s.Current {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName(name)
	return &k8s.Current{Template: &ray.Template{ConfigMap: &corev1.ConfigMap{}, Manifest: u}}
}

var conflict = apierrors.NewConflict(schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}, "x", io.EOF)

// The handlers past authentication, in process, with fakes: what each answers, and what it asked of
// the objects.
func TestHandlers(t *testing.T) {
	cases := []struct {
		name         string
		env          handlerEnv
		method, path string
		contentType  string
		body         string
		wantCode     int
		wantReason   string
		wantCalls    []string
		check        func(t *testing.T, e *handlerEnv, data json.RawMessage)
	}{
		{
			name:   "list in a namespace the caller may not list is 403",
			env:    handlerEnv{authz: &fakeAuthz{scopes: map[string]auth.Scope{"rayclusters": auth.Namespaces("b")}}},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayclusters", wantCode: 403, wantReason: "Forbidden",
		},
		{
			name: "list across namespaces shows only the allowed ones",
			env: handlerEnv{authz: &fakeAuthz{scopes: map[string]auth.Scope{"rayclusters": auth.Namespaces("b")}},
				store: &fakeStore{items: map[string][]*cache.Item{"rayclusters": {item("a", "x", "Running"), item("b", "y", "Running"), item("b", "z", "Stopped")}}}},
			method: "GET", path: "/rest/ray/v1/rayclusters?sortBy=name&order=asc", wantCode: 200,
			check: func(t *testing.T, _ *handlerEnv, data json.RawMessage) {
				var d Page[ray.Summary]
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, 2, d.Total)
				require.Len(t, d.Items, 2)
				assert.Equal(t, []string{"y", "z"}, []string{d.Items[0].Name, d.Items[1].Name})
			},
		},
		{
			name:   "the caller's objects cannot be made: the error's status",
			env:    handlerEnv{objectsErr: apierrors.NewUnauthorized("token expired")},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayclusters/x", wantCode: 401, wantReason: "Unauthorized",
		},
		{
			name:   "create without starting records the creator and asks for a stopped create",
			method: "POST", path: "/rest/ray/v1/namespaces/a/rayclusters?start=false", contentType: "application/yaml",
			body: "metadata: {name: demo}\nspec: {}\n", wantCode: 201, wantCalls: []string{"create a/demo"},
			check: func(t *testing.T, e *handlerEnv, _ json.RawMessage) {
				require.NotNil(t, e.objects.created, "a create stores")
				assert.False(t, e.objects.start)
				assert.Equal(t, "alice@example", e.objects.created.GetAnnotations()[ray.CreatorKey])
				assert.Equal(t, "alice_example", e.objects.created.GetLabels()[ray.CreatorKey])
				assert.Equal(t, "RayCluster", e.objects.created.GetKind(), "the kind follows from the path")
			},
		},
		{
			name:   "create with a name KubeRay cannot use is 422 before any Kubernetes call",
			method: "POST", path: "/rest/ray/v1/namespaces/a/rayclusters", contentType: "application/json",
			body: `{"metadata":{"name":"Not_A_Name"}}`, wantCode: 422, wantReason: "Invalid", wantCalls: []string{},
		},
		{
			name:   "a dry run answers 200 with what would be created, asks for a dry-run create and stores nothing",
			method: "POST", path: "/rest/ray/v1/namespaces/a/rayclusters?dryRun=true", contentType: "application/json",
			body: `{"metadata":{"name":"demo"}}`, wantCode: 200, wantCalls: []string{"create a/demo dry run"},
			check: func(t *testing.T, e *handlerEnv, data json.RawMessage) {
				assert.Nil(t, e.objects.created, "a dry run stores nothing")
				var d Detail
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, "demo", d.Name)
			},
		},
		{
			name:   "a create without dryRun is no dry run: it stores and answers 201",
			method: "POST", path: "/rest/ray/v1/namespaces/a/rayclusters", contentType: "application/json",
			body: `{"metadata":{"name":"demo"}}`, wantCode: 201, wantCalls: []string{"create a/demo"},
			check: func(t *testing.T, e *handlerEnv, _ json.RawMessage) {
				require.NotNil(t, e.objects.created, "a create stores")
				assert.True(t, e.objects.start, "a create starts by default")
			},
		},
		{
			name:   "detail of a template reads it with its events in one call, and links no dashboard",
			env:    handlerEnv{objects: &fakeObjects{current: template("demo")}},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayservices/demo", wantCode: 200,
			wantCalls: []string{"resolve with events a/demo"},
			check: func(t *testing.T, _ *handlerEnv, data json.RawMessage) {
				var d Detail
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, ray.TypeTemplate, d.Type)
				assert.Empty(t, d.DashboardURL)
			},
		},
		{
			name:   "detail of an instance links its dashboard proxy",
			env:    handlerEnv{objects: &fakeObjects{current: instance("a", "demo")}},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayclusters/demo", wantCode: 200,
			check: func(t *testing.T, _ *handlerEnv, data json.RawMessage) {
				var d Detail
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, "/rest/ray/v1/namespaces/a/rayclusters/demo/dashboard/", d.DashboardURL)
			},
		},
		{
			name:   "delete refused by the lifecycle keeps its status",
			env:    handlerEnv{objects: &fakeObjects{err: conflict}},
			method: "DELETE", path: "/rest/ray/v1/namespaces/a/rayclusters/x?force=false", wantCode: 409, wantReason: "Conflict",
			wantCalls: []string{"delete a/x"},
		},
		{
			name:   "a bad force flag is 400 before the delete",
			method: "DELETE", path: "/rest/ray/v1/namespaces/a/rayclusters/x?force=maybe", wantCode: 400, wantReason: "BadRequest",
			wantCalls: []string{},
		},
		{
			name:   "start answers the object as it is afterwards",
			env:    handlerEnv{objects: &fakeObjects{current: instance("a", "x")}},
			method: "POST", path: "/rest/ray/v1/namespaces/a/rayclusters/x/start", wantCode: 200, wantCalls: []string{"start a/x"},
			check: func(t *testing.T, _ *handlerEnv, data json.RawMessage) {
				var d Detail
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, []string{"a", "x", ray.TypeInstance}, []string{d.Namespace, d.Name, d.Type}, "the object Start answered")
			},
		},
		{
			name:   "logs of a template are 409 without opening a stream",
			env:    handlerEnv{objects: &fakeObjects{current: template("x")}},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayservices/x/logs", wantCode: 409, wantReason: "Conflict",
			wantCalls: []string{"resolve a/x"},
		},
		{
			name:   "batch delete answers each item in order, deleting duplicates once",
			env:    handlerEnv{objects: &fakeObjects{deleteOf: map[string]error{"a/busy": conflict}}},
			method: "POST", path: "/rest/ray/v1/rayclusters/batch-delete", contentType: "application/json",
			body:     `{"items":[{"namespace":"a","name":"x"},{"namespace":"a","name":"busy"},{"namespace":"a","name":"x"}]}`,
			wantCode: 200,
			check: func(t *testing.T, e *handlerEnv, data json.RawMessage) {
				var res []BatchResult
				require.NoError(t, json.Unmarshal(data, &res))
				require.Len(t, res, 3)
				assert.Equal(t, []int{200, 409, 200}, []int{res[0].Code, res[1].Code, res[2].Code})
				assert.ElementsMatch(t, []string{"delete a/x", "delete a/busy"}, e.objects.calls)
			},
		},
		{
			name:   "the dashboard proxy refuses a caller without services/proxy before reading anything",
			env:    handlerEnv{authz: &fakeAuthz{allowed: false}},
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayclusters/x/dashboard/api/version", wantCode: 403, wantReason: "Forbidden",
			wantCalls: []string{},
		},
		{
			name:   "metrics are per RayCluster",
			method: "GET", path: "/rest/ray/v1/namespaces/a/rayjobs/x/metrics", wantCode: 404, wantReason: "NotFound",
		},
		{
			name: "the overview of a namespace counts what the caller may list there",
			env: handlerEnv{authz: &fakeAuthz{scopes: map[string]auth.Scope{"rayjobs": auth.Namespaces()}},
				store: &fakeStore{items: map[string][]*cache.Item{
					"rayclusters": {item("a", "x", "Running"), item("a", "y", "Stopped")},
					"rayjobs":     {item("a", "j", "Running")}}}},
			method: "GET", path: "/rest/ray/v1/overview?namespace=a", wantCode: 200,
			check: func(t *testing.T, _ *handlerEnv, data json.RawMessage) {
				var d OverviewData
				require.NoError(t, json.Unmarshal(data, &d))
				assert.Equal(t, ray.KindCount{Total: 2, Active: 1}, d.Counts.RayClusters)
				assert.Equal(t, ray.KindCount{}, d.Counts.RayJobs, "RayJobs the caller may not list count nothing")
				assert.InDelta(t, 3.0, d.Allocated.CPU, 1e-9)
			},
		},
		{
			name:   "the overview of a namespace where Ray clusters may not be listed is 403",
			env:    handlerEnv{authz: &fakeAuthz{scopes: map[string]auth.Scope{"rayclusters": auth.Namespaces()}}},
			method: "GET", path: "/rest/ray/v1/overview?namespace=a", wantCode: 403, wantReason: "Forbidden",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env
			if e.objects == nil {
				e.objects = &fakeObjects{}
			}
			if e.authz == nil {
				e.authz = &fakeAuthz{allowed: true}
			}
			if e.store == nil {
				e.store = &fakeStore{}
			}
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			r.Header.Set("Authorization", "Bearer t")
			if tc.contentType != "" {
				r.Header.Set("Content-Type", tc.contentType)
			}
			w := httptest.NewRecorder()
			e.router().ServeHTTP(w, r)
			require.Equal(t, tc.wantCode, w.Code, w.Body.String())
			var env struct {
				Envelope
				Data json.RawMessage `json:"data"`
			}
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &env), w.Body.String())
			assert.Equal(t, w.Code, env.Code)
			assert.Equal(t, tc.wantReason, env.Reason)
			if tc.wantCalls != nil { // empty: no call at all
				assert.Equal(t, tc.wantCalls, append([]string{}, e.objects.calls...), "the calls of the objects")
			}
			if tc.check != nil {
				tc.check(t, &e, env.Data)
			}
		})
	}
}
