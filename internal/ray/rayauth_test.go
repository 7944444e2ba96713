package ray

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRayAuthOf(t *testing.T) {
	cluster, job := rayClusterKind(), rayJobKind()
	withAuth := func(path []string, opts map[string]any) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{}}
		if opts != nil {
			_ = unstructured.SetNestedMap(o.Object, opts, append(path, "authOptions")...)
		}
		return o
	}
	long := strings.Repeat("a", 10) + strings.Repeat("b", 50)
	for _, c := range []struct {
		name    string
		k       *Kind
		opts    map[string]any
		cluster string
		want    ClusterAuth
	}{
		{"no authOptions", cluster, nil, "c", ClusterAuth{}},
		{"disabled", cluster, map[string]any{"mode": "disabled"}, "c", ClusterAuth{}},
		{"mode left out: KubeRay sets no token either", cluster, map[string]any{"secretName": "s"}, "c", ClusterAuth{}},
		{"token, the Secret KubeRay makes", cluster, map[string]any{"mode": "token"}, "c", ClusterAuth{Token: true, Secret: "c"}},
		{"token, a named Secret", cluster, map[string]any{"mode": "token", "secretName": "mine"}, "c", ClusterAuth{Token: true, Secret: "mine"}},
		{"token through Kubernetes", cluster, map[string]any{"mode": "token", "enableK8sTokenAuth": true}, "c", ClusterAuth{Token: true, Kubernetes: true}},
		{"a RayJob's cluster", job, map[string]any{"mode": "token"}, "job-abcde", ClusterAuth{Token: true, Secret: "job-abcde"}},
		{"no cluster yet", job, map[string]any{"mode": "token"}, "", ClusterAuth{Token: true}},
		{"a long name clipped as KubeRay clips it", cluster, map[string]any{"mode": "token"}, long, ClusterAuth{Token: true, Secret: strings.Repeat("b", 50)}},
		{"a leading digit replaced", cluster, map[string]any{"mode": "token"}, "1abc", ClusterAuth{Token: true, Secret: "rabc"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, c.k.ClusterAuthOf(withAuth(c.k.ClusterSpecPath, c.opts), c.cluster))
		})
	}
}
