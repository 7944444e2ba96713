//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"ray-service/internal/config"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

func docs(t *testing.T, manifest string) []map[string]any {
	t.Helper()
	var out []map[string]any
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m))
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// The chart: lint and render for the marketplace and standalone values, a server-side dry run of every
// rendered object, and the service running under the chart's own RBAC.
func TestHelmChart(t *testing.T) {
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	kubectl := filepath.Join(env.vars["STACK_BIN"], "kubectl")
	chart := filepath.Join(env.root, "charts", "ray-package")
	standalone := filepath.Join(chart, "ci", "standalone-values.yaml")
	ns := namespace(t, "chart")
	kc := "--kubeconfig=" + env.vars["KUBECONFIG"]

	runTool(t, helm, "lint", "--strict", chart)
	runTool(t, helm, "lint", "--strict", chart, "-f", standalone)
	market := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns)
	alone := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "-f", standalone)

	kinds := func(manifest string) map[string]int {
		out := map[string]int{}
		for _, d := range docs(t, manifest) {
			out[d["kind"].(string)]++
		}
		return out
	}
	assert.Equal(t, 1, kinds(market)["ConsolePlugin"], "openFuyao: the console plugin")
	assert.Zero(t, kinds(alone)["ConsolePlugin"], "standalone: none")
	assert.Contains(t, market, "name: oauth-proxy")
	assert.NotContains(t, alone, "name: oauth-proxy")
	for _, want := range []string{"domain = 192.0.2.10", "nodePort: 30300", "nodePort: 30080", `MONITORING_URL: "http://prometheus-server.monitoring.svc:9090"`, "type: NodePort"} {
		assert.Contains(t, alone, want, "the user guide's standalone values take effect")
	}
	assert.Contains(t, alone, `dashboard-origin: "http://192.0.2.10:30081"`, "standalone: the dashboards' origin is a port of the node of their own")
	assert.Contains(t, alone, "nodePort: 30081")
	for name, manifest := range map[string]string{"marketplace": market, "standalone": alone} {
		assert.Contains(t, manifest, `dashboard-listen: ":8081"`, "%s: the Ray dashboards on an origin of their own", name)
		assert.Contains(t, manifest, "name: ray-service-dashboards", "%s: a Service of their own", name)
		assert.Contains(t, manifest, "{name: dashboards, containerPort: 8081}", name)
		assert.Contains(t, manifest, "dashboard-same-origin: false", name)
		assert.Contains(t, manifest, "trusted-proxies: []", "%s: no gateway's forwarded headers believed by default", name)
		assert.Contains(t, manifest, "template-key-secret: "+ns+"/ray-service-template-key", "%s: the service keeps its template key", name)
		assert.Contains(t, manifest, "audit-key-secret: "+ns+"/ray-service-audit-key", "%s: and its audit key", name)
		assert.NotContains(t, manifest, "kind: Secret", "%s: the chart renders no key, so no render changes it", name)
	}
	own := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.templateKey.existingSecret=my-key",
		"--set", "ray-service.auditKey.existingSecret=my-audit-key")
	assert.Contains(t, own, "template-key-file: /etc/ray-service-template-key/key", "a key of one's own is mounted")
	assert.Contains(t, own, "audit-key-file: /etc/ray-service-audit-key/key")
	assert.Contains(t, own, "secretName: my-key")
	assert.Contains(t, own, "secretName: my-audit-key")
	assert.Equal(t, 1, kinds(own)["Role"], "and no Role for keys of the service's own (the Lease's alone)")
	assert.Equal(t, 2, kinds(market)["Role"], "the service's Lease and the keys' Secrets")
	// Grafana: no anonymous viewers anywhere; behind the console, only the oauth-proxy's user, and only
	// the website's pods may reach it. Both run hardened, and NetworkPolicies are on unless opted out.
	assert.NotContains(t, market, "[auth.anonymous]\n    enabled = true")
	assert.NotContains(t, alone, "[auth.anonymous]\n    enabled = true")
	assert.Contains(t, market, "[auth.proxy]\n    enabled = true\n    header_name = X-Forwarded-User")
	assert.NotContains(t, alone, "[auth.proxy]")
	for name, manifest := range map[string]string{"marketplace": market, "standalone": alone} {
		assert.Equal(t, 3, kinds(manifest)["NetworkPolicy"], "%s: for ray-service (who reaches it, what it reaches) and Grafana", name)
		assert.Contains(t, manifest, "name: ray-service-egress", "%s: webhooks reach public addresses only", name)
		assert.Contains(t, manifest, `except: ["0.0.0.0/8","10.0.0.0/8","100.64.0.0/10","127.0.0.0/8","169.254.0.0/16"`, name)
		assert.Equal(t, 2, strings.Count(manifest, "readOnlyRootFilesystem: true"), "%s: both containers of the service chart", name)
	}
	// By default one replica, the history in SQLite on a volume of its own that outlives the release,
	// replaced (not rolled: the volume is mounted by one pod at a time), with a grace period that covers
	// the shutdown delay and timeout, and no disruption budget (it would block every drain).
	serviceDeployment := func(manifest string) map[string]any {
		for _, d := range docs(t, manifest) {
			if d["kind"] == "Deployment" && nested(d, "metadata", "name") == "ray-service" {
				return d
			}
		}
		require.Fail(t, "no ray-service Deployment")
		return nil
	}
	for name, manifest := range map[string]string{"marketplace": market, "standalone": alone} {
		assert.Zero(t, kinds(manifest)["PodDisruptionBudget"], name)
		assert.Equal(t, 1, kinds(manifest)["PersistentVolumeClaim"], name)
		d := serviceDeployment(manifest)
		assert.EqualValues(t, 1, nested(d, "spec", "replicas"), name)
		assert.Equal(t, "Recreate", nested(d, "spec", "strategy", "type"), name)
		assert.EqualValues(t, 30, nested(d, "spec", "template", "spec", "terminationGracePeriodSeconds"), name)
		assert.NotEmpty(t, nested(d, "spec", "template", "spec", "topologySpreadConstraints"), name)
		assert.Contains(t, manifest, "shutdown-delay: 5s", name)
		assert.Contains(t, manifest, "history-dsn: sqlite:/var/lib/ray-service/history.db", name)
		assert.Contains(t, manifest, "mountPath: /var/lib/ray-service", name)
	}
	// Several replicas need the history in PostgreSQL: refused with SQLite, naming what to do; with a
	// PostgreSQL Secret, two replicas, spread, one kept through voluntary disruptions, no volume.
	cmd := exec.Command(helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.replicas=2")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "two replicas on one SQLite volume")
	assert.Contains(t, string(out), "history.postgres.existingSecret")
	ha := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.replicas=2",
		"--set", "ray-service.history.postgres.existingSecret=ray-history-db")
	assert.Equal(t, 1, kinds(ha)["PodDisruptionBudget"])
	assert.Zero(t, kinds(ha)["PersistentVolumeClaim"])
	assert.EqualValues(t, 2, nested(serviceDeployment(ha), "spec", "replicas"))
	assert.Nil(t, nested(serviceDeployment(ha), "spec", "strategy"), "rolled")
	assert.Contains(t, ha, "secretKeyRef: {name: ray-history-db, key: dsn}")
	assert.NotContains(t, ha, "history-dsn:")
	off := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.history.enabled=false")
	assert.Contains(t, off, `history-dsn: ""`)
	assert.Zero(t, kinds(off)["PersistentVolumeClaim"])
	assert.NotContains(t, off, "pods/log", "no log tails read without a history")
	assert.Contains(t, off, "resources: [leases]", "the Lease chooses the replica that acts for all, with or without a history")
	assert.Contains(t, off, "resources: [leases]\n    resourceNames: [ray-service-history]\n    verbs: [get, update]", "the service's Lease alone")
	assert.Regexp(t, `\n    lease: \S+-history\n`, off)
	// The configuration the chart renders is one the service loads, with the values the chart gives.
	for name, manifest := range map[string]string{"marketplace": market, "history off": off} {
		rendered := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--show-only", "charts/ray-service/templates/configmap.yaml",
			"--set", "ray-service.history.enabled="+strconv.FormatBool(name != "history off"), "--set", "ray-service.lease.retryPeriod=3s")
		var cm corev1.ConfigMap
		require.NoError(t, yaml.Unmarshal([]byte(rendered), &cm), name)
		file := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o600))
		cfg, err := config.Load([]string{"--config", file})
		require.NoError(t, err, "%s: the rendered configuration loads", name)
		assert.Equal(t, 3*time.Second, cfg.LeaseRetryPeriod, name)
		assert.Equal(t, ns, cfg.LeaseNamespace, name)
		assert.Contains(t, manifest, "lease: "+cfg.Lease+"\n", name)
	}
	assert.Contains(t, market, "matchLabels: {app.kubernetes.io/name: ray-website, app.kubernetes.io/instance: openfuyao-ray}")
	assert.Zero(t, kinds(market)["PodMonitor"], "the PodMonitor needs the Prometheus Operator: off unless asked for")
	monitored := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.podMonitor.enabled=true")
	assert.Equal(t, 1, kinds(monitored)["PodMonitor"])
	assert.Contains(t, monitored, "podTargetLabels: [ray.io/cluster, ray.io/node-type]", "series carry ray_io_cluster, as the health tab selects them")
	for _, port := range []string{"metrics", "dash-metrics"} {
		assert.Contains(t, monitored, "- port: "+port+"\n", "the PodMonitor scrapes the Ray nodes' and the dashboard's metrics ports")
	}
	older := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.podMonitor.enabled=true",
		"--set", "ray-service.podMonitor.port=ray-metrics")
	assert.Contains(t, older, "- port: ray-metrics\n", "the values of earlier versions still name the port")
	assert.NotContains(t, older, "- port: dash-metrics\n")
	assert.Contains(t, market, "Cluster health", "the Grafana dashboard has the cluster health row")
	optedOut := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.networkPolicy.enabled=false")
	assert.Zero(t, kinds(optedOut)["NetworkPolicy"])
	// The stop of idle clusters by policy: no identity for it unless it is on; on, one ServiceAccount
	// that may get and patch RayClusters (and Kueue's Workloads), whose token the service alone may ask.
	assert.NotContains(t, market, "idle-stop", "off by default: no identity, no flag")
	stopping := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.idle.stopPolicy.enabled=true")
	assert.Equal(t, kinds(market)["ServiceAccount"]+1, kinds(stopping)["ServiceAccount"])
	assert.Contains(t, stopping, "idle-stop-identity: "+ns+"/ray-service-idle-stop")
	assert.Contains(t, stopping, "resources: [serviceaccounts/token]\n    resourceNames: [ray-service-idle-stop]\n    verbs: [create]")
	assert.Contains(t, stopping, "resources: [rayclusters]\n    verbs: [get, patch]")
	chartYAML, err := os.ReadFile(filepath.Join(chart, "Chart.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(chartYAML), "openfuyao-extension")

	runTool(t, kubectl, kc, "apply", "--server-side", "-f", filepath.Join("testdata", "consoleplugin-crd.yaml"))
	runTool(t, kubectl, kc, "wait", "--for=condition=Established", "--timeout=30s", "crd/consoleplugins.console.openfuyao.com")
	for name, manifest := range map[string]string{"marketplace": market, "standalone": alone} {
		f := filepath.Join(t.TempDir(), name+".yaml")
		require.NoError(t, os.WriteFile(f, []byte(manifest), 0o644))
		out := runTool(t, kubectl, kc, "apply", "--dry-run=server", "-f", f)
		assert.Contains(t, out, "created (server dry run)", name)
	}

	// The ClusterRole and the Role (the service's Lease) as rendered: the service runs under them,
	// impersonated, through the main paths.
	var role rbacv1.ClusterRole
	var leaseRole, keyRole rbacv1.Role
	for _, d := range docs(t, market) {
		b, _ := yaml.Marshal(d)
		switch {
		case d["kind"] == "ClusterRole":
			require.NoError(t, yaml.Unmarshal(b, &role))
		case d["kind"] == "Role" && nested(d, "metadata", "name") == "ray-service-keys":
			require.NoError(t, yaml.Unmarshal(b, &keyRole))
		case d["kind"] == "Role":
			require.NoError(t, yaml.Unmarshal(b, &leaseRole))
		}
	}
	require.NotEmpty(t, role.Rules)
	require.NotEmpty(t, leaseRole.Rules)
	require.NotEmpty(t, keyRole.Rules)
	// The services below keep their keys as the chart's does, in the Secrets the chart names; they hold the
	// stack's keys here, so that they trust the templates the tests' service writes.
	for secret, file := range map[string]string{"ray-service-template-key": "TEMPLATE_KEY_FILE", "ray-service-audit-key": "AUDIT_KEY_FILE"} {
		stackKey, err := os.ReadFile(env.vars[file])
		require.NoError(t, err)
		_, err = env.admin.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret}, Data: map[string][]byte{"key": stackKey}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	keyFlags := []string{"--template-key-file=", "--template-key-secret", ns + "/ray-service-template-key",
		"--audit-key-file=", "--audit-key-secret", ns + "/ray-service-audit-key"}
	chartRoles := roles{cluster: role.Rules, namespaced: append(slices.Clone(leaseRole.Rules), keyRole.Rules...)}
	t.Run("the keys' Role makes each key once and reads it after", func(t *testing.T) {
		fresh := namespace(t, "chart-key")
		flags := []string{"--lease-namespace", fresh, "--template-key-file=", "--template-key-secret", fresh + "/ray-service-template-key",
			"--audit-key-file=", "--audit-key-secret", fresh + "/ray-service-audit-key"}
		start := func(sa string, r roles, within time.Duration) *serviceProc {
			log := "ray-service-" + fresh + "-" + sa + ".log"
			svc, err := instance{log: log, readyWithin: within,
				args: append([]string{"--kubeconfig", grant(t, fresh, sa, r.leaseOf(log))}, flags...)}.start(t)
			if err != nil {
				return nil
			}
			return svc
		}
		for i, rule := range keyRole.Rules {
			if slices.Contains(rule.Verbs, "create") {
				without := roles{cluster: role.Rules, namespaced: append(slices.Clone(leaseRole.Rules), removePermission(keyRole.Rules, i, "secrets", "create")...)}
				assert.Nil(t, start("without-create", without, 8*time.Second), "without create secrets no key is made: never ready")
			}
		}
		first := start("first", chartRoles, 60*time.Second)
		require.NotNil(t, first, "the chart's Roles make the key")
		first.stop()
		made := map[string][]byte{}
		for _, name := range []string{"ray-service-template-key", "ray-service-audit-key"} {
			s, err := env.admin.CoreV1().Secrets(fresh).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Len(t, s.Data["key"], 64, name)
			made[name] = s.Data["key"]
		}
		assert.NotEqual(t, made["ray-service-template-key"], made["ray-service-audit-key"], "two keys")
		second := start("second", chartRoles, 60*time.Second)
		require.NotNil(t, second, "a restart reads the keys made before")
		second.stop()
		for name, key := range made {
			kept, err := env.admin.CoreV1().Secrets(fresh).Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, key, kept.Data["key"], "%s: none made again", name)
		}
		for i, rule := range keyRole.Rules {
			if slices.Contains(rule.Verbs, "get") {
				without := roles{cluster: role.Rules, namespaced: append(slices.Clone(leaseRole.Rules), removePermission(keyRole.Rules, i, "secrets", "get")...)}
				assert.Nil(t, start("without-get", without, 8*time.Second), "without get on its Secret the key made before is not read: never ready")
			}
		}
	})
	t.Run("the ClusterRole is enough", func(t *testing.T) {
		svc := serviceAs(t, ns, "ray-service", chartRoles, keyFlags...)
		admin := env.tokens["admin"]
		work := namespace(t, "chart-work")
		require.Equal(t, 201, createCluster(t, admin, work, "under-chart", nil).Status)
		r := call(t, "POST", nsPath(work, "rayservices")+"?start=false", admin, "application/yaml", testdata(t, "rayservice-minimal.yaml"))
		require.Equal(t, 201, r.Status)
		get := func(path string) *response {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			status, body, err := httpGetHeaders(ctx, svc.url+path, map[string]string{"Authorization": "Bearer " + admin})
			require.NoError(t, err)
			return &response{Status: status, Data: dataOf(t, body), Raw: body}
		}
		eventually(t, 60*time.Second, "the cluster listed and Running with ready workers", func() bool {
			l := decode[listData](t, get(nsPath(work, "rayclusters")))
			return l.Total == 1 && l.Items[0].Status == "Running" && l.Items[0].WorkerGroups[0].ReadyReplicas == 2
		})
		assert.Equal(t, 1, decode[listData](t, get(nsPath(work, "rayservices")+"?type=template")).Total, "templates")
		o := decode[overviewData](t, get("/rest/ray/v1/overview?namespace="+work))
		assert.Equal(t, 1, o.Counts.ActiveRayClusters)
		assert.InDelta(t, 5.0, o.Allocated.CPU, 1e-9)
	})
	t.Run("every permission of the ClusterRole is needed", func(t *testing.T) {
		// Without each single permission the service must either never become ready, or lag behind a
		// service with the whole ClusterRole. (Without watch, an informer relists after a backoff that
		// grows past 6 s within 25 s of starting; with watch, changes arrive in milliseconds.) Streaming
		// lists are off, as on apiservers that do not stream them: there informers need list as well.
		type variant struct {
			what string
			svc  *serviceProc
		}
		started := time.Now()
		var mu sync.Mutex
		var variants []variant
		var wg sync.WaitGroup
		launch := func(what, sa string, r roles) {
			kubeconfig := grant(t, ns, sa, r.leaseOf("ray-service-"+sa+".log"))
			// 38 instances start at once, beside other tests: the reference gets time to be ready under load,
			// and a variant enough not to count as never ready merely for being slow.
			within := 30 * time.Second
			if what == "" {
				within = 90 * time.Second
			}
			wg.Go(func() {
				svc, _ := instance{log: "ray-service-" + sa + ".log", readyWithin: within, environ: []string{"KUBE_FEATURE_WatchListClient=false"},
					args: append([]string{"--kubeconfig", kubeconfig, "--lease-namespace", ns, "--notify-allow-cidrs=127.0.0.0/8"}, keyFlags...)}.start(t)
				mu.Lock()
				variants = append(variants, variant{what: what, svc: svc})
				mu.Unlock()
			})
		}
		launch("", "reference", chartRoles)
		// A resource's group is in the name: Volcano's and Kubernetes' PodGroups are both podgroups.
		saName := func(group, res, verb string) string {
			return strings.TrimSuffix("without-"+strings.ReplaceAll(res, "/", "-")+"-"+verb+"-"+strings.ReplaceAll(group, ".", "-"), "-")
		}
		for ri, rule := range role.Rules {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					launch(verb+" "+res+" ("+rule.APIGroups[0]+")", saName(rule.APIGroups[0], res, verb), roles{cluster: removePermission(role.Rules, ri, res, verb),
						namespaced: append(slices.Clone(leaseRole.Rules), keyRole.Rules...)})
				}
			}
		}
		// The template key's Role is proven above, where the key is made and read.
		for ri, rule := range leaseRole.Rules {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					launch(verb+" "+res, saName(rule.APIGroups[0], res, verb), roles{cluster: role.Rules,
						namespaced: append(removePermission(leaseRole.Rules, ri, res, verb), keyRole.Rules...)})
				}
			}
		}
		wg.Wait()
		var reference *serviceProc
		for _, v := range variants {
			if v.what == "" {
				reference = v.svc
			}
		}
		require.NotNil(t, reference, "the whole ClusterRole makes the service ready")
		admin := env.tokens["admin"]
		probe := namespace(t, "chart-probe")
		// Each service follows one object from the start: its stream must show an event made later.
		require.Equal(t, 201, createClusterAt(t, admin, probe, "followed", "?start=false").Status)
		// Its ResourceQuota is shown beside what its clusters held (the utilization report, by namespace): one
		// of GPUs, which asks nothing of pods that request none.
		_, err := env.admin.CoreV1().ResourceQuotas(probe).Create(context.Background(), &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("100")}}},
			metav1.CreateOptions{})
		require.NoError(t, err)
		showsQuota := func(svc *serviceProc) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			status, body, err := httpGetHeaders(ctx, svc.url+"/rest/ray/v1/namespaces/"+probe+"/utilization", map[string]string{"Authorization": "Bearer " + admin})
			require.NoError(t, err)
			var rep struct {
				Items []struct {
					Quota []struct{ Resource string }
				}
			}
			if status != 200 || json.Unmarshal(dataOf(t, body), &rep) != nil || len(rep.Items) != 1 {
				return false
			}
			return len(rep.Items[0].Quota) == 1 && rep.Items[0].Quota[0].Resource == "requests.nvidia.com/gpu"
		}
		streams := map[*serviceProc]*reasons{}
		writes := map[*serviceProc]string{}
		// audited tells whether the audit event of the request id was written.
		audited := func(id string) bool {
			list, err := env.admin.CoreV1().Events(probe).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.openfuyao.com/audit=true"})
			require.NoError(t, err)
			for _, e := range list.Items {
				if id != "" && e.Annotations["ray.openfuyao.com/request-id"] == id {
					return true
				}
			}
			return false
		}
		// Each service delivers the notices of the probe's RayJobs to a webhook of its own, authorized
		// each time as the subscription's creator (a SubjectAccessReview the service makes).
		webhooks := map[*serviceProc]*subscriber{}
		for _, v := range variants {
			if v.svc != nil {
				_, s := openWatch(t, v.svc.url, itemPath(probe, "rayclusters", "followed")+"/watch", admin, "")
				streams[v.svc] = collectReasons(s)
				hook := newSubscriber(t)
				r := subscribe(t, v.svc.url, probe, admin, map[string]any{"url": hook.srv.URL, "kinds": []string{"RayJob"}, "events": []string{"job.succeeded"}})
				if v.svc == reference {
					require.Equal(t, 201, r.Status, "%s", r.Raw)
				}
				if r.Status == 201 {
					webhooks[v.svc] = hook
				}
			}
		}
		told := func(svc *serviceProc, step int) bool {
			if webhooks[svc] == nil {
				return false
			}
			for _, d := range webhooks[svc].received() {
				if d.event.Subject() == fmt.Sprint("RayJob/hjob-", step) {
					return true
				}
			}
			return false
		}
		time.Sleep(time.Until(started.Add(25 * time.Second)))

		// A tenant bound in a namespace of its own each round, by a RoleBinding made then: each service
		// must show it the namespace's RayCluster (the RoleBindings tell where to review it).
		tenantUser, tenantToken := tenant(t, probe, "chart-tenant")
		bound := map[int]string{}
		pgQueue, pgOwner := map[int]string{}, map[int]string{} // the queue of each round's PodGroup, and the resource of its owner
		tenantSees := func(svc *serviceProc, ns string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			status, body, err := httpGetHeaders(ctx, svc.url+"/rest/ray/v1/rayclusters?search=bound", map[string]string{"Authorization": "Bearer " + tenantToken})
			require.NoError(t, err)
			if status != 200 {
				return false
			}
			for _, it := range decode[listData](t, &response{Data: dataOf(t, body)}).Items {
				if it.Namespace == ns {
					return true
				}
			}
			return false
		}
		// lacks names the first thing svc does not show yet in round step, or is empty once it shows all.
		lacks := func(svc *serviceProc, step int) string {
			get := func(path string) listData {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_, body, err := httpGetHeaders(ctx, svc.url+path, map[string]string{"Authorization": "Bearer " + admin})
				require.NoError(t, err)
				return decode[listData](t, &response{Data: dataOf(t, body)})
			}
			// The RayClusters made here (the RayJobs and RayServices make their own, too).
			clusters, ready := 0, 0
			var history string // what the history lacks (asked in order, below)
			for _, it := range get(nsPath(probe, "rayclusters") + "?pageSize=500").Items {
				if regexp.MustCompile(`^probe-\d$`).MatchString(it.Name) && len(it.WorkerGroups) == 1 {
					clusters++
					ready += int(it.WorkerGroups[0].ReadyReplicas)
				}
			}
			// queued says what the list of kind shows of probe-<step>'s queue, "" where it is manager's
			// queue.
			queued := func(kind, manager, queue string) string {
				for _, it := range get(nsPath(probe, kind) + "?search=probe-" + fmt.Sprint(step)).Items {
					if it.Name == fmt.Sprint("probe-", step) {
						if it.Scheduling != nil && it.Scheduling.Manager == manager && it.Scheduling.Queue == queue {
							return ""
						}
						return fmt.Sprintf("%+v", it.Scheduling)
					}
				}
				return "not listed"
			}
			switch {
			case clusters != step || ready != 2*step:
				return fmt.Sprintf("%d RayClusters with %d ready workers", clusters, ready)
			case get(nsPath(probe, "rayjobs")+"?search=probe-").Total != step:
				return "the RayJobs"
			case queued(pgOwner[step], "volcano", pgQueue[step]) != "":
				return fmt.Sprintf("the PodGroup of the %s in queue %q (it shows %s)", pgOwner[step], pgQueue[step], queued(pgOwner[step], "volcano", pgQueue[step]))
			case func() bool {
				for _, it := range get(nsPath(probe, "rayclusters") + "?search=gang-" + fmt.Sprint(step)).Items {
					if it.Name == fmt.Sprint("gang-", step) {
						return it.Scheduling == nil || it.Scheduling.Manager != "kubernetes"
					}
				}
				return true
			}():
				return "the Kubernetes PodGroup of gang-" + fmt.Sprint(step)
			case func() bool {
				// A shared GPU's replica is one over the replicas the nodes say they share each GPU as (the
				// stack's kwok-gpu-sliced-0, relabelled each round): the nodes' labels, listed and watched.
				want := 1 / float64(4+step)
				for _, it := range get(nsPath(probe, "rayclusters") + "?search=sliced-" + fmt.Sprint(step)).Items {
					if it.Name == fmt.Sprint("sliced-", step) {
						return it.Requested.GPU < want-1e-9 || it.Requested.GPU > want+1e-9
					}
				}
				return true
			}():
				return "the shared GPU of sliced-" + fmt.Sprint(step) + " valued on the nodes' labels"
			case queued("rayservices", "kueue", fmt.Sprint("probe-q", step)) != "":
				return "the RayService's Workload (it shows " + queued("rayservices", "kueue", fmt.Sprint("probe-q", step)) + ")"
			case get(nsPath(probe, "raycronjobs")).Total != step:
				return "the RayCronJobs"
			case !tenantSees(svc, bound[step]):
				return "the tenant's RayCluster"
			case draProbeLacks(t, svc.url, probe, step) != "":
				return draProbeLacks(t, svc.url, probe, step)
			case get(nsPath(probe, "rayservices")+"?type=instance").Total != step:
				return "the RayServices"
			case get(nsPath(probe, "rayservices")+"?type=template").Total != step:
				return "the templates"
			case step > 1 && !streams[svc].has(fmt.Sprint("Probe-", step)):
				return "the event in the stream"
			case step > 1 && !audited(writes[svc]):
				return "the audit event"
			case step > 1 && func() bool {
				history = historyLacks(svc.url, "rayjobs", probe, fmt.Sprint("hjob-", step), func(r historyRecord) bool {
					return r.Status == "Succeeded" && r.Ending != nil && r.Ending.Log != nil &&
						strings.Contains(r.Ending.Log.Text, fmt.Sprint("round ", step))
				})
				return history != ""
			}():
				// The history: the RayJob that ended in this round, with the tail of its log.
				return "the history of the RayJob that ended (it shows " + history + ")"
			case step > 1 && !told(svc, step):
				return "the notification of the RayJob that ended"
			case !showsQuota(svc):
				// Last: asked only once the rest holds (38 instances polled every 100 ms).
				return "the quota"
			}
			return ""
		}
		sees := func(svc *serviceProc, step int) bool { return lacks(svc, step) == "" }
		// Three rounds: a service relisting after a backoff catches up now and then by chance (the
		// events stream opened late, so its backoff is still short); it must not do so three times.
		// Events are asked from round 2: a service that kept up in both is given up to two more rounds
		// (a relist after its backoff may fall in a round's window by chance).
		lagging := map[string]bool{}
		keptUp := func() bool {
			for _, v := range variants {
				if v.svc != nil && v.what != "" && !lagging[v.what] {
					return true
				}
			}
			return false
		}
		for step := 1; step <= 3 || (step <= 5 && keptUp()); step++ {
			if step >= 2 {
				// A write through each service must leave its audit event: the events it creates. Each
				// service makes a template of its own, a write that is never a no-op (a no-op is not
				// audited: a start of what another service started a moment before would be one).
				// Without a permission the write needs, a service has no audit event to show.
				for i, v := range variants {
					if v.svc != nil {
						r, err := sendTo(v.svc.url, "POST", nsPath(probe, "rayclusters")+"?start=false", admin, "application/yaml",
							[]byte(strings.Replace(minimalCluster, "NAME", fmt.Sprintf("audited-%d-%d", step, i), 1)))
						require.NoError(t, err)
						writes[v.svc] = ""
						if r.Status == 201 {
							writes[v.svc] = r.Header.Get("X-Request-ID")
						}
						if v.svc == reference {
							require.Equal(t, 201, r.Status, string(r.Raw))
						}
					}
				}
				finishedJob(t, probe, fmt.Sprint("hjob-", step), "Succeeded", []string{fmt.Sprint("round ", step)})
				_, err := env.admin.CoreV1().Events(probe).Create(context.Background(), &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{GenerateName: "probe-"},
					InvolvedObject: corev1.ObjectReference{Kind: "RayCluster", Name: "followed", Namespace: probe, APIVersion: "ray.io/v1"},
					Reason:         fmt.Sprint("Probe-", step), Message: "made by the test", Type: "Normal", Count: 1,
					FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
				}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			suffix := fmt.Sprint("-", step)
			bound[step] = namespace(t, "chart-bound")
			require.Equal(t, 201, createCluster(t, admin, bound[step], "bound", nil).Status)
			bind(t, bound[step], tenantUser, "ray-viewer")
			require.Equal(t, 201, createCluster(t, admin, probe, "probe"+suffix, nil).Status)
			require.Equal(t, 201, call(t, "POST", nsPath(probe, "rayjobs"), admin, "application/yaml", mustRename(t, "rayjob-minimal.yaml", "probe"+suffix)).Status)
			require.Equal(t, 201, call(t, "POST", nsPath(probe, "raycronjobs")+"?start=false", admin, "application/yaml",
				mustRename(t, "raycronjob-minimal.yaml", "probe"+suffix)).Status)
			require.Equal(t, 201, call(t, "POST", nsPath(probe, "rayservices"), admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "probe"+suffix)).Status)
			// The queue managers' groups: the PodGroup KubeRay makes (its batch scheduler here is
			// Volcano) named ray-probe-<round>-pg, of the RayCluster or of the RayJob, whichever it made
			// first (both are named probe-<round>), and a Workload of the RayService in a queue of the
			// round, as Kueue makes one (no Kueue runs here).
			var pg *unstructured.Unstructured
			eventually(t, 30*time.Second, "the PodGroup ray-probe"+suffix+"-pg", func() bool {
				var err error
				pg, err = env.adminDyn.Resource(podGroups).Namespace(probe).Get(context.Background(), "ray-probe"+suffix+"-pg", metav1.GetOptions{})
				return err == nil && len(pg.GetOwnerReferences()) == 1
			})
			pgQueue[step], _, _ = unstructured.NestedString(pg.Object, "spec", "queue")
			pgOwner[step] = map[string]string{"RayCluster": "rayclusters", "RayJob": "rayjobs"}[pg.GetOwnerReferences()[0].Kind]
			makeWorkload(t, probe, rayServices, "probe"+suffix, "rayservice-probe"+suffix, fmt.Sprint("probe-q", step))
			makeGang(t, probe, "gang"+suffix, gangCluster(t, probe, "gang"+suffix), 2)
			// This test runs before the parallel ones (TestSlicedAcceleratorsCountedAsDevices reads the
			// label): it shares the node's GPUs 4+round ways, and four again when it ends.
			relabel := func(replicas int) {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"nvidia.com/gpu.replicas":"%d"}}}`, replicas)
				_, err := env.admin.CoreV1().Nodes().Patch(context.Background(), "kwok-gpu-sliced-0", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				require.NoError(t, err)
			}
			relabel(4 + step)
			if step == 1 {
				t.Cleanup(func() { relabel(4) })
			}
			sliced := clusterManifest(t, "sliced"+suffix)
			res := group(sliced.Object, "spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources")
			for _, part := range []string{"requests", "limits"} {
				group(res, part)["nvidia.com/gpu.shared"] = "1"
			}
			group(sliced.Object, "spec", "workerGroupSpecs", 0)["replicas"] = 1
			slicedBody, err := json.Marshal(sliced.Object)
			require.NoError(t, err)
			require.Equal(t, 201, call(t, "POST", nsPath(probe, "rayclusters")+"?start=false", admin, "application/json", slicedBody).Status)
			draProbe(t, probe, step)
			require.Equal(t, 201, call(t, "POST", nsPath(probe, "rayservices")+"?start=false", admin, "application/yaml", mustRename(t, "rayservice-minimal.yaml", "tpl"+suffix)).Status)
			if missing := lacking(90*time.Second, func() string { return lacks(reference, step) }); missing != "" {
				// What the reference logged of its write and of the audit trail.
				t.Logf("the reference's log of request %s and of the audit trail:\n%s", writes[reference],
					logMentioning(t, reference, writes[reference], "audit"))
				for _, v := range variants {
					if v.svc != nil && v.what != "" && !lagging[v.what] {
						t.Logf("without %s: kept up so far (it lacks %q)", v.what, lacks(v.svc, step))
					}
				}
				t.Fatalf("timed out after 90s waiting for the reference service to see round %d: still without %s", step, missing)
			}
			deadline := time.Now().Add(time.Second)
			var check sync.WaitGroup
			for _, v := range variants {
				if v.svc == nil || v.what == "" || lagging[v.what] {
					continue
				}
				check.Go(func() {
					for !sees(v.svc, step) {
						if time.Now().After(deadline) {
							mu.Lock()
							lagging[v.what] = true
							mu.Unlock()
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				})
			}
			check.Wait()
			time.Sleep(2 * time.Second)
		}
		assert.Len(t, variants, 38) // list and watch of both podgroups, of workloads, of nodes and of DRA's claims, templates and slices too, list resourcequotas, create subjectaccessreviews
		for _, v := range variants {
			switch {
			case v.what == "":
			case v.svc == nil:
				t.Logf("without %s: never ready", v.what)
			case lagging[v.what]:
				t.Logf("without %s: ready, but behind on changes", v.what)
			default:
				assert.Fail(t, "a permission the service does not need", "without %s the service kept up", v.what)
			}
		}
	})
}

// removePermission returns rules without one verb on one resource of rule ri.
func removePermission(rules []rbacv1.PolicyRule, ri int, resource, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for i, r := range rules {
		if i != ri {
			out = append(out, r)
			continue
		}
		for _, res := range r.Resources {
			var verbs []string
			for _, v := range r.Verbs {
				if res != resource || v != verb {
					verbs = append(verbs, v)
				}
			}
			if len(verbs) > 0 {
				out = append(out, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: []string{res}, ResourceNames: r.ResourceNames, Verbs: verbs})
			}
		}
	}
	return out
}

// roles are the rules of a ClusterRole and of a Role in one namespace.
type roles struct{ cluster, namespaced []rbacv1.PolicyRule }

// leaseOf is r with the rules held to the chart's Lease held to the Lease of the instance that logs to
// log instead (startInstance gives each a Lease of its own, leaseName).
func (r roles) leaseOf(log string) roles {
	ns := make([]rbacv1.PolicyRule, len(r.namespaced))
	for i, rule := range r.namespaced {
		ns[i] = *rule.DeepCopy()
		if slices.Contains(rule.Resources, "leases") && len(rule.ResourceNames) > 0 {
			ns[i].ResourceNames = []string{leaseName(strings.TrimSuffix(log, ".log"))}
		}
	}
	return roles{cluster: r.cluster, namespaced: ns}
}

// grant makes a ServiceAccount with a ClusterRole and a Role in ns of the given rules, and a kubeconfig
// that impersonates it with the admin's credentials.
func grant(t *testing.T, ns, sa string, r roles) string {
	t.Helper()
	ctx := context.Background()
	_, err := env.admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(t, err)
	name := ns + "-" + sa
	_, err = env.admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: r.cluster}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: r.namespaced}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = env.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = env.admin.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	user := "system:serviceaccount:" + ns + ":" + sa
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: sa, user: {token: %q, as: %q, as-groups: [system:serviceaccounts, "system:serviceaccounts:%s", system:authenticated]}}]
contexts: [{name: local, context: {cluster: local, user: sa}}]
current-context: local
`, env.vars["KUBE_APISERVER_URL"], env.vars["KUBE_CA_FILE"], env.tokens["admin"], user, ns)), 0o600))
	return kubeconfig
}

func serviceAs(t *testing.T, ns, sa string, r roles, flags ...string) *serviceProc {
	t.Helper()
	kubeconfig := grant(t, ns, sa, r.leaseOf("ray-service-"+sa+".log"))
	return startInstance(t, "ray-service-"+sa+".log", append([]string{"--kubeconfig", kubeconfig,
		"--lease-namespace", ns}, flags...)...)
}

// reasons are the reasons of the Kubernetes events an object stream sent so far.
type reasons struct {
	mu   sync.Mutex
	seen map[string]bool
}

func collectReasons(s *sseStream) *reasons {
	r := &reasons{seen: map[string]bool{}}
	go func() {
		for ev := range s.events {
			var e struct{ Reason string }
			if ev.Name == "EVENT" && json.Unmarshal(ev.Data, &e) == nil {
				r.mu.Lock()
				r.seen[e.Reason] = true
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *reasons) has(reason string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[reason]
}

// The chart with the stop by policy on, on a cluster that serves ValidatingAdmissionPolicy: the service,
// under the chart's rules alone, makes its keys (the admission policy lets it create those Secrets and
// no other), sets a namespace's idle policy (the generations' ConfigMap the chart makes, updated under a
// Role held to its name) and applies it: the idle cluster there gets its stop planned, which needs the
// get on ConfigMaps the service reads policies with. Before, the ClusterRole granted ConfigMaps list and
// watch only (no namespace policy ever applied under the chart), and the service could create any
// Secret in its namespace.
func TestHelmChartIdlePolicyAndKeyRules(t *testing.T) {
	t.Parallel()
	helm := filepath.Join(env.vars["STACK_BIN"], "helm")
	kubectl := filepath.Join(env.vars["STACK_BIN"], "kubectl")
	chart := filepath.Join(env.root, "charts", "ray-package")
	ns := namespace(t, "chart-policy")
	kc := "--kubeconfig=" + env.vars["KUBECONFIG"]
	manifest := runTool(t, helm, "template", "openfuyao-ray", chart, "-n", ns, "--set", "ray-service.idle.stopPolicy.enabled=true",
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
	var r roles
	var admission []map[string]any
	for _, d := range docs(t, manifest) {
		b, _ := yaml.Marshal(d)
		name, _ := nested(d, "metadata", "name").(string)
		switch d["kind"] {
		case "ClusterRole":
			if name == "ray-service-idle-stop" {
				continue // the stopping identity's, not the service's
			}
			var role rbacv1.ClusterRole
			require.NoError(t, yaml.Unmarshal(b, &role))
			r.cluster = append(r.cluster, role.Rules...)
		case "Role":
			if name == "ray-service-idle-stop-token" {
				continue
			}
			var role rbacv1.Role
			require.NoError(t, yaml.Unmarshal(b, &role))
			r.namespaced = append(r.namespaced, role.Rules...)
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			admission = append(admission, d)
		case "ConfigMap":
			if name == "ray-service-idle-policies" {
				admission = append(admission, d) // applied with the policy: the chart makes it
			}
		}
	}
	require.Len(t, admission, 3, "the keys' admission policy, its binding and the generations' ConfigMap")
	assert.Contains(t, manifest, "resources: [configmaps]\n    verbs: [get]", "the service reads the namespaces' policies")
	assert.Contains(t, manifest, "resourceNames: [ray-service-idle-policies]\n    verbs: [get, update]")
	f := filepath.Join(t.TempDir(), "admission.yaml")
	var out []byte
	for _, d := range admission {
		b, err := yaml.Marshal(d)
		require.NoError(t, err)
		out = append(append(out, b...), []byte("---\n")...)
	}
	require.NoError(t, os.WriteFile(f, out, 0o644))
	runTool(t, kubectl, kc, "apply", "-n", ns, "-f", f)
	t.Cleanup(func() { runTool(t, kubectl, kc, "delete", "--ignore-not-found", "-n", ns, "-f", f) })

	kubeconfig := grant(t, ns, "ray-service", r.leaseOf("ray-service-"+ns+".log"))
	// The service's own Secrets: only its keys, of type Opaque.
	asService := clientFromKubeconfig(t, kubeconfig)
	tries := 0
	eventually(t, 30*time.Second, "the admission policy refuses another Secret", func() bool {
		tries++
		_, err := asService.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", tries)},
			StringData: map[string]string{"a": "b"}}, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "may create only its key Secrets")
	})
	svc := startInstance(t, "ray-service-"+ns+".log", "--kubeconfig", kubeconfig, "--lease-namespace", ns,
		"--template-key-file=", "--template-key-secret", ns+"/ray-service-template-key", "--audit-key-file=", "--audit-key-secret", ns+"/ray-service-audit-key",
		"--idle-window=30s", "--idle-interval=5s", "--idle-stop-identity="+ns+"/ray-service-idle-stop", "--idle-stop-warning=10s",
		"--idle-policy-store="+ns+"/ray-service-idle-policies")

	work := namespace(t, "chart-policy-work")
	admin := env.tokens["admin"]
	body, _ := json.Marshal(map[string]string{"stopAfter": "1h"})
	resp, err := sendTo(svc.url, "PUT", "/rest/ray/v1/namespaces/"+work+"/idle-policy", admin, "application/json", body)
	require.NoError(t, err)
	require.Equal(t, 201, resp.Status, "%s", resp.Raw)
	resp, err = sendTo(svc.url, "GET", "/rest/ray/v1/namespaces/"+work+"/idle-policy", admin, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.Status, "%s", resp.Raw)
	u := quietCluster(t, "quiet")
	_, err = env.adminDyn.Resource(rayClusters).Namespace(work).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 3*time.Minute, "the namespace's policy plans the idle cluster's stop", func() bool {
		r, err := sendTo(svc.url, "GET", itemPath(work, "rayclusters", "quiet"), admin, "", nil)
		require.NoError(t, err)
		d := decode[struct {
			Idle *struct {
				StopAt *time.Time `json:"stopAt"`
				Policy string     `json:"policy"`
			} `json:"idle"`
		}](t, r)
		return d.Idle != nil && d.Idle.StopAt != nil && strings.Contains(d.Idle.Policy, "namespace policy")
	})
}

// clientFromKubeconfig is a Kubernetes client of a kubeconfig file.
func clientFromKubeconfig(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}
