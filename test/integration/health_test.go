//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Each way a Ray cluster gets stuck, made real on the stack, gives the health state and the reason a
// user needs, with the pod it comes from; the list carries and filters by the same health.
func TestHealthDiagnosis(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "health")
	admin := env.tokens["admin"]
	cases := map[string]func(obj map[string]any){
		"healthy": nil,
		"gpu": func(obj map[string]any) { // workers ask for 1000 GPUs, more than any KWOK node has (stack/up.sh); the head runs
			res := group(obj, "spec", "workerGroupSpecs", 0, "template", "spec", "containers", 0, "resources")
			for _, k := range []string{"requests", "limits"} {
				group(res, k)["nvidia.com/gpu"] = "1000"
			}
		},
		"image": func(obj map[string]any) {
			failWith(group(obj, "spec", "workerGroupSpecs", 0, "template"), "image-pull")
		},
		"crash": func(obj map[string]any) { failWith(group(obj, "spec", "headGroupSpec", "template"), "crash") },
	}
	for name, mutate := range cases {
		require.Equal(t, 201, createCluster(t, admin, ns, name, mutate).Status, name)
	}
	results := map[string]healthDetail{}
	results["healthy"] = waitHealth(t, ns, "healthy", "Healthy", "Running")
	results["gpu"] = waitHealth(t, ns, "gpu", "Degraded", "Unschedulable")
	assert.Contains(t, results["gpu"].Health.Message, "Insufficient nvidia.com/gpu")
	assert.NotNil(t, results["gpu"].Health.Since)
	results["image"] = waitHealth(t, ns, "image", "Degraded", "ImagePullBackOff")
	assert.Contains(t, results["image"].Health.Message, "Back-off pulling image")
	results["crash"] = waitHealth(t, ns, "crash", "Failed", "CrashLoopBackOff")
	assert.Equal(t, "Failed", results["crash"].Status)
	assert.Contains(t, results["crash"].Health.Message, "exit code 1")
	for name, d := range results {
		if name == "healthy" {
			assert.Empty(t, d.Problems)
			continue
		}
		require.NotEmpty(t, d.Problems, name)
		assert.Equal(t, "Pod", d.Problems[0].Source.Kind, name)
		assert.True(t, strings.HasPrefix(d.Problems[0].Source.Name, name+"-"), "%s: %s", name, d.Problems[0].Source.Name)
		t.Logf("%-8s health %s, reason %s: %s (from %s %s)", name, d.Health.State, d.Health.Reason, d.Health.Message,
			d.Problems[0].Source.Kind, d.Problems[0].Source.Name)
	}
	assert.Equal(t, "head", podNodeType(t, ns, "crash", results["crash"].Problems[0].Source.Name), "the crashing pod is the head")

	// The list carries the same health and filters by it.
	r := call(t, "GET", nsPath(ns, "rayclusters")+"?health=Degraded,Failed&sortBy=name&order=asc", admin, "", nil)
	require.Equal(t, 200, r.Status)
	var names []string
	for _, s := range decode[listData](t, r).Items {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{"crash", "gpu", "image"}, names)
	assert.Equal(t, 400, call(t, "GET", nsPath(ns, "rayclusters")+"?health=Sick", admin, "", nil).Status)
}

func podNodeType(t *testing.T, ns, name, pod string) string {
	r := call(t, "GET", itemPath(ns, "rayclusters", name)+"/pods", env.tokens["admin"], "", nil)
	require.Equal(t, 200, r.Status)
	var pods []podInfo
	require.NoError(t, json.Unmarshal(r.Data, &pods))
	for _, p := range pods {
		if p.Name == pod {
			return p.NodeType
		}
	}
	return ""
}

// With every node cordoned, a new Ray cluster is Degraded for a reason that says so; uncordoned, it
// becomes Healthy.
func TestHealthOfCordonedNodes(t *testing.T) {
	ns := namespace(t, "cordon")
	ctx := context.Background()
	nodes, err := env.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	require.NoError(t, err)
	require.NotEmpty(t, nodes.Items)
	cordon := func(on bool) {
		for _, n := range nodes.Items {
			_, err := env.admin.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType,
				[]byte(fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, on)), metav1.PatchOptions{})
			require.NoError(t, err)
		}
	}
	cordon(true)
	defer cordon(false)
	require.Equal(t, 201, createCluster(t, env.tokens["admin"], ns, "cordoned", nil).Status)
	d := waitHealth(t, ns, "cordoned", "Degraded", "Unschedulable")
	assert.Contains(t, d.Health.Message, "unschedulable")
	t.Logf("every node cordoned: health %s, reason %s: %s", d.Health.State, d.Health.Reason, d.Health.Message)
	cordon(false)
	waitHealth(t, ns, "cordoned", "Healthy", "Running")
}

// In a namespace whose quota holds the head only, the operator cannot create the workers: the reason
// and the quota's message reach the health (from the operator's condition and Warning events).
func TestHealthOfExceededQuota(t *testing.T) {
	t.Parallel()
	ns := namespace(t, "quota")
	_, err := env.admin.CoreV1().ResourceQuotas(ns).Create(context.Background(), &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the quota counted", func() bool {
		q, err := env.admin.CoreV1().ResourceQuotas(ns).Get(context.Background(), "one-pod", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil
	})
	require.Equal(t, 201, createCluster(t, env.tokens["admin"], ns, "quota", nil).Status)
	var d healthDetail
	eventually(t, 60*time.Second, "the quota named in the health", func() bool {
		r := call(t, "GET", itemPath(ns, "rayclusters", "quota"), env.tokens["admin"], "", nil)
		require.Equal(t, 200, r.Status)
		d = decode[healthDetail](t, r)
		return (d.Health.State == "Failed" || d.Health.State == "Degraded") && strings.Contains(d.Health.Message, "exceeded quota")
	})
	assert.Contains(t, d.Health.Reason, "WorkerPod")
	t.Logf("quota of one pod: health %s, reason %s: %s", d.Health.State, d.Health.Reason, d.Health.Message)
}
