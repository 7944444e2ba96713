package history_test

import (
	"testing"

	"ray-service/internal/history/historytest"
)

// The audit trail's part of the contract on the embedded SQLite (the integration tests run it on
// PostgreSQL).
func TestAuditOnSQLite(t *testing.T) { historytest.RunAudit(t, openSQLite) }
