package kafka

import "time"

// SetLookupRetry sets how long s goes by the fallback limit after a failed
// lookup.
func SetLookupRetry(s *Sink, d time.Duration) { s.lookupRetry = d }
