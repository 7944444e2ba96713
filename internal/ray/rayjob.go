package ray

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rayJobKind: a RayJob runs on a Ray cluster it creates (or one its clusterSelector names) and submits
// its job from a Job of its own name. KubeRay names the RayCluster and the Job after the RayJob, hence
// the shorter limit. It suspends in place only when KubeRay allows; otherwise its Ray job is stopped
// through the dashboard. A finished RayJob runs again when started.
func rayJobKind() *Kind {
	return &Kind{
		Resource:        "rayjobs",
		Kind:            "RayJob",
		MaxNameLength:   47,
		ClusterSpecPath: []string{"spec", "rayClusterSpec"},
		StatusOf:        rayJobStatus,
		SignalsOf:       rayJobSignals,
		SummarizeOwn:    summarizeRayJob,
		ClustersOf:      func(s *Summary) []string { return []string{s.RayClusterName} },
		Makes:           rayJobMakes,
		HasSubmitter:    true,
		// KubeRay v1.6.0 batchscheduler/volcano reads its labels and rayjob_controller.go copies them to its
		// cluster; Kueue v0.17.0 pkg/controller/jobs/rayjob.
		QueueManagers: []string{ManagerVolcano, ManagerKueue},
		Notice: func(_, next string) string {
			return map[string]string{StatusSucceeded: "job.succeeded", StatusFailed: "job.failed", StatusStopped: "job.stopped"}[next]
		},
		Finishes:       true,
		CanSuspend:     rayJobSuspendable,
		StopBy:         StopViaDashboard,
		StoppedInPlace: rayJobStoppedInPlace,
		RerunsFrom: func(status string) bool {
			return status == StatusSucceeded || status == StatusFailed || status == StatusStopped
		},
	}
}

// rayJobMakes: the cluster a RayJob's status.rayClusterName names (KubeRay
// ray-operator/apis/ray/v1/rayjob_types.go RayJobStatus.RayClusterName, v1.5.0-v1.7.0), unless the RayJob
// runs on a cluster its spec.clusterSelector selects: KubeRay then writes that cluster's name there
// (controllers/ray/rayjob_controller.go, v1.6.0), but made none.
func rayJobMakes(o *unstructured.Unstructured) []string {
	if sel, _, _ := unstructured.NestedMap(o.Object, "spec", "clusterSelector"); len(sel) > 0 {
		return nil
	}
	name, _, _ := unstructured.NestedString(o.Object, "status", "rayClusterName")
	return []string{name}
}

// rayJobSuspendable: KubeRay suspends only a RayJob that owns its cluster and deletes it when done.
func rayJobSuspendable(o *unstructured.Unstructured) bool {
	shutdown, _, _ := unstructured.NestedBool(o.Object, "spec", "shutdownAfterJobFinishes")
	selector, _, _ := unstructured.NestedStringMap(o.Object, "spec", "clusterSelector")
	return shutdown && len(selector) == 0
}

// rayJobStatus normalizes a RayJob's jobDeploymentStatus and jobStatus.
func rayJobStatus(o *unstructured.Unstructured) string {
	deployment, _, _ := unstructured.NestedString(o.Object, "status", "jobDeploymentStatus")
	job, _, _ := unstructured.NestedString(o.Object, "status", "jobStatus")
	switch deployment {
	case "Failed", "ValidationFailed":
		return StatusFailed
	case "Suspending":
		return StatusStopping
	case "Suspended":
		return StatusStopped
	case "Retrying":
		return StatusRetrying
	}
	switch job {
	case "STOPPED":
		return StatusStopped
	case "FAILED":
		return StatusFailed
	case "SUCCEEDED":
		if deployment == "Complete" {
			return StatusSucceeded
		}
	}
	switch deployment {
	case "Complete":
		return StatusSucceeded
	case "Running":
		return StatusRunning
	}
	return StatusPending // "", New, Initializing, Waiting
}

func summarizeRayJob(o *unstructured.Unstructured, s *Summary) {
	s.JobStatus, _, _ = unstructured.NestedString(o.Object, "status", "jobStatus")
	s.JobDeploymentStatus, _, _ = unstructured.NestedString(o.Object, "status", "jobDeploymentStatus")
	s.Entrypoint, _, _ = unstructured.NestedString(o.Object, "spec", "entrypoint")
	s.SubmissionMode, _, _ = unstructured.NestedString(o.Object, "spec", "submissionMode")
	if s.SubmissionMode == "" {
		s.SubmissionMode = "K8sJobMode" // KubeRay's default
	}
	s.StartTime = nestedTime(o, "status", "startTime")
	s.EndTime = nestedTime(o, "status", "endTime")
	if d, ok := nestedInt(o.Object, "spec", "preRunningDeadlineSeconds"); ok {
		s.PreRunningDeadlineSeconds = &d
	}
	s.DeletionRules = deletionRules(o)
	s.RayClusterName, _, _ = unstructured.NestedString(o.Object, "status", "rayClusterName")
	if s.RayClusterName == "" {
		// A RayJob that runs on an existing cluster names it in its selector.
		s.RayClusterName, _, _ = unstructured.NestedString(o.Object, "spec", "clusterSelector", "ray.io/cluster")
	}
}

// deletionRules reads spec.deletionStrategy: its deletionRules, or the older onSuccess and onFailure
// policies, which wait spec.ttlSecondsAfterFinished (KubeRay v1.6 rayjob_controller.go
// handleDeletionRules, handleLegacyDeletionPolicy).
func deletionRules(o *unstructured.Unstructured) []DeletionRule {
	strategy, _, _ := unstructured.NestedMap(o.Object, "spec", "deletionStrategy")
	if strategy == nil {
		return nil
	}
	var out []DeletionRule
	rules, _ := strategy["deletionRules"].([]any)
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		policy, _ := rm["policy"].(string)
		cond, _ := rm["condition"].(map[string]any)
		on, _ := cond["jobStatus"].(string)
		if d, _ := cond["jobDeploymentStatus"].(string); on == "" {
			on = d
		}
		ttl, _ := nestedInt(cond, "ttlSeconds")
		out = append(out, DeletionRule{Policy: Clip(policy, MaxWordBytes), On: Clip(on, MaxWordBytes), TTLSeconds: ttl})
		if len(out) == MaxDeletionRules {
			return out
		}
	}
	ttl, _ := nestedInt(o.Object, "spec", "ttlSecondsAfterFinished")
	for _, legacy := range []struct{ field, on string }{{"onSuccess", "SUCCEEDED"}, {"onFailure", "FAILED"}} {
		if policy, ok, _ := unstructured.NestedString(strategy, legacy.field, "policy"); ok {
			out = append(out, DeletionRule{Policy: Clip(policy, MaxWordBytes), On: legacy.on, TTLSeconds: ttl})
		}
	}
	return out
}

// ReasonJobStatusCheckFailing is the health reason of a running RayJob whose Ray job's status the
// operator cannot read from the dashboard (KubeRay v1.7 status.jobStatusCheckFailureStartTime): the
// service's name for what KubeRay fails as JobStatusCheckTimeoutExceeded when it lasts.
const ReasonJobStatusCheckFailing = "JobStatusCheckFailing"

// jobStatusCheckTimeoutExceeded is the reason KubeRay v1.7 fails a RayJob with when its status checks
// fail for RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS (ray-project/kuberay v1.7.0
// ray-operator/apis/ray/v1/rayjob_types.go JobStatusCheckTimeoutExceeded).
const jobStatusCheckTimeoutExceeded = "JobStatusCheckTimeoutExceeded"

// rayJobSignals: a failed deployment is a problem, with the reason KubeRay gives; any other deployment
// status but Running and Complete is why it waits. A running RayJob whose status the operator cannot
// read is a problem too, since it started failing.
func rayJobSignals(o *unstructured.Unstructured, s *Summary, self InvolvedObjectRef) (problems []Problem, waiting *Health) {
	deployment, _, _ := unstructured.NestedString(o.Object, "status", "jobDeploymentStatus")
	reason, _, _ := unstructured.NestedString(o.Object, "status", "reason")
	msg, _, _ := unstructured.NestedString(o.Object, "status", "message")
	// KubeRay v1.7.0 rayjob_controller.go: recordJobStatusCheckFailure sets the time of the first failed
	// read of the Ray job's status while Running, a successful read clears it, and
	// checkJobStatusCheckTimeoutAndUpdateStatusIfNeeded fails the RayJob with JobStatusCheckTimeoutExceeded
	// once it is RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS old (300 by default), leaving the time. A RayJob
	// failed for another reason may keep a stale time: its reason is KubeRay's.
	checkFailing := nestedTime(o, "status", "jobStatusCheckFailureStartTime")
	switch {
	case deployment == "Failed" && reason == jobStatusCheckTimeoutExceeded && checkFailing != nil:
		return []Problem{{Source: self, Reason: reason, Since: checkFailing, Message: fmt.Sprintf(
			"the operator cannot reach the job's status since %s and has failed the RayJob: %s",
			checkFailing.Format(time.RFC3339), msg)}}, nil
	case deployment == "Failed" || deployment == "ValidationFailed":
		return []Problem{{Source: self, Reason: cmp.Or(reason, deployment), Message: msg, Since: s.EndTime}}, nil
	case deployment == "Running" && checkFailing != nil:
		return []Problem{{Source: self, Reason: ReasonJobStatusCheckFailing, Since: checkFailing, Message: fmt.Sprintf(
			"the operator cannot reach the job's status since %s (its reads from the Ray dashboard fail); it fails "+
				"the RayJob (JobStatusCheckTimeoutExceeded) when this lasts RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS, 300 s unless the operator sets it",
			checkFailing.Format(time.RFC3339))}}, nil
	case deployment != "" && deployment != "Running" && deployment != "Complete":
		return nil, &Health{Reason: deployment, Message: msg}
	}
	return nil, nil
}

// rayJobStoppedInPlace: a Stopped RayJob is suspended when KubeRay suspended it; one whose Ray job was
// stopped through the dashboard runs again from its spec when started.
func rayJobStoppedInPlace(s *Summary) bool {
	return s.JobDeploymentStatus == "Suspended" || s.JobDeploymentStatus == "Suspending"
}
