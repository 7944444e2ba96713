package ray

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The options of a KubeRay v1.7.0 cluster spec, as its samples write them (ray-project/kuberay v1.7.0
// ray-operator/config/samples: ray-cluster.embedded-gcs-ft.yaml, ray-cluster.mtls.yaml,
// ray-cluster.network-policy-deny-all.yaml, ray-cluster.historyserver.yaml,
// ray-cluster.kubernetes.auth.yaml) and as the apiserver stores them with the v1.7.0 CRD defaults
// (worker group priority: 0), are summarized the same for every kind that holds a cluster spec.
func TestClusterOptionsOfKubeRay17(t *testing.T) {
	spec := m{
		"rayVersion":               "2.55.0",
		"authOptions":              m{"mode": "token", "enableK8sTokenAuth": true},
		"tlsOptions":               m{"enabled": true},
		"gcsFaultToleranceOptions": m{"backend": "rocksdb", "storage": m{"size": "1Gi"}},
		"networkPolicy":            m{"mode": "DenyAllIngress", "head": m{"ingressRules": l{m{"from": l{m{"podSelector": m{}}}}}}},
		"historyServerOptions":     m{"collectorOptions": m{"image": "quay.io/kuberay/collector:nightly", "imagePullPolicy": "IfNotPresent"}},
		"headGroupSpec": m{"rayStartParams": m{}, "enableIngress": true,
			"ingressOptions": m{"host": "ray.example.com", "path": "/dash", "pathType": "Prefix"},
			"template":       m{"spec": m{"containers": l{m{"name": "ray-head", "image": "rayproject/ray:2.55.0"}}}}},
		"workerGroupSpecs": l{
			m{"groupName": "gpu", "priority": int64(10), "replicas": int64(1), "minReplicas": int64(0), "maxReplicas": int64(2), "rayStartParams": m{},
				"template": m{"spec": m{"containers": l{m{"name": "w", "image": "rayproject/ray:2.55.0"}}}}},
			m{"groupName": "cpu", "priority": int64(0), "replicas": int64(1), "minReplicas": int64(0), "maxReplicas": int64(2), "rayStartParams": m{},
				"template": m{"spec": m{"containers": l{m{"name": "w", "image": "rayproject/ray:2.55.0"}}}}},
		},
	}

	want := &ClusterOptions{Auth: "kubernetes", MTLS: true, GCSFaultTolerance: "rocksdb", NetworkPolicy: "DenyAllIngress",
		HistoryCollector: true, Ingress: true, IngressHost: "ray.example.com", IngressPath: "/dash",
		Notes: []string{"token authentication on, by Kubernetes tokens", "mTLS on", "GCS fault tolerance: rocksdb (embedded)",
			"network policy: DenyAllIngress", "history server collector on", "ingress to the dashboard: ray.example.com, path /dash"}}
	kinds := NewKinds()
	for _, c := range []struct {
		resource string
		object   m
	}{
		{"rayclusters", m{"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": m{"name": "c", "namespace": "ns"}, "spec": spec}},
		{"rayjobs", m{"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": m{"name": "j", "namespace": "ns"}, "spec": m{"rayClusterSpec": spec}}},
		{"rayservices", m{"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": m{"name": "s", "namespace": "ns"}, "spec": m{"rayClusterConfig": spec}}},
	} {
		k, ok := kinds.Lookup(c.resource)
		require.True(t, ok)
		s := k.Summarize(&unstructured.Unstructured{Object: c.object})
		assert.Equal(t, want, s.Options, c.resource)
		require.Len(t, s.WorkerGroups, 2)
		require.NotNil(t, s.WorkerGroups[0].Priority, c.resource)
		assert.Equal(t, int64(10), *s.WorkerGroups[0].Priority)
		assert.Nil(t, s.WorkerGroups[1].Priority, "priority 0 is the CRD's default: not shown")
	}
}

// Defaults as KubeRay v1.7.0 declares them: a gcsFaultToleranceOptions without backend is redis
// (GcsFaultToleranceOptions.Backend "Defaults to redis"), a networkPolicy without mode DenyAll
// (+kubebuilder:default=DenyAll), authOptions without mode token is off (utils.IsAuthEnabled), a secret
// name is kept, a spec without any option has no options, and what the author wrote is cut.
func TestClusterOptionsDefaultsAndBounds(t *testing.T) {
	o := clusterOptionsOf(m{"gcsFaultToleranceOptions": m{"redisAddress": "redis:6379"}, "networkPolicy": m{},
		"authOptions": m{"secretName": "mine"}, "tlsOptions": m{"enabled": false}})
	require.NotNil(t, o)
	assert.Equal(t, "redis", o.GCSFaultTolerance)
	assert.Equal(t, "DenyAll", o.NetworkPolicy)
	assert.Equal(t, "disabled", o.Auth)
	assert.Equal(t, "mine", o.AuthSecret)
	assert.False(t, o.MTLS)
	assert.Equal(t, []string{"token authentication off", "GCS fault tolerance: redis (external)", "network policy: DenyAll"}, o.Notes)
	o = clusterOptionsOf(m{"authOptions": m{"mode": "token"}, "headGroupSpec": m{"enableIngress": true}})
	assert.Equal(t, []string{"token authentication on", "ingress to the dashboard: any host, path /"}, o.Notes)
	assert.Nil(t, clusterOptionsOf(m{"rayVersion": "2.46.0", "headGroupSpec": m{}}))
	long := strings.Repeat("x", 4096)
	o = clusterOptionsOf(m{"networkPolicy": m{"mode": long}, "authOptions": m{"mode": "token", "secretName": long},
		"headGroupSpec": m{"enableIngress": true, "ingressOptions": m{"host": long, "path": long}}})
	assert.LessOrEqual(t, len(o.NetworkPolicy), MaxWordBytes)
	for _, s := range []string{o.AuthSecret, o.IngressHost, o.IngressPath} {
		assert.LessOrEqual(t, len(s), MaxNameBytes)
	}
	for _, n := range o.Notes {
		assert.LessOrEqual(t, len(n), 2*MaxNameBytes+64)
	}
}
