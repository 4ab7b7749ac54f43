package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// State is what CreateTopics found or did about a topic.
type State string

const (
	// Created: the topic was missing and is made.
	Created State = "created"
	// Exists: the topic was there already; it is left as it is.
	Exists State = "exists"
	// Failed: the topic could not be made, or the brokers report an
	// error about it.
	Failed State = "failed"
)

// TopicOptions say how CreateTopics makes a topic that is missing. A
// topic that exists is never changed, whatever they say.
type TopicOptions struct {
	// Partitions of a new topic, at least 1.
	Partitions int
	// ReplicationFactor of a new topic; -1 is the brokers'
	// default.replication.factor.
	ReplicationFactor int
	// Retention of a new topic (retention.ms); 0 is the brokers' default.
	Retention time.Duration
}

// TopicResult is what CreateTopics found or did about a topic.
type TopicResult struct {
	Topic string
	State State
	// Partitions, ReplicationFactor and Retention are the topic's: as
	// created (the options, -1 and 0 meaning the brokers' defaults), or as
	// the brokers describe the topic that exists. Of a topic that exists,
	// ReplicationFactor is 0 when it has no partitions to tell, and
	// Retention is 0 when it could not be read and negative when it is
	// unlimited.
	Partitions, ReplicationFactor int
	Retention                     time.Duration
	// Raced: the topic Exists because another client created it between
	// the lookup and the creation; its settings are not known.
	Raced bool
	// Err says why the State is Failed. It reads as a report on the
	// topic.
	Err error
}

// createTimeout bounds the client's requests when ctx has no deadline.
const createTimeout = 30 * time.Second

// adminClient is a client of cfg's brokers for the requests of setup and
// of the start-up checks, and what closes its connections.
func adminClient(cfg Config) (*kafkago.Client, func()) {
	transport := &kafkago.Transport{ClientID: cfg.ClientID, TLS: cfg.TLS, SASL: cfg.SASL}
	return &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Timeout: createTimeout, Transport: transport}, transport.CloseIdleConnections
}

// CreateTopics creates the topics that are missing, with the options o,
// and returns one result for each topic, in order (a topic named twice is
// asked about twice). It never changes a topic that exists. The error is
// for a cluster that could not be asked at all.
func CreateTopics(ctx context.Context, cfg Config, topics []string, o TopicOptions) ([]TopicResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, closeClient := adminClient(cfg)
	defer closeClient()

	meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	found := map[string]kafkago.Topic{}
	for _, t := range meta.Topics {
		found[t.Name] = t
	}
	results := make([]TopicResult, len(topics))
	var create []kafkago.TopicConfig
	var existing []string
	for i, t := range topics {
		results[i].Topic = t
		mt, ok := found[t]
		switch {
		case ok && mt.Error == nil:
			existing = append(existing, t)
		case !ok || errors.Is(mt.Error, kafkago.UnknownTopicOrPartition):
			tc := kafkago.TopicConfig{Topic: t, NumPartitions: o.Partitions, ReplicationFactor: o.ReplicationFactor}
			if o.Retention > 0 {
				tc.ConfigEntries = []kafkago.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(o.Retention.Milliseconds(), 10)}}
			}
			create = append(create, tc)
		default:
			results[i].State, results[i].Err = Failed, mt.Error
		}
	}
	retention := topicRetention(ctx, client, existing)
	var createErrs map[string]error
	if len(create) > 0 {
		resp, err := client.CreateTopics(ctx, &kafkago.CreateTopicsRequest{Topics: create})
		if err != nil {
			return nil, fmt.Errorf("creating topics: %w", err)
		}
		createErrs = resp.Errors
	}
	for i, t := range topics {
		r := &results[i]
		if r.State != "" {
			continue
		}
		if slices.Contains(existing, t) {
			mt := found[t]
			r.State, r.Partitions, r.Retention = Exists, len(mt.Partitions), retention[t]
			if len(mt.Partitions) > 0 {
				r.ReplicationFactor = len(mt.Partitions[0].Replicas)
			}
			continue
		}
		switch err := createErrs[t]; {
		case err == nil:
			r.State, r.Partitions, r.ReplicationFactor, r.Retention = Created, o.Partitions, o.ReplicationFactor, o.Retention
		case errors.Is(err, kafkago.TopicAlreadyExists):
			r.State, r.Raced = Exists, true
		default:
			r.State, r.Err = Failed, fmt.Errorf("could not create it: %w", err)
		}
	}
	return results, nil
}

// topicRetention asks for the retention of topics, by name: negative for
// none. It is only for the report: a topic whose configuration cannot be
// read is left out.
func topicRetention(ctx context.Context, client *kafkago.Client, topics []string) map[string]time.Duration {
	out := map[string]time.Duration{}
	if len(topics) == 0 {
		return out
	}
	req := &kafkago.DescribeConfigsRequest{}
	for _, t := range topics {
		req.Resources = append(req.Resources, kafkago.DescribeConfigRequestResource{
			ResourceType: kafkago.ResourceTypeTopic, ResourceName: t, ConfigNames: []string{"retention.ms"},
		})
	}
	resp, err := client.DescribeConfigs(ctx, req)
	if err != nil {
		return out
	}
	for _, r := range resp.Resources {
		for _, c := range r.ConfigEntries {
			if r.Error != nil || c.ConfigName != "retention.ms" {
				continue
			}
			ms, err := strconv.ParseInt(c.ConfigValue, 10, 64)
			switch {
			case err != nil:
			case ms < 0:
				out[r.ResourceName] = -1
			default:
				out[r.ResourceName] = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return out
}

// ErrNoTopic is what TopicErrors reports of a topic the brokers do not
// have.
var ErrNoTopic = errors.New("the topic does not exist")

// TopicErrors asks the brokers about topics, without creating any, and
// returns what is wrong with each one that cannot be written to, by
// topic: ErrNoTopic for one that does not exist (or has no partitions),
// the brokers' error for any other. A topic that is fine is not in it.
// The error is for a cluster that could not be asked at all.
func TopicErrors(ctx context.Context, cfg Config, topics []string) (map[string]error, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	client, closeClient := adminClient(cfg)
	defer closeClient()
	meta, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata for %q: %w", topics, err)
	}
	found := map[string]kafkago.Topic{}
	for _, t := range meta.Topics {
		found[t.Name] = t
	}
	errs := map[string]error{}
	for _, t := range topics {
		mt, ok := found[t]
		switch {
		case !ok || errors.Is(mt.Error, kafkago.UnknownTopicOrPartition) || (mt.Error == nil && len(mt.Partitions) == 0):
			errs[t] = ErrNoTopic
		case mt.Error != nil:
			errs[t] = mt.Error
		}
	}
	return errs, nil
}
