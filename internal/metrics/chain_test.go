package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Nothing before the first walk; then its verdict, 0 for a broken chain.
func TestChainCollector(t *testing.T) {
	var known, intact bool
	var entries int64
	c := NewChainCollector(func() (bool, bool, int64) { return known, intact, entries })
	assert.Zero(t, testutil.CollectAndCount(c), "no verdict yet")
	known, intact, entries = true, false, 42
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP ray_service_audit_chain_entries The entries the last walk of the audit trail's chain checked.
# TYPE ray_service_audit_chain_entries gauge
ray_service_audit_chain_entries 42
# HELP ray_service_audit_chain_intact 1 when the last walk of the audit trail's chain found every entry as appended, none missing and none added; 0 when it found the chain broken (the log says where).
# TYPE ray_service_audit_chain_intact gauge
ray_service_audit_chain_intact 0
`)))
}
