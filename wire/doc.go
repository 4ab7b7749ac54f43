// Package wire is what hyperplane reads and writes on the wire: the
// decoders of examples from JSON and msgpack, the events a worker
// publishes (predictions, misclassifications, dead letters) and the
// positions they carry, the replies to prediction requests, and the
// ordered parallel reader of example files.
//
// Bad input is an error, never a panic: a decoder returns a *DecodeError
// naming the field, the problem and its Reason. wire imports only
// learner; the worker (package consumer) and serving (package serve)
// build on it.
package wire
