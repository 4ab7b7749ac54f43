package wire

import "strconv"

// Position is where an example sits in its source: a Kafka partition
// ("kafka:<topic>/<partition>") and offset, a JetStream stream
// ("jetstream:<stream>") and sequence, or a file ("file:<path>") and
// record number.
type Position struct {
	Source string
	Offset int64
}

// AppendEventID appends the event id of the position,
// <source>/<offset>, e.g. kafka:clicks/3/1042. A replay from the same
// offsets produces the same ids, which is what lets downstream services
// de-duplicate the at-least-once outputs.
func (p Position) AppendEventID(dst []byte) []byte {
	dst = append(dst, p.Source...)
	dst = append(dst, '/')
	return strconv.AppendInt(dst, p.Offset, 10)
}

// EventID is AppendEventID as a string.
func (p Position) EventID() string { return string(p.AppendEventID(nil)) }
