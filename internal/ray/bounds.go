package ray

import (
	"unicode/utf8"
	"unsafe"
)

// Bounds of what a summary takes from an object. Whoever may write an object chooses these strings and
// how many groups, resources and problems it names; the watch cache keeps a summary of every object
// and of its recent versions, so none of them may be as large as the object. A string longer than its
// bound is cut at a character boundary and ends with "…" (within the bound). The Swagger descriptions
// of the summary's fields name the same figures.
const (
	// MaxNameBytes bounds names taken from a spec or a status: worker groups, Ray clusters and the
	// sources of problems.
	MaxNameBytes = 253
	// MaxRayResourceNameBytes bounds the names of Ray logical resources.
	MaxRayResourceNameBytes = 64
	// MaxCreatorBytes bounds the creator (the annotation ray.openfuyao.com/creator).
	MaxCreatorBytes = 256
	// MaxImageBytes bounds the head's image.
	MaxImageBytes = 512
	// MaxEntrypointBytes bounds a RayJob's entrypoint.
	MaxEntrypointBytes = 4096
	// MaxWordBytes bounds the short words of a status: the Ray version, a RayJob's job and deployment
	// statuses and submission mode, a RayService's service status, the reasons of health and problems.
	MaxWordBytes = 128
	// MaxMessageBytes bounds the messages of health and problems.
	MaxMessageBytes = 1024
	// MaxWorkerGroups is how many worker groups a summary lists (Requested still counts them all).
	MaxWorkerGroups = 64
	// MaxPodClaims is how many resource claims of a pod template a summary counts.
	MaxPodClaims = 32
	// MaxRayResources is how many Ray logical resources a head or a worker group lists.
	MaxRayResources = 16
	// MaxProblems is how many problems a summary keeps (the first ones: the object's own, then its
	// pods', then the Warning events').
	MaxProblems = 32
)

// clipEllipsis ends a string that was cut.
const clipEllipsis = "…"

// Clip returns s cut to at most n bytes, at a character boundary, ending with "…" when it was cut. The
// result never shares memory with a longer s, so that it does not hold the object s was read from.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(clipEllipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + clipEllipsis
}

func clipTo(p *string, n int) { *p = Clip(*p, n) }

// bound cuts what the summary took from its object to the bounds above.
func (s *Summary) bound() {
	clipTo(&s.Creator, MaxCreatorBytes)
	clipTo(&s.Image, MaxImageBytes)
	clipTo(&s.RayVersion, MaxWordBytes)
	clipTo(&s.Entrypoint, MaxEntrypointBytes)
	for _, p := range []*string{&s.JobStatus, &s.JobDeploymentStatus, &s.SubmissionMode, &s.ServiceStatus} {
		clipTo(p, MaxWordBytes)
	}
	for _, p := range []*string{&s.RayClusterName, &s.ActiveRayClusterName, &s.PendingRayClusterName} {
		clipTo(p, MaxNameBytes)
	}
	s.Head.RayResources = boundLogical(s.Head.RayResources)
	if len(s.WorkerGroups) > MaxWorkerGroups {
		s.WorkerGroups = append([]WorkerGroup(nil), s.WorkerGroups[:MaxWorkerGroups]...)
	}
	for i := range s.WorkerGroups {
		g := &s.WorkerGroups[i]
		if len(g.Name) > MaxNameBytes || len(g.RayResources) > MaxRayResources || logicalNeedsClip(g.RayResources) {
			g.Name = Clip(g.Name, MaxNameBytes)
			g.RayResources = boundLogical(g.RayResources)
		}
	}
	boundHealth(&s.Health)
	if s.waiting != nil && (len(s.waiting.Reason) > MaxWordBytes || len(s.waiting.Message) > MaxMessageBytes) {
		w := *s.waiting
		boundHealth(&w)
		s.waiting = &w
	}
	if len(s.problems) > MaxProblems {
		s.problems = append([]Problem(nil), s.problems[:MaxProblems]...)
	}
	for i := range s.problems {
		p := &s.problems[i]
		if len(p.Reason) > MaxWordBytes || len(p.Message) > MaxMessageBytes || len(p.Source.Name) > MaxNameBytes || len(p.Source.Kind) > MaxWordBytes {
			// The problems may be shared with the summary this one was made from: cut a copy.
			s.problems = append([]Problem(nil), s.problems...)
			for j := i; j < len(s.problems); j++ {
				q := &s.problems[j]
				q.Reason, q.Message = Clip(q.Reason, MaxWordBytes), Clip(q.Message, MaxMessageBytes)
				q.Source.Name, q.Source.Kind = Clip(q.Source.Name, MaxNameBytes), Clip(q.Source.Kind, MaxWordBytes)
			}
			break
		}
	}
}

func boundHealth(h *Health) {
	h.Reason, h.Message = Clip(h.Reason, MaxWordBytes), Clip(h.Message, MaxMessageBytes)
}

func logicalNeedsClip(r Logical) bool {
	for _, a := range r {
		if len(a.Name) > MaxRayResourceNameBytes {
			return true
		}
	}
	return false
}

// boundLogical keeps the first MaxRayResources amounts, their names cut; r itself when it is within.
func boundLogical(r Logical) Logical {
	if len(r) <= MaxRayResources && !logicalNeedsClip(r) {
		return r
	}
	out := make(Logical, 0, min(len(r), MaxRayResources))
	for _, a := range r[:min(len(r), MaxRayResources)] {
		out = append(out, Amount{Name: Clip(a.Name, MaxRayResourceNameBytes), Value: a.Value})
	}
	return out
}

// Sizes a summary's bytes are counted by: the structures it points to and the bytes of its strings.
// The count is an estimate of what the summary holds, not an exact measure.
const (
	groupOverhead   = int(unsafe.Sizeof(WorkerGroup{}))
	amountOverhead  = int(unsafe.Sizeof(Amount{}))
	problemOverhead = int(unsafe.Sizeof(Problem{}))
	timeOverhead    = int(unsafe.Sizeof(Health{}.Since)) + 24
)

// Bytes estimates the memory a summary holds outside its own struct: its strings, times, groups,
// problems and actions. The change feed bounds what it keeps by it.
func (s *Summary) Bytes() int {
	n := 0
	for _, str := range []string{s.Name, s.Namespace, s.Kind, s.Type, s.Status, s.RayVersion, s.Creator, s.Image,
		s.JobStatus, s.JobDeploymentStatus, s.Entrypoint, s.SubmissionMode, s.RayClusterName, s.ServiceStatus,
		s.ActiveRayClusterName, s.PendingRayClusterName, s.Health.State, s.Health.Reason, s.Health.Message} {
		n += len(str)
	}
	for _, t := range []bool{s.StartTime != nil, s.EndTime != nil, s.Health.Since != nil, s.NumServeEndpoints != nil} {
		if t {
			n += timeOverhead
		}
	}
	n += logicalBytes(s.Head.RayResources)
	for _, g := range s.WorkerGroups {
		n += groupOverhead + len(g.Name) + logicalBytes(g.RayResources)
	}
	for _, p := range s.problems {
		n += problemOverhead + len(p.Reason) + len(p.Message) + len(p.Source.Kind) + len(p.Source.Name) + timeOverhead
	}
	if w := s.waiting; w != nil {
		n += int(unsafe.Sizeof(*w)) + len(w.Reason) + len(w.Message) + timeOverhead
	}
	for _, a := range s.Actions {
		n += 16 + len(a)
	}
	return n
}

func logicalBytes(r Logical) int {
	n := 0
	for _, a := range r {
		n += amountOverhead + len(a.Name)
	}
	return n
}
