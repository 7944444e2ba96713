//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// The Gateway API resources an incremental RayService upgrade writes (sigs.k8s.io/gateway-api v1.4.1,
// the version KubeRay v1.6.0 builds against; its CRDs are installed by stack/up.sh).
var (
	gatewayClasses = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gatewayclasses"}
	gateways       = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"}
	httpRoutes     = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}
)

type rolloutSummary struct {
	Status          string `json:"status"`
	UpgradeStrategy string `json:"upgradeStrategy"`
	Rollout         []struct {
		Role           string `json:"role"`
		Cluster        string `json:"cluster"`
		TargetCapacity *int64 `json:"targetCapacity"`
		TrafficPercent *int64 `json:"trafficPercent"`
	} `json:"rollout"`
}

// An incremental RayService upgrade (KubeRay v1.6, NewClusterWithIncrementalUpgrade), and its rollback
// when the spec is set back mid-upgrade: the list, the detail and the stream show Upgrading with both
// clusters, their target capacity and share of traffic, then RollingBack. The test plays the gateway
// controller, accepting the Gateway and the HTTPRoute the operator writes, as KubeRay waits for
// (controllers/ray/utils/util.go: Accepted and Programmed; the route's parent Accepted and ResolvedRefs).
func TestRayServiceIncrementalUpgradeAndRollback(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "rollout")
	admin := env.tokens["admin"]
	ctx := context.Background()
	class := "stack-" + ns
	_, err := env.adminDyn.Resource(gatewayClasses).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": map[string]any{"name": class},
		"spec": map[string]any{"controllerName": "example.net/stack-gateway"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.adminDyn.Resource(gatewayClasses).Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	stop := playGatewayController(t, ns, "roll")
	defer stop()

	var obj map[string]any
	require.NoError(t, yaml.Unmarshal(testdata(t, "rayservice-minimal.yaml"), &obj))
	obj["metadata"] = map[string]any{"name": "roll"}
	spec := obj["spec"].(map[string]any)
	// Steps of 10% every 5 s: the rollback comes while the upgrade still runs.
	spec["upgradeStrategy"] = map[string]any{"type": "NewClusterWithIncrementalUpgrade", "clusterUpgradeOptions": map[string]any{
		"gatewayClassName": class, "stepSizePercent": 10, "intervalSeconds": 5, "maxSurgePercent": 20}}
	spec["rayClusterConfig"].(map[string]any)["enableInTreeAutoscaling"] = true
	body, err := json.Marshal(obj)
	require.NoError(t, err)
	r := call(t, "POST", nsPath(ns, "rayservices"), admin, "application/json", body)
	require.Equal(t, 201, r.Status, "%s", r.Raw)
	waitStatus(t, ns, "rayservices", "roll", "Running")
	_, stream := openWatch(t, env.serviceURL, watchPath(ns, "rayservices"), admin, "")
	stream.snapshot(t)

	// An edit as a client makes one: read, change, replace; read again when the operator wrote between.
	edit := func(image string) {
		t.Helper()
		for range 10 {
			cur, err := env.adminDyn.Resource(rayServices).Namespace(ns).Get(ctx, "roll", metav1.GetOptions{})
			require.NoError(t, err)
			head := group(cur.Object, "spec", "rayClusterConfig", "headGroupSpec", "template", "spec", "containers", 0)
			head["image"] = image
			cur.SetManagedFields(nil)
			b, err := json.Marshal(cur.Object)
			require.NoError(t, err)
			r := call(t, "PUT", itemPath(ns, "rayservices", "roll"), admin, "application/json", b)
			if r.Status == 409 {
				continue
			}
			require.Equal(t, 200, r.Status, "%s", r.Raw)
			return
		}
		t.Fatal("the edit met a newer version ten times")
	}
	detail := func() rolloutSummary {
		t.Helper()
		return decode[rolloutSummary](t, call(t, "GET", itemPath(ns, "rayservices", "roll"), admin, "", nil))
	}
	listed := func() rolloutSummary {
		t.Helper()
		l := decode[struct {
			Items []rolloutSummary `json:"items"`
		}](t, call(t, "GET", nsPath(ns, "rayservices"), admin, "", nil))
		require.Len(t, l.Items, 1)
		return l.Items[0]
	}

	// The service is Running as soon as its first cluster serves, but the operator upgrades incrementally
	// only once it routes that cluster's traffic through the HTTPRoute (status.activeServiceStatus
	// .trafficRoutedPercent); an edit before that replaces the cluster at once (KubeRay v1.6.0,
	// controllers/ray/rayservice_controller.go), so the test waits for it.
	var d rolloutSummary
	eventually(t, 60*time.Second, "the active cluster routed through the gateway", func() bool {
		d = detail()
		return len(d.Rollout) == 1 && d.Rollout[0].Role == "active" && d.Rollout[0].TrafficPercent != nil
	})

	// The upgrade: a new cluster alongside the one serving, at no capacity and no traffic yet.
	edit("rayproject/ray:2.46.0-py311")
	eventually(t, 90*time.Second, "Upgrading with the active and the pending cluster", func() bool {
		d = detail()
		return d.Status == "Upgrading" && len(d.Rollout) == 2 && d.Rollout[1].TargetCapacity != nil
	})
	assert.Equal(t, "NewClusterWithIncrementalUpgrade", d.UpgradeStrategy)
	assert.Equal(t, "active", d.Rollout[0].Role)
	assert.Equal(t, "pending", d.Rollout[1].Role)
	assert.NotEqual(t, d.Rollout[0].Cluster, d.Rollout[1].Cluster)
	if assert.NotNil(t, d.Rollout[0].TrafficPercent) {
		assert.Positive(t, *d.Rollout[0].TrafficPercent, "the active cluster serves at first")
	}
	if assert.NotNil(t, d.Rollout[1].TargetCapacity) {
		assert.Less(t, *d.Rollout[1].TargetCapacity, int64(100))
	}
	assert.Equal(t, "Upgrading", listed().Status)
	stream.until(t, 30*time.Second, "Upgrading on the stream", func(ev sseEvent) bool {
		return ev.Name == "MODIFIED" && decodeRollout(t, ev).Status == "Upgrading" && len(decodeRollout(t, ev).Rollout) == 2
	})

	// Traffic moves to the new cluster step by step.
	eventually(t, 90*time.Second, "a share of the traffic on the pending cluster", func() bool {
		d = detail()
		return d.Status == "Upgrading" && len(d.Rollout) == 2 && d.Rollout[1].TrafficPercent != nil && *d.Rollout[1].TrafficPercent > 0
	})
	assert.Less(t, *d.Rollout[1].TrafficPercent, int64(100))
	if assert.NotNil(t, d.Rollout[0].TrafficPercent) {
		assert.EqualValues(t, 100, *d.Rollout[0].TrafficPercent+*d.Rollout[1].TrafficPercent, "the shares add up")
	}

	// Set back mid-upgrade (the pending cluster serving a share): the operator moves the traffic back to
	// the cluster that served, a step at a time.
	edit("rayproject/ray:2.46.0")
	eventually(t, 60*time.Second, "RollingBack", func() bool { d = detail(); return d.Status == "RollingBack" })
	assert.Len(t, d.Rollout, 2, "both clusters while it rolls back")
	assert.Equal(t, "RollingBack", listed().Status)
	stream.until(t, 30*time.Second, "RollingBack on the stream", func(ev sseEvent) bool {
		return ev.Name == "MODIFIED" && decodeRollout(t, ev).Status == "RollingBack"
	})
	// Why, from RollbackInProgress; unless something was warned of meanwhile, which the health names
	// instead: by the operator about the service (e.g. a cluster it could not create), or by the
	// scheduler about its clusters' pods (FailedScheduling, where the stack's nodes are full). The
	// namespace is this test's alone.
	h := decode[healthDetail](t, call(t, "GET", itemPath(ns, "rayservices", "roll"), admin, "", nil))
	if h.Health.Reason != "TargetClusterChanged" {
		events, err := env.admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
		require.NoError(t, err)
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		assert.Contains(t, reasons, h.Health.Reason, "the health says why: %+v", h.Health)
		assert.NotContains(t, h.Health.Message, "the object has been modified", "a write that lost a race is no problem")
	}
}

func decodeRollout(t *testing.T, ev sseEvent) rolloutSummary {
	t.Helper()
	var s rolloutSummary
	require.NoError(t, json.Unmarshal([]byte(ev.Data), &s))
	return s
}

// playGatewayController accepts, as a gateway controller would, the Gateway and the HTTPRoute KubeRay
// writes for the RayService ns/name (<name>-gateway, <name>-httproute), and publishes the endpoints of its
// Serve services (see publishServeEndpoints), until the returned func is called.
func playGatewayController(t *testing.T, ns, name string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	accepted := func(gen int64, types ...string) []any {
		var out []any
		for _, ty := range types {
			out = append(out, map[string]any{"type": ty, "status": "True", "reason": ty, "message": "",
				"observedGeneration": gen, "lastTransitionTime": "2026-01-01T00:00:00Z"})
		}
		return out
	}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if gw, err := env.adminDyn.Resource(gateways).Namespace(ns).Get(ctx, name+"-gateway", metav1.GetOptions{}); err == nil {
				if _, found, _ := unstructured.NestedSlice(gw.Object, "status", "conditions"); !found || gw.GetGeneration() != observed(gw) {
					gw.Object["status"] = map[string]any{"conditions": accepted(gw.GetGeneration(), "Accepted", "Programmed")}
					_, _ = env.adminDyn.Resource(gateways).Namespace(ns).UpdateStatus(ctx, gw, metav1.UpdateOptions{})
				}
			}
			if rt, err := env.adminDyn.Resource(httpRoutes).Namespace(ns).Get(ctx, name+"-httproute", metav1.GetOptions{}); err == nil {
				if _, found, _ := unstructured.NestedSlice(rt.Object, "status", "parents"); !found || rt.GetGeneration() != observed(rt) {
					rt.Object["status"] = map[string]any{"parents": []any{map[string]any{
						"parentRef":      map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name + "-gateway"},
						"controllerName": "example.net/stack-gateway",
						"conditions":     accepted(rt.GetGeneration(), "Accepted", "ResolvedRefs")}}}
					_, _ = env.adminDyn.Resource(httpRoutes).Namespace(ns).UpdateStatus(ctx, rt, metav1.UpdateOptions{})
				}
			}
			publishServeEndpoints(ctx, ns)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// observed is the generation a gateway controller last wrote its status for (of the first condition, or
// of the first parent's), 0 without one.
func observed(u *unstructured.Unstructured) int64 {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	if parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents"); len(parents) > 0 {
		conds, _, _ = unstructured.NestedSlice(parents[0].(map[string]any), "conditions")
	}
	if len(conds) == 0 {
		return 0
	}
	gen, _, _ := unstructured.NestedInt64(conds[0].(map[string]any), "observedGeneration")
	return gen
}

// publishServeEndpoints plays the EndpointSlice controller for the Serve services of ns, which KubeRay
// counts for a RayService's Ready condition (rayservice_controller.go, calculateNumServeEndpointsFromSlices:
// ready endpoints by targetRef UID). The stack's pods have loopback IPs, which the apiserver refuses in an
// EndpointSlice, so the controller-manager's slices stay empty; these carry TEST-NET-1 addresses (RFC 5737),
// which nothing connects to: the endpoints are only counted.
func publishServeEndpoints(ctx context.Context, ns string) {
	services, err := env.admin.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, svc := range services.Items {
		if svc.Spec.Selector["ray.io/serve"] != "true" {
			continue
		}
		pods, err := env.admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			continue
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name + "-test", Namespace: ns, Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: "integration-test"}},
			AddressType: discoveryv1.AddressTypeIPv4,
		}
		for i, p := range pods.Items {
			if !allRunningReady([]corev1.Pod{p}) || p.DeletionTimestamp != nil {
				continue
			}
			ready := true
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("192.0.2.%d", 1+i%250)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: p.Name, UID: p.UID},
			})
		}
		slices := env.admin.DiscoveryV1().EndpointSlices(ns)
		if cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{}); err == nil {
			if len(cur.Endpoints) != len(slice.Endpoints) {
				cur.Endpoints = slice.Endpoints
				_, _ = slices.Update(ctx, cur, metav1.UpdateOptions{})
			}
			continue
		}
		_, _ = slices.Create(ctx, slice, metav1.CreateOptions{})
	}
}
