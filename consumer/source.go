package consumer

import (
	"context"
	"time"

	"github.com/hyperplane-ml/hyperplane/wire"
)

// Message is one message from a source.
type Message struct {
	// Position is the message's place: its partition or stream and its
	// offset or sequence. The event ids derive from it.
	Position wire.Position
	// Resume is what the model's position for Position.Source becomes once
	// the message is in the model, in the form the source is opened with:
	// the next offset for a Kafka partition, the message's own sequence
	// for a JetStream stream.
	Resume int64
	Value  []byte
	Time   time.Time
}

// Source delivers messages, in order within each partition or stream.
//
// A Source is opened at positions chosen by the worker (see the adapters'
// constructors), so what it delivers follows from those positions alone:
// never from broker-side commits.
type Source interface {
	// Fetch waits until at least one message is available and returns
	// up to max of them, without waiting for more. The slice and the
	// messages are valid until the next Fetch. It returns ctx's error
	// when ctx is done, and keeps retrying through broker restarts.
	Fetch(ctx context.Context, max int) ([]Message, error)
	// Commit tells the broker how far the model has got (the Resume
	// values of the last messages it includes, by source key), for lag
	// monitoring and retention. It never changes what Fetch returns.
	Commit(ctx context.Context, resume map[string]int64) error
	// Close releases the source.
	Close() error
}

// Output is one message for a sink.
type Output struct {
	// Topic is the Kafka topic or NATS subject.
	Topic string
	// Key is the event id: the Kafka message key, the JetStream
	// Nats-Msg-Id header. Empty means no key.
	Key   []byte
	Value []byte
	// Partition, with HasPartition, is the Kafka partition of Topic the
	// output is written to; without, the partition its key hashes to.
	// Other sinks ignore it.
	Partition    int32
	HasPartition bool
}

// Sink publishes outputs.
//
// The bytes of a batch's keys and values belong to the caller, who reuses
// them once Publish returns, except after a Publish that ctx ended: its
// batch may still be in flight, and the caller lets its bytes go without
// reusing them. A sink that needs them after a Publish that returned
// otherwise (a copy it keeps) copies them first.
type Sink interface {
	// Publish returns nil once the broker holds every output of batch
	// durably (Kafka: acknowledged by all in-sync replicas; JetStream: a
	// publish acknowledgement for each), and an error otherwise, in which
	// case the caller publishes the whole batch again: outputs are
	// at-least-once, and their keys let readers drop the repeats.
	Publish(ctx context.Context, batch []Output) error
	Close() error
}

// A SendSink is a Sink that hands a batch to the broker without waiting
// for the broker to hold it, so that a worker sends its next batch while
// the broker stores this one: a Worker keeps at most two batches in
// flight to a SendSink, and takes a batch's positions only once its
// outputs are held.
//
// Send sends every output of batch, in order, behind those of the batches
// sent before it, and returns at once. The wait it returns, called at
// most once, returns nil once the broker holds every output of batch
// durably, as Publish does, and an error otherwise (a send that failed
// too), after which the caller publishes the whole batch again; the
// outputs of the batch sent after it may then be stored before those.
// batch must not change until wait has returned, or, if wait is never
// called, ever. Send and the waits may be called from several goroutines.
type SendSink interface {
	Sink
	Send(ctx context.Context, batch []Output) (wait func(context.Context) error)
}
