package ray

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The status mapping is checked against API.md's "Status" table, read here independently of the code
// under test. Each fixture in testdata/status is a KubeRay object (with its head pod where a row reads
// it) as the operator and the kubelet write it, captured on the local stack or built after the source
// it cites. No fixture records the status it must have: the test derives it from KubeRay's own fields
// by statusContract, and checks that the service answers it. Every reading of the table has a fixture.

// is names, for each field a reading of the table looks at, the values that satisfy it; "" stands for
// a field KubeRay has not written. The fields are named:
//
//   - spec.suspend, status.state, status.jobDeploymentStatus, status.jobStatus, status.serviceStatus:
//     the object's own fields;
//   - conditions[T] and conditions[T].reason: the status and the reason of its condition of type T;
//   - headPod.phase and headPod.waiting: the phase of its head pod (label ray.io/node-type=head,
//     KubeRay ray-operator/controllers/ray/utils/constant.go) and why its first waiting container waits;
//   - spec.schedule parses: "yes" or "no", as the operator's parser reads spec.schedule;
//   - template: "yes" for a manifest the service stores as a template instead of handing it to KubeRay.
type is map[string][]string

// statusRow is one reading of API.md's table: the status, API.md's words for it, and what KubeRay
// writes to say it.
type statusRow struct {
	status, reads string
	when          is
}

// holds tells whether the fields say what the row reads.
func (r statusRow) holds(fields map[string]string) bool {
	for field, values := range r.when {
		if !slices.Contains(values, fields[field]) {
			return false
		}
	}
	return true
}

// Waiting reasons the kubelet gives a container that cannot start, and will not by waiting
// (kubernetes/kubernetes v1.37.2): pkg/kubelet/container/sync_result.go (ErrCrashLoopBackOff,
// ErrRunContainer), pkg/kubelet/images/types.go (ErrImagePullBackOff, ErrImagePull,
// ErrInvalidImageName), pkg/kubelet/kuberuntime/kuberuntime_container.go (ErrCreateContainerConfig,
// ErrCreateContainer).
var containerCannotStart = []string{"CrashLoopBackOff", "RunContainerError", "ImagePullBackOff", "ErrImagePull",
	"InvalidImageName", "CreateContainerConfigError", "CreateContainerError"}

// statusContract is API.md's "Status" table, kind by kind: the first row that holds gives the status.
// Where the table does not say which of two readings wins, a stop asked outranks a failure (the failure
// shows again once started), a failure outranks the progress KubeRay last wrote, and what the operator
// wrote outranks what the spec asks, but for a stop the operator has not answered yet.
var statusContract = map[string][]statusRow{
	// RayCluster: ray-project/kuberay v1.5.0, ray-operator/controllers/ray/raycluster_controller.go
	// calculateStatus, the same to v1.7.0 (apis/ray/v1/raycluster_types.go names the values).
	//   - status.state is "ready" once every pod runs and is ready (utils.CheckAllPodsRunning), and
	//     "suspended" once spec.suspend is true and no pod is left; neither is taken back but by the
	//     other ("failed" is deprecated: no operator since v1.2 writes it).
	//   - Under the RayClusterStatusConditions gate (ray-operator/pkg/features/features.go, on by
	//     default): RayClusterProvisioned is False until all pods are first ready; RayClusterSuspending
	//     is True from spec.suspend until the pods are gone, then RayClusterSuspended is True (never
	//     both); Suspended turns False when spec.suspend is false again, while state stays "suspended"
	//     until the new pods run. ReplicaFailure is True while a pod cannot be created or deleted.
	"RayCluster": {
		{"Stopped", "suspended", is{"conditions[RayClusterSuspended]": {"True"}}},
		{"Stopped", "suspended, by an operator without the conditions gate",
			is{"conditions[RayClusterSuspended]": {""}, "status.state": {"suspended"}, "spec.suspend": {"true"}}},
		{"Stopping", "suspending", is{"conditions[RayClusterSuspending]": {"True"}}},
		{"Stopping", "suspending: spec.suspend the operator has not answered yet", is{"spec.suspend": {"true"}}},
		{"Failed", "pods failing: ReplicaFailure", is{"conditions[ReplicaFailure]": {"True"}}},
		{"Failed", "pods failing: head pod in a failing waiting state", is{"headPod.waiting": containerCannotStart}},
		{"Failed", "pods failing: head pod failed", is{"headPod.phase": {"Failed"}}},
		{"Running", "head and workers ready", is{"status.state": {"ready"}}},
		{"Pending", "provisioning", is{"status.state": {""}}},
		{"Pending", "provisioning again once resumed", is{"status.state": {"suspended"}, "conditions[RayClusterSuspended]": {"False"}}},
	},
	// RayJob: ray-project/kuberay v1.5.0, ray-operator/controllers/ray/rayjob_controller.go Reconcile,
	// the same in meaning to v1.7.0 (apis/ray/v1/rayjob_types.go names the values).
	// jobDeploymentStatus goes New ("") → Initializing → Waiting (InteractiveMode) → Running → Complete
	// or Failed; ValidationFailed when the spec is refused; Running or Initializing → Suspending →
	// Suspended on spec.suspend; Failed → Retrying → New while spec.backoffLimit allows, jobStatus
	// keeping FAILED until the retry starts. jobStatus is the Ray job's (PENDING, RUNNING, STOPPED,
	// SUCCEEDED, FAILED); with a submitter Job it may be final while jobDeploymentStatus still says
	// Running, until the submitter ends. Complete comes with a final jobStatus.
	"RayJob": {
		{"Stopped", "a template (API.md: templates are always Stopped)", is{"template": {"yes"}}},
		{"Stopping", "Suspending", is{"status.jobDeploymentStatus": {"Suspending"}}},
		{"Stopped", "Suspended", is{"status.jobDeploymentStatus": {"Suspended"}}},
		{"Retrying", "Retrying", is{"status.jobDeploymentStatus": {"Retrying"}}},
		{"Failed", "Failed", is{"status.jobDeploymentStatus": {"Failed"}}},
		{"Failed", "ValidationFailed", is{"status.jobDeploymentStatus": {"ValidationFailed"}}},
		{"Stopped", "jobStatus STOPPED", is{"status.jobStatus": {"STOPPED"}}},
		{"Failed", "jobStatus FAILED", is{"status.jobStatus": {"FAILED"}}},
		{"Succeeded", "Complete", is{"status.jobDeploymentStatus": {"Complete"}}},
		{"Running", "Running", is{"status.jobDeploymentStatus": {"Running"}}},
		{"Pending", "New", is{"status.jobDeploymentStatus": {""}}},
		{"Pending", "Initializing", is{"status.jobDeploymentStatus": {"Initializing"}}},
		{"Pending", "Waiting", is{"status.jobDeploymentStatus": {"Waiting"}}},
	},
	// RayService: ray-project/kuberay ray-operator/controllers/ray/rayservice_controller.go and
	// apis/ray/v1/rayservice_types.go. v1.5.0 calculateConditions: Ready starts False with reason
	// Initializing, is True while a serve endpoint exists (serviceStatus Running is its deprecated
	// equivalent), and False with reason InitializingTimeout past the ray.io/initializing-timeout
	// annotation (markFailedOnInitializingTimeout); UpgradeInProgress is True while an active and a
	// pending cluster both exist. v1.6.0 reconcileRollbackState: RollbackInProgress True, reason
	// TargetClusterChanged, within an incremental upgrade; v1.7.0 names the reason
	// DesiredClusterSpecChanged. v1.7.0 handleSuspend (spec.suspend exists from v1.7): Suspending True
	// while the operator deletes what the service owns, to the end even when spec.suspend is set back,
	// then Suspended True; Suspended turns False on resume, Ready starting again from Initializing.
	"RayService": {
		{"Stopped", "its cluster removed by a stop: kept as a template", is{"template": {"yes"}}},
		{"Stopped", "suspended (v1.7)", is{"conditions[Suspended]": {"True"}}},
		{"Stopping", "Suspending (v1.7)", is{"conditions[Suspending]": {"True"}}},
		{"Stopping", "Suspending: spec.suspend the operator has not answered yet (v1.7)", is{"spec.suspend": {"true"}}},
		{"RollingBack", "RollbackInProgress, reason TargetClusterChanged (before v1.7)",
			is{"conditions[RollbackInProgress]": {"True"}, "conditions[RollbackInProgress].reason": {"TargetClusterChanged"}}},
		{"RollingBack", "RollbackInProgress, reason DesiredClusterSpecChanged (from v1.7)",
			is{"conditions[RollbackInProgress]": {"True"}, "conditions[RollbackInProgress].reason": {"DesiredClusterSpecChanged"}}},
		{"Upgrading", "UpgradeInProgress", is{"conditions[UpgradeInProgress]": {"True"}}},
		{"Running", "Ready", is{"conditions[Ready]": {"True"}}},
		{"Failed", "InitializingTimeout", is{"conditions[Ready]": {"False"}, "conditions[Ready].reason": {"InitializingTimeout"}}},
		{"Pending", "initializing", is{"conditions[Ready]": {"False"}, "conditions[Ready].reason": {"Initializing"}}},
		{"Pending", "initializing: nothing written yet", is{"conditions[Ready]": {""}, "status.serviceStatus": {""}}},
	},
	// RayCronJob: ray-project/kuberay v1.6.0, ray-operator/controllers/ray/raycronjob_controller.go
	// Reconcile: utils/validation.go ValidateRayCronJobSpec refuses a schedule robfig/cron/v3's
	// ParseStandard does not parse (v3.0.1 in its go.mod), and no run is made while spec.suspend is
	// true; otherwise it makes a RayJob at each time the schedule names.
	"RayCronJob": {
		{"Stopped", "spec.suspend", is{"spec.suspend": {"true"}}},
		{"Failed", "a schedule the operator's parser refuses", is{"spec.schedule parses": {"no"}}},
		{"Running", "scheduling", is{"spec.schedule parses": {"yes"}}},
	},
}

// statusFixture is one file of testdata/status.
type statusFixture struct {
	file string
	// Kind is the object's kind.
	Kind string `json:"kind"`
	// Source says what wrote the object: captured on the local stack, or built after the KubeRay (and
	// kubelet) source it names, with the version.
	Source string `json:"source"`
	// Reads are the fields the fixture exercises (named as in is), with the values it holds.
	Reads map[string]string `json:"reads"`
	// StoredAs "template": the service stores the object as a template (see is).
	StoredAs string `json:"storedAs,omitempty"`
	// Object is the object as KubeRay wrote it, or the manifest the service stores.
	Object map[string]any `json:"object"`
	// Pods are its pods, as the kubelet writes them, where a row reads them.
	Pods []map[string]any `json:"pods,omitempty"`
}

// statusFixtures reads testdata/status. A fixture holds nothing but the object, what it exercises and
// its source: no expected status can be recorded in it.
func statusFixtures(t *testing.T) []statusFixture {
	t.Helper()
	files, err := filepath.Glob("testdata/status/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []statusFixture
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		fx := statusFixture{file: filepath.Base(file)}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&fx), file)
		out = append(out, fx)
	}
	return out
}

// kubeRayFields reads, from the fixture alone, every field statusContract names.
func kubeRayFields(fx statusFixture) map[string]string {
	f := map[string]string{}
	for _, path := range []string{"spec.suspend", "status.state", "status.jobDeploymentStatus", "status.jobStatus", "status.serviceStatus"} {
		f[path] = text(at(fx.Object, strings.Split(path, ".")...))
	}
	conditions, _ := at(fx.Object, "status", "conditions").([]any)
	for _, c := range conditions {
		typ := text(at(c, "type"))
		f["conditions["+typ+"]"] = text(at(c, "status"))
		f["conditions["+typ+"].reason"] = text(at(c, "reason"))
	}
	for _, pod := range fx.Pods {
		if text(at(pod, "metadata", "labels", "ray.io/node-type")) != "head" {
			continue
		}
		f["headPod.phase"] = text(at(pod, "status", "phase"))
		statuses, _ := at(pod, "status", "containerStatuses").([]any)
		for _, cs := range statuses {
			if reason := text(at(cs, "state", "waiting", "reason")); reason != "" {
				f["headPod.waiting"] = reason
				break
			}
		}
	}
	if schedule, ok := at(fx.Object, "spec", "schedule").(string); ok {
		f["spec.schedule parses"] = "yes"
		if _, err := cron.ParseStandard(schedule); err != nil {
			f["spec.schedule parses"] = "no"
		}
	}
	if fx.StoredAs == "template" {
		f["template"] = "yes"
	}
	return f
}

func at(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

func text(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// contractRow is the index of the row of the fixture's kind that gives its status, or -1.
func contractRow(fx statusFixture) int {
	fields := kubeRayFields(fx)
	return slices.IndexFunc(statusContract[fx.Kind], func(r statusRow) bool { return r.holds(fields) })
}

// answered is the status the service gives the fixture's object: its summary, completed by its pods,
// or, for a template, the summary of the template the service stores and reads back.
func answered(t *testing.T, k *Kind, fx statusFixture) string {
	t.Helper()
	o := &unstructured.Unstructured{Object: fx.Object}
	if fx.StoredAs == "template" {
		// as the service stores it; its signature is internal/signing's, checked before it is parsed
		cm, err := k.TemplateConfigMap(o, string(o.GetUID()), true)
		require.NoError(t, err)
		tpl, err := k.ParseTemplate(cm)
		require.NoError(t, err)
		return k.TemplateSummary(tpl).Status
	}
	pods := make([]*corev1.Pod, len(fx.Pods))
	for i, p := range fx.Pods {
		b, err := json.Marshal(p)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &pods[i]))
	}
	s := k.Summarize(o)
	return k.WithPods(&s, pods, nil).Status
}

// TestStatusFollowsTheContract: each fixture says which KubeRay fields it exercises, API.md's table
// gives the status those fields mean, and the service answers that status.
func TestStatusFollowsTheContract(t *testing.T) {
	byKind := map[string]*Kind{}
	for _, k := range NewKinds().All() {
		byKind[k.Kind] = k
	}
	for _, fx := range statusFixtures(t) {
		t.Run(fx.file, func(t *testing.T) {
			k, rows := byKind[fx.Kind], statusContract[fx.Kind]
			require.NotNil(t, k, fx.Kind)
			require.NotEmpty(t, rows, "API.md's table has a row for %s", fx.Kind)
			assert.Regexp(t, `ray-project/kuberay v1\.[5-7]\.\d+ ray-operator/\S+`, fx.Source, "the fixture cites what wrote it")

			fields := kubeRayFields(fx)
			require.NotEmpty(t, fx.Reads, "the fixture names the KubeRay fields it exercises")
			for field, value := range fx.Reads {
				_, known := fields[field]
				known = known || slices.ContainsFunc(rows, func(r statusRow) bool { _, ok := r.when[field]; return ok })
				assert.True(t, known, "%s: neither in the object nor looked at by API.md's %s row", field, fx.Kind)
				assert.Equal(t, value, fields[field], "the fixture says it exercises %s = %q", field, value)
			}
			i := contractRow(fx)
			require.GreaterOrEqual(t, i, 0, "no reading of API.md's %s row holds for %v", fx.Kind, fields)
			row := rows[i]
			for field := range row.when {
				assert.Contains(t, fx.Reads, field, "the fixture names every field its reading (%s) looks at", row.reads)
			}
			assert.Equal(t, row.status, answered(t, k, fx), "API.md: a %s is %s when %s", fx.Kind, row.status, row.reads)
		})
	}
}

// TestStatusFixturesCoverTheContract: every reading of API.md's table, for every kind, has a fixture.
func TestStatusFixturesCoverTheContract(t *testing.T) {
	covered := map[string][]string{}
	for _, fx := range statusFixtures(t) {
		if i := contractRow(fx); i >= 0 {
			key := fmt.Sprintf("%s %d", fx.Kind, i)
			covered[key] = append(covered[key], fx.file)
		}
	}
	for kind, rows := range statusContract {
		for i, r := range rows {
			assert.NotEmpty(t, covered[fmt.Sprintf("%s %d", kind, i)], "no fixture exercises %s %s (%s)", kind, r.status, r.reads)
		}
	}
	for _, k := range NewKinds().All() {
		assert.NotEmpty(t, statusContract[k.Kind], "API.md's table has rows for %s", k.Kind)
	}
}

// What operators older than the supported ones wrote, outside API.md's table: a RayCluster's state
// "failed" (ray-project/kuberay v1.1.0 raycluster_controller.go, deprecated since), and a RayService's
// serviceStatus without conditions (before v1.3.0, apis/ray/v1/rayservice_types.go: "Since KubeRay
// v1.3.0, ServiceStatus is equivalent to the RayServiceReady condition").
func TestStatusOfOlderOperators(t *testing.T) {
	cluster, service := rayClusterKind(), rayServiceKind(&Declared{})
	assert.Equal(t, StatusFailed, cluster.Status(obj(nil, m{"state": "failed"})))
	assert.Equal(t, StatusRunning, service.Status(obj(nil, m{"serviceStatus": "Running"})))
	assert.Equal(t, StatusPending, service.Status(obj(nil, m{"serviceStatus": ""})))
}

func cond(typ, status, reason string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason}
}

func obj(spec, status map[string]any) *unstructured.Unstructured {
	o := map[string]any{}
	if spec != nil {
		o["spec"] = spec
	}
	if status != nil {
		o["status"] = status
	}
	return &unstructured.Unstructured{Object: o}
}

type m = map[string]any
type l = []any
