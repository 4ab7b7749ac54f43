// Package consumer is hyperplane's stream side: the Worker that runs a
// model over a Source (predict, publish, learn, advance) and the Source and
// Sink interfaces that the broker adapters in its subpackages implement.
// The examples it decodes and the events it publishes are package wire's.
//
// Bad input never stops a stream: a decoder returns a *wire.DecodeError
// naming the field and the problem, and the worker turns it into a
// dead-letter event and moves past it without touching the model.
package consumer
