package ray

import (
	"strconv"
	"strings"
	"time"

	// A schedule may name its time zone (CRON_TZ=Asia/Shanghai, as robfig/cron/v3 reads it): the
	// service reads it wherever it runs, with or without the system's zone files.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// RayCronJob (KubeRay v1.6, feature gate RayCronJob; apis/ray/v1/raycronjob_types.go and
// controllers/ray/raycronjob_controller.go): spec.schedule (a standard cron schedule, parsed with
// robfig/cron/v3's ParseStandard), spec.suspend, spec.jobTemplate (a RayJob spec) and
// status.lastScheduleTime. At each time the schedule names, the operator creates one RayJob from the
// template, named <name>-<5 random characters>, labelled RunOfLabel, annotated ScheduledAtAnnotation,
// and owned by the RayCronJob. It runs on no Ray cluster of its own.
//
// KubeRay v1.7.0 added spec.timeZone (the schedule is read in that zone, "TZ=<zone> <schedule>",
// raycronjob_controller.go:211 formatSchedule) and names each run after its tick, <name>-<Unix minutes>
// (getRayJobName, :166), so that a tick makes one run at most; it refuses a schedule that names its own
// zone (TZ= or CRON_TZ=), a timeZone it cannot load and a name over 36 characters
// (utils/validation.go:969 ValidateRayCronJobSpec; utils/constant.go:385 MaxRayCronJobNameLength).
const (
	// CronJobKind is the kind's name, which the owner reference of its runs names.
	CronJobKind = "RayCronJob"
	// RunOfLabel names, on a RayJob, the RayCronJob that made it (KubeRay constant.go).
	RunOfLabel = "ray.io/cronjob-name"
	// ScheduledAtAnnotation is the time a RayCronJob's run was scheduled for, UTC RFC 3339.
	ScheduledAtAnnotation = "ray.io/cronjob-scheduled-timestamp"
	// InvalidScheduleReason is the health reason of a RayCronJob whose schedule does not parse.
	InvalidScheduleReason = "InvalidSchedule"
	// NextRunsShown is how many of the next run times a summary gives.
	NextRunsShown = 3
)

// rayCronJobKind: a RayCronJob is Running while it schedules and Stopped while suspended (start and
// stop set spec.suspend); its runs are RayJobs. Its name leaves room for the suffix of its runs'
// names within a RayJob's limit.
func rayCronJobKind(declared *Declared) *Kind {
	return &Kind{
		Resource: "raycronjobs",
		Kind:     CronJobKind,
		// 36: the limit of v1.7 (47 for a RayJob, less "-" and 10 digits of Unix minutes), kept on v1.6
		// too (41 there) so that a RayCronJob made today is still run after KubeRay's upgrade.
		MaxNameLength:   36,
		ClusterSpecPath: []string{"spec", "jobTemplate", "rayClusterSpec"},
		StatusOf:        func(o *unstructured.Unstructured) string { return rayCronJobStatus(o, declared) },
		SignalsOf:       rayCronJobSignals,
		SummarizeOwn:    func(o *unstructured.Unstructured, s *Summary) { summarizeRayCronJob(o, s, declared) },
		ClustersOf:      func(*Summary) []string { return nil },
		CanSuspend:      func(*unstructured.Unstructured) bool { return true },
		NoPods:          true,
		Runs:            &Runs{Resource: "rayjobs", Label: RunOfLabel},
		NewRun: func(o *unstructured.Unstructured, now time.Time, suffix string) *unstructured.Unstructured {
			if declared.Has(FieldCronTimeZone) {
				suffix = strconv.FormatInt(now.Unix()/60, 10) // as v1.7 names a run (getRayJobName)
			}
			return newRayCronJobRun(o, now, suffix)
		},
		AtAnswer: nextRunsAt,
		Optional: true,
		Requires: "KubeRay v1.6 or later with the RayCronJob feature gate",
	}
}

// CronSchedule is what a RayCronJob's summary says of its schedule.
type CronSchedule struct {
	// Expression is spec.schedule, cut to 128 bytes.
	Expression string `json:"expression" example:"*/5 * * * *"`
	// TimeZone is the time zone the schedule is read in: spec.timeZone (KubeRay v1.7), else the one the
	// schedule names (its CRON_TZ= or TZ= prefix, KubeRay v1.6); empty for the operator's own (UTC in
	// its image).
	TimeZone string `json:"timeZone,omitempty" example:"Asia/Shanghai"`
	// Error says why the schedule does not parse, as the operator would refuse it; empty when it does.
	Error string `json:"error,omitempty"`
	// LastScheduled is status.lastScheduleTime: when the operator last made a run.
	LastScheduled *time.Time `json:"lastScheduled,omitempty"`
	// NextRuns are the next NextRunsShown times the schedule names, from the time of the answer; none
	// while the RayCronJob is suspended or its schedule does not parse.
	NextRuns []time.Time `json:"nextRuns,omitempty"`
	// parsed is the schedule as the operator parses it (OperatorSchedule).
	parsed string
}

func rayCronJobStatus(o *unstructured.Unstructured, declared *Declared) string {
	if suspended, _, _ := unstructured.NestedBool(o.Object, "spec", "suspend"); suspended {
		return StatusStopped
	}
	if scheduleError(o, declared) != "" {
		return StatusFailed
	}
	return StatusRunning
}

// OperatorSchedule is a RayCronJob's schedule as the operator parses it: spec.schedule, prefixed
// "TZ=<zone> " where spec.timeZone names one (KubeRay v1.7.0 raycronjob_controller.go:211 formatSchedule).
func OperatorSchedule(o *unstructured.Unstructured) string {
	expr, _, _ := unstructured.NestedString(o.Object, "spec", "schedule")
	if tz, found, _ := unstructured.NestedString(o.Object, "spec", "timeZone"); found {
		return "TZ=" + tz + " " + expr
	}
	return expr
}

// scheduleError says why the operator refuses a RayCronJob's schedule, "" where it does not: its parser's
// error (v1.6 and v1.7), and where the CRD declares spec.timeZone (v1.7), a schedule naming its own zone
// or a time zone it cannot load (utils/validation.go:976-991, v1.7.0, with its messages).
func scheduleError(o *unstructured.Unstructured, declared *Declared) string {
	expr, _, _ := unstructured.NestedString(o.Object, "spec", "schedule")
	if declared.Has(FieldCronTimeZone) && strings.Contains(expr, "TZ") {
		return "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
	}
	if tz, found, _ := unstructured.NestedString(o.Object, "spec", "timeZone"); found {
		if tz == "" {
			return "timeZone must not be empty string, omit the field to use the local time zone of the KubeRay operator"
		}
		if _, err := time.LoadLocation(tz); err != nil {
			return "invalid time zone: " + err.Error()
		}
	}
	if _, err := cron.ParseStandard(OperatorSchedule(o)); err != nil {
		return err.Error()
	}
	return ""
}

func summarizeRayCronJob(o *unstructured.Unstructured, s *Summary, declared *Declared) {
	expr, _, _ := unstructured.NestedString(o.Object, "spec", "schedule")
	zone, found, _ := unstructured.NestedString(o.Object, "spec", "timeZone")
	if !found {
		zone = timeZoneOf(expr)
	}
	sched := &CronSchedule{Expression: Clip(expr, MaxWordBytes), TimeZone: Clip(zone, MaxWordBytes), parsed: OperatorSchedule(o)}
	if err := scheduleError(o, declared); err != "" {
		sched.Error = Clip(err, MaxMessageBytes)
	}
	if last, _, _ := unstructured.NestedString(o.Object, "status", "lastScheduleTime"); last != "" {
		if t, err := time.Parse(time.RFC3339, last); err == nil {
			sched.LastScheduled = &t
		}
	}
	s.Schedule = sched
}

// rayCronJobSignals: a schedule that does not parse is a problem (the operator records
// InvalidRayCronJobSpec and makes no run).
func rayCronJobSignals(_ *unstructured.Unstructured, s *Summary, self InvolvedObjectRef) ([]Problem, *Health) {
	if s.Schedule != nil && s.Schedule.Error != "" {
		return []Problem{{Source: self, Reason: InvalidScheduleReason, Message: s.Schedule.Error}}, nil
	}
	return nil, nil
}

// timeZoneOf is the time zone a cron schedule names by its prefix, as robfig/cron/v3's parser reads
// it (parser.go: "CRON_TZ=" or "TZ=", up to the first space).
func timeZoneOf(expr string) string {
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if rest, ok := strings.CutPrefix(expr, prefix); ok {
			zone, _, _ := strings.Cut(rest, " ")
			return zone
		}
	}
	return ""
}

// NextRuns are the next n times the cron schedule expr names after t, as the operator reads it; none
// when it does not parse.
func NextRuns(expr string, after time.Time, n int) []time.Time {
	sched, err := cron.ParseStandard(expr)
	if err != nil {
		return nil
	}
	out := make([]time.Time, 0, n)
	// A schedule without a time zone is read in the time zone of the time given (robfig/cron/v3
	// spec.go): UTC, the operator's, not this process's.
	for t := after.UTC(); len(out) < n; {
		t = sched.Next(t)
		if t.IsZero() { // a schedule that never fires again (e.g. 30 February)
			break
		}
		out = append(out, t.UTC())
	}
	return out
}

// nextRunsAt gives a scheduling RayCronJob's next runs from now, on a copy of its schedule.
func nextRunsAt(s *Summary, now time.Time) {
	if s.Schedule == nil || s.Status != StatusRunning {
		return
	}
	sched := *s.Schedule
	sched.NextRuns = NextRuns(sched.parsed, now, NextRunsShown)
	s.Schedule = &sched
}

// newRayCronJobRun is the RayJob a RayCronJob runs now, made as the operator makes its runs
// (raycronjob_controller.go, constructRayJob): named <name>-<suffix>, labelled and annotated with the
// RayCronJob and the time, owned by it (so it is deleted with it), its spec the job template.
func newRayCronJobRun(o *unstructured.Unstructured, now time.Time, suffix string) *unstructured.Unstructured {
	spec, _, _ := unstructured.NestedMap(o.Object, "spec", "jobTemplate")
	run := &unstructured.Unstructured{Object: map[string]any{"apiVersion": RayGroupVersion.String(), "kind": "RayJob", "spec": spec}}
	run.SetName(o.GetName() + "-" + suffix)
	run.SetNamespace(o.GetNamespace())
	run.SetLabels(map[string]string{RunOfLabel: o.GetName()})
	run.SetAnnotations(map[string]string{ScheduledAtAnnotation: now.UTC().Format(time.RFC3339)})
	yes := true
	run.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(),
		UID: o.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	return run
}

// ScheduledRunGrace is how long after the tick it names a RayJob may be made and still be believed a
// run KubeRay made on schedule: KubeRay makes it at the tick (requeued for that time).
const ScheduledRunGrace = 2 * time.Minute

// CronRun is what a RayJob says of the RayCronJob run it is: the RayCronJob its controlling owner
// reference (of ray.io) and its label RunOfLabel both name, that reference's UID, the tick its
// annotation ScheduledAtAnnotation names, and when the RayJob was made.
type CronRun struct {
	CronJob     string
	UID         types.UID
	ScheduledAt time.Time
	Created     time.Time
}

// Covers tells whether r, were it the run KubeRay made, leaves the tick at without a run of its own: at
// is its tick, or a later one it was made after. KubeRay makes the run of the tick after the last it
// made (status.lastScheduleTime, or the RayCronJob's creation) once that tick has come, and goes on from
// the time it made it (raycronjob_controller.go, v1.6.0): where it made it late, it ran none of the ticks
// in between.
func (r *CronRun) Covers(at time.Time) bool {
	return at.Equal(r.ScheduledAt) || at.After(r.ScheduledAt) && at.Before(r.Created)
}

// RunOf is the RayCronJob run the RayJob o says it is; nil when it says none. Anyone who may create
// RayJobs may say so (with the RayCronJob's real UID): CronJobFacts.Scheduled tells whether KubeRay's
// schedule backs it.
func RunOf(o *unstructured.Unstructured) *CronRun {
	name := o.GetLabels()[RunOfLabel]
	at, err := time.Parse(time.RFC3339, o.GetAnnotations()[ScheduledAtAnnotation])
	if o.GetKind() != "RayJob" || name == "" || err != nil {
		return nil
	}
	for _, ref := range o.GetOwnerReferences() {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == RayGroupVersion.Group && ref.Controller != nil && *ref.Controller && ref.Kind == CronJobKind &&
			ref.Name == name && ref.UID != "" {
			return &CronRun{CronJob: name, UID: ref.UID, ScheduledAt: at.UTC(), Created: o.GetCreationTimestamp().UTC()}
		}
	}
	return nil
}

// CronJobFacts are what a RayCronJob's object says of the runs KubeRay made on its schedule: its UID,
// its schedule as the operator parses it, when it was made, and status.lastScheduleTime (zero: none).
type CronJobFacts struct {
	UID      types.UID
	Schedule string
	Created  time.Time
	Last     time.Time
}

// CronJobFactsOf reads them from a RayCronJob. Its schedule is spec.schedule, prefixed "TZ=<zone> " where
// spec.timeZone names one (KubeRay v1.7.0 raycronjob_types.go RayCronJobSpec.TimeZone,
// raycronjob_controller.go formatSchedule).
func CronJobFactsOf(o *unstructured.Unstructured) CronJobFacts {
	f := CronJobFacts{UID: o.GetUID(), Created: o.GetCreationTimestamp().UTC(), Schedule: OperatorSchedule(o)}
	if last, _, _ := unstructured.NestedString(o.Object, "status", "lastScheduleTime"); last != "" {
		if t, err := time.Parse(time.RFC3339, last); err == nil {
			f.Last = t.UTC()
		}
	}
	return f
}

// Scheduled tells whether r is, as far as the objects tell, a run KubeRay made on the RayCronJob's
// schedule (ray-project/kuberay ray-operator/controllers/ray/raycronjob_controller.go, v1.6.0-v1.7.0):
// KubeRay makes one run per tick, at the tick (scheduleTime, schedule.Next of status.lastScheduleTime or
// of the RayCronJob's creation), and then writes status.lastScheduleTime (v1.6.0: the time it made it;
// v1.7.0: the tick). So r names this RayCronJob's UID and one of its schedule's ticks after it was made,
// no later than the status's lastScheduleTime, and the RayJob was made at that tick or up to
// ScheduledRunGrace after. A RayJob made before the tick it names, or long after, is not KubeRay's; the
// caller also believes only one RayJob that so names a tick (KubeRay makes one).
func (f CronJobFacts) Scheduled(r *CronRun) bool {
	if r == nil || r.UID != f.UID || f.Last.IsZero() || r.ScheduledAt.After(f.Last) || r.Created.Before(r.ScheduledAt) ||
		r.Created.Sub(r.ScheduledAt) > ScheduledRunGrace {
		return false
	}
	sched, err := cron.ParseStandard(f.Schedule)
	if err != nil {
		return false
	}
	tick := sched.Next(r.ScheduledAt.Add(-time.Second))
	return tick.Equal(r.ScheduledAt) && r.ScheduledAt.After(f.Created)
}
