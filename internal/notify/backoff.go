package notify

import (
	"math/rand/v2"
	"time"
)

const (
	firstBackoff = time.Second
	maxBackoff   = 5 * time.Minute
	jitter       = 0.2
)

// Backoff is the wait before retry number attempt (from 1): 1 s, doubling, at most 5 min, each
// within ±20 % so that deliveries failing together do not retry together.
func Backoff(attempt int) time.Duration {
	d := maxBackoff
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 20 { // 1 s << 19 is past the cap already; beyond, the shift would overflow.
		d = min(firstBackoff<<(attempt-1), maxBackoff)
	}
	f := 1 - jitter + 2*jitter*rand.Float64()
	return time.Duration(float64(d) * f)
}
