// Package raytest holds the fixtures and helpers the tests of several packages share: a Ray cluster's
// manifest, its pods and a template key. It imports no package of the project, so that the tests of
// package ray use it too.
package raytest

import (
	_ "embed"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// ClusterYAML is a RayCluster ns/c of three worker groups (one multi-host, one suspended), Running.
//
//go:embed testdata/raycluster.yaml
var ClusterYAML string

// Cluster is ClusterYAML as an object.
func Cluster(t testing.TB) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(ClusterYAML), &u.Object))
	return u
}

// Key is a template key of the tests, long enough for a signer.
var Key = []byte("a key of the tests, 32 bytes at least")

// Manifest is an object name of the kind given in namespace team, with ClusterYAML's Ray cluster spec
// at specPath (the kind's ClusterSpecPath) and the status given.
func Manifest(t testing.TB, kind string, specPath []string, name string, status map[string]any) *unstructured.Unstructured {
	t.Helper()
	spec := Cluster(t).Object["spec"]
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "team"}}}
	if len(specPath) == 1 {
		u.Object["spec"] = spec
	} else {
		u.Object["spec"] = map[string]any{specPath[1]: spec}
	}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// Pod is a Ray pod of team: Pending, or Running and Ready. Its labels are those KubeRay puts on every
// Ray pod (ray-project/kuberay, kubectl-plugin/pkg/util/constant.go: RayClusterLabelKey,
// RayIsRayNodeLabelKey, RayNodeGroupLabelKey, RayNodeTypeLabelKey); ray's own constants are not
// imported here so that package ray's tests can use this one.
func Pod(name, cluster, nodeType, group string, ready bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", Labels: map[string]string{
			"ray.io/is-ray-node": "yes", "ray.io/cluster": cluster, "ray.io/node-type": nodeType, "ray.io/group": group}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if ready {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

// ManifestSeeds are the manifests the fuzz targets start from: the integration tests' Ray objects, the
// statuses package ray's tests read, and a few malformed ones.
func ManifestSeeds(f *testing.F) [][]byte {
	_, here, _, _ := runtime.Caller(0)
	ray := filepath.Join(filepath.Dir(here), "..")
	var seeds [][]byte
	for _, pattern := range []string{filepath.Join(ray, "../../test/integration/testdata/ray*.yaml"), filepath.Join(ray, "testdata/status/*.json")} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				seeds = append(seeds, data)
			}
		}
	}
	if len(seeds) == 0 {
		f.Fatal("no seed manifests")
	}
	return append(seeds, []byte(`{"spec":{"workerGroupSpecs":[null,1,{"replicas":"x","template":[]}]}}`),
		[]byte(`{"spec":{"rayClusterSpec":{"headGroupSpec":{"rayStartParams":{"num-cpus":"NaN","resources":"'{\"a\":1e400}'"}}}}}`),
		[]byte(`{"status":{"conditions":"no","state":7}}`))
}
