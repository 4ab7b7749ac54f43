package wire

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/hyperplane-ml/hyperplane/internal/oneof"
)

// StartKind is how a source that has no position for a partition or a
// stream chooses where to begin.
type StartKind string

// The kinds of Start.
const (
	StartEarliest StartKind = "earliest" // the oldest message the broker still holds
	StartLatest   StartKind = "latest"   // only messages that arrive after the source opens
	StartOffset   StartKind = "offset"   // Start.Offset: a Kafka offset or a JetStream sequence
	StartTime     StartKind = "time"     // the first message at or after Start.Time
)

// StartKinds lists the kinds of Start.
func StartKinds() []StartKind { return []StartKind{StartEarliest, StartLatest, StartOffset, StartTime} }

// Start is where a source begins when the model has no position for it
// (a new model, or a partition the model has not read yet): the
// configuration's source.start, which the Kafka and JetStream sources
// take as it is. The zero Start is earliest.
//
// Its text, read by UnmarshalText and written by MarshalText, is
// "earliest", "latest", "offset:N" with N an integer >= 0, or "time:T"
// with T an RFC 3339 time (time:2024-05-01T12:00:00Z).
type Start struct {
	Kind StartKind
	// Offset, for StartOffset, is the first Kafka offset, or JetStream
	// stream sequence, to read.
	Offset int64
	// Time, for StartTime, selects the first message stored at or after
	// it.
	Time time.Time
}

// String is the text of s.
func (s Start) String() string {
	switch s.Kind {
	case "":
		return string(StartEarliest)
	case StartOffset:
		return string(StartOffset) + ":" + strconv.FormatInt(s.Offset, 10)
	case StartTime:
		return string(StartTime) + ":" + s.Time.Format(time.RFC3339Nano)
	}
	return string(s.Kind)
}

// MarshalText writes s as UnmarshalText reads it.
func (s Start) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a start from its text (see Start). On an error,
// which quotes text, s is unchanged. A Start it reads is valid.
func (s *Start) UnmarshalText(text []byte) error {
	str := string(text)
	kind, arg, hasArg := strings.Cut(str, ":")
	var v Start
	switch k := StartKind(kind); {
	case (k == StartEarliest || k == StartLatest) && !hasArg:
		v = Start{Kind: k}
	case k == StartOffset && hasArg:
		n, err := strconv.ParseInt(arg, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q: offset:N needs an integer N >= 0", str)
		}
		v = Start{Kind: k, Offset: n}
	case k == StartTime && hasArg:
		t, err := time.Parse(time.RFC3339, arg)
		if err != nil {
			return fmt.Errorf("%q: time:T needs an RFC 3339 time such as 2024-05-01T12:00:00Z: %w", str, err)
		}
		if err := checkStartTime(t); err != nil {
			return fmt.Errorf("%q: %w", str, err)
		}
		v = Start{Kind: k, Time: t}
	default:
		return fmt.Errorf("unknown start %q (want earliest, latest, offset:N or time:RFC3339)", str)
	}
	*s = v
	return nil
}

// Validate reports what makes s, built in code rather than read by
// UnmarshalText, no start: an unknown kind, a negative offset, or a time
// start without its time.
func (s Start) Validate() error {
	switch s.Kind {
	case "", StartEarliest, StartLatest:
	case StartOffset:
		if s.Offset < 0 {
			return fmt.Errorf("start %s: the offset is negative", s)
		}
	case StartTime:
		if s.Time.IsZero() {
			return errors.New("start time: no time given")
		}
		if err := checkStartTime(s.Time); err != nil {
			return fmt.Errorf("start %s: %w", s, err)
		}
	default:
		return oneof.Check("start", s.Kind, StartKinds()...)
	}
	return nil
}

// The times a time start may name: a record's time, on Kafka and
// JetStream alike, counts nanoseconds or milliseconds from the Unix epoch
// in an int64 that the clients fill from a time's UnixNano, so a time out
// of this range would reach the broker as another time, or as none.
var (
	minStartTime = time.Unix(0, 0).UTC()
	maxStartTime = time.Unix(0, math.MaxInt64).UTC().Truncate(time.Second)
)

// checkStartTime reports a time start's time that no record can have.
func checkStartTime(t time.Time) error {
	switch {
	case t.Before(minStartTime):
		return fmt.Errorf("time:T is before %s, when record times begin: earliest reads from the first message", minStartTime.Format(time.RFC3339))
	case t.After(maxStartTime):
		return fmt.Errorf("time:T is after %s, the last time a record can have: latest reads only the messages that arrive", maxStartTime.Format(time.RFC3339))
	}
	return nil
}
