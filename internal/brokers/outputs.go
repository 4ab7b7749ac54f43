package brokers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
	"github.com/hyperplane-ml/hyperplane/wire"
)

// CheckOutputs refuses the outputs cfg's worker writes that name a Kafka
// topic the brokers do not have, or a JetStream subject no stream stores:
// a worker would start and retry their publishes for ever
// (docs/operations.md, "The container"). It also refuses an output,
// JetStream or core NATS, whose subject source.stream stores when the
// worker reads that stream whole (no source.subject, which the
// configuration checks otherwise): each event would come back as an
// example. And it refuses outputs of events keyed by the example's position
// (config.ExampleIDOutputs) whose subjects one JetStream stream stores: their events
// share a Nats-Msg-Id, and the stream would keep the first of each
// example's and drop the others as repeats. Its error names each such
// output by its key and what it names, on one line. A lookup that fails for another reason (a user without
// permission for the JetStream API, a topic whose leader is being
// elected) is logged, and the output left to its publishes.
func (b *Clients) CheckOutputs(ctx context.Context, cfg config.Config) error {
	readWhole := cfg.Source.Kind == config.KindJetStream && cfg.Source.Subject == ""
	var kafka, kafkaKeys []string
	keys := map[config.Destination][]string{}
	var dests []config.Destination
	for _, d := range written(cfg) {
		if d.Dest.Kind == config.KindNATS && !readWhole {
			continue
		}
		if keys[d.Dest] == nil {
			dests = append(dests, d.Dest)
			if d.Dest.Kind == config.KindKafka {
				kafka = append(kafka, d.Dest.Topic)
			}
		}
		if d.Dest.Kind == config.KindKafka {
			kafkaKeys = append(kafkaKeys, d.Key)
		}
		keys[d.Dest] = append(keys[d.Dest], d.Key)
	}
	var topicErrs map[string]error
	if len(kafka) > 0 {
		kc, err := b.KafkaConfig()
		if err != nil {
			return err
		}
		if topicErrs, err = kafkaio.TopicErrors(ctx, kc, kafka); err != nil {
			return fmt.Errorf("%s: %w (%s)", strings.Join(kafkaKeys, ", "), err, KafkaCheck(err, ""))
		}
	}
	var problems []string
	missing := false
	// shared holds, by stream, the outputs of config.ExampleIDOutputs it stores, in
	// the order of the configuration's keys.
	shared := map[string][]config.OutputDestination{}
	var sharing []string // the streams of shared, in the order first met
	for _, d := range dests {
		key := strings.Join(keys[d], ", ")
		if d.Kind == config.KindKafka {
			var kerr kafkago.Error
			switch err := topicErrs[d.Topic]; {
			case errors.Is(err, kafkaio.ErrNoTopic):
				problems, missing = append(problems, fmt.Sprintf("%s: kafka topic %s does not exist", key, d.Topic)), true
			case errors.As(err, &kerr) && kerr.Temporary():
				b.log.Warn("an output's topic is not ready yet: its publishes will tell", zap.String("output", key), zap.String("topic", d.Topic), zap.Error(err))
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: kafka topic %s: %v", key, d.Topic, err))
			}
			continue
		}
		nc, err := b.NATSConn()
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		stream, err := natsio.StoringStream(ctx, nc, d.Topic)
		switch {
		case err == nil && readWhole && stream == cfg.Source.Stream:
			problems = append(problems, fmt.Sprintf("%s: subject %s is stored in source.stream %s, which the worker reads whole (source.subject is empty): it would read its own events as examples; choose a subject outside it", key, d.Topic, stream))
		case err == nil && d.Kind == config.KindJetStream:
			for _, k := range keys[d] {
				if config.ExampleIDOutputs[k] {
					if shared[stream] == nil {
						sharing = append(sharing, stream)
					}
					shared[stream] = append(shared[stream], config.OutputDestination{Key: k, Dest: d})
				}
			}
		case err == nil:
		case errors.Is(err, jetstream.ErrStreamNotFound) && d.Kind == config.KindJetStream:
			problems, missing = append(problems, fmt.Sprintf("%s: no JetStream stream stores subject %s", key, d.Topic)), true
		case errors.Is(err, jetstream.ErrStreamNotFound):
			// Core NATS needs no stream.
		default:
			b.log.Warn("the stream of an output could not be looked up: its publishes will tell", zap.String("output", key), zap.String("subject", d.Topic), zap.Error(err))
		}
	}
	for _, stream := range sharing {
		if outs := shared[stream]; len(outs) > 1 {
			names := make([]string, len(outs))
			subjects := make([]string, 0, len(outs))
			for i, o := range outs {
				names[i] = o.Key
				if !slices.Contains(subjects, o.Dest.Topic) {
					subjects = append(subjects, o.Dest.Topic)
				}
			}
			problems = append(problems, fmt.Sprintf("%s: stream %s stores %s, and the events of these outputs share their ids (an example's position, each event's Nats-Msg-Id): the stream would drop all but the first of each example's as repeats; give each a subject of a stream of its own",
				strings.Join(names, ", "), stream, strings.Join(subjects, " and ")))
		}
	}
	switch {
	case len(problems) == 0:
		return nil
	case missing:
		return fmt.Errorf("%s (create them with hyperplane setup, or name what exists)", strings.Join(problems, "; "))
	}
	return errors.New(strings.Join(problems, "; "))
}

// written are the outputs cfg's worker writes: those set, but for the
// predictions when outputs.publish is none and the late labels without
// labels that come later.
func written(cfg config.Config) []config.OutputDestination {
	var out []config.OutputDestination
	for _, d := range cfg.Outputs.Destinations() {
		switch {
		case d.Dest.IsZero():
		case d.Key == "outputs.predictions" && cfg.Outputs.Publish == wire.PublishNone:
		case d.Key == "outputs.late_labels" && !cfg.Labels.Enabled():
		default:
			out = append(out, d)
		}
	}
	return out
}
