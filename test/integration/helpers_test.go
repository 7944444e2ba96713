//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
)

var (
	rayClusters = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
	rayJobs     = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayjobs"}
	rayServices = schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayservices"}
)

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
	}
	return r, nil
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

func httpGet(ctx context.Context, url string) (int, []byte, error) {
	return httpGetHeaders(ctx, url, nil)
}

// eventually polls cond every 100ms until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

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

func getRay(t *testing.T, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	t.Helper()
	return env.adminDyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
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

// dataOf returns the data member of an envelope.
func dataOf(t *testing.T, body []byte) json.RawMessage {
	t.Helper()
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	return env.Data
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

// instance is a service instance a test runs for itself, beside the shared one.
type instance struct {
	log         string        // its log's file name under the stack's logs; it also names its history and Lease
	readyWithin time.Duration // how long it may take to become ready; 60 s when zero
	environ     []string      // added to its environment
	args        []string      // added to (and overriding) the default flags
}

// startInstance runs a service instance for t with args added to the default flags, fails t unless it
// becomes ready within 60 s, and stops it when t ends.
func startInstance(t *testing.T, log string, args ...string) *serviceProc {
	t.Helper()
	svc, err := instance{log: log, args: args}.start(t)
	require.NoError(t, err)
	return svc
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
