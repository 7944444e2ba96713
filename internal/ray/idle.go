package ray

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ReasonIdle is the health reason of a running Ray cluster that does no Ray work while it holds its
// resources (see Idle).
const ReasonIdle = "Idle"

// Idle says that a Ray cluster has done no Ray work for a while: over the detection window none of its
// Ray logical resources were in use (Ray's ray_resources{State="USED"}), and what its pods measurably
// use stayed under the thresholds (cAdvisor's CPU, DCGM's and npu-exporter's utilization).
type Idle struct {
	// Since is when it was last seen at work, to the detection's step; the time it began running where
	// it never was in the look-back.
	Since time.Time `json:"since"`
	// Holding is what its pods request, and so hold while it idles.
	Holding Resources `json:"holding"`
	// Evidence is what the detection measured over its window.
	Evidence IdleEvidence `json:"evidence"`
	// StopAt is when an idle policy stops it, if it stays idle; Policy names the policy. Both are empty
	// for an object with no policy: it is never stopped for idling.
	StopAt *time.Time `json:"stopAt,omitempty"`
	Policy string     `json:"policy,omitempty" example:"annotation ray.openfuyao.com/idle-stop-after=2h"`
}

// IdleStopAfterKey is the annotation of a RayCluster that asks for it to be stopped once it has idled
// this long (a Go duration, at least a minute); "never" exempts it from its namespace's policy.
const IdleStopAfterKey = "ray.openfuyao.com/idle-stop-after"

// IdleEvidence is what an idle detection measured over its window, from Prometheus.
type IdleEvidence struct {
	// Window is the detection's window, as a Go duration ("30m0s").
	Window string `json:"window" example:"30m0s"`
	// RayUsed is the most Ray logical CPU, GPU and NPU in use at once over the window: 0.
	RayUsed float64 `json:"rayUsed"`
	// CPU is the most CPU cores its containers used at once (cAdvisor), where measured.
	CPU *float64 `json:"cpu,omitempty"`
	// GPUUtilization and NPUUtilization are the highest utilization of one of its GPUs (DCGM) or NPUs
	// (npu-exporter), in percent, where it holds any and they are measured. A MIG instance or a vNPU
	// counts as a device of its own: percent of the slice (DCGM_FI_PROF_GR_ENGINE_ACTIVE times 100,
	// vnpu_pod_aicore_utilization).
	GPUUtilization *float64 `json:"gpuUtilization,omitempty"`
	NPUUtilization *float64 `json:"npuUtilization,omitempty"`
}

// WithIdle returns the summary completed by its cluster's idleness (nil: not idle): the summary
// carries it, and a healthy running object's health says since when and what it holds.
func WithIdle(base *Summary, idle *Idle) *Summary {
	if idle == nil || base.Type != TypeInstance {
		return base
	}
	s := *base
	s.Idle = idle
	if s.Health.State == HealthHealthy && s.Status == StatusRunning {
		since := idle.Since
		s.Health = Health{State: HealthHealthy, Reason: ReasonIdle, Message: IdleMessage(idle), Since: &since}
	}
	return &s
}

// IdleMessage says it in words: "idle since 14:02 UTC, holding 8 GPUs" (the day too, when it is not
// today's; the accelerators, else the CPUs).
func IdleMessage(idle *Idle) string {
	at := idle.Since.UTC()
	when := at.Format("15:04 UTC")
	if y, m, d := at.Date(); y != time.Now().UTC().Year() || m != time.Now().UTC().Month() || d != time.Now().UTC().Day() {
		when = at.Format("2006-01-02 15:04 UTC")
	}
	var held []string
	for _, h := range []struct {
		n    float64
		what string
	}{{idle.Holding.GPU, "GPU"}, {idle.Holding.NPU, "NPU"}} {
		// Device equivalents, to two decimals: "0.5 GPU", "1 NPU", "2.43 GPUs".
		n := strconv.FormatFloat(math.Round(h.n*100)/100, 'f', -1, 64)
		switch {
		case h.n <= 0:
		case h.n <= 1:
			held = append(held, n+" "+h.what)
		default:
			held = append(held, n+" "+h.what+"s")
		}
	}
	if len(held) == 0 {
		held = append(held, fmt.Sprintf("%g CPUs", idle.Holding.CPU))
	}
	return "idle since " + when + ", holding " + strings.Join(held, " and ")
}
