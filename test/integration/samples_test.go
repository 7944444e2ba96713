//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kuberayModule is the operator module whose CRDs and binary the stack runs (stack/tools/kuberay).
const kuberayModule = "github.com/ray-project/kuberay/ray-operator"

// sampleKinds are the kinds the service manages, by kind: their resource and their collection.
var sampleKinds = map[string]struct {
	gvr        schema.GroupVersionResource
	collection string
}{
	"RayCluster": {rayClusters, "rayclusters"},
	"RayJob":     {rayJobs, "rayjobs"},
	"RayService": {rayServices, "rayservices"},
}

// unknownFieldInMessage finds the fields the apiserver's strict decoding names.
var unknownFieldInMessage = regexp.MustCompile(`unknown field "([^"]+)"`)

// KubeRay's own samples (config/samples of the operator module the stack runs) are accepted or refused by
// the service exactly as kube-apiserver decides, for a dry run and for a create: the service adds no
// rule of its own to what a manifest may hold, loses nothing KubeRay's examples use, and passes the
// apiserver's reasons on. Every RayCluster, RayJob and RayService of ray.io/v1 in them is judged first
// by the apiserver (server-side dry run, strict field validation, as the admin), then sent to the
// service; what it creates is read back and deleted at once, without waiting for the operator.
func TestKubeRaySamples(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(kuberayDir(t), "config", "samples")
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	}))
	require.NotEmpty(t, files, "samples in %s", dir)
	ns := namespace(t, "kuberay-samples")
	checked, accepted, skipped := map[string]int{}, map[string]int{}, map[string]int{}
	firstAccepted := map[string]*unstructured.Unstructured{}

	for i, path := range files {
		rel, err := filepath.Rel(dir, path)
		require.NoError(t, err)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			for j, obj := range sampleObjects(t, data) {
				if _, known := sampleKinds[obj.GetKind()]; obj.GetAPIVersion() != "ray.io/v1" || !known {
					skipped[obj.GetAPIVersion()+" "+obj.GetKind()]++
					continue
				}
				// Several samples share names, and one name per object keeps a create from meeting another's.
				obj.SetName(sampleName(rel, i, j))
				obj.SetNamespace(ns)
				checked[obj.GetKind()]++
				if judgedAlike(t, fmt.Sprintf("document %d of %s", j, rel), obj) {
					accepted[obj.GetKind()]++
					if firstAccepted[obj.GetKind()] == nil {
						firstAccepted[obj.GetKind()] = obj
					}
				}
			}
		})
	}
	for _, k := range slices.Sorted(maps.Keys(sampleKinds)) {
		t.Logf("%s: %d objects checked, %d accepted by the apiserver", k, checked[k], accepted[k])
		assert.NotZero(t, checked[k], "KubeRay's samples hold %s objects", k)
	}
	for _, k := range slices.Sorted(maps.Keys(skipped)) {
		t.Logf("skipped %s: %d objects", k, skipped[k])
	}
	t.Logf("%d sample files", len(files))

	// A control for the refusals, which KubeRay's samples do not reach: a sample of each kind made
	// invalid two ways (a field the schema lacks, a label value the apiserver refuses) is refused by both,
	// and the service's answer names the field.
	t.Run("refused variants", func(t *testing.T) {
		for _, k := range slices.Sorted(maps.Keys(firstAccepted)) {
			unknown := firstAccepted[k].DeepCopy()
			unknown.SetName("unknown-field-" + strings.ToLower(k))
			require.NoError(t, unstructured.SetNestedField(unknown.Object, "x", "spec", "notAField"))
			assert.False(t, judgedAlike(t, "an unknown field", unknown), "%s with spec.notAField", k)
			label := firstAccepted[k].DeepCopy()
			label.SetName("bad-label-" + strings.ToLower(k))
			label.SetLabels(map[string]string{"sample": "not a label value!"})
			assert.False(t, judgedAlike(t, "an invalid label", label), "%s with an invalid label", k)
		}
	})
}

// judgedAlike asks the apiserver to decide on obj (a server-side dry run, as the admin), then sends obj
// to the service as a dry run and as a create, and checks that the service decided alike. What it
// created is read back and deleted. It returns whether the apiserver accepted obj.
func judgedAlike(t *testing.T, from string, obj *unstructured.Unstructured) bool {
	t.Helper()
	admin := env.tokens["admin"]
	kind := sampleKinds[obj.GetKind()]
	ns := obj.GetNamespace()
	what := fmt.Sprintf("%s %s (%s)", obj.GetKind(), obj.GetName(), from)

	_, apiErr := env.adminDyn.Resource(kind.gvr).Namespace(ns).Create(context.Background(), obj.DeepCopy(),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	var status apierrors.APIStatus
	if apiErr != nil && !errors.As(apiErr, &status) {
		require.NoError(t, apiErr, "%s: the apiserver gave no status", what)
	}
	apiAnswer := "accepted"
	if apiErr != nil {
		apiAnswer = fmt.Sprintf("refused %d %s: %s", status.Status().Code, status.Status().Reason, status.Status().Message)
	}
	manifest, err := yaml.Marshal(obj.Object)
	require.NoError(t, err)
	item := itemPath(ns, kind.collection, obj.GetName())

	dry := call(t, "POST", nsPath(ns, kind.collection)+"?dryRun=true", admin, "application/yaml", manifest)
	agrees(t, "dry run", what, apiErr, dry)
	if dry.Status == 200 {
		r := call(t, "GET", item, admin, "", nil)
		assert.Equal(t, 404, r.Status, "%s: a dry run stores nothing: %s", what, r.Raw)
	}
	created := call(t, "POST", nsPath(ns, kind.collection), admin, "application/yaml", manifest)
	agrees(t, "create", what, apiErr, created)
	if created.Status == 201 {
		r := call(t, "GET", item, admin, "", nil)
		assert.Equal(t, 200, r.Status, "%s: created, then read back: %s", what, r.Raw)
		// force: an object the operator already calls Running is deleted all the same.
		r = call(t, "DELETE", item+"?force=true", admin, "", nil)
		assert.Equal(t, 200, r.Status, "%s: deleted right after: %s", what, r.Raw)
	}
	t.Logf("%s: apiserver %s; service: dry run %d, create %d", what, apiAnswer, dry.Status, created.Status)
	return apiErr == nil
}

// agrees checks that the service answered a create (or its dry run) as the apiserver decided: a success
// where the apiserver accepted; where it refused, a 4xx of the same reason (422 for an invalid object, an
// unknown field included) naming the fields the apiserver named.
func agrees(t *testing.T, step, what string, apiErr error, r *response) {
	t.Helper()
	success := 201
	if step == "dry run" {
		success = 200
	}
	if apiErr == nil {
		if r.Status != success {
			t.Errorf("%s, %s: the apiserver accepts it, the service answered %d: %s", what, step, r.Status, r.Raw)
		}
		return
	}
	var status apierrors.APIStatus
	errors.As(apiErr, &status)
	st := status.Status()
	if r.Status < 400 || r.Status >= 500 {
		t.Errorf("%s, %s: the apiserver refuses it (%d %s: %s), the service answered %d: %s",
			what, step, st.Code, st.Reason, st.Message, r.Status, r.Raw)
		return
	}
	var fields []string
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Field != "" {
				fields = append(fields, c.Field)
			}
		}
	}
	unknown := unknownFieldInMessage.FindAllStringSubmatch(st.Message, -1)
	for _, m := range unknown {
		fields = append(fields, m[1])
	}
	switch {
	case st.Reason == metav1.StatusReasonInvalid || len(unknown) > 0:
		assert.Equal(t, 422, r.Status, "%s, %s: the apiserver: %s; the service: %s", what, step, st.Message, r.Raw)
	default:
		assert.EqualValues(t, st.Code, r.Status, "%s, %s: the apiserver: %s; the service: %s", what, step, st.Message, r.Raw)
	}
	said := r.Msg
	for _, d := range r.Details {
		said += "\n" + d.Field + ": " + d.Message
	}
	for _, f := range fields {
		assert.Contains(t, said, f, "%s, %s: the service's answer names the field the apiserver named: %s", what, step, r.Raw)
	}
}

// kuberayDir is the directory of the KubeRay operator module, found as stack/up.sh finds it.
func kuberayDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", kuberayModule)
	cmd.Dir = filepath.Join(env.root, "stack", "tools", "kuberay")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "go list -m %s: %s", kuberayModule, errOut.String())
	d := strings.TrimSpace(out.String())
	require.NotEmpty(t, d)
	return d
}

// sampleObjects splits a sample file into its objects, as unstructured (numbers kept as written).
func sampleObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		j, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&m))
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

var notNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// sampleName is a unique DNS-1035 name of at most 40 characters for object j of file i.
func sampleName(rel string, i, j int) string {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(rel), ".yaml"), ".yml")
	suffix := fmt.Sprintf("-%d-%d", i, j)
	base = strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(base), "-"), "-")
	base = strings.TrimRight(base[:min(len(base), 40-len(suffix)-2)], "-")
	return "s-" + base + suffix
}
