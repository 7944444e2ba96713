package ray

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Health reasons an object that makes runs (Kind.Runs) takes from them.
const (
	// ReasonLastRunFailed: the newest run that ended failed.
	ReasonLastRunFailed = "LastRunFailed"
	// ReasonRunsPilingUp: more than one run is active at once, each taking longer than the schedule
	// leaves it (the operator starts the next run whether or not the last one ended).
	ReasonRunsPilingUp = "RunsPilingUp"
)

// OutcomeNone is the last outcome of an object none of whose runs has ended. A list filters the
// objects that make runs by it or by the status of the newest run that ended (Succeeded, Failed).
const OutcomeNone = "none"

// RunsState is what an object's runs are doing, from the runs the watch cache holds (the operator or a
// TTL may have deleted older ones).
type RunsState struct {
	// Total counts its runs that exist now.
	Total int `json:"total"`
	// Active counts those not stopped or ended.
	Active int `json:"active"`
	// Last is the newest run, whatever its state.
	Last *RunOutcome `json:"last,omitempty"`
	// LastEnded is the newest run that ended (Succeeded or Failed): the last outcome.
	LastEnded *RunOutcome `json:"lastEnded,omitempty"`
}

// RunOutcome is one run: its name (the RayJob's, whose own routes show it whole), status and times.
type RunOutcome struct {
	Name      string     `json:"name"`
	Status    string     `json:"status" enums:"Pending,Running,Retrying,Stopping,Stopped,Succeeded,Failed"`
	StartTime *time.Time `json:"startTime,omitempty"`
	EndTime   *time.Time `json:"endTime,omitempty"`
	// DurationSeconds is from its start to its end, once it ended.
	DurationSeconds *float64 `json:"durationSeconds,omitempty"`
}

func outcomeOf(r *Summary) *RunOutcome {
	o := &RunOutcome{Name: r.Name, Status: r.Status, StartTime: r.StartTime, EndTime: r.EndTime}
	if r.StartTime != nil && r.EndTime != nil {
		d := r.EndTime.Sub(*r.StartTime).Seconds()
		o.DurationSeconds = &d
	}
	return o
}

// LastOutcome is the status of the newest run that ended, OutcomeNone when none has; "" for an object
// of a kind that makes no runs.
func (s *Summary) LastOutcome() string {
	switch {
	case s.Runs == nil:
		return ""
	case s.Runs.LastEnded == nil:
		return OutcomeNone
	}
	return s.Runs.LastEnded.Status
}

// WithRuns returns the summary of an object of a kind that makes runs completed by the summaries of
// the runs it made (any order): how many there are and are active, the newest, the last outcome, and
// the health they give it — Degraded while the last run that ended failed, or while runs pile up.
func (k *Kind) WithRuns(base *Summary, runs []*Summary) *Summary {
	if k.Runs == nil || base.Type != TypeInstance {
		return base
	}
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b *Summary) int { // newest first
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.Name, a.Name))
	})
	st := &RunsState{Total: len(sorted)}
	var active []string
	for _, r := range sorted {
		if k.Active(r.Status) {
			st.Active++
			active = append(active, r.Name)
		}
		if st.LastEnded == nil && Ended(r.Status) {
			st.LastEnded = outcomeOf(r)
		}
	}
	if len(sorted) > 0 {
		st.Last = outcomeOf(sorted[0])
	}
	s := *base
	s.Runs = st
	s.problems = slices.Clip(base.problems)
	if st.LastEnded != nil && st.LastEnded.Status == StatusFailed {
		s.problems = append(s.problems, Problem{Source: InvolvedObjectRef{Kind: runKindName(sorted), Name: st.LastEnded.Name},
			Reason: ReasonLastRunFailed, Message: failedRunMessage(sorted, st.LastEnded.Name), Since: st.LastEnded.EndTime})
	}
	if len(active) > 1 {
		s.problems = append(s.problems, Problem{Source: InvolvedObjectRef{Kind: k.Kind, Name: base.Name}, Reason: ReasonRunsPilingUp,
			Message: fmt.Sprintf("%d runs are active at once (%s): each run takes longer than the schedule leaves it", len(active), listNames(active, 5))})
	}
	k.deriveHealth(&s, nil)
	s.bound()
	return &s
}

func runKindName(runs []*Summary) string {
	if len(runs) > 0 {
		return runs[0].Kind
	}
	return ""
}

// failedRunMessage says which run failed and why, as far as its own status says (a reason read from
// its pods or events is not repeated here: the run's own health shows it to whoever may see it).
func failedRunMessage(runs []*Summary, name string) string {
	for _, r := range runs {
		if r.Name != name {
			continue
		}
		msg := "run " + name + " failed"
		if h := r.Health; h.seenOn == "" && h.Reason != "" && h.Reason != StatusFailed {
			msg += ": " + h.Reason
			if h.Message != "" {
				msg += ": " + h.Message
			}
		}
		return msg
	}
	return "run " + name + " failed"
}

// listNames names the first n names, and how many more there are.
func listNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
