package brokers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/hyperplane-ml/hyperplane/config"
	kafkaio "github.com/hyperplane-ml/hyperplane/consumer/kafka"
	natsio "github.com/hyperplane-ml/hyperplane/consumer/nats"
)

// CheckOutputs refuses outputs that name a Kafka topic the brokers do not
// have, or a JetStream subject no stream stores: a worker would start
// and retry their publishes for ever (docs/operations.md, "The
// container"). Its error names each such output by its key and what it
// names, on one line. Core NATS stores nothing, and is not checked. A
// JetStream lookup that fails for another reason (a user without
// permission for the JetStream API) is logged, and the output left to
// its publishes; a Kafka topic the brokers report an error of is refused
// with it.
func (b *Clients) CheckOutputs(ctx context.Context, o config.Outputs) error {
	var kafka, kafkaKeys []string
	keys := map[config.Destination][]string{}
	var dests []config.Destination
	for _, d := range o.Destinations() {
		if d.Dest.IsZero() || d.Dest.Kind == config.KindNATS {
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
			return fmt.Errorf("%s: %w (check kafka.brokers and that the brokers are up)", strings.Join(kafkaKeys, ", "), err)
		}
	}
	var problems []string
	for _, d := range dests {
		key := strings.Join(keys[d], ", ")
		switch d.Kind {
		case config.KindKafka:
			switch err := topicErrs[d.Topic]; {
			case errors.Is(err, kafkaio.ErrNoTopic):
				problems = append(problems, fmt.Sprintf("%s: kafka topic %s does not exist", key, d.Topic))
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: kafka topic %s: %v", key, d.Topic, err))
			}
		case config.KindJetStream:
			nc, err := b.NATSConn()
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			_, err = natsio.StoringStream(ctx, nc, d.Topic)
			switch {
			case errors.Is(err, jetstream.ErrStreamNotFound):
				problems = append(problems, fmt.Sprintf("%s: no JetStream stream stores subject %s", key, d.Topic))
			case err != nil:
				b.log.Warn("the stream of an output could not be looked up: its publishes will tell", zap.String("output", key), zap.String("subject", d.Topic), zap.Error(err))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s (create them with hyperplane setup, or name what exists)", strings.Join(problems, "; "))
}
