package ray

import (
	"ray-service/internal/ray/raytest"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The fuzz targets feed what the service reads from the cluster, and may not trust, to the code that
// reads it: no input may panic. `go test` runs their seeds; `make test` fuzzes each for a bounded time.

// FuzzSummarize: any object the watch delivers is summarized, for every kind, without a panic.
func FuzzSummarize(f *testing.F) {
	for _, s := range raytest.ManifestSeeds(f) {
		f.Add(s)
	}
	kinds := NewKinds()
	f.Fuzz(func(_ *testing.T, data []byte) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil || u.Object == nil {
			return
		}
		for _, k := range kinds.All() {
			sum := k.Summarize(u)
			s := &sum
			k.Clusters(s)
			k.HeadService(u, s)
			k.WithPods(s, nil, nil)
			k.ObjectClusters(u)
		}
	})
}
