package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMethodLabel(t *testing.T) {
	require.Equal(t, "GET", MethodLabel("GET"))
	require.Equal(t, "DELETE", MethodLabel("DELETE"))
	require.Equal(t, "other", MethodLabel("get"), "methods are case-sensitive")
	require.Equal(t, "other", MethodLabel("MMMMMMMMMMMM"))
}
