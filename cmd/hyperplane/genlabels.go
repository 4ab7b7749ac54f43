package main

import (
	"time"

	"github.com/hyperplane-ml/hyperplane/config"
	"github.com/hyperplane-ml/hyperplane/internal/feed"
)

// genLabels is gen's -labels-to: the examples go out without their
// labels, and each label follows on a destination of its own after a
// delay (feed.Labels).
type genLabels struct {
	to      feed.Target
	delay   time.Duration
	missing float64
	format  string
	seed    uint64
}

func (l *genLabels) enabled() bool { return !l.to.IsZero() }

func (l *genLabels) validate(examples feed.Target) error {
	switch {
	case l.to.Kind != config.KindKafka && l.to.Kind != config.KindJetStream:
		return usagef("-labels-to: kafka:<topic> or jetstream:<subject> (core NATS has no replay: a join over it could not be replayed)")
	case l.to.Kind != examples.Kind:
		return usagef("-labels-to: the labels go to the examples' kind of broker (%s)", examples.Kind)
	case l.to.Topic == examples.Topic:
		return usagef("-labels-to: %s is -to's: the labels need a topic or subject of their own, as the worker's labels.topics and labels.subject do", l.to)
	case l.delay < 0:
		return usagef("-label-delay: must be 0s or more, got %s", l.delay)
	case l.missing < 0 || l.missing > 1:
		return usagef("-label-missing: a fraction between 0 and 1, got %v", l.missing)
	}
	return nil
}
