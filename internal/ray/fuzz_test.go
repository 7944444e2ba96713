package ray

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The fuzz targets feed what the service reads from the cluster, and may not trust, to the code that
// reads it: no input may panic. `go test` runs their seeds; `make test` fuzzes each for a bounded time.

func manifestSeeds(f *testing.F) [][]byte {
	files, _ := filepath.Glob("../../test/integration/testdata/ray*.yaml")
	var seeds [][]byte
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			seeds = append(seeds, data)
		}
	}
	status, _ := filepath.Glob("testdata/status/*.json")
	for _, file := range status {
		if data, err := os.ReadFile(file); err == nil {
			seeds = append(seeds, data)
		}
	}
	if len(seeds) == 0 {
		f.Fatal("no seed manifests")
	}
	return append(seeds, []byte(`{"spec":{"workerGroupSpecs":[null,1,{"replicas":"x","template":[]}]}}`),
		[]byte(`{"spec":{"rayClusterSpec":{"headGroupSpec":{"rayStartParams":{"num-cpus":"NaN","resources":"'{\"a\":1e400}'"}}}}}`),
		[]byte(`{"status":{"conditions":"no","state":7}}`))
}

// FuzzSummarize: any object the watch delivers is summarized, for every kind, without a panic.
func FuzzSummarize(f *testing.F) {
	for _, s := range manifestSeeds(f) {
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
