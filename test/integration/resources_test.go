//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// Each kind is created from each sample manifest, as JSON, as YAML and as an uploaded file; the
// operator reconciles the RayClusters until their pods run and the summary says Running.
func TestCreateFromSamples(t *testing.T) {
	ns := namespace(t, "create-samples")
	admin := env.tokens["admin"]
	samples := []struct{ kind, file string }{
		{"rayclusters", "raycluster-minimal.yaml"},
		{"rayclusters", "raycluster-guide.yaml"},
		{"rayjobs", "rayjob-minimal.yaml"},
		{"rayservices", "rayservice-minimal.yaml"},
	}
	for i := 1; i <= 6; i++ {
		samples = append(samples, struct{ kind, file string }{"rayjobs", fmt.Sprintf("rayjob-example%d.yaml", i)})
	}
	var clusters []string
	for _, s := range samples {
		manifest := testdata(t, s.file)
		var meta struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal(manifest, &meta))
		for _, form := range []string{"json", "yaml", "file"} {
			name := meta.Metadata.Name + "-" + form
			y, j := renamed(t, manifest, name)
			var r *response
			switch form {
			case "json":
				r = call(t, "POST", nsPath(ns, s.kind), admin, "application/json", j)
			case "yaml":
				r = call(t, "POST", nsPath(ns, s.kind), admin, "application/yaml", y)
			case "file":
				ct, body := multipartFile(t, s.file, y)
				r = call(t, "POST", nsPath(ns, s.kind), admin, ct, body)
			}
			require.Equal(t, 201, r.Status, "%s as %s: %s", s.file, form, r.Raw)
			got := decode[summary](t, r)
			assert.Equal(t, name, got.Name)
			assert.Equal(t, ns, got.Namespace)
			assert.Equal(t, "admin", got.Creator)
			labels, _, _ := unstructured.NestedStringMap(got.Object, "metadata", "labels")
			assert.Equal(t, "admin", labels["ray.openfuyao.com/creator"])
			if s.kind == "rayclusters" {
				clusters = append(clusters, name)
			}
		}
	}
	for _, name := range clusters {
		eventually(t, 90*time.Second, name+" Running in the summary", func() bool {
			r := call(t, "GET", nsPath(ns, "rayclusters")+"/"+name, admin, "", nil)
			return r.Status == 200 && decode[summary](t, r).Status == "Running"
		})
		assert.True(t, allRunningReady(clusterPods(t, ns, name)), "pods of %s", name)
	}
	// The list shows everything created, with ready worker replicas counted from the pods.
	r := call(t, "GET", nsPath(ns, "rayclusters")+"?search=minimal-cluster-json", admin, "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	l := decode[listData](t, r)
	require.Len(t, l.Items, 1)
	require.Len(t, l.Items[0].WorkerGroups, 1)
	assert.Equal(t, int64(2), l.Items[0].WorkerGroups[0].ReadyReplicas)
	assert.InDelta(t, 3.0, l.Items[0].Requested.CPU, 1e-9) // head 1 + 2 workers x 1

	eventually(t, 30*time.Second, "all RayJobs in the cache", func() bool {
		r := call(t, "GET", nsPath(ns, "rayjobs")+"?pageSize=500", admin, "", nil)
		return r.Status == 200 && decode[listData](t, r).Total == 21
	})
}

func TestAuthorization(t *testing.T) {
	ns := namespace(t, "authz-a")
	other := namespace(t, "authz-b")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "owned", nil).Status)
	require.Equal(t, 201, createCluster(t, admin, other, "elsewhere", nil).Status)
	bind(t, ns, "bob", "ray-viewer") // bob may read Ray objects in ns only
	eventually(t, 30*time.Second, "both clusters cached", func() bool {
		r := call(t, "GET", "/rest/ray/v1/rayclusters?search=owned", admin, "", nil)
		r2 := call(t, "GET", "/rest/ray/v1/rayclusters?search=elsewhere", admin, "", nil)
		return decode[listData](t, r).Total >= 1 && decode[listData](t, r2).Total >= 1
	})
	item := nsPath(ns, "rayclusters") + "/owned"
	manifest, _ := json.Marshal(map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": map[string]string{"name": "x"}})

	t.Run("no token is 401 on every route", func(t *testing.T) {
		for _, rt := range []struct{ method, path string }{
			{"GET", "/rest/ray/v1/rayclusters"}, {"GET", "/rest/ray/v1/rayjobs"}, {"GET", nsPath(ns, "rayservices")},
			{"POST", nsPath(ns, "rayclusters")}, {"GET", item}, {"PUT", item}, {"DELETE", item}, {"GET", item + "/yaml"},
		} {
			r := call(t, rt.method, rt.path, "", "application/json", manifest)
			assert.Equal(t, 401, r.Status, "%s %s", rt.method, rt.path)
			assert.Equal(t, "Unauthorized", r.Reason)
		}
	})
	t.Run("an unknown token is 401", func(t *testing.T) {
		r := call(t, "GET", "/rest/ray/v1/rayclusters", "not-a-token", "", nil)
		assert.Equal(t, 401, r.Status)
		r = call(t, "GET", item, "not-a-token", "", nil)
		assert.Equal(t, 401, r.Status)
	})
	t.Run("the X-OpenFuyao-Authorization header is read first", func(t *testing.T) {
		req := func(h map[string]string) int {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			status, _, err := httpGetHeaders(ctx, env.serviceURL+item, h)
			require.NoError(t, err)
			return status
		}
		assert.Equal(t, 200, req(map[string]string{"X-OpenFuyao-Authorization": "Bearer " + admin, "Authorization": "Bearer " + env.tokens["nobody"]}))
		assert.Equal(t, 403, req(map[string]string{"X-OpenFuyao-Authorization": "Bearer " + env.tokens["nobody"], "Authorization": "Bearer " + admin}))
	})
	t.Run("the viewer reads but may not write", func(t *testing.T) {
		viewer := env.tokens["viewer"]
		r := call(t, "GET", "/rest/ray/v1/rayclusters?search=owned", viewer, "", nil)
		require.Equal(t, 200, r.Status)
		assert.GreaterOrEqual(t, decode[listData](t, r).Total, 1)
		assert.Equal(t, 200, call(t, "GET", item, viewer, "", nil).Status)
		assert.Equal(t, 200, call(t, "GET", item+"/yaml", viewer, "", nil).Status)
		r = createCluster(t, viewer, ns, "viewer-made", nil)
		assert.Equal(t, 403, r.Status)
		assert.Equal(t, "Forbidden", r.Reason)
		cur := call(t, "GET", item+"/yaml", admin, "", nil)
		r = call(t, "PUT", item, viewer, "application/yaml", cur.Raw)
		assert.Equal(t, 403, r.Status)
		r = call(t, "DELETE", item, viewer, "", nil)
		assert.Equal(t, 403, r.Status)
		_, err := getRay(t, rayClusters, ns, "owned")
		assert.NoError(t, err, "the object survives")
	})
	t.Run("the user without permissions sees nothing", func(t *testing.T) {
		nobody := env.tokens["nobody"]
		r := call(t, "GET", "/rest/ray/v1/rayclusters", nobody, "", nil)
		require.Equal(t, 200, r.Status)
		l := decode[listData](t, r)
		assert.Equal(t, 0, l.Total)
		assert.Empty(t, l.Items)
		r = call(t, "GET", nsPath(ns, "rayclusters"), nobody, "", nil)
		assert.Equal(t, 403, r.Status)
		assert.Equal(t, 403, call(t, "GET", item, nobody, "", nil).Status)
		assert.Equal(t, 403, createCluster(t, nobody, ns, "nobody-made", nil).Status)
	})
	t.Run("a user allowed in one namespace sees only that namespace", func(t *testing.T) {
		bob := env.tokens["bob"]
		r := call(t, "GET", "/rest/ray/v1/rayclusters?pageSize=500", bob, "", nil)
		require.Equal(t, 200, r.Status)
		l := decode[listData](t, r)
		require.NotEmpty(t, l.Items)
		for _, it := range l.Items {
			assert.Equal(t, ns, it.Namespace)
		}
		assert.Equal(t, 200, call(t, "GET", nsPath(ns, "rayclusters"), bob, "", nil).Status)
		assert.Equal(t, 403, call(t, "GET", nsPath(other, "rayclusters"), bob, "", nil).Status)
		assert.Equal(t, 403, call(t, "GET", nsPath(other, "rayclusters")+"/elsewhere", bob, "", nil).Status)
	})
}

// stored returns the object's spec and generation as the admin sees them: what a request may change.
// (The operator's status writes change the resourceVersion, not these.)
func stored(t *testing.T, gvr schema.GroupVersionResource, ns, name string) (map[string]any, int64) {
	t.Helper()
	o, err := getRay(t, gvr, ns, name)
	require.NoError(t, err)
	spec, _, _ := unstructured.NestedMap(o.Object, "spec")
	return spec, o.GetGeneration()
}

func TestInputHandling(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "input")
	admin := env.tokens["admin"]
	require.Equal(t, 201, createCluster(t, admin, ns, "keep", nil).Status)
	spec0, gen0 := stored(t, rayClusters, ns, "keep")
	unchanged := func(t *testing.T) {
		t.Helper()
		spec, gen := stored(t, rayClusters, ns, "keep")
		assert.Equal(t, gen0, gen, "generation of the stored object")
		assert.Equal(t, spec0, spec)
	}
	current := call(t, "GET", nsPath(ns, "rayclusters")+"/keep/yaml", admin, "", nil)
	require.Equal(t, 200, current.Status)
	currentYAML := string(current.Raw)
	// A spec edit from a resourceVersion the apiserver cannot give back (the object did not exist then),
	// without a generation to tell that the spec has not moved since: nothing says the edit is based on
	// the current spec (see TestYAMLRoundTrip for a stale edit found out).
	staleYAML := regexp.MustCompile(`resourceVersion: "\d+"`).ReplaceAllString(currentYAML, `resourceVersion: "1"`)
	staleYAML = regexp.MustCompile(`\n  generation: \d+`).ReplaceAllString(staleYAML, "")
	staleYAML = strings.Replace(staleYAML, "replicas: 2", "replicas: 3", 1)
	require.NotEqual(t, currentYAML, staleYAML)
	require.NotContains(t, staleYAML, "generation:")
	keep := nsPath(ns, "rayclusters") + "/keep"
	keepYAML := strings.Replace(minimalCluster, "NAME", "keep", 1)

	cases := []struct {
		name, method, path, contentType, body string
		code                                  int
		reason, msg, field                    string
	}{
		{"body over 1 MiB", "POST", nsPath(ns, "rayclusters"), "application/yaml", keepYAML + "# " + strings.Repeat("x", 1<<20) + "\n", 413, "RequestEntityTooLarge", "1 MiB", ""},
		{"other content type", "POST", nsPath(ns, "rayclusters"), "text/plain", keepYAML, 415, "UnsupportedMediaType", "text/plain", ""},
		{"multi-document YAML", "POST", nsPath(ns, "rayclusters"), "application/yaml", keepYAML + "---\n" + keepYAML, 400, "BadRequest", "2 documents", ""},
		{"YAML syntax", "POST", nsPath(ns, "rayclusters"), "application/yaml", "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata:\n  name: [keep\n", 400, "BadRequest", "line", ""},
		{"JSON syntax", "POST", nsPath(ns, "rayclusters"), "application/json", "{\n \"kind\": \"RayCluster\",\n \"metadata\": {\"name\": \"keep\"\n", 400, "BadRequest", "line", ""},
		{"kind not matching the path", "POST", nsPath(ns, "rayjobs"), "application/yaml", keepYAML, 400, "BadRequest", "kind \"RayCluster\"", ""},
		{"apiVersion not matching", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(keepYAML, "ray.io/v1", "ray.io/v1alpha1", 1), 400, "BadRequest", "apiVersion", ""},
		{"namespace not matching", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(keepYAML, "  name: keep", "  name: keep\n  namespace: elsewhere", 1), 400, "BadRequest", "metadata.namespace", ""},
		{"name not a DNS-1035 label", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(minimalCluster, "NAME", "Bad_Name", 1), 422, "Invalid", "", "metadata.name"},
		{"name too long for a RayCluster", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(minimalCluster, "NAME", strings.Repeat("a", 54), 1), 422, "Invalid", "", "metadata.name"},
		{"name too long for a RayJob", "POST", nsPath(ns, "rayjobs"), "application/yaml", string(mustRename(t, "rayjob-minimal.yaml", strings.Repeat("j", 48))), 422, "Invalid", "", "metadata.name"},
		{"missing name", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(minimalCluster, "  name: NAME\n", "  labels: {a: b}\n", 1), 422, "Invalid", "", "metadata.name"},
		{"unknown field", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(strings.Replace(minimalCluster, "NAME", "unknown", 1), "  rayVersion:", "  colour: blue\n  rayVersion:", 1), 422, "Invalid", "colour", "spec.colour"},
		{"schema violation", "POST", nsPath(ns, "rayclusters"), "application/json", `{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"no-head"},"spec":{"rayVersion":"2.9.0"}}`, 422, "Invalid", "", "spec.headGroupSpec"},
		{"CEL violation", "POST", nsPath(ns, "rayclusters"), "application/yaml", strings.Replace(strings.Replace(minimalCluster, "NAME", "cel", 1), "  rayVersion:", "  managedBy: someone/else\n  rayVersion:", 1), 422, "Invalid", "managedBy", "spec.managedBy"},
		{"duplicate name", "POST", nsPath(ns, "rayclusters"), "application/yaml", keepYAML, 409, "AlreadyExists", "keep", ""},
		{"PUT of a spec edit from an unknown resourceVersion", "PUT", keep, "application/yaml", staleYAML, 409, "Conflict", "spec was changed since resourceVersion 1", ""},
		{"PUT of another name", "PUT", keep, "application/yaml", strings.Replace(currentYAML, "name: keep", "name: other", 1), 400, "BadRequest", "does not match", ""},
		{"PUT with an unknown field", "PUT", keep, "application/yaml", strings.Replace(currentYAML, "spec:\n", "spec:\n  colour: blue\n", 1), 422, "Invalid", "colour", "spec.colour"},
		{"bad dryRun value", "POST", nsPath(ns, "rayclusters") + "?dryRun=maybe", "application/yaml", keepYAML, 400, "BadRequest", "dryRun", ""},
		{"unknown kind", "POST", nsPath(ns, "pods"), "application/yaml", keepYAML, 404, "NotFound", "unknown kind", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, c.method, c.path, admin, c.contentType, []byte(c.body))
			require.Equal(t, c.code, r.Status, "%s", r.Raw)
			if c.code >= 400 {
				assert.Equal(t, c.reason, r.Reason, "%s", r.Raw)
			}
			assert.Contains(t, r.Msg, c.msg)
			if c.field != "" {
				var fields []string
				for _, d := range r.Details {
					fields = append(fields, d.Field)
				}
				assert.Contains(t, fields, c.field, "%s", r.Raw)
			}
			unchanged(t)
		})
	}
	t.Run("server-set fields in a create body are ignored", func(t *testing.T) {
		body := strings.Replace(minimalCluster, "NAME", "ignored-fields", 1)
		body = strings.Replace(body, "  name: ignored-fields\n", "  name: ignored-fields\n  uid: 1234\n  resourceVersion: \"99\"\n  managedFields: [{manager: x, operation: Apply}]\n", 1)
		body += "status:\n  state: ready\n"
		r := call(t, "POST", nsPath(ns, "rayclusters"), admin, "application/yaml", []byte(body))
		require.Equal(t, 201, r.Status, "%s", r.Raw)
		o, err := getRay(t, rayClusters, ns, "ignored-fields")
		require.NoError(t, err)
		assert.NotEqual(t, "1234", string(o.GetUID()))
	})
	t.Run("PUT dry run stores nothing", func(t *testing.T) {
		// The operator's status writes may land after the export: the replace is rebased on them.
		fresh := call(t, "GET", keep+"/yaml", admin, "", nil)
		r := call(t, "PUT", keep+"?dryRun=true", admin, "application/yaml", []byte(strings.Replace(string(fresh.Raw), "replicas: 2", "replicas: 3", 1)))
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		assert.Equal(t, int64(3), decode[summary](t, r).WorkerGroups[0].Replicas, "the answer shows the change")
		unchanged(t)
	})
	t.Run("create dry run stores nothing", func(t *testing.T) {
		r := createClusterAt(t, admin, ns, "dry", "?dryRun=true")
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		assert.Equal(t, "dry", decode[summary](t, r).Name)
		_, err := getRay(t, rayClusters, ns, "dry")
		assert.Error(t, err)
	})
}

// The exported YAML goes back unchanged with PUT: 200, and the spec stays as it was, although the object
// moved since the export (as the operator's status writes move it): the replace is rebased on the
// current object, and what someone else changed meanwhile in a part the YAML leaves as exported stays.
func TestYAMLRoundTrip(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "roundtrip")
	admin := env.tokens["admin"]
	for _, s := range []struct{ kind, file string }{
		{"rayclusters", "raycluster-guide.yaml"}, {"rayjobs", "rayjob-example5.yaml"}, {"rayservices", "rayservice-minimal.yaml"},
	} {
		t.Run(s.kind, func(t *testing.T) {
			r := call(t, "POST", nsPath(ns, s.kind), admin, "application/yaml", testdata(t, s.file))
			require.Equal(t, 201, r.Status, "%s", r.Raw)
			name := decode[summary](t, r).Name
			gvr := schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: s.kind}
			// The operator's first writes land before the snapshot the test compares with: KubeRay
			// v1.6.0 adds a RayJob's finalizer with an update of its spec (see internal/k8s/rebase.go).
			operatorStarted(t, gvr, ns, name)
			exp := call(t, "GET", nsPath(ns, s.kind)+"/"+name+"/yaml?download=true", admin, "", nil)
			require.Equal(t, 200, exp.Status)
			assert.Equal(t, "application/yaml; charset=utf-8", exp.Header.Get("Content-Type"))
			assert.Equal(t, `attachment; filename="`+name+`.yaml"`, exp.Header.Get("Content-Disposition"))
			assert.NotContains(t, string(exp.Raw), "managedFields")
			// Someone else writes after the export, at a moment the test chooses: the operator's writes
			// land whenever they land, before the export or after it.
			patchRay(t, gvr, ns, name, types.MergePatchType, `{"metadata":{"annotations":{"example.com/noted":"by someone else"}}}`)
			before, gen := stored(t, gvr, ns, name)
			put := call(t, "PUT", nsPath(ns, s.kind)+"/"+name, admin, "application/yaml", exp.Raw)
			require.Equal(t, 200, put.Status, "%s", put.Raw)
			after, _ := stored(t, gvr, ns, name)
			assert.Equal(t, before, after)
			o1, _ := getRay(t, gvr, ns, name)
			assert.Equal(t, gen, o1.GetGeneration(), "no spec change")
			assert.Equal(t, "admin", o1.GetAnnotations()["ray.openfuyao.com/creator"])
			assert.Equal(t, "by someone else", o1.GetAnnotations()["example.com/noted"], "the annotation added since the export stays")
		})
	}
	t.Run("a stale edit", func(t *testing.T) {
		require.Equal(t, 201, createCluster(t, admin, ns, "stale", nil).Status)
		path := nsPath(ns, "rayclusters") + "/stale"
		exp := call(t, "GET", path+"/yaml", admin, "", nil)
		require.Equal(t, 200, exp.Status)
		edited := editedReplicas(t, exp.Raw, 1)
		// Someone else scales the workers after the export.
		patchRay(t, rayClusters, ns, "stale", types.JSONPatchType, `[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":3}]`)
		theirs, gen := stored(t, rayClusters, ns, "stale")
		put := call(t, "PUT", path, admin, "application/yaml", edited)
		require.Equal(t, 409, put.Status, "an edit of the spec someone changed since: %s", put.Raw)
		assert.Equal(t, "Conflict", put.Reason)
		assert.Contains(t, put.Msg, "spec was changed since resourceVersion")
		now, _ := stored(t, rayClusters, ns, "stale")
		assert.Equal(t, theirs, now, "their spec stays")
		// The export sent back as it was changes nothing: their spec stays.
		put = call(t, "PUT", path, admin, "application/yaml", exp.Raw)
		require.Equal(t, 200, put.Status, "%s", put.Raw)
		now, nowGen := stored(t, rayClusters, ns, "stale")
		assert.Equal(t, theirs, now)
		assert.Equal(t, gen, nowGen)
		// Read again, the edit is taken.
		exp = call(t, "GET", path+"/yaml", admin, "", nil)
		require.Equal(t, 200, exp.Status)
		put = call(t, "PUT", path, admin, "application/yaml", editedReplicas(t, exp.Raw, 1))
		require.Equal(t, 200, put.Status, "%s", put.Raw)
		assert.Equal(t, int64(1), decode[summary](t, put).WorkerGroups[0].Replicas)
	})
	// Attack (from the review of the rebase): an empty object someone else adds carries meaning, and a
	// stale edit must not drop it. An anti-affinity term's namespaceSelector: {} is every namespace,
	// its absence the pod's own namespace only.
	t.Run("a stale edit cannot drop an empty selector added since", func(t *testing.T) {
		require.Equal(t, 201, createCluster(t, admin, ns, "selector", nil).Status)
		path := nsPath(ns, "rayclusters") + "/selector"
		patchRay(t, rayClusters, ns, "selector", types.JSONPatchType, `[{"op":"add","path":"/spec/workerGroupSpecs/0/template/spec/affinity",`+
			`"value":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"topologyKey":"kubernetes.io/hostname"}]}}}]`)
		exp := call(t, "GET", path+"/yaml", admin, "", nil)
		require.Equal(t, 200, exp.Status)
		patchRay(t, rayClusters, ns, "selector", types.JSONPatchType,
			`[{"op":"add","path":"/spec/workerGroupSpecs/0/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/0/namespaceSelector","value":{}}]`)
		theirs, _ := stored(t, rayClusters, ns, "selector")
		put := call(t, "PUT", path, admin, "application/yaml", editedReplicas(t, exp.Raw, 1))
		require.Equal(t, 409, put.Status, "a spec edit from before the selector: %s", put.Raw)
		assert.Contains(t, put.Msg, "spec was changed since resourceVersion")
		var o unstructured.Unstructured
		require.NoError(t, yaml.Unmarshal(exp.Raw, &o.Object))
		o.SetLabels(map[string]string{"team": "a"})
		labelled, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		put = call(t, "PUT", path, admin, "application/yaml", labelled)
		require.Equal(t, 200, put.Status, "a label edit alone: %s", put.Raw)
		now, _ := stored(t, rayClusters, ns, "selector")
		assert.Equal(t, theirs, now, "their selector stays")
	})
}

// operatorStarted waits until the operator has written the object's status: for a RayJob, past
// JobDeploymentStatus New, where KubeRay adds its finalizer.
func operatorStarted(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	eventually(t, time.Minute, "the operator's first status of "+name, func() bool {
		o, err := getRay(t, gvr, ns, name)
		require.NoError(t, err)
		status, _, _ := unstructured.NestedMap(o.Object, "status")
		if gvr.Resource == "rayjobs" {
			d, _ := status["jobDeploymentStatus"].(string)
			return d != "" && d != "New" && len(o.GetFinalizers()) > 0
		}
		return len(status) > 0
	})
}

// editedReplicas is an exported RayCluster's YAML with its one worker group's replicas set to n.
func editedReplicas(t *testing.T, exported []byte, n int64) []byte {
	t.Helper()
	var o map[string]any
	require.NoError(t, yaml.Unmarshal(exported, &o))
	groups, _, err := unstructured.NestedSlice(o, "spec", "workerGroupSpecs")
	require.NoError(t, err)
	require.Len(t, groups, 1)
	groups[0].(map[string]any)["replicas"] = n
	require.NoError(t, unstructured.SetNestedSlice(o, groups, "spec", "workerGroupSpecs"))
	out, err := yaml.Marshal(o)
	require.NoError(t, err)
	return out
}

// Attack (from the review of the rebase): an export whose uid was taken out, sent after its object was
// deleted and created again under the name, by a caller who may not list (so the export cannot be read
// back). The new object's generation starts again and can equal the one sent: the generation alone must
// not let the old spec over the new object.
func TestAttackStaleReplaceOfAnObjectCreatedAgain(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "recreated")
	admin := env.tokens["admin"]
	user, token := tenant(t, ns, "editor")
	grantRole(t, ns, user, "get-update", rbacv1.PolicyRule{APIGroups: []string{"ray.io"}, Resources: []string{"rayclusters"}, Verbs: []string{"get", "update"}})
	require.Equal(t, 201, createCluster(t, admin, ns, "again", nil).Status)
	path := nsPath(ns, "rayclusters") + "/again"
	exp := call(t, "GET", path+"/yaml", token, "", nil)
	require.Equal(t, 200, exp.Status, "%s", exp.Raw)
	var o unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal(editedReplicas(t, exp.Raw, 1), &o.Object))
	unstructured.RemoveNestedField(o.Object, "metadata", "uid")
	stale, err := yaml.Marshal(o.Object)
	require.NoError(t, err)

	_, exported := stored(t, rayClusters, ns, "again") // the generation the export carries
	ctx := context.Background()
	require.NoError(t, env.adminDyn.Resource(rayClusters).Namespace(ns).Delete(ctx, "again", metav1.DeleteOptions{}))
	eventually(t, time.Minute, "the cluster gone", func() bool {
		_, err := getRay(t, rayClusters, ns, "again")
		return apierrors.IsNotFound(err)
	})
	theirs := clusterManifest(t, "again")
	groups, _, _ := unstructured.NestedSlice(theirs.Object, "spec", "workerGroupSpecs")
	groups[0].(map[string]any)["replicas"] = int64(3)
	require.NoError(t, unstructured.SetNestedSlice(theirs.Object, groups, "spec", "workerGroupSpecs"))
	created, err := env.adminDyn.Resource(rayClusters).Namespace(ns).Create(ctx, theirs, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, exported, created.GetGeneration(), "the attack needs the generations to match")
	spec, _ := stored(t, rayClusters, ns, "again")

	put := call(t, "PUT", path, token, "application/yaml", stale)
	require.Equal(t, 409, put.Status, "the old spec over the object created again: %s", put.Raw)
	now, _ := stored(t, rayClusters, ns, "again")
	assert.Equal(t, spec, now, "the new object's spec stays")
}
