//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// The service on a cluster whose Ray CRDs are KubeRay v1.5.0's: an apiserver of its own (the stack's
// etcd under another prefix, the stack's users), with the CRD manifests of the v1.5.0 operator module
// (test/compat/kuberay15) and no operator, whose part the test plays by writing statuses as v1.5 writes
// them. Every kind is created, listed, shown, scaled, stopped, started and deleted; what only v1.6's
// CRDs hold is refused (422) with the field named, as the apiserver refuses it, and nothing is stored.
func TestKubeRayV15CRDs(t *testing.T) {
	t.Parallel()
	api := compatAPIServer(t, "kuberay15")
	kubectl := filepath.Join(env.vars["STACK_BIN"], "kubectl")
	kc := "--kubeconfig=" + api.admin
	runTool(t, kubectl, kc, "apply", "--server-side", "-f", filepath.Join(kuberay15Dir(t), "config", "crd", "bases"))
	runTool(t, kubectl, kc, "apply", "--server-side", "-f", filepath.Join(env.root, "stack", "rbac.yaml"))
	runTool(t, kubectl, kc, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/rayclusters.ray.io", "crd/rayjobs.ray.io", "crd/rayservices.ray.io")
	crds := runTool(t, kubectl, kc, "get", "crd", "-o", "name")
	assert.NotContains(t, crds, "raycronjobs", "v1.5 has no RayCronJob")

	vars := maps.Clone(env.vars)
	vars["SERVICE_KUBECONFIG"] = api.service
	svc, err := launchServiceEnv(env.root, env.state, vars, "compat-kuberay15.log", 60*time.Second, nil)
	require.NoError(t, err, "the service becomes ready on v1.5's CRDs")
	t.Cleanup(func() { svc.stop() })

	ctx := context.Background()
	admin := env.tokens["admin"]
	ns := "compat-" + utilrand.String(5)
	_, err = api.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	send := func(method, path, contentType string, body []byte) *response {
		t.Helper()
		r, err := sendTo(svc.url, method, path, admin, contentType, body)
		require.NoError(t, err)
		return r
	}
	status := func(kind, name string) summary {
		t.Helper()
		r := send("GET", itemPath(ns, kind, name), "", nil)
		require.Equal(t, 200, r.Status, "%s", r.Raw)
		return decode[summary](t, r)
	}
	writeStatus := func(kind, name, status string) {
		t.Helper()
		_, err := api.dyn.Resource(rayGVR(kind)).Namespace(ns).Patch(ctx, name, types.MergePatchType,
			[]byte(`{"status":`+status+`}`), metav1.PatchOptions{}, "status")
		require.NoError(t, err)
	}
	stored := func(kind, name string) bool {
		t.Helper()
		_, err := api.dyn.Resource(rayGVR(kind)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	refused := func(kind, name string, body []byte, field string) {
		t.Helper()
		r := send("POST", nsPath(ns, kind), "application/json", body)
		assert.Equal(t, 422, r.Status, "%s", r.Raw)
		said := r.Msg
		for _, d := range r.Details {
			said += "\n" + d.Field + ": " + d.Message
		}
		assert.Contains(t, said, field, "the answer names what v1.5's CRD lacks")
		assert.False(t, stored(kind, name), "nothing is stored")
	}
	manifest := func(doc []byte, name string, mutate func(spec map[string]any)) []byte {
		t.Helper()
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &obj))
		obj["metadata"] = map[string]any{"name": name}
		if mutate != nil {
			mutate(obj["spec"].(map[string]any))
		}
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		return b
	}
	cluster := []byte(strings.Replace(minimalCluster, "NAME", "x", 1))

	// The statuses written below use KubeRay v1.5.0's own names (apis/ray/v1/raycluster_types.go:
	// HeadPodRunningAndReady, AllPodRunningAndReadyFirstTime, RayClusterSuspended; rayservice_types.go:
	// NonZeroServeEndpoints, BothActivePendingClustersExist).
	// RayCluster: created, shown with the status v1.5 writes (conditions under its gate, state), scaled,
	// stopped in place and started again.
	require.Equal(t, 201, send("POST", nsPath(ns, "rayclusters"), "application/json", manifest(cluster, "demo", nil)).Status)
	assert.Equal(t, "Pending", status("rayclusters", "demo").Status, "nothing reconciles it")
	writeStatus("rayclusters", "demo", `{"state":"ready","readyWorkerReplicas":2,"availableWorkerReplicas":2,"desiredWorkerReplicas":2,`+
		`"conditions":[{"type":"HeadPodReady","status":"True","reason":"HeadPodRunningAndReady","lastTransitionTime":"2026-01-01T00:00:00Z","message":""},`+
		`{"type":"RayClusterProvisioned","status":"True","reason":"AllPodRunningAndReadyFirstTime","lastTransitionTime":"2026-01-01T00:00:00Z","message":""}]}`)
	assert.Equal(t, "Running", status("rayclusters", "demo").Status)
	r := send("POST", itemPath(ns, "rayclusters", "demo")+"/scale", "application/json", []byte(`{"group":"workers","replicas":3}`))
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.EqualValues(t, 3, status("rayclusters", "demo").WorkerGroups[0].Replicas)
	r = send("POST", itemPath(ns, "rayclusters", "demo")+"/stop", "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	got, err := api.dyn.Resource(rayGVR("rayclusters")).Namespace(ns).Get(ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, true, got.Object["spec"].(map[string]any)["suspend"], "stopped in place")
	writeStatus("rayclusters", "demo", `{"state":"suspended","conditions":[{"type":"RayClusterSuspended","status":"True","reason":"RayClusterSuspended","lastTransitionTime":"2026-01-01T00:01:00Z","message":""}]}`)
	assert.Equal(t, "Stopped", status("rayclusters", "demo").Status)
	r = send("POST", itemPath(ns, "rayclusters", "demo")+"/start", "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	got, err = api.dyn.Resource(rayGVR("rayclusters")).Namespace(ns).Get(ctx, "demo", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, false, got.Object["spec"].(map[string]any)["suspend"], "resumed")
	refused("rayclusters", "token", manifest(cluster, "token", func(spec map[string]any) {
		spec["authOptions"] = map[string]any{"mode": "token"}
	}), "authOptions")
	refused("rayclusters", "recreate", manifest(cluster, "recreate", func(spec map[string]any) {
		spec["upgradeStrategy"] = map[string]any{"type": "Recreate"}
	}), "upgradeStrategy")

	// RayJob: its legacy deletion strategy shown as rules; v1.6's deadline before running refused.
	job := testdata(t, "rayjob-minimal.yaml")
	require.Equal(t, 201, send("POST", nsPath(ns, "rayjobs"), "application/json", manifest(job, "job", func(spec map[string]any) {
		spec["shutdownAfterJobFinishes"] = true
		spec["deletionStrategy"] = map[string]any{"onSuccess": map[string]any{"policy": "DeleteCluster"}, "onFailure": map[string]any{"policy": "DeleteNone"}}
	})).Status)
	writeStatus("rayjobs", "job", `{"jobDeploymentStatus":"Running","jobStatus":"RUNNING","rayClusterName":"job-abcde","jobId":"job-1","startTime":"2026-01-01T00:00:00Z"}`)
	jr := send("GET", itemPath(ns, "rayjobs", "job"), "", nil)
	require.Equal(t, 200, jr.Status, "%s", jr.Raw)
	var jobDetail struct {
		Status        string `json:"status"`
		DeletionRules []struct {
			Policy string `json:"policy"`
			On     string `json:"on"`
		} `json:"deletionRules"`
	}
	require.NoError(t, json.Unmarshal(dataOf(t, jr.Raw), &jobDetail))
	assert.Equal(t, "Running", jobDetail.Status)
	if assert.Len(t, jobDetail.DeletionRules, 2, "onSuccess and onFailure, as rules: %s", jr.Raw) {
		assert.Equal(t, "DeleteCluster", jobDetail.DeletionRules[0].Policy)
		assert.Equal(t, "SUCCEEDED", jobDetail.DeletionRules[0].On)
	}
	refused("rayjobs", "deadline", manifest(job, "deadline", func(spec map[string]any) {
		spec["preRunningDeadlineSeconds"] = 60
	}), "preRunningDeadlineSeconds")

	// RayService: no spec.suspend in v1.5 (v1.7 adds it), so a stop keeps it as a template; an upgrade
	// as v1.5 shows it (UpgradeInProgress; no RollbackInProgress there).
	svcDoc := testdata(t, "rayservice-minimal.yaml")
	require.Equal(t, 201, send("POST", nsPath(ns, "rayservices"), "application/json", manifest(svcDoc, "serve", nil)).Status)
	writeStatus("rayservices", "serve", `{"serviceStatus":"Running","activeServiceStatus":{"rayClusterName":"serve-a"},`+
		`"conditions":[{"type":"Ready","status":"True","reason":"NonZeroServeEndpoints","lastTransitionTime":"2026-01-01T00:00:00Z","message":""},`+
		`{"type":"UpgradeInProgress","status":"True","reason":"BothActivePendingClustersExist","lastTransitionTime":"2026-01-01T00:00:00Z","message":""}]}`)
	assert.Equal(t, "Upgrading", status("rayservices", "serve").Status)
	r = send("POST", itemPath(ns, "rayservices", "serve")+"/stop", "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.Equal(t, "Stopped", status("rayservices", "serve").Status)
	assert.False(t, stored("rayservices", "serve"), "kept as a template")
	r = send("POST", itemPath(ns, "rayservices", "serve")+"/start", "", nil)
	require.Equal(t, 200, r.Status, "%s", r.Raw)
	assert.True(t, stored("rayservices", "serve"), "made again from its template")

	// Lists, the overview and a batch delete across kinds.
	for _, kind := range []string{"rayclusters", "rayjobs", "rayservices"} {
		r := send("GET", nsPath(ns, kind), "", nil)
		assert.Equal(t, 200, r.Status, "%s: %s", kind, r.Raw)
		assert.Contains(t, string(r.Raw), `"total":1`, "%s", kind)
	}
	assert.Equal(t, 200, send("GET", "/rest/ray/v1/overview", "", nil).Status)
	r = send("GET", nsPath(ns, "raycronjobs"), "", nil)
	assert.Equal(t, 404, r.Status, "no RayCronJob CRD: %s", r.Raw)
	assert.Contains(t, r.Msg, "RayCronJob needs KubeRay v1.6", "the answer says why")
	for kind, name := range map[string]string{"rayclusters": "demo", "rayjobs": "job", "rayservices": "serve"} {
		r := send("DELETE", itemPath(ns, kind, name)+"?force=true", "", nil) // the RayJob is Running
		assert.Equal(t, 200, r.Status, "%s: %s", kind, r.Raw)
		assert.Eventually(t, func() bool { return !stored(kind, name) }, 10*time.Second, 100*time.Millisecond, "%s deleted", kind)
	}
}

// kuberay15Dir is the directory of the KubeRay v1.5.0 operator module, which `make test` downloads
// (test/compat/kuberay15).
func kuberay15Dir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kuberayModule)
	cmd.Dir = filepath.Join(env.root, "test", "compat", "kuberay15")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list -m %s (make test downloads it): %s", kuberayModule, out)
	return strings.TrimSpace(string(out))
}

// compatServer is a kube-apiserver of a test's own.
type compatServer struct {
	admin, service string // kubeconfigs of the stack's admin and of the service's user
	client         kubernetes.Interface
	dyn            dynamic.Interface
}

// compatAPIServer starts a kube-apiserver on a loopback port of its own, storing under its own prefix
// of the stack's etcd, with the stack's certificates and users; it is stopped when t ends.
func compatAPIServer(t *testing.T, name string) *compatServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	pki := filepath.Join(env.state, "pki")
	etcd := env.vars["ETCD_URL"]
	require.NotEmpty(t, etcd, "the stack's env names its etcd")
	logf, err := os.Create(filepath.Join(env.state, "logs", "kube-apiserver-"+name+".log"))
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(env.vars["STACK_BIN"], "kube-apiserver"), "--etcd-servers="+etcd,
		"--etcd-prefix=/"+name+"-"+utilrand.String(5),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", "--tls-cert-file="+filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file="+filepath.Join(pki, "apiserver.key"), "--client-ca-file="+filepath.Join(pki, "ca.crt"),
		"--token-auth-file="+filepath.Join(env.state, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=127.3.0.0/16", "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})

	dir := t.TempDir()
	s := &compatServer{admin: filepath.Join(dir, "admin.kubeconfig"), service: filepath.Join(dir, "service.kubeconfig")}
	for file, from := range map[string]string{s.admin: env.vars["KUBECONFIG"], s.service: env.vars["SERVICE_KUBECONFIG"]} {
		cfg, err := clientcmd.LoadFromFile(from)
		require.NoError(t, err)
		for _, c := range cfg.Clusters {
			c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
		}
		require.NoError(t, clientcmd.WriteToFile(*cfg, file))
	}
	rest, err := clientcmd.BuildConfigFromFlags("", s.admin)
	require.NoError(t, err)
	s.client, err = kubernetes.NewForConfig(rest)
	require.NoError(t, err)
	s.dyn, err = dynamic.NewForConfig(rest)
	require.NoError(t, err)
	ready := func() bool {
		select {
		case <-done:
			return true
		default:
		}
		raw, err := s.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(raw) == "ok"
	}
	require.Eventually(t, ready, 90*time.Second, 200*time.Millisecond, "kube-apiserver %s ready", name)
	select {
	case <-done:
		t.Fatalf("kube-apiserver %s exited; see its log", name)
	default:
	}
	return s
}

// rayGVR is the resource of a Ray kind named as in the service's paths.
func rayGVR(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: kind}
}
