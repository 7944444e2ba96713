//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The helpers the suite's tests share, by subject. A test file keeps its tests and what only they use.

// Requests to the service and their answers.

// response is a decoded envelope plus the raw body.
type response struct {
	Status  int
	Header  http.Header
	Raw     []byte
	Code    int             `json:"code"`
	Msg     string          `json:"msg"`
	Data    json.RawMessage `json:"data"`
	Reason  string          `json:"reason"`
	Details []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"details"`
}

// call sends a request to the service. body may be nil; token "" sends none.
func call(t *testing.T, method, path, token, contentType string, body []byte) *response {
	t.Helper()
	r, err := send(method, path, token, contentType, body)
	require.NoError(t, err)
	return r
}

// send is call for goroutines other than the test's own: it returns what went wrong instead of
// failing the test.
func send(method, path, token, contentType string, body []byte) (*response, error) {
	return sendTo(env.serviceURL, method, path, token, contentType, body)
}

// sendTo is send against the service at base (another instance of it).
func sendTo(base, method, path, token, contentType string, body []byte) (*response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	r := &response{Status: res.StatusCode, Header: res.Header, Raw: raw}
	record(method, path, r)
	if res.Header.Get("Content-Type") == "application/json; charset=utf-8" && method != http.MethodHead {
		if err := json.Unmarshal(raw, r); err != nil {
			return nil, fmt.Errorf("body %s: %w", raw, err)
		}
		if r.Status != r.Code {
			return nil, fmt.Errorf("envelope code %d must equal the HTTP status %d: %s", r.Code, r.Status, raw)
		}
		holdAnsweredSecret(method, path, r.Data)
	}
	return r, nil
}

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	return httpGetHeaders(ctx, url, nil)
}

func httpGetHeaders(ctx context.Context, url string, headers map[string]string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// multipartFile builds a multipart body with data in field "file".
func multipartFile(t *testing.T, filename string, data []byte) (contentType string, body []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile("file", filename)
	require.NoError(t, err)
	_, err = fw.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return w.FormDataContentType(), buf.Bytes()
}

// dataOf returns the data member of an envelope.
func dataOf(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	return env.Data
}

func decode[T any](t *testing.T, r *response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.Data, &v), "data: %s", r.Data)
	return v
}

// patience is the least eventually waits: a bound is there to end a test that will never pass, not to
// judge speed (benchmarks do). A busy machine (the unit tests and the fuzzing run beside this suite)
// answers a watch or a reconcile in seconds that an idle one answers in milliseconds.
const patience = time.Minute

// eventually polls cond every 100ms until it holds or the timeout passes; the timeout is at least
// patience.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = max(timeout, patience)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lacking polls lacks until it names nothing or d has passed, and returns what it named last.
func lacking(d time.Duration, lacks func() string) string {
	deadline := time.Now().Add(d)
	missing := lacks()
	for missing != "" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		missing = lacks()
	}
	return missing
}

// logMentioning returns the lines of svc's log that contain any of words (case-insensitive).
func logMentioning(t *testing.T, svc *serviceProc, words ...string) string {
	t.Helper()
	data, err := os.ReadFile(svc.log.Name())
	require.NoError(t, err)
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, w := range words {
			if w != "" && strings.Contains(strings.ToLower(line), strings.ToLower(w)) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// waitFor polls cond until it holds or d has passed, and says whether it held.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// Paths, manifests and the kinds' resources.

var (
	rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	rayJobs     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	rayServices = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayservices"}
	rayCronJobs = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "raycronjobs"}
)

func nsPath(ns, kind string) string { return "/rest/ray/v1/namespaces/" + ns + "/" + kind }

func itemPath(ns, kind, name string) string { return nsPath(ns, kind) + "/" + name }

func watchPath(ns, kind string) string { return nsPath(ns, kind) + "/watch" }

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

const minimalCluster = `
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: NAME
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-head
          image: rayproject/ray:2.46.0
          resources:
            requests: {cpu: "1", memory: 2Gi}
            limits: {cpu: "1", memory: 2Gi}
  workerGroupSpecs:
  - groupName: workers
    replicas: 2
    minReplicas: 0
    maxReplicas: 4
    rayStartParams: {}
    template:
      spec:
        containers:
        - name: ray-worker
          image: rayproject/ray:2.46.0
          resources:
            requests: {cpu: "2", memory: 4Gi}
            limits: {cpu: "2", memory: 4Gi}
`

func clusterManifest(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(minimalCluster), &u.Object))
	u.SetName(name)
	return u
}

// rayJob builds a RayJob manifest running in HTTPMode (the operator submits through the dashboard).
func rayJob(t *testing.T, name string, suspendable bool) []byte {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(testdata(t, "rayjob-minimal.yaml"), &obj))
	obj["metadata"].(map[string]any)["name"] = name
	spec := obj["spec"].(map[string]any)
	spec["submissionMode"] = "HTTPMode"
	spec["shutdownAfterJobFinishes"] = suspendable
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return b
}

// Namespaces, users and their rights.

// namespace creates a namespace for one test, named prefix and a random suffix, and deletes it when the
// test ends.
func namespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := context.Background()
	name := prefix + "-" + utilrand.String(5)
	_, err := env.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.admin.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// tenant makes a ServiceAccount in ns, a user bound nowhere, gone with its namespace: its user name and a
// token of it. Tests that bind a user in their own namespace use one, so that no other test sees its rights.
func tenant(t *testing.T, ns, name string) (user, token string) {
	t.Helper()
	ctx := context.Background()
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	expiry := int64(3600)
	tr, err := env.admin.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return "system:serviceaccount:" + ns + ":" + name, tr.Status.Token
}

// letServiceAskTokenOf lets the stack's service (the user ray-service) ask a token for the ServiceAccount
// name of ns alone: what an identity it acts as (the idle stop's) needs.
func letServiceAskTokenOf(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	_, err := env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name + "-token"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{name},
			Verbs: []string{"create"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-token"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name + "-token"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "ray-service"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// bind grants a cluster role to a user in one namespace.
func bind(t *testing.T, ns, user, role string) {
	t.Helper()
	_, err := env.admin.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllowed(t, user, ns, "get", "ray.io", "rayclusters")
}

// grantRole gives user a Role of the given name and rules in ns, and waits until the apiserver allows
// the first rule's first verb on its first resource.
func grantRole(t *testing.T, ns, user, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	_, err := env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	first := rules[0]
	waitAllowed(t, user, ns, first.Verbs[0], first.APIGroups[0], first.Resources[0])
}

// allowedTo asks the apiserver whether user may do verb on resource in ns.
func allowedTo(t *testing.T, user, ns, verb, group, resource string) bool {
	t.Helper()
	sar, err := env.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return sar.Status.Allowed
}

// waitAllowed waits until the apiserver's RBAC cache, which learns of bindings a moment after they are
// made, allows user the verb.
func waitAllowed(t *testing.T, user, ns, verb, group, resource string) {
	t.Helper()
	eventually(t, 10*time.Second, user+" allowed to "+verb+" "+resource, func() bool {
		return allowedTo(t, user, ns, verb, group, resource)
	})
}

// clientAs returns a Kubernetes client that acts as a stack user, straight to the apiserver.
func clientAs(t *testing.T, user string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(seeingCredentials(&rest.Config{Host: env.vars["KUBE_APISERVER_URL"], BearerToken: env.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.vars["KUBE_CA_FILE"]}}))
	require.NoError(t, err)
	return cs
}

// dynamicAs returns a dynamic client that acts as a stack user, straight to the apiserver.
func dynamicAs(t *testing.T, user string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(seeingCredentials(&rest.Config{Host: env.vars["KUBE_APISERVER_URL"], BearerToken: env.tokens[user],
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.vars["KUBE_CA_FILE"]}, QPS: 500, Burst: 1000}))
	require.NoError(t, err)
	return d
}

func scaleAs(t *testing.T, token, ns, kind, name, body string) *response {
	t.Helper()
	return call(t, "POST", itemPath(ns, kind, name)+"/scale", token, "application/json", []byte(body))
}

// Ray objects: making them, waiting for them, reading them.

func createCluster(t *testing.T, token, ns, name string, mutate func(map[string]any)) *response {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(minimalCluster), &obj))
	obj["metadata"].(map[string]any)["name"] = name
	if mutate != nil {
		mutate(obj)
	}
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return call(t, "POST", nsPath(ns, "rayclusters"), token, "application/json", b)
}

func createClusterAt(t *testing.T, token, ns, name, query string) *response {
	return call(t, "POST", nsPath(ns, "rayclusters")+query, token, "application/yaml", []byte(strings.Replace(minimalCluster, "NAME", name, 1)))
}

// runningCluster creates the minimal RayCluster ns/name as the admin and waits until it is Running.
func runningCluster(t *testing.T, ns, name string) {
	t.Helper()
	require.Equal(t, 201, createCluster(t, env.tokens["admin"], ns, name, nil).Status)
	waitStatus(t, ns, "rayclusters", name, "Running")
}

func waitStatus(t *testing.T, ns, kind, name, want string) summary {
	t.Helper()
	var last summary
	defer func() {
		if t.Failed() { // what stood in the way, from the detail's health (a timeout ends the test here)
			r := call(t, "GET", itemPath(ns, kind, name), env.tokens["admin"], "", nil)
			t.Logf("%s/%s last read as %q: %d %s", kind, name, last.Status, r.Status, healthOf(r.Raw))
		}
	}()
	eventually(t, 90*time.Second, fmt.Sprintf("%s/%s status %s", kind, name, want), func() bool {
		s, code := statusOf(t, ns, kind, name)
		last = s
		return code == 200 && s.Status == want
	})
	captureStatus(t, ns, kind, name)
	return last
}

// healthOf is the health part of a detail's answer, for a failure's log.
func healthOf(raw []byte) string {
	var d struct {
		Health json.RawMessage `json:"health"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return string(raw)
	}
	return string(d.Health)
}

// statusOf reads an object's summary status through the service, as the admin.
func statusOf(t *testing.T, ns, kind, name string) (summary, int) {
	t.Helper()
	r := call(t, "GET", itemPath(ns, kind, name), env.tokens["admin"], "", nil)
	if r.Status != 200 {
		return summary{}, r.Status
	}
	return decode[summary](t, r), 200
}

// captureStatus saves the object as KubeRay wrote it (its status and spec.suspend) as a candidate
// fixture of the status mapping's unit test, when RAY_TEST_CAPTURE_STATUS names a directory. It
// records no status: the unit test derives the status from KubeRay's fields by API.md's table, so a
// fixture is kept only once someone has named the fields it exercises ("reads", see
// internal/ray/status_test.go); until then that test refuses it.
func captureStatus(t *testing.T, ns, kind, name string) {
	dir := os.Getenv("RAY_TEST_CAPTURE_STATUS")
	if dir == "" {
		return
	}
	gvr := rayClusters.GroupVersion().WithResource(kind)
	o, err := getRay(t, gvr, ns, name)
	require.NoError(t, err)
	object := map[string]any{"status": o.Object["status"]}
	if suspend, ok, _ := unstructured.NestedBool(o.Object, "spec", "suspend"); ok {
		object["spec"] = map[string]any{"suspend": suspend}
	}
	controller := strings.ToLower(o.GetKind()) + "_controller.go"
	fixture := map[string]any{"kind": o.GetKind(), "object": object,
		"source": fmt.Sprintf("captured on the local stack (KWOK pods) by %s; written by ray-project/kuberay %s ray-operator/controllers/ray/%s",
			t.Name(), stackKubeRayVersion(t), controller)}
	b, err := json.MarshalIndent(fixture, "", "  ")
	require.NoError(t, err)
	file := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.json", strings.ToLower(o.GetKind()), name, o.GetResourceVersion()))
	require.NoError(t, os.WriteFile(file, append(b, '\n'), 0o644))
}

// stackKubeRayVersion is the version of the KubeRay operator the local stack runs (stack/tools/kuberay).
func stackKubeRayVersion(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "..", "stack", "tools", "kuberay", "go.mod"))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" && f[1] == "github.com/ray-project/kuberay/ray-operator" {
			return f[2]
		}
	}
	require.FailNow(t, "stack/tools/kuberay/go.mod names no ray-operator version")
	return ""
}

func currentRayCluster(t *testing.T, ns, job string) string {
	t.Helper()
	var name string
	eventually(t, 30*time.Second, "the RayJob's cluster name", func() bool {
		o, err := getRay(t, rayJobs, ns, job)
		require.NoError(t, err)
		name, _, _ = unstructured.NestedString(o.Object, "status", "rayClusterName")
		return name != ""
	})
	return name
}

func mustUID(t *testing.T, ns, name string) string {
	t.Helper()
	o, err := getRay(t, rayJobs, ns, name)
	require.NoError(t, err)
	return string(o.GetUID())
}

func mustRename(t *testing.T, file, name string) []byte {
	y, _ := renamed(t, testdata(t, file), name)
	return y
}

// renamed returns a manifest with another name, as YAML and as JSON.
func renamed(t *testing.T, manifest []byte, name string) (yamlDoc, jsonDoc []byte) {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(manifest, &obj))
	obj["metadata"].(map[string]any)["name"] = name
	y, err := yaml.Marshal(obj)
	require.NoError(t, err)
	j, err := json.Marshal(obj)
	require.NoError(t, err)
	return y, j
}

func getRay(t *testing.T, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return env.adminDyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
}

// patchRay patches a Ray object as the admin, straight to the apiserver: someone else's write.
func patchRay(t *testing.T, gvr schema.GroupVersionResource, ns, name string, pt types.PatchType, patch string) {
	t.Helper()
	_, err := env.adminDyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, pt, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

// clusterPods lists the pods of a Ray cluster as the admin.
func clusterPods(t *testing.T, ns, cluster string) []corev1.Pod {
	t.Helper()
	pods, err := env.admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/cluster=" + cluster})
	require.NoError(t, err)
	return pods.Items
}

func allRunningReady(pods []corev1.Pod) bool {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			return false
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		if !ready {
			return false
		}
	}
	return len(pods) > 0
}

// summary is the part of a list item or detail the tests read.
type summary struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Kind       string `json:"kind"`
	Type       string `json:"type"`
	Status     string `json:"status"`
	RayVersion string `json:"rayVersion"`
	Creator    string `json:"creator"`
	// CreatorSigned says the service wrote the creator.
	CreatorSigned bool      `json:"creatorSigned"`
	CreatedAt     time.Time `json:"createdAt"`
	Image         string    `json:"image"`
	WorkerGroups  []struct {
		Name          string `json:"name"`
		Replicas      int64  `json:"replicas"`
		MinReplicas   int64  `json:"minReplicas"`
		MaxReplicas   int64  `json:"maxReplicas"`
		ReadyReplicas int64  `json:"readyReplicas"`
	} `json:"workerGroups"`
	Requested struct {
		CPU         float64 `json:"cpu"`
		MemoryBytes int64   `json:"memoryBytes"`
		GPU         float64 `json:"gpu"`
	} `json:"requested"`
	Object map[string]any `json:"object"`
	// Scheduling is where the object stands with its queue manager.
	Scheduling *struct {
		Manager string `json:"manager"`
		Queue   string `json:"queue"`
	} `json:"scheduling"`
	// Idle is present while the cluster is judged idle.
	Idle json.RawMessage `json:"idle"`
}

type listData struct {
	Items    []summary `json:"items"`
	Total    int       `json:"total"`
	Page     int       `json:"page"`
	PageSize int       `json:"pageSize"`
}

func nested(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// heldDevices is what a summary or the overview says is held of one accelerator resource.
type heldDevices struct {
	Kind      string  `json:"kind"`
	Resource  string  `json:"resource"`
	Model     string  `json:"model"`
	Count     float64 `json:"count"`
	Devices   float64 `json:"devices"`
	Estimated bool    `json:"estimated"`
}

type overviewData struct {
	Counts *struct {
		RayClusters struct{ Total, Active int } `json:"rayclusters"`
		RayJobs     struct{ Total, Active int } `json:"rayjobs"`
		RayServices struct{ Total, Active int } `json:"rayservices"`
		RayCronJobs struct {
			Total, Active int
			RunsActive    *int `json:"runsActive"`
		} `json:"raycronjobs"`
		ActiveRayClusters int `json:"activeRayClusters"`
	} `json:"counts"`
	Allocated struct {
		CPU          float64            `json:"cpu"`
		MemoryBytes  int64              `json:"memoryBytes"`
		GPU          float64            `json:"gpu"`
		NPU          float64            `json:"npu"`
		Accelerators []heldDevices      `json:"accelerators"`
		Ray          map[string]float64 `json:"ray"`
	} `json:"allocated"`
	Used   figures `json:"used"`
	Series struct {
		Used      map[string][]point `json:"used"`
		Allocated map[string][]point `json:"allocated"`
		RayUsed   map[string][]point `json:"rayUsed"`
	} `json:"series"`
	GrafanaURL string   `json:"grafanaURL"`
	Warnings   []string `json:"warnings"`
}

type figures struct {
	CPU            *float64           `json:"cpu"`
	MemoryBytes    *float64           `json:"memoryBytes"`
	GPU            *float64           `json:"gpu"`
	GPUMemoryBytes *float64           `json:"gpuMemoryBytes"`
	NPU            *float64           `json:"npu"`
	NPUMemoryBytes *float64           `json:"npuMemoryBytes"`
	Ray            map[string]float64 `json:"ray"`
}

type point struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

// Pods and their logs.

type podInfo struct {
	Name       string `json:"name"`
	NodeType   string `json:"nodeType"`
	Group      string `json:"group"`
	Phase      string `json:"phase"`
	Ready      bool   `json:"ready"`
	Node       string `json:"node"`
	IP         string `json:"ip"`
	Containers []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"containers"`
}

// podLog writes lines to a CRI-format log file and has KWOK serve it as the container's log.
func podLog(t *testing.T, ns, pod, container string, lines ...string) string {
	t.Helper()
	dir := filepath.Join(env.vars["KWOK_LOGS_DIR"], ns)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, pod+"-"+container+".log")
	appendLog(t, file, lines...)
	logs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": pod, "namespace": ns},
		"spec": map[string]any{"logs": []any{map[string]any{
			"containers": []any{container}, "logsFile": file, "follow": true}}},
	}}
	_, err := env.adminDyn.Resource(kwokLogs).Namespace(ns).Create(context.Background(), logs, metav1.CreateOptions{})
	require.NoError(t, err)
	return file
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s line %d", prefix, i+1)
	}
	return out
}

func appendLog(t *testing.T, file string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	for _, l := range lines {
		_, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l)
		require.NoError(t, err)
	}
}

var kwokLogs = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// followHeadLog writes line to the log of the head pod of the running RayCluster ns/cluster, opens a
// log follow of it on the service at base as the admin (openFollow), and returns the stream past that
// first line.
func followHeadLog(t *testing.T, base, ns, cluster, line string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	for _, p := range clusterPods(t, ns, cluster) {
		if p.Labels["ray.io/node-type"] == "head" {
			podLog(t, ns, p.Name, "ray-head", line)
		}
	}
	var res *http.Response
	eventually(t, 20*time.Second, "a follow stream open", func() bool {
		var status int
		status, res = openFollow(t, base, itemPath(ns, "rayclusters", cluster), env.tokens["admin"])
		return status == 200
	})
	sc := bufio.NewScanner(res.Body)
	require.True(t, sc.Scan(), "the follow shows the log")
	require.Equal(t, line, sc.Text())
	return res, sc
}

// openFollow starts a log follow on svc as token; it returns the status and, on 200, the open response.
// The request gives up after 120 s, so that a follow that never ends cannot hold the test; a follow the
// service ends ends well before (a test that asserts so tells the two apart by the read's error).
func openFollow(t *testing.T, svcURL, path, token string) (int, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", svcURL+path+"/logs?follow=true", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if res.StatusCode != 200 {
		res.Body.Close()
		return res.StatusCode, nil
	}
	return 200, res
}

// goroutines reads the service's go_goroutines from its /metrics.
func goroutines(t *testing.T) int {
	t.Helper()
	return goroutinesOf(t, env.serviceURL)
}

// goroutinesOf reads the number of goroutines of the service at base.
func goroutinesOf(t *testing.T, base string) int {
	t.Helper()
	status, body, err := httpGet(context.Background(), base+"/metrics")
	require.NoError(t, err)
	require.Equal(t, 200, status)
	m := regexp.MustCompile(`(?m)^go_goroutines (\d+)`).FindSubmatch(body)
	require.NotNil(t, m)
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// Streams.

// sseEvent is one Server-Sent Event as an EventSource dispatches it, stamped when the reader took it off
// the connection (not when a test drains it from the channel).
type sseEvent struct {
	ID    string
	HasID bool
	Name  string
	Data  json.RawMessage
	At    time.Time
}

func (e sseEvent) summary(t *testing.T) summary {
	t.Helper()
	var s summary
	require.NoError(t, json.Unmarshal(e.Data, &s), "%s: %s", e.Name, e.Data)
	return s
}

func (e sseEvent) String() string { return fmt.Sprintf("%s(id %q) %.120s", e.Name, e.ID, e.Data) }

// sseStream reads one watch stream in the background.
type sseStream struct {
	res        *http.Response
	events     chan sseEvent
	done       chan struct{}
	err        error // why reading ended, after done: nil for a clean end of the stream
	heartbeats atomic.Int32
	cancel     context.CancelFunc
	lastID     string
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
	s.res.Body.Close()
}

// read parses the stream as the EventSource specification says: fields up to an empty line make an
// event; a line starting with ":" is a comment; an id field, even empty, sets the last event id.
func (s *sseStream) read() {
	defer close(s.done)
	defer close(s.events)
	lines := bufio.NewScanner(s.res.Body)
	lines.Buffer(make([]byte, 1<<20), 8<<20)
	var ev sseEvent
	var data []string
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if ev.HasID {
					s.lastID = ev.ID
				} else {
					ev.ID = s.lastID
				}
				ev.At = time.Now()
				s.events <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			s.heartbeats.Add(1)
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.ID, ev.HasID = value, true
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			}
		}
	}
	s.err = lines.Err()
}

// next returns the next event, failing the test when none comes within d or the stream ended.
func (s *sseStream) next(t *testing.T, d time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		require.True(t, ok, "the stream ended (%v)", s.err)
		return ev
	case <-time.After(d):
		require.FailNow(t, "no event", "within %s", d)
	}
	return sseEvent{}
}

// until collects events until one satisfies stop (included), within d.
func (s *sseStream) until(t *testing.T, d time.Duration, what string, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	deadline := time.After(d)
	var got []sseEvent
	for {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "the stream ended (%v) before %s; got %v", s.err, what, got)
			got = append(got, ev)
			if stop(ev) {
				return got
			}
		case <-deadline:
			require.FailNow(t, "waiting for "+what, "within %s; got %v", d, got)
		}
	}
}

// snapshot reads the first events up to SYNCED and returns the items by name.
func (s *sseStream) snapshot(t *testing.T) (map[string]summary, sseEvent) {
	t.Helper()
	items := map[string]summary{}
	for {
		ev := s.next(t, 30*time.Second)
		switch ev.Name {
		case "ADDED":
			require.False(t, ev.HasID, "snapshot items have no id of their own")
			items[ev.summary(t).Name] = ev.summary(t)
		case "SYNCED":
			var d struct{ Total int }
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			require.Equal(t, len(items), d.Total)
			require.NotEmpty(t, ev.ID)
			return items, ev
		case "RESYNC":
		default:
			require.FailNow(t, "unexpected event in a snapshot", "%v", ev)
		}
	}
}

// ended waits until the stream ends, and says whether it did within d.
func (s *sseStream) ended(d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// heartbeatCount is how many comment lines the stream sent so far.
func (s *sseStream) heartbeatCount() int { return int(s.heartbeats.Load()) }

// during collects the events that come within d.
func (s *sseStream) during(d time.Duration) []sseEvent {
	deadline := time.After(d)
	var got []sseEvent
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-deadline:
			return got
		}
	}
}

// openWatch opens path on the service at base as token, resuming after lastID when it is set. It
// returns the status and, on 200, the stream (closed at the test's end).
func openWatch(t *testing.T, base, path, token, lastID string) (int, *sseStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if res.StatusCode != 200 {
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		recordStream("GET", path, res, body)
		return res.StatusCode, nil
	}
	recordStream("GET", path, res, nil)
	require.Equal(t, "text/event-stream; charset=utf-8", res.Header.Get("Content-Type"))
	require.Equal(t, "no", res.Header.Get("X-Accel-Buffering"))
	s := &sseStream{res: res, events: make(chan sseEvent, 4096), done: make(chan struct{}), cancel: cancel, lastID: lastID}
	go s.read()
	t.Cleanup(s.close)
	return 200, s
}

// Health.

type health struct {
	State   string     `json:"state"`
	Reason  string     `json:"reason"`
	Message string     `json:"message"`
	Since   *time.Time `json:"since"`
}

type healthDetail struct {
	Status   string    `json:"status"`
	Health   health    `json:"health"`
	Problems []problem `json:"problems"`
}

type problem struct {
	Source  struct{ Kind, Name string } `json:"source"`
	Reason  string                      `json:"reason"`
	Message string                      `json:"message"`
}

func group(obj map[string]any, path ...any) map[string]any {
	var cur any = obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m := cur.(map[string]any)
			if m[k] == nil {
				m[k] = map[string]any{}
			}
			cur = m[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur.(map[string]any)
}

// failWith annotates a pod template so that the stack's KWOK makes its pods fail that way.
func failWith(template map[string]any, how string) {
	group(template, "metadata")["annotations"] = map[string]any{"ray-service.test/fail": how}
}

// waitHealth waits until the detail's health is state with reason, and returns the detail.
func waitHealth(t *testing.T, ns, name, state, reason string) healthDetail {
	t.Helper()
	var d healthDetail
	eventually(t, 60*time.Second, fmt.Sprintf("%s: health %s (%s)", name, state, reason), func() bool {
		r := call(t, "GET", itemPath(ns, "rayclusters", name), env.tokens["admin"], "", nil)
		require.Equal(t, 200, r.Status, string(r.Raw))
		d = decode[healthDetail](t, r)
		return d.Health.State == state && d.Health.Reason == reason
	})
	return d
}

type clusterHealthData struct {
	Cluster string `json:"cluster"`
	Verdict struct {
		Level   string `json:"level"`
		Message string `json:"message"`
	} `json:"verdict"`
	Panels   []healthPanel `json:"panels"`
	Warnings []string      `json:"warnings"`
}

type healthPanel struct {
	Name   string   `json:"name"`
	Value  *float64 `json:"value"`
	Level  string   `json:"level"`
	Query  string   `json:"query"`
	Source string   `json:"source"`
	Reason string   `json:"reason"`
	Series []struct {
		T int64   `json:"t"`
		V float64 `json:"v"`
	} `json:"series"`
	Split   []healthFigure `json:"split"`
	Figures []healthFigure `json:"figures"`
}

type healthFigure struct {
	Name   string   `json:"name"`
	Value  *float64 `json:"value"`
	Series []struct {
		T int64   `json:"t"`
		V float64 `json:"v"`
	} `json:"series"`
}

// History, audit trail and the service's metrics.

type historyRecord struct {
	UID        string     `json:"uid"`
	Kind       string     `json:"kind"`
	Namespace  string     `json:"namespace"`
	Name       string     `json:"name"`
	Creator    string     `json:"creator"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason"`
	FinishedAt *time.Time `json:"finishedAt"`
	DeletedAt  *time.Time `json:"deletedAt"`
	Timeline   []struct {
		Status string    `json:"status"`
		At     time.Time `json:"at"`
	} `json:"timeline"`
	Ending *struct {
		Events []struct {
			Reason         string `json:"reason"`
			InvolvedObject struct{ Kind, Name string }
		} `json:"events"`
		Pods []struct {
			Name       string `json:"name"`
			NodeType   string `json:"nodeType"`
			Containers []struct {
				Name     string `json:"name"`
				State    string `json:"state"`
				ExitCode *int32 `json:"exitCode"`
				Reason   string `json:"reason"`
			} `json:"containers"`
		} `json:"pods"`
		Log *struct {
			Pod       string `json:"pod"`
			Container string `json:"container"`
			Text      string `json:"text"`
			Truncated bool   `json:"truncated"`
		} `json:"log"`
	} `json:"ending"`
	Manifest map[string]any `json:"manifest"`
}

func (r historyRecord) statuses() []string {
	var out []string
	for _, t := range r.Timeline {
		out = append(out, t.Status)
	}
	return out
}

type historyPage struct {
	Items []historyRecord `json:"items"`
	Total int             `json:"total"`
}

// historyOf returns the records of kind named name in ns, as the service at base lists them to the admin.
func historyOf(t *testing.T, base, kind, ns, name string) []historyRecord {
	t.Helper()
	r, err := sendTo(base, "GET", "/rest/ray/v1/history/"+kind+"?namespace="+ns+"&search="+url.QueryEscape(name)+"&pageSize=500",
		env.tokens["admin"], "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, r.Status, string(r.Raw))
	var out []historyRecord
	for _, it := range decode[historyPage](t, r).Items {
		if it.Name == name {
			out = append(out, it)
		}
	}
	return out
}

// recordOf returns the one record of kind named name in ns once cond holds of it, in full.
func recordOf(t *testing.T, base, kind, ns, name string, what string, cond func(historyRecord) bool) historyRecord {
	t.Helper()
	var got historyRecord
	eventually(t, 60*time.Second, fmt.Sprintf("the history of %s %s/%s: %s", kind, ns, name, what), func() bool {
		return historyShows(base, kind, ns, name, func(r historyRecord) bool { got = r; return cond(r) })
	})
	return got
}

// historyShows tells whether the service at base shows one record of kind named name in ns to the
// admin, and cond holds of it in full.
func historyShows(base, kind, ns, name string, cond func(historyRecord) bool) bool {
	return historyLacks(base, kind, ns, name, cond) == ""
}

// historyRecordOf is the record of the one object named name in the history of base, or what is
// missing to read it.
func historyRecordOf(base, kind, ns, name string) (historyRecord, string) {
	r, err := sendTo(base, "GET", "/rest/ray/v1/history/"+kind+"?namespace="+ns+"&search="+url.QueryEscape(name), env.tokens["admin"], "", nil)
	if err != nil || r.Status != 200 {
		return historyRecord{}, fmt.Sprintf("the history's list answered %v", errOrStatus(err, r))
	}
	var page historyPage
	if err := json.Unmarshal(r.Data, &page); err != nil {
		return historyRecord{}, "the history's list: " + err.Error()
	}
	var uids []string
	for _, it := range page.Items {
		if it.Name == name {
			uids = append(uids, it.UID)
		}
	}
	if len(uids) != 1 {
		return historyRecord{}, fmt.Sprintf("%d records named %s", len(uids), name)
	}
	r, err = sendTo(base, "GET", "/rest/ray/v1/history/"+kind+"/"+uids[0], env.tokens["admin"], "", nil)
	if err != nil || r.Status != 200 {
		return historyRecord{}, fmt.Sprintf("the record answered %v", errOrStatus(err, r))
	}
	var rec historyRecord
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return historyRecord{}, "the record: " + err.Error()
	}
	return rec, ""
}

// errOrStatus is err, or else r's status.
func errOrStatus(err error, r *response) any {
	if err != nil {
		return err
	}
	return r.Status
}

// historyLacks is "" where the one record named name in the history of base meets cond, else what it
// shows of how its object ended (for a test's message), from the same reading.
func historyLacks(base, kind, ns, name string, cond func(historyRecord) bool) string {
	rec, missing := historyRecordOf(base, kind, ns, name)
	switch {
	case missing != "":
		return missing
	case cond(rec):
		return ""
	case rec.Ending == nil:
		return fmt.Sprintf("status %s, timeline %v, no ending", rec.Status, rec.statuses())
	case rec.Ending.Log == nil:
		return fmt.Sprintf("status %s, an ending of %d pods and %d events, without a log", rec.Status, len(rec.Ending.Pods), len(rec.Ending.Events))
	}
	text := rec.Ending.Log.Text
	return fmt.Sprintf("status %s, a log of %s ending %q", rec.Status, rec.Ending.Log.Pod, text[max(0, len(text)-80):])
}

// finishedJob runs a RayJob (HTTPMode, its cluster deleted 2 s after it ends) to status, with lines in
// its head's log, and returns its cluster's name.
func finishedJob(t *testing.T, ns, name, status string, lines []string) string {
	t.Helper()
	var obj map[string]any
	require.NoError(t, json.Unmarshal(rayJob(t, name, true), &obj))
	obj["spec"].(map[string]any)["ttlSecondsAfterFinished"] = 2
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayjobs"), env.tokens["admin"], "application/json", b)
	require.Equal(t, 201, r.Status, string(r.Raw))
	waitStatus(t, ns, "rayjobs", name, "Running")
	cluster := currentRayCluster(t, ns, name)
	for _, p := range clusterPods(t, ns, cluster) {
		if p.Labels["ray.io/node-type"] == "head" {
			podLog(t, ns, p.Name, "ray-head", lines...)
		}
	}
	finishJobs(t, ns, cluster, strings.ToUpper(status))
	waitStatus(t, ns, "rayjobs", name, status)
	return cluster
}

// postgresDatabase creates a database of its own on the stack's PostgreSQL and returns its DSN.
func postgresDatabase(t *testing.T) string {
	t.Helper()
	dsn, err := newPostgresDatabase(env.vars)
	require.NoError(t, err)
	return dsn
}

// newPostgresDatabase makes a database of its own in the stack's PostgreSQL and returns its DSN.
func newPostgresDatabase(vars map[string]string) (string, error) {
	return postgresDatabaseOf(vars, "history_"+strings.ReplaceAll(utilrand.String(8), "-", ""))
}

// postgresDatabaseOf is the DSN of the database of the stack's PostgreSQL named for name (an instance's
// log, so that an instance started again under the same name finds its database, as it finds its SQLite
// file), made where it is not there yet.
func postgresDatabaseOf(vars map[string]string, name string) (string, error) {
	admin := vars["HISTORY_POSTGRES_DSN"]
	if admin == "" {
		return "", errors.New("the stack runs no PostgreSQL (WITH_POSTGRES=1)")
	}
	name = strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(name, "_"))
	if len(name) > 63 { // PostgreSQL's longest name: the end, which tells instances apart
		name = name[len(name)-63:]
	}
	db, err := sql.Open("pgx", admin)
	if err != nil {
		return "", err
	}
	defer func() { _ = db.Close() }()
	ctx := context.Background()
	var there bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&there); err != nil {
		return "", err
	}
	if !there {
		if _, err = db.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
			return "", err
		}
	}
	return strings.Replace(admin, "/postgres?", "/"+name+"?", 1), nil
}

// metricOf reads one of the service's own metrics.
func metricOf(t *testing.T, base, name string) float64 {
	t.Helper()
	v, ok := seriesOf(t, base, name)
	require.True(t, ok, "%s in /metrics", name)
	return v
}

// seriesOf reads a series of the service's own metrics (a name, a pattern of its labels), and whether
// it is there.
func seriesOf(t *testing.T, base, series string) (float64, bool) {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + series + ` ([0-9.e+]+)$`).FindStringSubmatch(string(body))
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v, true
}

// metricsSize reads the service's /metrics.
func metricsBody(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, body, err := httpGet(ctx, env.serviceURL+"/metrics")
	require.NoError(t, err)
	require.Equal(t, 200, status)
	return string(body)
}

type auditData struct {
	Items []auditEntry `json:"items"`
	Total int          `json:"total"`
}

type auditEntry struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Action    string    `json:"action"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	User      string    `json:"user"`
	RequestID string    `json:"requestID"`
	Message   string    `json:"message"`
}

// Service instances and the stack.

// instance is a service instance a test runs for itself, beside the shared one.
type instance struct {
	log         string        // its log's file name under the stack's logs; it also names its history and Lease
	readyWithin time.Duration // how long it may take to become ready; 60 s when zero
	environ     []string      // added to its environment
	args        []string      // added to (and overriding) the default flags
}

// start runs i and stops it when t ends; it returns the error of an instance that did not become ready,
// which is stopped already.
func (i instance) start(t *testing.T) (*serviceProc, error) {
	t.Helper()
	within := i.readyWithin
	if within == 0 {
		within = 60 * time.Second
	}
	svc, err := launchServiceEnv(env.root, env.state, env.vars, i.log, within, i.environ, i.args...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { svc.stop() })
	return svc, nil
}

// startInstance runs a service instance for t with args added to the default flags, fails t unless it
// becomes ready within 60 s, and stops it when t ends.
func startInstance(t *testing.T, log string, args ...string) *serviceProc {
	t.Helper()
	svc, err := instance{log: log, args: args}.start(t)
	require.NoError(t, err)
	return svc
}

// serviceProc is a running service binary.
type serviceProc struct {
	url string
	// dashboardURL is the origin of its Ray dashboards (dashboard-listen).
	dashboardURL string
	// client reaches url: it trusts the serving certificate of an instance that speaks HTTPS.
	client *http.Client
	cmd    *exec.Cmd
	log    *os.File
	done   chan struct{}

	stopOnce sync.Once
	stopped  bool // whether the first stop saw the process end in time
}

// get reads path of the instance with its own client.
func (p *serviceProc) get(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return 0, nil, err
	}
	res, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// stop sends SIGTERM and waits for the process to end; it says whether it ended in time. Only the first
// call acts (a test may stop an instance before its clean-up does); later ones say what it saw.
func (p *serviceProc) stop() bool {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		defer p.log.Close()
		select {
		case <-p.done:
			p.stopped = true
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p.stopped
}

// launched are the log files of the service instances of the run, for the check of the logs.
var launched struct {
	sync.Mutex
	logs []string
}

// launchedLogs returns the log files of the instances launched so far.
func launchedLogs() []string {
	launched.Lock()
	defer launched.Unlock()
	return slices.Clone(launched.logs)
}

// launchService runs the service binary against the stack with the ray-service user's credentials and
// waits until it is ready. args are added to (and may override) the defaults.
func launchService(root, state string, vars map[string]string, logName string, readyWithin time.Duration, args ...string) (*serviceProc, error) {
	return launchServiceEnv(root, state, vars, logName, readyWithin, nil, args...)
}

// launchServiceEnv is launchService with extra environment variables. The free ports it picks may be
// taken by another process before the service binds them (many start side by side): the service then
// exits at once, naming the address, and is started again on others.
func launchServiceEnv(root, state string, vars map[string]string, logName string, readyWithin time.Duration, environ []string, args ...string) (*serviceProc, error) {
	for attempt := 1; ; attempt++ {
		p, err := launchServiceOnce(root, state, vars, logName, readyWithin, environ, args...)
		if err == nil || attempt == 5 || !errors.Is(err, errPortTaken) {
			return p, err
		}
	}
}

// errPortTaken is a service's exit because an address it was given was taken meanwhile.
var errPortTaken = errors.New("an address the service was given was taken")

func launchServiceOnce(root, state string, vars map[string]string, logName string, readyWithin time.Duration, environ []string, args ...string) (*serviceProc, error) {
	bin := os.Getenv("RAY_SERVICE_BIN")
	if bin == "" {
		bin = filepath.Join(root, "bin", "ray-service")
	}
	// The API's address and the Ray dashboards' own origin, picked while both are held: two picks one
	// after the other may return the same port, which the service refuses.
	addrs, err := freeLoopbacks(2)
	if err != nil {
		return nil, err
	}
	addr, dashAddr := addrs[0], addrs[1]
	logf, err := os.Create(filepath.Join(state, "logs", logName))
	if err != nil {
		return nil, err
	}
	launched.Lock()
	launched.logs = append(launched.logs, logName)
	launched.Unlock()
	// Each service keeps a history of its own, in a file named for its log (or, with
	// RAY_TEST_DATABASE=postgres, a PostgreSQL database of its own), under a Lease of its own.
	base := strings.TrimSuffix(logName, ".log")
	if err := os.MkdirAll(filepath.Join(state, "history"), 0o755); err != nil {
		return nil, err
	}
	dsn := "sqlite:" + filepath.Join(state, "history", base+".db")
	if os.Getenv("RAY_TEST_DATABASE") == "postgres" {
		if dsn, err = postgresDatabaseOf(vars, base); err != nil {
			return nil, err
		}
	}
	all := append([]string{"--listen", addr, "--dashboard-listen", dashAddr, "--kubeconfig", vars["SERVICE_KUBECONFIG"],
		"--prometheus-url", vars["PROMETHEUS_URL"], "--template-key-file", vars["TEMPLATE_KEY_FILE"], "--audit-key-file", vars["AUDIT_KEY_FILE"],
		"--log-level", "debug",
		"--shutdown-delay", "0s", "--history-dsn", dsn,
		"--lease", leaseName(base), "--lease-namespace", "default"}, args...) // a test that needs a delay passes one; the last flag wins
	cmd := exec.Command(bin, all...)
	cmd.Env = append(append(os.Environ(), "HTTP_PROXY="+vars["OPERATOR_HTTP_PROXY"], "NO_PROXY=127.0.0.1,localhost"), environ...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &serviceProc{url: "http://" + addr, dashboardURL: "http://" + dashAddr, client: http.DefaultClient, cmd: cmd, log: logf, done: make(chan struct{})}
	if i := slices.Index(all, "--tls-cert-file"); i >= 0 && i+1 < len(all) {
		// A self-signed serving certificate is its own root.
		pem, err := os.ReadFile(all[i+1])
		if err != nil {
			return nil, err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(pem)
		p.url, p.dashboardURL = "https://"+addr, "https://"+dashAddr
		p.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	for {
		if status, _, err := p.get(ctx, "/readyz"); err == nil && status == 200 {
			return p, nil
		}
		select {
		case <-p.done:
			if b, _ := os.ReadFile(logf.Name()); bytes.Contains(b, []byte("address already in use")) {
				return nil, fmt.Errorf("%w; see %s", errPortTaken, logf.Name())
			}
			return nil, fmt.Errorf("the service exited; see %s", logf.Name())
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("the service did not become ready; see %s", logf.Name())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// leaseName makes a Lease name of a log file's base name.
func leaseName(base string) string {
	return "history-" + strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(base), "-"), "-")
}

// freeLoopbacks returns n distinct loopback addresses nothing listened on: each is held until all are
// picked.
func freeLoopbacks(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func stopStack(root, state string) {
	down := exec.Command(filepath.Join(root, "stack", "down.sh"), state)
	down.Stdout, down.Stderr = os.Stderr, os.Stderr
	_ = down.Run()
}

// Stand-ins: Ray dashboards, Prometheus, slow links, tools and a browser.

// standIn is a stand-in for the Ray dashboards of every Ray cluster: it speaks enough of Ray's Jobs and
// Serve REST APIs for the KubeRay operator and the service. Both reach it as their HTTP proxy (the
// stack's OPERATOR_HTTP_PROXY, a loopback address), so requests arrive in proxy form with the in-cluster
// address of the dashboard in the URL, and no name is ever resolved.
type standIn struct {
	srv *http.Server

	mu       sync.Mutex
	jobs     map[string]map[string]*fakeJob // dashboard host -> job id -> job
	requests []seenRequest
	// gcsLogs are the gcs_server.out of the head nodes, by dashboard host prefix and node IP.
	gcsLogs map[string]gcsLog

	// admin reads what a dashboard's head pod says of token authentication.
	admin kubernetes.Interface
	// tokens are the Ray tokens the dashboards took, by dashboard host: the logs are searched for them.
	tokens   map[string]string
	authSeen map[string]authSeen
	// answers are what a test makes the dashboards of hosts starting with a prefix answer instead.
	answers map[string]standInAnswer
}

// standInAnswer answers a request in a test's own way and tells whether it did; the stand-in answers
// the others.
type standInAnswer func(w http.ResponseWriter, r *http.Request) bool

// answer makes the dashboards of hosts starting with prefix answer with h (what whoever controls a
// head could make it answer), until the test ends.
func (s *standIn) answer(t *testing.T, prefix string, h standInAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[prefix] = h
	t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.answers, prefix)
	})
}

// answerOf is what a test made the dashboard at host answer; nil for the stand-in's own answers.
func (s *standIn) answerOf(host string) standInAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	for prefix, h := range s.answers {
		if strings.HasPrefix(host, prefix) {
			return h
		}
	}
	return nil
}

type gcsLog struct{ nodeIP, text string }

// setGCSLog makes the dashboards of hosts starting with prefix serve text as the gcs_server.out of the
// node at nodeIP.
func (s *standIn) setGCSLog(prefix, nodeIP, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcsLogs[prefix] = gcsLog{nodeIP: nodeIP, text: text}
}

// rayToken is the token the dashboard at host (<head service>.<namespace>.svc...) takes, as its head pod
// says: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from a Secret's key, as KubeRay v1.6 writes them
// (controllers/ray/common/pod.go SetContainerTokenAuthEnvVars). "" where it takes none.
func (s *standIn) rayToken(ctx context.Context, host string) (string, error) {
	// The operator asks a RayJob's or RayService's dashboard every few seconds: what a head pod says is
	// read once a second at most.
	s.mu.Lock()
	seen, ok := s.authSeen[host]
	s.mu.Unlock()
	if ok && time.Since(seen.at) < time.Second {
		return seen.token, nil
	}
	token, err := s.readRayToken(ctx, host)
	if err == nil {
		s.mu.Lock()
		s.authSeen[host] = authSeen{token: token, at: time.Now()}
		s.mu.Unlock()
	}
	return token, err
}

type authSeen struct {
	token string
	at    time.Time
}

func (s *standIn) readRayToken(ctx context.Context, host string) (string, error) {
	svcName, rest, _ := strings.Cut(host, ".")
	ns, _, _ := strings.Cut(rest, ".")
	svc, err := s.admin.CoreV1().Services(ns).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil || svc.Spec.Selector["ray.io/cluster"] == "" {
		return "", nil // no head service: the stand-in answers as an open dashboard
	}
	pods, err := s.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: "ray.io/node-type=head,ray.io/cluster=" + svc.Spec.Selector["ray.io/cluster"]})
	if err != nil || len(pods.Items) == 0 {
		return "", err
	}
	for _, c := range pods.Items[0].Spec.Containers {
		mode, modeSet, ref, token := "", false, (*corev1.SecretKeySelector)(nil), ""
		for _, e := range c.Env {
			switch {
			case e.Name == "RAY_AUTH_MODE":
				mode, modeSet = e.Value, true
			case e.Name == "RAY_AUTH_TOKEN" && e.ValueFrom != nil:
				ref = e.ValueFrom.SecretKeyRef
			case e.Name == "RAY_AUTH_TOKEN":
				token = e.Value
			}
		}
		// From Ray 2.61 every cluster runs with token authentication unless RAY_AUTH_MODE=disabled, and
		// ray start --head requires a token (ray-project/ray release notes of ray-2.61.0, "Token
		// authentication on by default"): a head of that version without RAY_AUTH_MODE takes the token
		// its RAY_AUTH_TOKEN gives, whatever its cluster's authOptions say.
		if !modeSet && rayImageAtLeast(c.Image, 2, 61) {
			mode = "token"
		}
		if mode != "token" || (ref == nil && token == "") {
			continue
		}
		if ref != nil {
			secret, err := s.admin.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			token = strings.TrimSpace(string(secret.Data[ref.Key]))
			if token == "" {
				return "", fmt.Errorf("secret %s has no %s", ref.Name, ref.Key)
			}
		}
		s.mu.Lock()
		s.tokens[host] = token
		s.mu.Unlock()
		return token, nil
	}
	return "", nil
}

// rayImageAtLeast tells whether image is a Ray image (rayproject/ray:<version>[-suffix]) of version
// major.minor or later.
func rayImageAtLeast(image string, major, minor int) bool {
	_, tag, ok := strings.Cut(image, "rayproject/ray:")
	if !ok {
		return false
	}
	tag, _, _ = strings.Cut(tag, "-")
	var ma, mi int
	if _, err := fmt.Sscanf(tag, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// rayTokens are the Ray tokens the dashboards took so far.
func (s *standIn) rayTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.tokens))
}

// tokenRefused answers as Ray's dashboard in token mode does (Ray 2.52 and later,
// python/ray/_private/authentication/http_token_authentication.py token_auth_middleware: a text/plain
// 401 "Unauthorized: Missing authentication token", without WWW-Authenticate): the token from Authorization,
// X-Ray-Authorization or the ray-authentication-token cookie; 401 without one, 403 with a wrong one.
// The page itself and /api/authentication_mode are open, so that the page can ask for the token. It
// tells whether it refused.
func (s *standIn) tokenRefused(w http.ResponseWriter, r *http.Request, host string) bool {
	if r.URL.Path == "/" || r.URL.Path == "/api/authentication_mode" {
		return false
	}
	want, err := s.rayToken(r.Context(), host)
	if err != nil {
		http.Error(w, "stand-in: "+err.Error(), http.StatusInternalServerError)
		return true
	}
	if want == "" {
		return false
	}
	got := cmp.Or(r.Header.Get("Authorization"), r.Header.Get("X-Ray-Authorization"))
	if c, err := r.Cookie("ray-authentication-token"); got == "" && err == nil {
		got = "Bearer " + c.Value
	}
	switch {
	case got == "":
		http.Error(w, "Unauthorized: Missing authentication token", http.StatusUnauthorized)
	case got != "Bearer "+want:
		http.Error(w, "Forbidden: Invalid authentication token", http.StatusForbidden)
	default:
		return false
	}
	s.mu.Lock()
	s.requests = append(s.requests, seenRequest{Method: r.Method, Host: host, Path: r.URL.Path, Query: r.URL.RawQuery, Refused: true})
	s.mu.Unlock()
	return true
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Host
	if host == "" {
		host = r.Host
	}
	host = strings.Split(host, ":")[0]
	if s.tokenRefused(w, r, host) {
		return
	}
	if h := s.answerOf(host); h != nil && h(w, r) { // served outside the lock: it may be slow
		return
	}
	if r.URL.Path == "/slow" { // a dashboard that does not answer in time (served outside the lock)
		s.mu.Lock()
		s.requests = append(s.requests, seenRequest{Method: r.Method, Host: host, Path: r.URL.Path, Header: r.Header.Clone()})
		s.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, seenRequest{Method: r.Method, Host: host, Path: r.URL.Path, Query: r.URL.RawQuery,
		Credentials: r.Header.Get("Authorization") != "" || r.Header.Get("X-OpenFuyao-Authorization") != "", Header: r.Header.Clone()})
	table := s.jobs[host]
	if table == nil {
		table = map[string]*fakeJob{}
		s.jobs[host] = table
	}
	now := time.Now().UnixMilli()
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch p := r.URL.Path; {
	case p == "/":
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<html><head><script src="./static/main.js"></script></head><body>Ray Dashboard of ` + host + `</body></html>`))
	case p == "/api/echo" && r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		reply(200, map[string]string{"echo": string(b), "query": r.URL.RawQuery})
	case p == "/hostile":
		// What whoever controls a head pod could answer: a cookie for the console's origin, and a page
		// whose script reads through its own dashboard (allowed) and calls the console's API (refused).
		http.SetCookie(w, &http.Cookie{Name: "console-session", Value: "planted", Path: "/"})
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(hostilePage))
	case p == "/redirect-away":
		http.Redirect(w, r, "http://attacker.example/phish", http.StatusFound)
	case p == "/redirect-root":
		http.Redirect(w, r, "/api/version", http.StatusFound)
	case p == "/redirect-to":
		// Whatever Location a hostile head answers, as it answers it (http.Redirect would clean it).
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(cmp.Or(code, http.StatusFound))
	case p == "/api/v0/logs/file":
		// Ray's log API (python/ray/dashboard/modules/state/state_head.py, Ray 2.10 and later): the
		// file's last lines as they are, text/plain; 400 without a node, 404 for a node it does not know.
		q := r.URL.Query()
		if q.Get("node_ip") == "" && q.Get("node_id") == "" {
			reply(400, map[string]any{"result": false, "msg": "Both node_id and node_ip are not given", "data": map[string]any{}})
			return
		}
		for prefix, l := range s.gcsLogs {
			if strings.HasPrefix(host, prefix) && q.Get("filename") == "gcs_server.out" && q.Get("node_ip") == l.nodeIP {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = w.Write([]byte(l.text))
				return
			}
		}
		reply(404, map[string]any{"result": false, "msg": "Node with IP " + q.Get("node_ip") + " not found", "data": map[string]any{}})
	case strings.HasPrefix(p, "/api/version"):
		reply(200, map[string]string{"version": "standin", "ray_version": "2.46.0", "ray_commit": "standin"})
	case strings.HasPrefix(p, "/api/serve/applications"):
		if r.Method == http.MethodPut {
			reply(200, map[string]string{})
			return
		}
		reply(200, map[string]any{"applications": map[string]any{
			"hello": map[string]any{"name": "hello", "route_prefix": "/", "status": "RUNNING", "message": "",
				"deployments": map[string]any{"Hello": map[string]string{"name": "Hello", "status": "HEALTHY", "message": ""}}},
		}})
	case jobPath.MatchString(p):
		m := jobPath.FindStringSubmatch(p)
		id, action := m[1], m[2]
		switch {
		case id == "" && r.Method == http.MethodPost: // HTTPMode submission
			var body struct {
				Entrypoint   string `json:"entrypoint"`
				SubmissionID string `json:"submission_id"`
			}
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			table[body.SubmissionID] = &fakeJob{ID: body.SubmissionID, Entrypoint: body.Entrypoint, Status: "RUNNING", Start: now}
			reply(200, map[string]string{"job_id": body.SubmissionID, "submission_id": body.SubmissionID})
		case id == "":
			list := []any{}
			for _, j := range table {
				list = append(list, j.info())
			}
			reply(200, list)
		case action == "/stop":
			j := table[id]
			if j == nil {
				reply(404, map[string]string{"error": "no such job"})
				return
			}
			stopped := j.Status == "RUNNING" || j.Status == "PENDING"
			if stopped {
				j.Status, j.End = "STOPPED", now
			}
			reply(200, map[string]bool{"stopped": stopped})
		case action == "/logs":
			reply(200, map[string]string{"logs": ""})
		case r.Method == http.MethodDelete:
			delete(table, id)
			reply(200, map[string]bool{"deleted": true})
		default:
			j := table[id]
			if j == nil { // K8sJobMode: as if the submitter had submitted it
				j = &fakeJob{ID: id, Status: "RUNNING", Start: now}
				table[id] = j
			}
			reply(200, j.info())
		}
	default:
		reply(404, map[string]string{"error": "not found: " + p})
	}
}

// finish sets the status of every job of a Ray cluster's dashboard whose host starts with prefix.
func (s *standIn) finish(hostPrefix, status string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for host, table := range s.jobs {
		if strings.HasPrefix(host, hostPrefix) {
			for _, j := range table {
				j.Status, j.End = status, time.Now().UnixMilli()
				n++
			}
		}
	}
	return n
}

// finishJobs ends with status, through the dashboard stand-in, the Ray jobs submitted to the head of
// cluster, once there is one: a RayJob shows Running before the operator's submission (HTTPMode, in a
// later reconcile) has reached the dashboard.
func finishJobs(t *testing.T, ns, cluster, status string) {
	t.Helper()
	eventually(t, 30*time.Second, "a Ray job submitted to "+cluster, func() bool {
		return env.dashboards.finish(cluster+"-head-svc."+ns, status) > 0
	})
}

// seen counts the requests matching method and a path suffix made to hosts starting with prefix, and
// answered (not refused for their Ray token).
func (s *standIn) seen(method, hostPrefix, pathSuffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if !r.Refused && r.Method == method && strings.HasPrefix(r.Host, hostPrefix) && strings.HasSuffix(strings.TrimSuffix(r.Path, "/"), pathSuffix) {
			n++
		}
	}
	return n
}

// seenQuery counts the requests matching method and path made to hosts starting with prefix whose
// query contains query.
func (s *standIn) seenQuery(method, hostPrefix, path, query string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method && strings.HasPrefix(r.Host, hostPrefix) && r.Path == path && strings.Contains(r.Query, query) {
			n++
		}
	}
	return n
}

// credentialsSeen tells whether any request to hosts starting with prefix carried credentials.
func (s *standIn) credentialsSeen(hostPrefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if strings.HasPrefix(r.Host, hostPrefix) && r.Credentials {
			return true
		}
	}
	return false
}

// startStandIn listens on addr (host:port) until the test binary ends.
func startStandIn(addr string, admin kubernetes.Interface) (*standIn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &standIn{jobs: map[string]map[string]*fakeJob{}, gcsLogs: map[string]gcsLog{}, admin: admin, tokens: map[string]string{}, authSeen: map[string]authSeen{},
		answers: map[string]standInAnswer{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

type fakeJob struct {
	ID, Entrypoint, Status string
	Start, End             int64
}

func (j *fakeJob) info() map[string]any {
	info := map[string]any{"job_id": j.ID, "submission_id": j.ID, "status": j.Status, "entrypoint": j.Entrypoint,
		"message": "stand-in job " + strings.ToLower(j.Status), "type": "SUBMISSION", "start_time": j.Start}
	if j.End != 0 {
		info["end_time"] = j.End
	}
	return info
}

type seenRequest struct {
	Method, Host, Path, Query string
	// Credentials tells whether the request carried an Authorization or X-OpenFuyao-Authorization header.
	Credentials bool
	// Refused: a token-mode dashboard refused it for its token.
	Refused bool
	// Header is what the request carried.
	Header http.Header
}

// headersSeen are the headers of the requests to hosts starting with prefix whose path ends with suffix.
func (s *standIn) headersSeen(hostPrefix, pathSuffix string) []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []http.Header
	for _, r := range s.requests {
		if strings.HasPrefix(r.Host, hostPrefix) && strings.HasSuffix(r.Path, pathSuffix) {
			out = append(out, r.Header)
		}
	}
	return out
}

var jobPath = regexp.MustCompile(`^/api/jobs/?([^/]*)(/stop|/logs)?/?$`)

// hostilePage reports in its own DOM what its script could reach: its dashboard's API through the proxy
// (relative), and the console's API on the same origin.
const hostilePage = `<html><head><title>hostile</title></head><body><div id="dash">pending</div><div id="console">pending</div>
<script>
fetch("./api/version").then(r => r.json()).then(j => { document.getElementById("dash").textContent = "dashboard:" + j.version })
  .catch(e => { document.getElementById("dash").textContent = "dashboard:blocked" });
fetch("/rest/ray/v1/rayclusters").then(r => { document.getElementById("console").textContent = "console:" + r.status })
  .catch(e => { document.getElementById("console").textContent = "console:blocked" });
</script></body></html>`

// startPrometheus backfills the OpenMetrics text with promtool and serves it with Debian's Prometheus on
// a free loopback port. The returned stop ends that Prometheus.
func startPrometheus(t *testing.T, openmetrics string) (string, func()) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "fixture.om")
	require.NoError(t, os.WriteFile(src, []byte(openmetrics), 0o644))
	data := filepath.Join(dir, "data")
	out, err := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics", src, data).CombinedOutput()
	require.NoError(t, err, "%s", out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("global: {scrape_interval: 1m}\n"), 0o644))
	logf, err := os.Create(filepath.Join(env.state, "logs", "prometheus-fixture.log"))
	require.NoError(t, err)
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+data, "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=30d")
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
		logf.Close()
	}
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			stop()
		}
	})
	u := "http://" + addr
	eventually(t, 60*time.Second, "the fixture Prometheus ready", func() bool {
		status, _, err := httpGet(context.Background(), u+"/-/ready")
		return err == nil && status == 200
	})
	return u, stop
}

// slowPrometheus forwards to the stack's Prometheus after a delay, and counts the queries begun, those
// whose client went away before the answer, and those forwarded to be answered.
type slowPrometheus struct {
	delay                        time.Duration
	mu                           sync.Mutex
	started, canceled, forwarded int
}

func (p *slowPrometheus) start(t *testing.T) string {
	t.Helper()
	target, err := url.Parse(env.vars["PROMETHEUS_URL"])
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the query first: only then can the server see the client go away.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.mu.Lock()
		p.started++
		p.mu.Unlock()
		p.mu.Lock()
		delay := p.delay
		p.mu.Unlock()
		select {
		case <-r.Context().Done():
			p.mu.Lock()
			p.canceled++
			p.mu.Unlock()
			return
		case <-time.After(delay):
		}
		p.mu.Lock()
		p.forwarded++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// setDelay changes the delay of the queries that come next.
func (p *slowPrometheus) setDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *slowPrometheus) counts() (started, canceled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started, p.canceled
}

// forwardedCount is how many queries were forwarded to Prometheus (past their delay) so far.
func (p *slowPrometheus) forwardedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded
}

// tcpForwarder relays connections to target until cut: then it refuses new ones and closes the open
// ones, as an apiserver that went away.
type tcpForwarder struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	// delay holds back each chunk sent towards the target: a slow link, so that a test can act
	// between the requests of one operation.
	delay atomic.Int64
	// held: nothing more is sent towards the target.
	held atomic.Bool
}

// slow sets the delay of each chunk read from now on.
func (f *tcpForwarder) slow(d time.Duration) { f.delay.Store(int64(d)) }

// hold sends nothing more towards the target: what is read, and what is held back by the delay, is
// dropped.
func (f *tcpForwarder) hold() { f.held.Store(true) }

// relay copies from towards the target (to), each chunk held back by the delay at the time it was
// read: a link of long latency, not a narrow one (chunks read together arrive together, in order).
func (f *tcpForwarder) relay(to, from net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	chunks := make(chan chunk, 1024)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := from.Read(buf)
			if n > 0 {
				chunks <- chunk{buf[:n], time.Now().Add(time.Duration(f.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if f.held.Load() {
			break
		}
		if _, err := to.Write(c.data); err != nil {
			break
		}
	}
	to.Close()
	from.Close()
	for range chunks { // until the reader ends
	}
}

func (f *tcpForwarder) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cut = true
	f.ln.Close()
	for _, c := range f.conns {
		c.Close()
	}
}

// forward relays connections from a local port to target, at full speed until slowed (see slow).
func forward(t *testing.T, target string) *tcpForwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &tcpForwarder{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, up)
			f.mu.Unlock()
			go f.relay(up, c)
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(f.stop)
	return f
}

// kubeconfigVia writes a copy of the service's kubeconfig whose server is reached through addr.
func kubeconfigVia(t *testing.T, addr string) string {
	t.Helper()
	data, err := os.ReadFile(env.vars["SERVICE_KUBECONFIG"])
	require.NoError(t, err)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(strings.ReplaceAll(string(data), env.vars["KUBE_APISERVER_URL"], "https://"+addr)), 0o600))
	return kc
}

// apiRequest is one request a service instance sent the apiserver.
type apiRequest struct {
	Method, Path, Query string
}

// apiRecorder stands between a service instance and the apiserver, with a TLS certificate of its own,
// and records the requests it passes on, in the order they reach it: what the instance asked of the
// apiserver, and when, relative to what the test saw, without a clock.
type apiRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []apiRequest
}

// recordAPI starts a recorder in front of the stack's apiserver; it stops when t ends, after the
// instances started later (t.Cleanup runs last in first).
func recordAPI(t *testing.T) *apiRecorder {
	t.Helper()
	target, err := url.Parse(env.vars["KUBE_APISERVER_URL"])
	require.NoError(t, err)
	ca, err := os.ReadFile(env.vars["KUBE_CA_FILE"])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca), "the stack's CA")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	rp.FlushInterval = -1 // watches and log follows pass each chunk on at once
	rec := &apiRecorder{}
	rec.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, apiRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery})
		rec.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	rec.srv.StartTLS()
	t.Cleanup(func() {
		rec.srv.CloseClientConnections() // the watches still open
		rec.srv.Close()
	})
	return rec
}

// kubeconfig writes a copy of the service's kubeconfig (its user, its token) whose apiserver is the
// recorder.
func (r *apiRecorder) kubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.vars["SERVICE_KUBECONFIG"])
	require.NoError(t, err)
	caData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	for _, c := range cfg.Clusters {
		c.Server, c.CertificateAuthority, c.CertificateAuthorityData = r.srv.URL, "", caData
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kc))
	return kc
}

// requests returns the requests recorded so far, oldest first.
func (r *apiRecorder) requests() []apiRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// eventReads are the reads (lists and watches) of the events of namespace ns among reqs.
func eventReads(reqs []apiRequest, ns string) []apiRequest {
	var out []apiRequest
	for _, q := range reqs {
		if q.Method == http.MethodGet && q.Path == "/api/v1/namespaces/"+ns+"/events" {
			out = append(out, q)
		}
	}
	return out
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "%s %s:\n%s%s", name, strings.Join(args, " "), out.String(), errOut.String())
	return out.String()
}

// renderPage loads a page in headless Chromium, lets its scripts run (20 s of virtual time, which
// passes as fast as the page lets it), and returns the DOM.
func renderPage(t *testing.T, pageURL string) string {
	t.Helper()
	out, err := chromium(context.Background(), t, "--virtual-time-budget=20000", "--dump-dom", pageURL).Output()
	require.NoError(t, err)
	return string(out)
}

// chromium returns Debian's headless Chromium with a profile of its own, in a process group of its own:
// when ctx ends, or the test does, the whole group is killed (the browser's helper processes too, which
// otherwise keep writing into the profile), and the profile is removed once they are gone.
func chromium(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	require.NoError(t, err, "Debian's chromium is needed: .ci/run installs it")
	profile, err := os.MkdirTemp("", "chromium-profile-")
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + profile}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	killGroup := func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.Cancel = killGroup
	t.Cleanup(func() {
		_ = killGroup()
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("the browser's profile %s could not be removed", profile)
	})
	return cmd
}
