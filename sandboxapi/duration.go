package sandboxapi

import (
	"math"
	"time"
)

// Milliseconds converts a contract millisecond count (deadlines and
// timeouts, 0 to MaxSafeInteger) to a time.Duration. Counts beyond the
// largest Duration (math.MaxInt64 nanoseconds, about 292 years) clamp to it
// rather than wrap: a wrapped value can be negative and expire at once
// (docs/contract.md#policy).
func Milliseconds(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}
