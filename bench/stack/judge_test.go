package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ray-service/internal/benchtarget"
)

// The stack benchmark's targets fail its run: each missed target and failed check is kept, the row's
// note says which target was missed, and the run's end names the figure, its target and its value.
func TestJudgeFailsTheRunForEachMiss(t *testing.T) {
	t.Setenv(benchtarget.ChecksOnlyEnv, "")
	j := &judge{}
	assert.Equal(t, "≤ 1 ms", j.target(benchtarget.AtMost("detail, p50", 1, "ms"), 0.7))
	assert.Equal(t, "≥ 50%", j.target(benchtarget.AtLeast("share, quiet", 50, "%"), 69))
	require.NoError(t, j.err(), "every target met")

	assert.Equal(t, "≤ 5 ms: missed", j.target(benchtarget.AtMost("detail, p99", 5, "ms"), 7.25))
	assert.Equal(t, "≥ 50%: missed", j.target(benchtarget.AtLeast("share, changing", 50, "%"), 34))
	j.check("%d requests failed under load", 3)
	err := j.err()
	require.Error(t, err)
	assert.Equal(t, "target missed: detail, p99 measured 7.25 ms, target ≤ 5 ms\n"+
		"  target missed: share, changing measured 34%, target ≥ 50%\n"+
		"  check failed: 3 requests failed under load", err.Error())
}

func TestJudgeLeavesFiguresInChecksOnlyRuns(t *testing.T) {
	t.Setenv(benchtarget.ChecksOnlyEnv, "1")
	j := &judge{}
	assert.Equal(t, "≤ 5 ms (not judged)", j.target(benchtarget.AtMost("detail, p99", 5, "ms"), 7.25))
	require.NoError(t, j.err())
	j.check("%d of %d changes never reached their stream", 1, 40)
	require.Error(t, j.err(), "the benchmark's own checks are judged in every run")
}
