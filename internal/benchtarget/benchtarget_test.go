package benchtarget

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTargetMet(t *testing.T) {
	most, least := AtMost("p99-ms", 20, "ms"), AtLeast("share of /healthz", 50, "%")
	assert.True(t, most.Met(20))
	assert.True(t, most.Met(0.3))
	assert.False(t, most.Met(20.01))
	assert.True(t, least.Met(50))
	assert.False(t, least.Met(49.9))
	assert.False(t, most.Met(math.NaN()), "a figure that is not a number meets no target")
	assert.False(t, least.Met(math.NaN()))
}

func TestTargetWithinSlack(t *testing.T) {
	most := AtMost("by-cluster-all-p50-ms", 20, "ms").Within(10)
	assert.True(t, most.Met(20))
	assert.False(t, most.Met(24), "past the target")
	assert.True(t, most.Passes(24), "within the slack")
	assert.True(t, most.Passes(30))
	assert.False(t, most.Passes(30.5))
	least := AtLeast("share", 50, "%").Within(5)
	assert.True(t, least.Passes(46))
	assert.False(t, least.Met(46))
	assert.False(t, least.Passes(44))
	assert.Equal(t, "≤ 20 ms, failing past 30 ms", most.Bound())
	assert.Equal(t, "target missed: by-cluster-all-p50-ms measured 31.2 ms, target ≤ 20 ms, failing past 30 ms", most.Missed(31.2))
	assert.True(t, AtMost("p99-ms", 20, "ms").Passes(20))
	assert.False(t, AtMost("p99-ms", 20, "ms").Passes(20.1), "no slack: the target is the threshold")
}

func TestTargetLines(t *testing.T) {
	assert.Equal(t, "≤ 20 ms", AtMost("p99-ms", 20, "ms").Bound())
	assert.Equal(t, "≥ 50%", AtLeast("share", 50, "%").Bound())
	assert.Equal(t, "target missed: p99-ms measured 23.4 ms, target ≤ 20 ms", AtMost("p99-ms", 20, "ms").Missed(23.4))
	assert.Equal(t, "target missed: heap per stream measured 19740 bytes, target ≤ 8000 bytes",
		AtMost("heap per stream", 8000, "bytes").Missed(19740.4))
	assert.Equal(t, "target missed: share measured 34%, target ≥ 50%", AtLeast("share", 50, "%").Missed(34))
}

// recorder is a testing.TB that keeps what a check says instead of failing the test.
type recorder struct {
	testing.TB
	errors, logs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Error(args ...any) {
	r.errors = append(r.errors, fmt.Sprint(args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func TestCheckFailsAMissedTarget(t *testing.T) {
	t.Setenv(ChecksOnlyEnv, "")
	r := &recorder{TB: t}
	Check(r, AtMost("p99-ms", 20, "ms"), 12)
	assert.Empty(t, r.errors, "a met target")
	Check(r, AtMost("p99-ms", 20, "ms"), 31)
	assert.Equal(t, []string{"target missed: p99-ms measured 31 ms, target ≤ 20 ms"}, r.errors)
	assert.Equal(t, []string{"target met: p99-ms measured 12 ms, target ≤ 20 ms"}, r.logs,
		"a met figure is printed too: a failed benchmark prints no figures")

	r = &recorder{TB: t}
	slack := AtMost("p50-ms", 20, "ms").Within(10)
	Check(r, slack, 24)
	assert.Empty(t, r.errors, "within the slack")
	assert.Equal(t, []string{"target not met, within its slack: p50-ms measured 24 ms, target ≤ 20 ms, failing past 30 ms"}, r.logs)
	Check(r, slack, 31)
	assert.Equal(t, []string{"target missed: p50-ms measured 31 ms, target ≤ 20 ms, failing past 30 ms"}, r.errors)
}

func TestCheckJudgesNothingInChecksOnlyRuns(t *testing.T) {
	t.Setenv(ChecksOnlyEnv, "1")
	assert.False(t, Judged())
	r := &recorder{TB: t}
	Check(r, AtMost("p99-ms", 20, "ms"), 31)
	assert.Empty(t, r.errors)
	assert.Equal(t, []string{"not judged (BENCH_CHECKS_ONLY=1): p99-ms measured 31 ms, target ≤ 20 ms"}, r.logs)
	t.Setenv(ChecksOnlyEnv, "0")
	assert.True(t, Judged(), "only 1 turns the judging off")
}

func TestSizes(t *testing.T) {
	t.Setenv(ChecksOnlyEnv, "")
	assert.Equal(t, 100_000, Size(100_000, 5_000))
	assert.Equal(t, []int{1000, 10000, 100000}, Sizes(1000, 10000, 100000))
	t.Setenv(ChecksOnlyEnv, "1")
	assert.Equal(t, 5_000, Size(100_000, 5_000), "checks alone run small")
	assert.Equal(t, []int{1000}, Sizes(1000, 10000, 100000))
}
