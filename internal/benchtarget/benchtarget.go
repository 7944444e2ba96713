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
	Limit  float64 // the bound, in Unit
	Unit   string  // printed after the numbers: "ms", "%", "bytes"
	Least  bool    // the figure must be at least Limit; otherwise at most
}

// AtMost is the target of a figure that must not exceed limit.
func AtMost(figure string, limit float64, unit string) Target {
	return Target{Figure: figure, Limit: limit, Unit: unit}
}

// AtLeast is the target of a figure that must reach limit.
func AtLeast(figure string, limit float64, unit string) Target {
	return Target{Figure: figure, Limit: limit, Unit: unit, Least: true}
}

// Met reports whether the figure got meets the target. A figure that is not a number (a share of
// nothing) meets none.
func (t Target) Met(got float64) bool {
	if math.IsNaN(got) {
		return false
	}
	if t.Least {
		return got >= t.Limit
	}
	return got <= t.Limit
}

// Bound is the target as the tables print it: "≤ 20 ms".
func (t Target) Bound() string {
	op := "≤"
	if t.Least {
		op = "≥"
	}
	return op + " " + number(t.Limit) + unit(t.Unit)
}

// Missed is the line a missed target fails with: the figure, the value measured and the target.
func (t Target) Missed(got float64) string {
	return fmt.Sprintf("target missed: %s measured %s%s, target %s", t.Figure, number(got), unit(t.Unit), t.Bound())
}

// Check fails b, with Missed's line, when got misses t, and logs the figure beside its target when
// it meets it: a benchmark that fails prints no line of figures, so each judged figure is printed
// here, met or missed. When this run does not judge figures (Judged), it logs the figure alone.
func Check(b testing.TB, t Target, got float64) {
	b.Helper()
	switch {
	case !Judged():
		b.Logf("not judged (%s=1): %s measured %s%s, target %s", ChecksOnlyEnv, t.Figure, number(got), unit(t.Unit), t.Bound())
	case !t.Met(got):
		b.Error(t.Missed(got))
	default:
		b.Logf("target met: %s measured %s%s, target %s", t.Figure, number(got), unit(t.Unit), t.Bound())
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
