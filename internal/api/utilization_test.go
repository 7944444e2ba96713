package api

import (
	"net/http/httptest"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the test runs

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A report asked for without from counts the last seven UTC days, today included, whatever the
// service's local time zone: in a zone that left summer time within the week, the week was reckoned on
// the local clock and began a UTC day early (eight days).
func TestUtilizationDefaultWindowIsSevenUTCDays(t *testing.T) {
	gin.SetMode(gin.TestMode)
	local := time.Local
	t.Cleanup(func() { time.Local = local })
	for _, zone := range []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney"} {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		time.Local = loc
		// Days after a change of summer time, each side of midnight UTC.
		for _, now := range []string{"2026-10-27T12:00:00Z", "2026-10-26T00:00:01Z", "2026-03-31T23:59:59Z",
			"2026-11-03T12:00:00Z", "2026-04-07T01:00:00Z", "2026-12-06T12:00:00Z"} {
			at, err := time.Parse(time.RFC3339, now)
			require.NoError(t, err)
			c, _ := gin.CreateTestContext(httptest.NewRecorder())
			c.Request = httptest.NewRequest("GET", "/rest/ray/v1/utilization", nil)
			q, err := utilizationQuery(c, at)
			require.NoError(t, err)
			today := at.UTC().Truncate(24 * time.Hour)
			assert.Equal(t, today.AddDate(0, 0, -6), q.From, "%s, the service in %s: from six UTC days before today", now, zone)
			assert.Equal(t, today.AddDate(0, 0, 1), q.To, "%s, the service in %s: to the end of today", now, zone)
		}
	}
}
