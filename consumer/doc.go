// Package consumer is hyperplane's stream side: the Worker that runs a
// model over a Source (predict, publish, learn, advance), the Source and
// Sink interfaces that the broker adapters in its subpackages implement,
// the decoders of examples from JSON and msgpack, the events the worker
// publishes, and the ordered parallel reader of example files.
//
// Bad input never stops a stream: a decoder returns a *DecodeError naming
// the field and the problem, and the worker turns it into a dead-letter
// event and moves past it without touching the model.
package consumer
