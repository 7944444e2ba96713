package ray

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestClip(t *testing.T) {
	assert.Equal(t, "short", Clip("short", 5))
	assert.Equal(t, "ab…", Clip("abcdef", 5))
	long := strings.Repeat("é", 100) // two bytes each
	c := Clip(long, 10)
	assert.True(t, utf8.ValidString(c), "cut at a character boundary: %q", c)
	assert.LessOrEqual(t, len(c), 10)
	assert.True(t, strings.HasSuffix(c, "…"))
	assert.Equal(t, "…", Clip("abcdef", 3))
	big := strings.Repeat("x", 1<<20)
	c = Clip(big, 100)
	start := uintptr(unsafe.Pointer(unsafe.StringData(big)))
	at := uintptr(unsafe.Pointer(unsafe.StringData(c)))
	assert.False(t, at >= start && at < start+uintptr(len(big)), "a cut string holds none of the long one")
}

// Every string a summary takes from an object is within its bound, and so is every list, however
// large the object makes them.
func TestSummaryBounds(t *testing.T) {
	huge := strings.Repeat("x", 200<<10)
	var groups []any
	for i := range 100 {
		groups = append(groups, map[string]any{"groupName": fmt.Sprintf("g%d-%s", i, huge[:300]), "replicas": int64(1),
			"rayStartParams": map[string]any{"resources": customResources(100)},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "w", "image": huge,
				"resources": map[string]any{"requests": map[string]any{"cpu": "1"}}}}}}})
	}
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob",
		"metadata": map[string]any{"name": "j", "namespace": "a", "annotations": map[string]any{CreatorKey: huge}},
		"spec": map[string]any{"entrypoint": huge, "submissionMode": huge, "clusterSelector": map[string]any{"ray.io/cluster": huge},
			"rayClusterSpec": map[string]any{"rayVersion": huge,
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{"resources": customResources(100)},
					"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "h", "image": huge}}}}},
				"workerGroupSpecs": groups}},
		"status": map[string]any{"jobStatus": huge, "jobDeploymentStatus": "Failed", "reason": huge, "message": huge},
	}}
	kinds := NewKinds()
	s := kinds.ByKind("RayJob").Summarize(job)
	assert.Len(t, s.Creator, len(huge[:MaxCreatorBytes-len("…")])+len("…"))
	assert.LessOrEqual(t, len(s.Entrypoint), MaxEntrypointBytes)
	assert.LessOrEqual(t, len(s.Image), MaxImageBytes)
	assert.LessOrEqual(t, len(s.RayVersion), MaxWordBytes)
	assert.LessOrEqual(t, len(s.JobStatus), MaxWordBytes)
	assert.LessOrEqual(t, len(s.SubmissionMode), MaxWordBytes)
	assert.LessOrEqual(t, len(s.RayClusterName), MaxNameBytes)
	assert.Len(t, s.WorkerGroups, MaxWorkerGroups)
	assert.InDelta(t, 100.0, s.Requested.CPU, 0.001, "requested counts every group")
	assert.Len(t, s.Head.RayResources, MaxRayResources)
	for _, g := range s.WorkerGroups {
		assert.LessOrEqual(t, len(g.Name), MaxNameBytes)
		assert.Len(t, g.RayResources, MaxRayResources)
	}
	assert.Equal(t, HealthFailed, s.Health.State)
	assert.LessOrEqual(t, len(s.Health.Reason), MaxWordBytes)
	assert.LessOrEqual(t, len(s.Health.Message), MaxMessageBytes)
	for _, p := range s.Problems() {
		assert.LessOrEqual(t, len(p.Message), MaxMessageBytes)
	}
	for _, a := range s.Head.RayResources {
		assert.LessOrEqual(t, len(a.Name), MaxRayResourceNameBytes)
	}
	assert.Less(t, s.Bytes(), 128<<10, "the summary of a 20 MB object holds little")

	// Warnings about the object are problems too: as many as there are, as long as they are.
	var warnings []Problem
	now := time.Now()
	for range 200 {
		warnings = append(warnings, Problem{Source: InvolvedObjectRef{Kind: "RayJob", Name: "j"}, Reason: huge, Message: huge, Since: &now})
	}
	pending := kinds.Cluster().Summarize(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": map[string]any{"name": "c", "namespace": "a"},
		"spec": map[string]any{"headGroupSpec": map[string]any{}}}})
	base := pending
	w := kinds.Cluster().WithPods(&base, nil, warnings)
	assert.Len(t, w.Problems(), MaxProblems)
	for _, p := range w.Problems() {
		assert.LessOrEqual(t, len(p.Reason), MaxWordBytes)
		assert.LessOrEqual(t, len(p.Message), MaxMessageBytes)
	}
	assert.Equal(t, huge, warnings[0].Message, "the warnings given are not changed")
}

func customResources(n int) string {
	m := map[string]float64{}
	for i := range n {
		m[fmt.Sprintf("custom-%03d-%s", i, strings.Repeat("r", 300))] = 1
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Summaries within the bounds are not changed, and share what they had.
func TestSummaryWithinBoundsIsKept(t *testing.T) {
	s := Summary{Name: "c", Creator: "alice", Image: "rayproject/ray:2.46.0", WorkerGroups: []WorkerGroup{{Name: "workers", RayResources: Logical{{"CPU", 1}}}}}
	before := s
	s.bound()
	require.Equal(t, before, s)
	assert.Same(t, &before.WorkerGroups[0], &s.WorkerGroups[0])
}
