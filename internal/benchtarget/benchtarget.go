// Package benchtarget compares the benchmarks' figures with their targets: a figure that misses its
// target fails the benchmark, with a line naming the figure, the target and the value measured. The
// figures are reported as before (b.ReportMetric, the stack benchmark's tables), met or missed.
//
// `make test` runs each Go benchmark once for what it checks besides its figures (pages full, counts
// right, every answer 200), with BENCH_CHECKS_ONLY=1: a figure of one round, on a machine busy with the
// other tests, says nothing of the service, so no figure is judged then, and the benchmarks run at a
// size their checks need rather than the size their figures are of (Size). Every other run judges them.
package benchtarget

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"
)

// ChecksOnlyEnv names the environment variable that, set to 1, leaves every figure unjudged: the
// benchmarks run for their correctness checks alone.
const ChecksOnlyEnv = "BENCH_CHECKS_ONLY"

// Judged reports whether this run compares figures with their targets: every run but those with
// BENCH_CHECKS_ONLY=1.
func Judged() bool { return os.Getenv(ChecksOnlyEnv) != "1" }

// Size is a benchmark's size: full in runs that judge its figures, small in runs for its checks alone,
// which need objects enough for the checks (a full page, a second one) but no figure.
func Size(full, small int) int {
	if Judged() {
		return full
	}
	return small
}

// Sizes are the sizes a benchmark runs at: each of them in runs that judge its figures, the first alone
// (the smallest) in runs for its checks alone.
func Sizes(sizes ...int) []int {
	if Judged() {
		return sizes
	}
	return sizes[:1]
}

// A Target bounds one figure.
type Target struct {
	Figure string  // the figure, as the benchmark names it (a metric, a table's row)
	Limit  float64 // the target, in Unit
	Unit   string  // printed after the numbers: "ms", "%", "bytes"
	Least  bool    // the figure must be at least Limit; otherwise at most
	// Slack is how far past its target a figure may go before the run fails (Within): 0 but where the
	// machine the benchmarks run on measures the figure past its target from one run to the next.
	Slack float64
}

// AtMost is the target of a figure that must not exceed limit.
func AtMost(figure string, limit float64, unit string) Target {
	return Target{Figure: figure, Limit: limit, Unit: unit}
}

// AtLeast is the target of a figure that must reach limit.
func AtLeast(figure string, limit float64, unit string) Target {
	return Target{Figure: figure, Limit: limit, Unit: unit, Least: true}
}

// Within is t with a threshold slack past its target: the run fails past the threshold, not past the
// target. For a figure this machine measures past its target from one run to the next, so that the
// benchmark fails for a change and not for its noise; the lines it prints give both.
func (t Target) Within(slack float64) Target {
	t.Slack = slack
	return t
}

// threshold is the bound past which the run fails: the target, moved by its slack.
func (t Target) threshold() float64 {
	if t.Least {
		return t.Limit - t.Slack
	}
	return t.Limit + t.Slack
}

// Met reports whether the figure got meets the target itself. A figure that is not a number (a share
// of nothing) meets none.
func (t Target) Met(got float64) bool { return within(got, t.Limit, t.Least) }

// Passes reports whether the figure got is within the threshold (the target, or its slack past it):
// the run fails otherwise.
func (t Target) Passes(got float64) bool { return within(got, t.threshold(), t.Least) }

func within(got, bound float64, least bool) bool {
	if math.IsNaN(got) {
		return false
	}
	if least {
		return got >= bound
	}
	return got <= bound
}

// Bound is the target as the tables print it: "≤ 20 ms", or with a slack "≤ 20 ms, failing past 30 ms".
func (t Target) Bound() string {
	op := "≤"
	if t.Least {
		op = "≥"
	}
	bound := op + " " + number(t.Limit) + unit(t.Unit)
	if t.Slack != 0 {
		bound += ", failing past " + number(t.threshold()) + unit(t.Unit)
	}
	return bound
}

// Missed is the line a run fails with when the figure got does not pass: the figure, the value
// measured and the target.
func (t Target) Missed(got float64) string {
	return fmt.Sprintf("target missed: %s measured %s, target %s", t.Figure, t.value(got), t.Bound())
}

func (t Target) value(got float64) string { return number(got) + unit(t.Unit) }

// Check fails b, with Missed's line, when got does not pass t, and otherwise logs the figure beside its
// target: a benchmark that fails prints no line of figures, so each judged figure is printed here,
// met, over its target within the slack, or missed. When this run does not judge figures (Judged), it
// logs the figure alone.
func Check(b testing.TB, t Target, got float64) {
	b.Helper()
	switch {
	case !Judged():
		b.Logf("not judged (%s=1): %s measured %s, target %s", ChecksOnlyEnv, t.Figure, t.value(got), t.Bound())
	case !t.Passes(got):
		b.Error(t.Missed(got))
	case !t.Met(got):
		b.Logf("target not met, within its slack: %s measured %s, target %s", t.Figure, t.value(got), t.Bound())
	default:
		b.Logf("target met: %s measured %s, target %s", t.Figure, t.value(got), t.Bound())
	}
}

// number prints a figure with the precision the tables give it: whole numbers past 100, three
// significant digits below.
func number(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func unit(u string) string {
	if u == "" || u == "%" {
		return u
	}
	return " " + u
}
