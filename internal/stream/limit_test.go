package stream

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestFollowLimit(t *testing.T) {
	l := NewFollowLimit(3, 2, 0)
	a1, err := l.acquire("a")
	require.NoError(t, err)
	a2, err := l.acquire("a")
	require.NoError(t, err)
	_, err = l.acquire("a")
	assert.True(t, apierrors.IsTooManyRequests(err), "a third of one caller: %v", err)
	b1, err := l.acquire("b")
	require.NoError(t, err, "another caller is not held up")
	_, err = l.acquire("c")
	assert.True(t, apierrors.IsTooManyRequests(err), "three in all: %v", err)
	a1()
	a1() // releasing twice frees one place only
	c1, err := l.acquire("c")
	require.NoError(t, err)
	_, err = l.acquire("d")
	assert.True(t, apierrors.IsTooManyRequests(err))
	for _, release := range []func(){a2, b1, c1} {
		release()
	}
	assert.Zero(t, l.total)
	assert.Empty(t, l.byCaller)
}
